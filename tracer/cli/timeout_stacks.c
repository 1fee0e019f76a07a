/*
 * timeout_stacks.c — `tftrace --timeout`: before the launcher sends SIGTERM
 * to a run that overstayed, it takes the stack of every thread of every
 * live recording process (BPF, stacks_report.h), says on stderr where each
 * rank is, and stores one STACK record per thread in that process's rank
 * file (FORMAT.md §5.16), where `tfdump --check` and `tfdiff` show them next
 * to the desync that explains the hang. Best effort: without BPF support or
 * privileges it says why and the timeout goes on as before.
 */
#include "cli_internal.h"
#include "collector.h"
#include "stacks_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void store_thread(collector *col, const tft_thread_stack *t)
{
    enum { FRAMES_TEXT = TFT_STACK_MAX_FRAMES * 400 };
    char sum[1024], *frames = malloc(FRAMES_TEXT);
    if (!frames)
        return;
    stacks_summary(t, sum, sizeof sum);
    stacks_frames_text(t, frames, FRAMES_TEXT);
    int scan = 0;
    for (int i = 0; i < t->nframes; i++)
        scan |= t->frames[i].how == TFT_FRAME_SCAN;
    tft_rec_stack r = {.h = {.kind = TFT_REC_STACK, .len = sizeof(r), .ts = tft_clock_mono_ns(), .step = TFT_STEP_NONE,
                             .seq = TFT_SEQ_NONE},
                       .pid = t->pid, .tid = t->tid, .source = (uint32_t)t->source, .nframes = (uint32_t)t->nframes};
    r.h.flags = (uint16_t)(TFT_STACK_FLAG_TIMEOUT | (t->tid == t->pid ? TFT_STACK_FLAG_MAIN : 0) |
                           (scan ? TFT_STACK_FLAG_SCAN : 0));
    const char *texts[4] = {t->comm, sum, frames, t->note};
    uint64_t *ids[4] = {&r.comm, &r.summary, &r.frames, &r.note};
    collector_append_for(col, t->pid, &r.h, texts, ids, 4);
    free(frames);
}

void timeout_stacks(collector *col, int quiet)
{
    enum { MAX = 1024 };
    if (!tft_stacks_supported() || !bpf_privileged()) {
        if (!quiet)
            fprintf(stderr, "tftrace: no stacks taken before SIGTERM: %s (docs/ATTACH.md)\n",
                    tft_stacks_supported() ? "needs root or CAP_BPF + CAP_PERFMON" : "built without BPF support");
        return;
    }
    pid_t pids[MAX];
    int n = collector_live_pids(col, pids, MAX);
    if (n <= 0)
        return;
    stacks_report r;
    char err[256] = "";
    if (stacks_collect(pids, (size_t)n, 300, &r, err, sizeof err) < 0) {
        fprintf(stderr, "tftrace: no stacks taken before SIGTERM: %s\n", err);
        stacks_report_free(&r);
        return;
    }
    fprintf(stderr, "tftrace: where each process was (stored in the trace: tfdump --check):\n");
    stacks_print_text(stderr, &r, 0);
    for (size_t i = 0; i < r.nthreads; i++)
        store_thread(col, &r.threads[i]);
    collector_flush(col);
    stacks_report_free(&r);
}
