/*
 * detect_trace.c — the detectors (detect.h) over a whole trace in a
 * pass of their own, for tfdiff (tfdump --check feeds them in its shared
 * pass, dump_check.c).
 */
#include "detect.h"
#include "core.h"
#include "core_spill.h"

#include <errno.h>
#include <stdlib.h>

typedef struct trace_scan {
    tft_trace *t;
    const detect_opts *o;
    double clip_cmd;
    detect_rank **ranks;
} trace_scan;

static int scan_rank(void *ctx, int i, int worker)
{
    (void)worker;
    trace_scan *s = ctx;
    tft_reader *r = tft_trace_reader(s->t, i);
    if (!r)
        return errno ? -errno : -EIO;
    detect_rank *c = s->ranks[i] = detect_rank_new(s->o, tft_trace_rank_id(s->t, i), s->clip_cmd);
    int e = c ? tft_reader_rewind(r) : -ENOMEM;
    const tft_rec *rec;
    while (e == 0 && (e = tft_reader_next(r, &rec)) == 1)
        e = detect_rank_record(c, r, rec);
    if (e == 0)
        e = detect_rank_finish(c);
    tft_trace_release(s->t, i);
    return e;
}

int detect_trace(tft_trace *t, const detect_opts *o, double clip_cmd, detect_finding *out, int max)
{
    int n = tft_trace_nranks(t);
    trace_scan s = {.t = t, .o = o, .clip_cmd = clip_cmd, .ranks = calloc((size_t)n + 1, sizeof(detect_rank *))};
    int e = s.ranks ? core_pool_run(n, core_pool_width(), scan_rank, &s) : -ENOMEM;
    int k = e ? e : detect_merge(s.ranks, n, out, max);
    for (int i = 0; s.ranks && i < n; i++)
        detect_rank_free(s.ranks[i]);
    free(s.ranks);
    return k;
}
