/*
 * report.c — tfdiff's findings across ranks (report.h): the per-rank
 * results, leaks, desyncs and notes tfdiff adds, the verdict and the
 * counts by class. The renderings are report_text.c, report_json.c,
 * report_junit.c, report_markdown.c and report_html.c.
 */
#include "core_common.h"
#include "report_internal.h"
#include "core_drops.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void report_add_check(diff_report *r, const detect_finding *f)
{
    if (r->nchecks < (int)(sizeof(r->checks) / sizeof(r->checks[0])))
        r->checks[r->nchecks++] = *f;
}

diff_report *report_new(const char *golden, const char *bad, const compare_opts *o)
{
    diff_report *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->ranks = calloc(MAX_RANKS, sizeof(*r->ranks));
    if (!r->ranks) {
        free(r);
        return NULL;
    }
    r->golden = golden;
    r->bad = bad;
    r->o = *o;
    return r;
}

void report_free(diff_report *r)
{
    if (r) {
        free(r->ranks);
        desync_stacks_free(&r->stacks);
    }
    free(r);
}

void report_set_stacks(diff_report *r, desync_stacks *s)
{
    desync_stacks_free(&r->stacks);
    r->stacks = *s;
    *s = (desync_stacks){0};
}

void report_note(diff_report *r, const char *fmt, ...)
{
    if (r->nnotes == 8)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->notes[r->nnotes++], sizeof(r->notes[0]), fmt, ap);
    va_end(ap);
}

void report_incomplete(diff_report *r, const char *fmt, ...)
{
    if (r->nincomplete == 8)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->incomplete[r->nincomplete++], sizeof(r->incomplete[0]), fmt, ap);
    va_end(ap);
}

void report_add_rank(diff_report *r, const compare_result *res)
{
    if (r->nranks < MAX_RANKS)
        r->ranks[r->nranks++] = *res;
}

void report_add_leak(diff_report *r, const leak_finding *l)
{
    if (r->nleaks < MAX_ITEMS)
        r->leaks[r->nleaks++] = *l;
}

void report_add_desync(diff_report *r, const desync_finding *d)
{
    int lost = report_drops_explain(r->ranks, r->nranks, d);
    if (lost >= 0) { /* a dropped record can fake it: not judged */
        char sb[48];
        report_incomplete(r, "rank %d: BAD dropped records there, so a desync (%s) at %s (%s) was not judged", lost,
                          desync_kind_name(d->kind), core_step_text(d->step, sb, sizeof(sb)),
                          d->comm_name[0] ? d->comm_name : "no communicator");
        return;
    }
    if (r->ndesyncs < MAX_ITEMS)
        r->desyncs[r->ndesyncs++] = *d;
}

void report_bad_unrecorded(diff_report *r, const char *what, int exit_status)
{
    r->bad_unrecorded = true;
    snprintf(r->bad_unrecorded_what, sizeof(r->bad_unrecorded_what), "%s", what);
    r->bad_exit_status = exit_status;
}

/* The earliest point among the ranks' by (step, collectives before it in
 * the step, seq, rank); NULL if none. A rank that parts right after a
 * collective (its result differs: an all-reduce's) follows the rank whose
 * input to that collective differed first, earlier in the same step:
 * that rank holds the cause (docs/TFDIFF.md, "The cause across ranks"). */
const compare_result *report_first_rank(const diff_report *r)
{
    const compare_result *best = NULL;
    for (int i = 0; i < r->nranks; i++) {
        const compare_point *p = &r->ranks[i].first, *q = best ? &best->first : NULL;
        if (!p->found)
            continue;
        if (!q || p->step < q->step ||
            (p->step == q->step && (p->colls_before < q->colls_before ||
                                    (p->colls_before == q->colls_before && p->seq < q->seq))))
            best = &r->ranks[i];
    }
    return best;
}

const compare_result *report_downstream_rank(const diff_report *r, const compare_result *first)
{
    for (int i = 0; first && i < r->nranks; i++) {
        const compare_point *p = &r->ranks[i].first;
        if (&r->ranks[i] != first && p->found && p->step == first->first.step &&
            p->colls_before > first->first.colls_before && p->coll[0])
            return &r->ranks[i];
    }
    return NULL;
}

