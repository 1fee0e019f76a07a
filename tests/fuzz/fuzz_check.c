/*
 * fuzz_check.c — libFuzzer target for tfdump's analyses of one trace:
 * --check (the first non-finite tensor, leaks, desyncs across ranks), and
 * the summary, --verify, --events, --chunks and --export (Chrome JSON and
 * Perfetto) that read the same trace, in text and JSON.
 *
 * The input is a program (fuzz_trace.h) that writes 1..4 rank files with
 * tft_writer into a directory on tmpfs, checksummed, so the fuzzer's bytes
 * reach the analyses. Each mode runs as tfdump would run it (dump_*.c are
 * compiled in), its output to /dev/null.
 *
 * Invariants (abort): a mode returns one of tfdump's exit statuses (0, 1,
 * 2); a trace written without the copy flag opens; the copy flag makes the
 * trace refused. Crashes, leaks, undefined behaviour, time (-timeout) and
 * memory (-rss_limit_mb, -malloc_limit_mb) are libFuzzer's to catch.
 */
#include "core.h"
#include "desync.h"
#include "leak.h"
#include "dump_internal.h"
#include "export.h"
#include "fuzz_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FUZZ_TARGET "fuzz_check"
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

static int run_mode(int mode, int json, const uint8_t *data, size_t size)
{
    dump_opts o = {.path = dir, .mode = mode, .json = json, .order = TFT_ORDER_STEP_SEQ, .rank = -1,
                   .step_lo = INT64_MIN + 1, .step_hi = INT64_MAX, .rtol = 1e-5, .atol = 1e-7,
                   .leak_min_bytes = LEAK_EXIT_MIN_BYTES};
    if (mode == MODE_CHECK && size > 1 && (data[size - 1] & 1))
        o.leak_min_bytes = (uint64_t)data[size - 1] << 10; /* small: the at-exit rule fires */
    if (mode == MODE_EVENTS && size > 2 && (data[size - 2] & 1)) {
        o.order = TFT_ORDER_TIME;
        o.name_glob = "L0.*";
        o.have_steps = 1;
        o.step_lo = 0, o.step_hi = 3;
    }
    if (mode == MODE_EXPORT) {
        o.export_format = json ? EXP_PERFETTO : EXP_CHROME;
        o.export_out = "/dev/null";
        if (size > 2 && (data[size - 2] & 2)) {
            o.have_steps = 1;
            o.step_lo = 1, o.step_hi = 2;
        }
    }
    dump_trace d;
    int st = dump_trace_open(&d, &o);
    if (st)
        return -st; /* did not open */
    d.log.hold = 0;
    switch (mode) {
    case MODE_CHECK: st = dump_check(&d, &o); break;
    case MODE_VERIFY: st = dump_verify(&d, &o); break;
    case MODE_EVENTS: st = dump_events(&d, &o); break;
    case MODE_CHUNKS: st = dump_chunks(&d, &o); break;
    case MODE_EXPORT: st = dump_export(&d, &o); break;
    default: st = dump_summary(&d, &o); break;
    }
    dump_trace_close(&d);
    FUZZ_CHECK(st >= 0 && st <= 2, "mode %d returned %d", mode, st);
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    ft_clean(dir);
    int nf = ft_build(dir, data, size);
    FUZZ_CHECK(nf > 0, "could not write the trace");
    bool copied = (data[0] & FT_CFG_COPY) && nf > 1;
    int json = size > 1 && (data[1] & 0x80);
    int st = run_mode(MODE_CHECK, json, data, size);
    FUZZ_CHECK(copied ? st == -DUMP_USAGE : st >= 0, "--check on a trace %s: %d", copied ? "with a copy" : "", st);
    if (st < 0)
        return 0;
    run_mode(MODE_SUMMARY, json, data, size);
    run_mode(MODE_VERIFY, !json, data, size);
    run_mode(MODE_EVENTS, json, data, size);
    run_mode(MODE_CHUNKS, !json, data, size);
    run_mode(MODE_EXPORT, json, data, size);
    run_mode(MODE_EXPORT, !json, data, size);
    fflush(stdout);
    return 0;
}
