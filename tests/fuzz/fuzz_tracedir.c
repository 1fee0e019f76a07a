/*
 * fuzz_tracedir.c — libFuzzer target for the JSON files beside the rank
 * files of a trace directory: manifest.json, the in-process writers'
 * fragments manifest.rank-*.json (merged by tft_manifest_read_dir, FORMAT.md
 * §2.4) and the launcher's process tables processes-PID.json (FORMAT.md
 * §2.5, read by tfdump's summary).
 *
 * The input is split at each byte 0x00 into up to 6 parts: part 0 is
 * manifest.json, parts 1-4 fragments manifest.rank-0000K.json, part 5
 * processes-4242.json (an empty part: no such file). The directory also
 * holds one small intact rank file of 3 steps (written once, at
 * initialisation), so
 * the merged manifest meets real rank files. Each input then goes through
 * tft_manifest_read_dir, the trace's open, and tfdump's summary in text and
 * JSON.
 *
 * Invariants (abort): tft_manifest_read_dir returns 0 or a documented
 * error, and a merged manifest serialises and parses back; the summary
 * returns one of tfdump's statuses. Crashes, leaks and time are libFuzzer's.
 */
#include "dump_internal.h"
#include "tft_format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FUZZ_TARGET "fuzz_tracedir"
#include "tft_fuzz_check.h"

static char dir[256];
static const char *const part_names[] = {"manifest.json",           "manifest.rank-00000.json",
                                         "manifest.rank-00001.json", "manifest.rank-00002.json",
                                         "manifest.rank-00003.json", "processes-4242.json"};
enum { NPARTS = 6 };

static void remove_parts(void)
{
    char p[512];
    for (int i = 0; i < NPARTS; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, part_names[i]);
        unlink(p);
    }
}

static void remove_dir(void)
{
    char p[512];
    remove_parts();
    snprintf(p, sizeof(p), "%s/rank-00000.tft", dir);
    unlink(p);
    rmdir(dir);
}

/* One rank file of a few steps: a tensor, an allocation and its free each. */
static void write_rank_file(void)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/rank-00000.tft", dir);
    tft_file_info fi = {.rank = 0, .world_size = 1, .pid = 4242};
    tft_writer *w = tft_writer_open(p, &fi, NULL);
    FUZZ_CHECK(w != NULL, "cannot write %s", p);
    for (int s = 0; s < 3; s++) {
        tft_rec_step st = {.h = {.kind = TFT_REC_STEP, .len = sizeof(st), .step = s, .seq = TFT_SEQ_NONE},
                           .phase = TFT_STEP_BEGIN};
        FUZZ_CHECK(tft_writer_append(w, &st.h) == 0, "step");
        tft_rec_tensor t;
        memset(&t, 0, sizeof(t));
        t.h = (tft_rec){.kind = TFT_REC_TENSOR, .len = sizeof(t), .step = s, .seq = s};
        t.id = (uint64_t)s + 1;
        t.name = tft_writer_string(w, "loss", 4);
        t.dtype = TFT_F32;
        t.ndim = 1;
        t.shape[0] = 4;
        t.mode = TFT_STATS_HEALTH;
        t.stats.numel = 4;
        t.stats.min = 1;
        t.stats.max = 4;
        t.stats.fingerprint = 0x1234 + (uint64_t)s;
        FUZZ_CHECK(tft_writer_append(w, &t.h) == 0, "tensor");
    }
    FUZZ_CHECK(tft_writer_close(w) == 0, "close");
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch_dir(dir, sizeof(dir), ".trace");
    atexit(remove_dir);
    write_rank_file();
    FUZZ_CHECK(freopen("/dev/null", "w", stdout), "stdout");
    dump_out_init();
    return 0;
}

static void write_part(int i, const uint8_t *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, part_names[i]);
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f != NULL, "cannot write %s", path);
    FUZZ_CHECK(fwrite(p, 1, n, f) == n, "short write");
    fclose(f);
}

static int summary(int json)
{
    dump_opts o = {.path = dir, .mode = MODE_SUMMARY, .json = json, .order = TFT_ORDER_STEP_SEQ, .rank = -1,
                   .step_lo = INT64_MIN + 1, .step_hi = INT64_MAX, .rtol = 1e-5, .atol = 1e-7,
                   .leak_min_bytes = LEAK_EXIT_MIN_BYTES};
    dump_trace d;
    int st = dump_trace_open(&d, &o);
    if (st)
        return st;
    d.log.hold = 0;
    st = dump_summary(&d, &o);
    dump_trace_close(&d);
    FUZZ_CHECK(st >= 0 && st <= 2, "summary returned %d", st);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    remove_parts();
    size_t at = 0;
    for (int i = 0; i < NPARTS && at <= size; i++) {
        const uint8_t *z = at < size ? memchr(data + at, 0, size - at) : NULL;
        size_t end = z ? (size_t)(z - data) : size;
        if (end > at)
            write_part(i, data + at, end - at);
        at = end + 1;
    }
    tft_manifest m;
    char err[512];
    int e = tft_manifest_read_dir(dir, &m, err, sizeof(err));
    FUZZ_CHECK(e == 0 || e == -ENOENT || e == -EPROTO || e == -EPROTONOSUPPORT || e == -ENOMEM || e == -EFBIG ||
                   e == -ESPIPE,
               "tft_manifest_read_dir returned %d (%s)", e, err);
    if (e == 0) {   /* the merged manifest survives a round trip */
        char *text = tft_manifest_to_json(&m);
        if (text) {
            tft_manifest m2;
            int e2 = tft_manifest_parse(text, strlen(text), &m2, err, sizeof(err));
            FUZZ_CHECK(e2 == 0 || e2 == -ENOMEM, "the merged manifest does not parse back: %d (%s)", e2, err);
            FUZZ_CHECK(e2 != 0 || m2.nranks == m.nranks, "nranks %d -> %d", m.nranks, m2.nranks);
            if (e2 == 0)
                tft_manifest_free(&m2);
            free(text);
        }
        tft_manifest_free(&m);
    }
    summary(0);
    summary(1);
    fflush(stdout);
    return 0;
}
