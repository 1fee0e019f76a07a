/*
 * test_keep_compact.c — the compaction of flight-recorder rank files
 * (FORMAT.md §3.6, "Compaction"; formats/src/writer_compact.c):
 *
 * - closed: tft_writer_close compacts the file; its size (apparent, not
 *   only its blocks) is at most 0.3x the same records written without
 *   keep_steps, it reads complete, with the same records as before the
 *   compaction (the last steps in full, the loss of every step);
 * - killed (a writer that never closed: a sparse, torn file):
 *   tft_rank_compact makes it as small, complete, with the records the
 *   torn file gave;
 * - a compaction killed before its rename (TFT_TEST_COMPACT=kill, in a
 *   child): the file reads as before; the next compaction succeeds and
 *   removes the leftover.
 */
#include "tft_format.h"
#include "tft_test.h"
#include "tft_writer_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#define STEPS 60
#define BIGS 200 /* large tensors per step; one loss besides */

static char tmpdir[256];

/* STEPS steps of BIGS tensors of 1000 elements and a loss, keep_steps 3
 * (or 0: every record kept); closed, or abandoned as by a kill. */
static void write_steps(const char *path, long long keep, bool close_it)
{
    tft_writer_opts o = TFT_WRITER_OPTS(.sync = 0, .keep_steps = keep);
    tft_writer *w = tft_writer_open(path, NULL, &o);
    CHECK(w != NULL);
    if (!w)
        return;
    uint64_t big = tft_writer_string(w, "act", 3), loss = tft_writer_string(w, "loss", 4);
    int64_t seq = 0;
    for (int64_t step = 0; step < STEPS; step++) {
        tft_rec_step sr = {.h = {.kind = TFT_REC_STEP, .len = sizeof(sr), .ts = (uint64_t)step * 100,
                                 .step = step, .seq = TFT_SEQ_NONE}, .phase = TFT_STEP_BEGIN};
        CHECK(tft_writer_append(w, &sr.h) == 0);
        for (int i = 0; i <= BIGS; i++) {
            tft_rec_tensor t;
            memset(&t, 0, sizeof(t));
            t.h = (tft_rec){.kind = TFT_REC_TENSOR, .len = sizeof(t), .ts = (uint64_t)step * 100 + 1,
                            .step = step, .seq = seq++};
            t.id = (uint64_t)seq;
            t.name = i < BIGS ? big : loss;
            t.dtype = TFT_F32;
            t.device = -1;
            t.ndim = 1;
            t.shape[0] = i < BIGS ? 1000 : 1;
            /* statistics as varied as a trace's: they compress as little */
            uint64_t x = XXH64(&seq, sizeof(seq), 1);
            t.stats.numel = 1000;
            t.stats.fingerprint = x;
            t.stats.mean = (double)(x & 0xffff) / 65536.0 - 0.5;
            t.stats.std = (double)((x >> 16) & 0xffff) / 65536.0;
            t.stats.min = t.stats.mean - 3 * t.stats.std;
            t.stats.max = t.stats.mean + 3 * t.stats.std;
            t.stats.l2 = (double)(x >> 32) / 1e6;
            CHECK(tft_writer_append(w, &t.h) == 0);
        }
        sr.h.ts += 2;
        sr.phase = TFT_STEP_END;
        CHECK(tft_writer_append(w, &sr.h) == 0);
    }
    if (close_it)
        CHECK(tft_writer_close(w) == 0);
    else
        tft_writer_abandon(w);
}

/* What a reader gets from path: a hash of every record, the losses and
 * large tensors per step, the first full step, the integrity. */
typedef struct readout {
    bool ok;
    uint64_t hash, records;
    int losses[STEPS], bigs[STEPS];
    int64_t first_full, last;
    int integrity, closed;
} readout;

static readout read_all(const char *path)
{
    readout o;
    memset(&o, 0, sizeof(o));
    tft_reader *r = tft_reader_open(path, NULL);
    CHECK(r != NULL);
    if (!r)
        return o;
    XXH64_state_t *h = XXH64_createState();
    XXH64_reset(h, 0);
    long long keep = 0;
    tft_reader_full_steps(r, &keep, &o.first_full, &o.last);
    const tft_rec *rec;
    while (tft_reader_next(r, &rec) == 1) {
        XXH64_update(h, rec, rec->len);
        o.records++;
        if (rec->kind == TFT_REC_TENSOR && rec->step >= 0 && rec->step < STEPS)
            (((const tft_rec_tensor *)rec)->shape[0] == 1 ? o.losses : o.bigs)[rec->step]++;
    }
    o.hash = XXH64_digest(h);
    XXH64_freeState(h);
    tft_reader_status st;
    CHECK(tft_reader_verify(r, &st) >= 0);
    o.integrity = st.integrity;
    o.closed = st.closed;
    tft_reader_close(r);
    o.ok = true;
    return o;
}

