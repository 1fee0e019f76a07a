/*
 * detect_finding.c — the finding store of a rank (detect_internal.h): a
 * rule adds a finding with detect_add and appends to one it added with
 * detect_note; detect_findings_gather copies every rank's and sorts them
 * (most severe first, then by step, rank, layer); a finding as text (its
 * severity's name) and as JSON (detect.h).
 *
 * A rank keeps at most DETECT_FIND_MAX findings; later ones are dropped.
 * The store calls nothing of the rules or the dispatcher.
 */
#include "detect_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *detect_severity_name(int severity)
{
    return severity == DETECT_ERROR ? "error" : severity == DETECT_WARNING ? "warning" : "info";
}

void detect_add(detect_rank *c, const char *kind, int sev, int64_t step, const detect_series *s, const char *tensor2,
                double value, double threshold, const char *causes, const char *fmt, ...)
{
    if (c->nf >= DETECT_FIND_MAX)
        return;
    detect_finding *f = &c->f[c->nf++];
    *f = (detect_finding){.severity = sev, .rank = c->rank, .step = step, .layer = s ? s->layer : -1,
                       .value = value, .threshold = threshold, .causes = causes};
    snprintf(f->kind, sizeof(f->kind), "%s", kind);
    snprintf(f->tensor, sizeof(f->tensor), "%s", s ? s->name : "");
    snprintf(f->tensor2, sizeof(f->tensor2), "%s", tensor2 ? tensor2 : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->evidence, sizeof(f->evidence), fmt, ap);
    va_end(ap);
}

static int cmp_finding(const void *a, const void *b)
{
    const detect_finding *x = a, *y = b;
    if (x->severity != y->severity)
        return x->severity - y->severity;
    int64_t sx = x->step == TFT_STEP_NONE ? INT64_MAX : x->step, sy = y->step == TFT_STEP_NONE ? INT64_MAX : y->step;
    if (sx != sy)
        return sx < sy ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank - y->rank;
    return (x->layer < 0 ? 1 << 30 : x->layer) - (y->layer < 0 ? 1 << 30 : y->layer);
}

detect_finding *detect_note(detect_rank *c, int fi, const char *fmt, ...)
{
    if (fi < 0 || fi >= c->nf)
        return NULL;
    detect_finding *f = &c->f[fi];
    size_t k = strlen(f->evidence);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->evidence + k, sizeof(f->evidence) - k, fmt, ap);
    va_end(ap);
    return f;
}

int detect_findings_gather(detect_rank *const *ranks, int n, detect_finding *out, int max)
{
    int k = 0;
    for (int r = 0; r < n; r++)
        for (int i = 0; ranks[r] && i < ranks[r]->nf && k < max; i++)
            out[k++] = ranks[r]->f[i];
    qsort(out, (size_t)k, sizeof(*out), cmp_finding);
    return k;
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
