/*
 * detect_trace.c — the detectors (detect.h) over a whole trace in a
 * pass of their own, for tfdiff (tfdump --check feeds them in its shared
 * pass, dump_check.c); and a finding as JSON, shared by both programs.
 */
#include "detect.h"
#include "core.h"
#include "core_spill.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

double detect_clip_of(const tft_manifest *m)
{
    if (!m || !m->argv)
        return 0;
    for (int i = 0; i < m->argc; i++) {
        const char *a = m->argv[i], *base = a ? strrchr(a, '/') : NULL;
        if (!a || strcmp(base ? base + 1 : a, "tftrain"))
            continue;
        double clip = 1.0;
        for (int k = i + 1; k < m->argc; k++) {
            const char *v = NULL;
            if (m->argv[k] && !strcmp(m->argv[k], "--clip") && k + 1 < m->argc)
                v = m->argv[k + 1];
            else if (m->argv[k] && !strncmp(m->argv[k], "--clip=", 7))
                v = m->argv[k] + 7;
            char *end;
            double x = v ? strtod(v, &end) : 0;
            if (v && end != v && x >= 0)
                clip = x;
        }
        return clip > 0 ? clip : -1;
    }
    return 0;
}

cJSON *detect_finding_json(const detect_finding *x)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "kind", x->kind);
    cJSON_AddStringToObject(j, "severity", detect_severity_name(x->severity));
    cJSON_AddNumberToObject(j, "rank", x->rank);
    if (x->step == TFT_STEP_NONE)
        cJSON_AddNullToObject(j, "step");
    else
        cJSON_AddNumberToObject(j, "step", (double)x->step);
    cJSON_AddStringToObject(j, "tensor", x->tensor);
    if (x->tensor2[0])
        cJSON_AddStringToObject(j, "other_tensor", x->tensor2);
    else
        cJSON_AddNullToObject(j, "other_tensor");
    if (x->layer >= 0)
        cJSON_AddNumberToObject(j, "layer", x->layer);
    else
        cJSON_AddNullToObject(j, "layer");
    cJSON_AddNumberToObject(j, "value", isfinite(x->value) ? x->value : 0);
    cJSON_AddNumberToObject(j, "threshold", isfinite(x->threshold) ? x->threshold : 0);
    cJSON_AddStringToObject(j, "evidence", x->evidence);
    cJSON_AddStringToObject(j, "causes", x->causes ? x->causes : "");
    return j;
}