/* Every step up to the last keeps its loss; the steps from the first full
 * one have their large tensors, the others none. */
static void check_steps(const readout *o)
{
    int wrong = 0;
    for (int s = 0; s <= o->last && s < STEPS; s++)
        wrong += o->losses[s] != 1 || o->bigs[s] != (s >= o->first_full ? BIGS : 0);
    CHECK(wrong == 0);
    CHECK(o->first_full > 10 && o->first_full <= o->last);
}

static uint64_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static void path_in_tmp(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", tmpdir, name);
}

/* Closed: compacted by the close itself. */
static void test_closed(uint64_t full)
{
    char path[600];
    path_in_tmp(path, sizeof(path), "closed.tft");
    write_steps(path, 3, true);
    uint64_t size = file_size(path);
    fprintf(stderr, "closed: %llu bytes, full trace %llu (%.3fx)\n", (unsigned long long)size,
            (unsigned long long)full, (double)size / (double)full);
    CHECK(size > 0 && size * 10 <= full * 3);
    readout o = read_all(path);
    CHECK(o.ok && o.integrity == TFT_INTACT && o.closed);
    CHECK(o.last == STEPS - 1 && o.first_full >= STEPS - 6);
    check_steps(&o);
    tft_compact_stats st;
    CHECK(tft_rank_compact(path, false, &st) == 0 && !st.compacted); /* compact already */
}

/* Runs tft_rank_compact(path) in a child killed just before its rename. */
static void compact_killed(const char *path)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TFT_TEST_COMPACT", "kill", 1);
        tft_rank_compact(path, false, NULL);
        _exit(0); /* not reached: the hook kills */
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/* Killed writer: sparse and torn; compacted offline, after a compaction
 * that was itself killed. */
static void test_killed(uint64_t full)
{
    char path[600], leftover[700];
    path_in_tmp(path, sizeof(path), "killed.tft");
    path_in_tmp(leftover, sizeof(leftover), ".killed.tft.compact");
    write_steps(path, 3, false);
    uint64_t sparse = file_size(path);
    CHECK(sparse > full / 2); /* retired chunks still count in the size */
    readout before = read_all(path);
    CHECK(before.ok && before.integrity == TFT_TORN);
    check_steps(&before);

    compact_killed(path);
    CHECK(access(leftover, F_OK) == 0);
    readout mid = read_all(path); /* the old file, as it was */
    CHECK(mid.ok && mid.hash == before.hash && mid.records == before.records && file_size(path) == sparse);

    tft_compact_stats st;
    CHECK(tft_rank_compact(path, false, &st) == 0 && st.compacted);
    CHECK(access(leftover, F_OK) != 0 && errno == ENOENT);
    uint64_t size = file_size(path);
    fprintf(stderr, "killed: %llu bytes sparse, %llu compacted, full trace %llu (%.3fx)\n",
            (unsigned long long)sparse, (unsigned long long)size, (unsigned long long)full,
            (double)size / (double)full);
    CHECK(st.before_bytes == sparse && st.after_bytes == size && size * 10 <= full * 3);
    readout after = read_all(path);
    CHECK(after.ok && after.integrity == TFT_INTACT && after.closed);
    CHECK(after.hash == before.hash && after.records == before.records);
    CHECK(after.first_full == before.first_full && after.last == before.last);
    check_steps(&after);
}

/* A file without keep_steps is left alone. */
static void test_not_keep(const char *full_path)
{
    tft_compact_stats st;
    CHECK(tft_rank_compact(full_path, false, &st) == -ENOTSUP && !st.compacted);
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/tft-test-compact-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    char full_path[600];
    path_in_tmp(full_path, sizeof(full_path), "full.tft");
    write_steps(full_path, 0, true);
    uint64_t full = file_size(full_path);
    CHECK(full > 0);
    test_closed(full);
    test_killed(full);
    test_not_keep(full_path);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (!getenv("TFT_TEST_KEEP") && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return TEST_DONE();
}
