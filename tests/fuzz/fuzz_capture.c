/*
 * fuzz_capture.c — libFuzzer target for captured tensors: assembling
 * CAPTURE parts (capture.c), the .npy export (tfdump --tensor --out),
 * the capture listing (--captures) and --replay-op, which re-executes a
 * captured op (cblas gemms, tftrain's ops) from captured inputs whose
 * shapes, dtypes and attributes come from the file.
 *
 * The input is a program (fuzz_trace.h) writing 1..4 rank files with
 * tft_writer, so the CAPTURE records are checksummed and reach the
 * analysis: parts with any offsets, totals, shapes and dtypes, shuffled or
 * not, missing or repeated, and OP records naming gemms or tftrain's ops
 * with any attributes. Output goes to /dev/null.
 *
 * Invariants (abort): core_capture_list succeeds on a trace that opens; a capture
 * marked complete has its data and exactly its bytes; every mode returns
 * 0, 1 or 2. Memory safety and time are libFuzzer's (ASan, -timeout).
 */
#include "core_capture.h"
#include "dump_internal.h"
#include "fuzz_trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FUZZ_TARGET "fuzz_capture"
#include "tft_fuzz_check.h"

static char dir[256];

/* at exit: the trace directory goes (libFuzzer's exit, replay_main.c's) */
static void remove_dir(void) { ft_remove(dir); }

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch_dir(dir, sizeof(dir), ".trace");
    atexit(remove_dir);
    FUZZ_CHECK(freopen("/dev/null", "w", stdout), "stdout");
    dump_out_init();
    return 0;
}

static int mode(int m, const char *tensor, int64_t seq, int json, int raw)
{
    dump_opts o = {.path = dir, .mode = m, .json = json, .order = TFT_ORDER_STEP_SEQ, .rank = -1, .rtol = 1e-5,
                   .atol = 1e-7, .tensor = tensor, .replay_seq = seq, .raw = raw,
                   .out = m == MODE_TENSOR ? "/dev/null" : NULL};
    dump_trace d;
    int st = dump_trace_open(&d, &o);
    if (st)
        return st;
    d.log.hold = 0;
    st = m == MODE_TENSOR ? dump_tensor(&d, &o) : m == MODE_REPLAY ? dump_replay(&d, &o) : dump_captures(&d, &o);
    dump_trace_close(&d);
    FUZZ_CHECK(st >= 0 && st <= 2, "mode %d: %d", m, st);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    ft_clean(dir);
    uint8_t prog[4096 + 1];
    size_t n = size < sizeof(prog) ? size : sizeof(prog);
    memcpy(prog, data, n);
    prog[0] &= (uint8_t)~FT_CFG_COPY;
    FUZZ_CHECK(ft_build(dir, prog, n) > 0, "could not write the trace");

    core_capture_tensor *t;
    size_t nt;
    char err[512];
    char lost[256];
    int e = core_capture_list(dir, 1, &t, &nt, err, sizeof(err), lost, sizeof(lost));
    FUZZ_CHECK(e == 0, "core_capture_list: %s", err);
    int64_t seqs[8];
    int nseq = 0;
    for (size_t i = 0; i < nt; i++) {
        FUZZ_CHECK(!t[i].complete || t[i].data, "complete capture %zu without data", i);
        FUZZ_CHECK(!t[i].complete || t[i].present == t[i].bytes, "complete capture %zu: %llu of %llu bytes", i,
                   (unsigned long long)t[i].present, (unsigned long long)t[i].bytes);
        if (t[i].complete) {
            core_capture_write_npy(&t[i], "/dev/null", 0, 0, err, sizeof(err));
            core_capture_write_npy(&t[i], "/dev/null", 1, 0, err, sizeof(err));
        }
        bool seen = false;
        for (int k = 0; k < nseq; k++)
            seen |= seqs[k] == t[i].seq;
        if (!seen && nseq < 8 && t[i].seq >= 0)
            seqs[nseq++] = t[i].seq;
    }
    char name[300] = "0";
    if (nt)
        snprintf(name, sizeof(name), "%s", t[size % nt].name);
    core_capture_find(t, nt, name);
    core_capture_free(t, nt);

    int json = data[size - 1] & 1, raw = (data[size - 1] >> 1) & 1;
    mode(MODE_CAPTURES, NULL, 0, json, 0);
    mode(MODE_TENSOR, name, 0, json, raw);
    for (int k = 0; k < nseq; k++)
        mode(MODE_REPLAY, NULL, seqs[k], json, 0);
    fflush(stdout);
    return 0;
}