const compare_nonfinite *report_first_nonfinite(const diff_report *r)
{
    const compare_nonfinite *best = NULL;
    for (int i = 0; i < r->nranks; i++) {
        const compare_nonfinite *p = &r->ranks[i].nonfinite;
        if (p->found && (!best || p->step < best->step || (p->step == best->step && p->seq < best->seq)))
            best = p;
    }
    return best;
}

/* The reasons the comparison is incomplete, one per call with k = 0, 1,
 * ...: writes reason k to buf and returns true, false past the last. */
bool report_incomplete_reason(const diff_report *r, int k, char *buf, size_t n)
{
    if (k < r->nincomplete) {
        snprintf(buf, n, "%s", r->incomplete[k]);
        return true;
    }
    k -= r->nincomplete;
    compare_roundoff ro;
    report_roundoff(r, &ro);
    bool diverged = false;
    for (int i = 0; i < r->nranks; i++)
        diverged |= r->ranks[i].first.found;
    if (ro.wide_step != TFT_STEP_NONE && !diverged && k-- == 0) { /* the runs decorrelated: nothing smaller is seen */
        char at[48];
        core_step_text(ro.wide_step, at, sizeof(at));
        snprintf(buf, n, "from %s on, round-off moved the forward tensors by %g or more (the runs decorrelate): a bug "
                 "smaller than that cannot be told from it; compared in full up to there (--steps :%lld)", at,
                 RO_WIDE, (long long)(ro.wide_step - 1));
        return true;
    }
    for (int w = 0; w < 2; w++) {   /* a side cut by its recording: once per side */
        const compare_result *first = NULL;
        int64_t upto = INT64_MAX;
        int nr = 0;
        for (int i = 0; i < r->nranks; i++)
            if (r->ranks[i].cut_why[w][0]) {
                first = first ? first : &r->ranks[i];
                upto = r->ranks[i].cut_step[w] < upto ? r->ranks[i].cut_step[w] : upto;
                nr++;
            }
        if (!first || k-- > 0)
            continue;
        char at[48];
        snprintf(buf, n, "%s was cut short: %s; its rank files end in the middle of a step, so the comparison "
                 "stops before %s (%d rank%s)", w ? "BAD" : "GOLDEN", first->cut_why[w],
                 core_step_text(upto, at, sizeof(at)), nr, nr == 1 ? "" : "s");
        return true;
    }
    for (int i = 0; i < r->nranks; i++) {
        const compare_result *x = &r->ranks[i];
        const char *side[4] = {"GOLDEN", "BAD", "GOLDEN", "BAD"};
        bool on[4] = {x->golden_records == 0, x->bad_records == 0, x->golden_dropped > 0, x->bad_dropped > 0};
        uint64_t lost[4] = {0, 0, x->golden_dropped, x->bad_dropped};
        char span[64];
        for (int w = 0; w < 4; w++) {
            if (!on[w] || k-- > 0)
                continue;
            if (w < 2)
                snprintf(buf, n, "rank %d: %s recorded nothing (its rank file holds no records)", x->rank, side[w]);
            else
                snprintf(buf, n, "rank %d: %s lost %" PRIu64 " records (dropped by the recorder)%s%s", x->rank,
                         side[w], lost[w], report_drops_span(x, w - 2, span, sizeof(span)),
                         x->unverified ? "; differences where a lost record may be the cause were not judged" : "");
            return true;
        }
    }
    return false;
}

report_class report_rank_class(const compare_result *x)
{
    if (x->first.found)
        return REPORT_DIVERGENCE;
    if (x->structure[0])
        return REPORT_STRUCTURE;
    if (x->bad_ended_early && !x->lost_tail)
        return REPORT_ENDED;
    return x->exit_differs ? REPORT_EXIT : REPORT_NONE;
}

