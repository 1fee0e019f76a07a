/*
 * report_check.c — how tfdump --check (and its HTML page) shows the
 * detectors' findings (detect.h): one text line each, the JSON
 * array `findings` and the verdict line (docs/CHECK.md).
 */
#include "report_check.h"
#include "tft_drops.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void report_check_print(FILE *f, const detect_finding *x)
{
    char sb[48], layer[24] = "";
    if (x->layer >= 0)
        snprintf(layer, sizeof(layer), ", layer %d", x->layer);
    fprintf(f, "%s: %s: rank %d, %s, %s%s: %s", detect_severity_name(x->severity), x->kind, x->rank,
            core_step_text(x->step, sb, sizeof(sb)), x->tensor[0] ? x->tensor : "-", layer, x->evidence);
    if (x->causes && x->causes[0])
        fprintf(f, ". Likely: %s", x->causes);
    fputs("\n", f);
}

/* The most important problem: a desync (the cause of a hang comes first),
 * else the earliest of the first non-finite value and the detectors'
 * first error, else a leak, else the first warning. */
static void first_problem(const report_check_result *r, char *buf, size_t n)
{
    char sb[48];
    const detect_finding *f = r->nfind ? &r->findings[0] : NULL;
    if (r->nd)
        snprintf(buf, n, "desync at %s", core_step_text(r->ds[0].step, sb, sizeof(sb)));
    else if (r->nf.found && (!f || f->severity != DETECT_ERROR || f->step == TFT_STEP_NONE || r->nf.step <= f->step))
        snprintf(buf, n, "non-finite at %s in %s", core_step_text(r->nf.step, sb, sizeof(sb)), r->nf.name);
    else if (f && f->severity == DETECT_ERROR)
        snprintf(buf, n, "%s at %s in %s", f->kind, core_step_text(f->step, sb, sizeof(sb)), f->tensor);
    else if (r->nl)
        snprintf(buf, n, "leak at %s", r->leaks[0].site);
    else if (f)
        snprintf(buf, n, "%s at %s in %s", f->kind, core_step_text(f->step, sb, sizeof(sb)), f->tensor);
    else
        snprintf(buf, n, "-");
}

void report_check_verdict(const report_check_result *r, int lossy, char *buf, size_t n)
{
    char notes[48] = "";
    if (r->ninfo)
        snprintf(notes, sizeof(notes), " (%d note%s)", r->ninfo, r->ninfo == 1 ? "" : "s");
    if (!report_check_found(r)) {
        snprintf(buf, n, "OK: no non-finite values, leaks or desyncs%s%s", lossy ? " in what was recorded" : "",
                 notes);
        return;
    }
    char first[200];
    first_problem(r, first, sizeof(first));
    int errs = r->nerr + (r->nf.found ? 1 : 0) + r->nd + r->nl, warns = r->nwarn;
    snprintf(buf, n, "verdict: %d error%s, %d warning%s%s; first: %s", errs, errs == 1 ? "" : "s", warns,
             warns == 1 ? "" : "s", notes, first);
}

void report_check_json(cJSON *o, const report_check_result *r)
{
    cJSON *a = cJSON_AddArrayToObject(o, "findings");
    for (int i = 0; i < r->nfind; i++) {
        cJSON *j = detect_finding_json(&r->findings[i]);
        cJSON_AddItemToArray(a, j);
    }
    char v[256];
    report_check_verdict(r, r->lossy, v, sizeof(v));
    cJSON_AddStringToObject(o, "verdict", v);
    cJSON *c = cJSON_AddObjectToObject(o, "counts");
    cJSON_AddNumberToObject(c, "error", r->nerr);
    cJSON_AddNumberToObject(c, "warning", r->nwarn);
    cJSON_AddNumberToObject(c, "info", r->ninfo);
}

double report_check_clip_of(const tft_manifest *m)
{
    return detect_clip_of(m);
}

bool report_check_found(const report_check_result *res)
{
    return res->nf.found || res->nl || res->nd || res->nerr || res->nwarn;
}

void report_check_result_free(report_check_result *res)
{
    free(res->drops);
    res->drops = NULL;
    free(res->findings);
    res->findings = NULL;
    desync_stacks_free(&res->stacks);
}

int report_check_drops_text(FILE *f, const report_check_result *res, const tft_trace *t)
{
    int k = 0;
    const struct tft_drop_sum *drops = res->drops;
    for (int i = 0; i < tft_trace_nranks(t); i++) {
        if (!drops[i].count)
            continue;
        char what[256];
        fprintf(f, "incomplete: rank %d lost %s; what follows covers only what was recorded\n",
                tft_trace_rank_id(t, i), tft_drop_describe(&drops[i], what, sizeof(what)));
        k++;
    }
    return k;
}

void report_check_text(FILE *f, const report_check_result *res, int lossy)
{
    const report_check_nonfinite *nf = &res->nf;
    const leak_finding *l = res->leaks;
    const desync_finding *ds = res->ds;
    int nl = res->nl, nd = res->nd;
    char sb[48];
    if (nf->found)
        fprintf(f, "non-finite: rank %d, %s, seq %lld: %s (%" PRIu64 " NaN, %" PRIu64 " Inf)\n", nf->rank,
               core_step_text(nf->step, sb, sizeof(sb)), (long long)nf->seq, nf->name, nf->nan, nf->inf);
    for (int i = 0; i < nl; i++) {
        char what[400];
        leak_describe(&l[i], what, sizeof(what));
        fprintf(f, "leak: rank %d, %s\n", l[i].rank, what);
    }
    for (int i = 0; i < nd; i++) {
        char where[160];
        desync_where(ds, nd, i, where, sizeof(where));
        fprintf(f, "desync: %s at %s (%s): %s\n", desync_kind_name(ds[i].kind),
               core_step_text(ds[i].step, sb, sizeof(sb)), where, ds[i].detail);
    }
    if (res->stacks.n) {
        fprintf(f, "stacks: where each rank's main thread was when tftrace --timeout stopped the run"
               " (all threads: tfdump --events --kind stack):\n");
        desync_stacks_print(f, &res->stacks, "  ");
    }
    for (int i = 0; i < res->nfind; i++)
        report_check_print(f, &res->findings[i]);
    char v[256];
    report_check_verdict(res, lossy, v, sizeof(v));
    fprintf(f, "%s\n", v);
}
