/*
 * report_check.c — tfdump --check's findings (report_check.h) in words:
 * their sentences (the leak, desync and detector ones are tfdiff's too,
 * report_sentence.c), the text tfdump --check prints, the verdict line,
 * the first finding that the HTML page leads with, and the JSON keys
 * findings, verdict and counts (docs/CHECK.md).
 */
#include "report_internal.h"
#include "tft_drops.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

const char *report_check_sentence_nonfinite(const report_check_nonfinite *nf, char *buf, size_t n)
{
    char sb[48];
    snprintf(buf, n, "non-finite: rank %d, %s, seq %lld: %s (%" PRIu64 " NaN, %" PRIu64 " Inf)", nf->rank,
             core_step_text(nf->step, sb, sizeof(sb)), (long long)nf->seq, nf->name, nf->nan, nf->inf);
    return buf;
}

const char *report_check_sentence_drops(int rank, const struct tft_drop_sum *s, char *buf, size_t n)
{
    char what[256];
    snprintf(buf, n, "incomplete: rank %d lost %s; what follows covers only what was recorded", rank,
             tft_drop_describe(s, what, sizeof(what)));
    return buf;
}

const char *report_check_sentence_ok(const report_check_result *r, char *buf, size_t n)
{
    snprintf(buf, n, "OK: no non-finite values, leaks or desyncs%s", r->lossy ? " in what was recorded" : "");
    return buf;
}

/* The most important problem: a desync (the cause of a hang comes first),
 * else the earliest of the first non-finite value and the detectors'
 * first error, else a leak, else the first warning. */
static void first_problem(const report_check_result *r, char *buf, size_t n)
{
    char sb[48];
    const detect_finding *f = r->nfind ? &r->findings[0] : NULL;
    if (r->ndamage)
        snprintf(buf, n, "damage: %.150s", r->damage[0]);
    else if (r->nd)
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

void report_check_verdict(const report_check_result *r, char *buf, size_t n)
{
    char notes[48] = "", ok[80];
    if (r->ninfo)
        snprintf(notes, sizeof(notes), " (%d note%s)", r->ninfo, r->ninfo == 1 ? "" : "s");
    if (!report_check_found(r)) {
        snprintf(buf, n, "%s%s", report_check_sentence_ok(r, ok, sizeof(ok)), notes);
        return;
    }
    char first[200];
    first_problem(r, first, sizeof(first));
    int errs = r->ndamage + r->damage_more + r->nerr + (r->nf.found ? 1 : 0) + r->nd + r->nl, warns = r->nwarn;
    snprintf(buf, n, "verdict: %d error%s, %d warning%s%s; first: %s", errs, errs == 1 ? "" : "s", warns,
             warns == 1 ? "" : "s", notes, first);
}

bool report_check_found(const report_check_result *res)
{
    return res->ndamage || res->nf.found || res->nl || res->nd || res->nerr || res->nwarn;
}

void report_check_result_free(report_check_result *res)
{
    free(res->drops);
    res->drops = NULL;
    free(res->findings);
    res->findings = NULL;
    desync_stacks_free(&res->stacks);
}

void report_check_text(FILE *f, const report_check_result *res, const tft_trace *t)
{
    char line[2048];
    for (int i = 0; i < res->ndamage; i++)
        fprintf(f, "damage: %s\n", res->damage[i]);
    if (res->damage_more)
        fprintf(f, "damage: %d more rank files torn or damaged (tfdump --verify lists them)\n", res->damage_more);
    for (int i = 0; i < tft_trace_nranks(t); i++)
        if (res->drops[i].count)
            fprintf(f, "%s\n",
                    report_check_sentence_drops(tft_trace_rank_id(t, i), &res->drops[i], line, sizeof(line)));
    if (res->nf.found)
        fprintf(f, "%s\n", report_check_sentence_nonfinite(&res->nf, line, sizeof(line)));
    for (int i = 0; i < res->nl; i++)
        fprintf(f, "%s\n", report_sentence_leak(&res->leaks[i], line, sizeof(line)));
    for (int i = 0; i < res->nd; i++)
        fprintf(f, "%s\n", report_sentence_desync(res->ds, res->nd, i, line, sizeof(line)));
    if (res->stacks.n) {
        fprintf(f, "stacks: where each rank's main thread was when tftrace --timeout stopped the run"
                   " (all threads: tfdump --events --kind stack):\n");
        desync_stacks_print(f, &res->stacks, "  ");
    }
    for (int i = 0; i < res->nfind; i++)
        fprintf(f, "%s\n", report_sentence_check(&res->findings[i], REPORT_CHECK_LAYER | REPORT_CHECK_CAUSES |
                                                 REPORT_CHECK_DASH, line, sizeof(line)));
    char v[256];
    report_check_verdict(res, v, sizeof(v));
    fprintf(f, "%s\n", v);
}

void report_check_first_finding(const report_check_result *c, char *buf, size_t n)
{
    if (c->nf.found)
        report_check_sentence_nonfinite(&c->nf, buf, n);
    else if (c->nd)
        report_sentence_desync(c->ds, c->nd, 0, buf, n);
    else if (c->nl)
        report_sentence_leak(&c->leaks[0], buf, n);
    else if (c->nerr || c->nwarn)
        report_sentence_check(&c->findings[0], 0, buf, n);
    else
        report_check_sentence_ok(c, buf, n);
}

int64_t report_check_first_step(const report_check_result *c, int *rank)
{
    *rank = -1;
    if (c->nf.found)
        return *rank = c->nf.rank, c->nf.step;
    if (c->nd)
        return *rank = c->ds[0].nranks ? c->ds[0].ranks[0] : -1, c->ds[0].step;
    if (c->nl) {
        const leak_finding *l = &c->leaks[0];
        *rank = l->rank;
        return l->how == LEAK_GROWTH && l->from_step != TFT_STEP_NONE ? l->from_step : l->first_alloc_step;
    }
    if (c->nerr || c->nwarn) /* the detectors' first (most severe, earliest) */
        return *rank = c->findings[0].rank, c->findings[0].step;
    return TFT_STEP_NONE;
}