report_finding report_first(const diff_report *r)
{
    const compare_result *fr = report_first_rank(r);
    const compare_nonfinite *nf = report_first_nonfinite(r);
    if (r->bad_unrecorded)
        return (report_finding){REPORT_UNRECORDED, NULL};
    if (fr)
        return (report_finding){REPORT_DIVERGENCE, fr};
    if (nf && !nf->in_golden)
        return (report_finding){REPORT_NONFINITE, NULL};
    if (r->ndesyncs)
        return (report_finding){REPORT_DESYNC, NULL};
    if (r->nleaks)
        return (report_finding){REPORT_LEAK, NULL};
    for (int i = 0; i < r->nranks; i++)
        if (report_rank_class(&r->ranks[i]) != REPORT_NONE)
            return (report_finding){report_rank_class(&r->ranks[i]), &r->ranks[i]};
    char buf[8];
    if (report_incomplete_reason(r, 0, buf, sizeof(buf)))
        return (report_finding){REPORT_INCOMPLETE, NULL};
    return (report_finding){REPORT_NONE, NULL};
}

int report_verdict(const diff_report *r)
{
    report_class c = report_first(r).cls;
    if (c != REPORT_NONE && c != REPORT_INCOMPLETE)
        return VERDICT_DIVERGED;
    char buf[8];
    return report_incomplete_reason(r, 0, buf, sizeof(buf)) ? VERDICT_INCOMPLETE : VERDICT_MATCH;
}

const char *report_verdict_word(int v, bool upper)
{
    if (v == VERDICT_DIVERGED)
        return upper ? "DIVERGED" : "diverged";
    return v == VERDICT_INCOMPLETE ? (upper ? "INCOMPLETE" : "incomplete") : (upper ? "MATCH" : "match");
}
void report_set_outputs(diff_report *r, const char *html, const char *markdown, int argc, char **argv)
{
    r->html = html;
    r->markdown = markdown;
    r->argc = argc;
    r->argv = argv;
}

void report_count(const diff_report *r, report_counts *c)
{
    *c = (report_counts){.leaks = r->nleaks, .desyncs = r->ndesyncs, .unrecorded = r->bad_unrecorded,
                         .ranks = r->nranks};
    for (int i = 0; i < r->nranks; i++) {
        const compare_result *x = &r->ranks[i];
        c->divergence += x->first.found;
        c->nonfinite += x->nonfinite.found && !x->nonfinite.in_golden;
        c->structure += x->structure[0] != '\0';
        c->ended += (x->bad_ended_early && !x->lost_tail) || x->exit_differs;
        c->compared += x->compared;
        c->identical += x->identical;
        c->within_tolerance += x->within_tolerance;
        c->unverified += x->unverified;
        c->shape_only += x->shape_only;
    }
    uint64_t judged = c->identical + c->within_tolerance + c->unverified + c->shape_only;
    c->different = c->compared > judged ? c->compared - judged : 0;
    char why[320];
    while (report_incomplete_reason(r, c->incomplete, why, sizeof(why)))
        c->incomplete++;
}



const char *report_sentence_compared(const diff_report *r, const report_counts *c, char *buf, size_t n)
{
    int k = snprintf(buf, n,
                     "%" PRIu64 " tensor%s on %d rank%s: %" PRIu64 " bit-identical, %" PRIu64
                     " different but within tolerance (rtol %g, atol %g%s)",
                     c->compared, c->compared == 1 ? "" : "s", c->ranks, c->ranks == 1 ? "" : "s", c->identical,
                     c->within_tolerance, r->o.rtol, r->o.atol, r->o.roundoff ? ", or within round-off" : "");
    if (c->different && k > 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ", %" PRIu64 " beyond it (the divergence and what followed)",
                      c->different);
    if (c->shape_only && k > 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ", %" PRIu64 " by shape and dtype alone (recorded without statistics)",
                      c->shape_only);
    if (c->unverified && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, ", %" PRIu64 " not judged (records lost on a side)", c->unverified);
    return buf;
}

void report_roundoff(const diff_report *r, compare_roundoff *out)
{
    memset(out, 0, sizeof *out);
    out->first_step = out->last_step = out->max_step = out->jump_step = out->wide_step = TFT_STEP_NONE;
    out->width = 1;
    for (int i = 0; i < r->nranks; i++)
        compare_roundoff_merge(out, &r->ranks[i].roundoff);
}

const desync_finding *report_desyncs(const diff_report *r, int *n)
{
    *n = r->ndesyncs;
    return r->desyncs;
}
