/*
 * report_sentence.c — the sentences of tfdiff's findings: one per class
 * of finding, and the first finding of a report (the verdict line of the
 * HTML and Markdown reports, JUnit's failure messages).
 */
#include "core_common.h"
#include "report_internal.h"

#include <stdio.h>

/* A rank's divergence sentence: its first divergence and origin, else a
 * structural difference or an early or different end; NULL when none. */
const char *report_sentence_rank(const compare_result *x, char *buf, size_t n)
{
    char sb[48], ob[48], gb[48];
    const compare_point *p = &x->first;
    if (p->found) {
        int w = snprintf(buf, n, "first divergence: rank %d, %s, seq %lld: %s (%s%s%s)", p->rank,
                         core_step_text(p->step, sb, sizeof(sb)), (long long)p->seq, p->tensor,
                         compare_kind_name(p->kind), p->stat[0] ? ", " : "", p->stat);
        const compare_point *o = &x->origin;
        if (w > 0 && (size_t)w < n && o->found && (o->step != p->step || o->seq != p->seq))
            snprintf(buf + w, n - (size_t)w, "; origin: %s, seq %lld: %s (its inputs match GOLDEN, its output does not)",
                     core_step_text(o->step, ob, sizeof(ob)), (long long)o->seq, o->tensor);
        return buf;
    }
    if (x->structure[0])
        snprintf(buf, n, "rank %d: structure: %s", x->rank, x->structure);
    else if (x->bad_ended_early && !x->lost_tail)
        snprintf(buf, n, "rank %d: BAD ended early at %s (GOLDEN ran to %s)", x->rank,
                 core_step_text(x->bad_last_step, sb, sizeof(sb)), core_step_text(x->golden_last_step, gb, sizeof(gb)));
    else if (x->exit_differs)
        snprintf(buf, n, "rank %d: BAD exited with %s %d, GOLDEN otherwise", x->rank,
                 x->bad_exit_signal ? "signal" : "code", x->bad_exit_signal ? x->bad_exit_signal : x->bad_exit_code);
    else
        return NULL;
    return buf;
}

const char *report_sentence_nonfinite(const compare_nonfinite *nf, char *buf, size_t n)
{
    char sb[48];
    snprintf(buf, n, "first non-finite in BAD: rank %d, %s, %s (GOLDEN has none)", nf->rank,
             core_step_text(nf->step, sb, sizeof(sb)), nf->tensor);
    return buf;
}

const char *report_sentence_leak(const leak_finding *l, char *buf, size_t n)
{
    char what[400];
    leak_describe(l, what, sizeof(what));
    snprintf(buf, n, "leak: rank %d, %s", l->rank, what);
    return buf;
}

const char *report_sentence_desync(const diff_report *r, char *buf, size_t n)
{
    char sb[48], where[160];
    desync_where(r->desyncs, r->ndesyncs, 0, where, sizeof(where));
    snprintf(buf, n, "desync: %s at %s (%s): %s", desync_kind_name(r->desyncs[0].kind),
             core_step_text(r->desyncs[0].step, sb, sizeof(sb)), where, r->desyncs[0].detail);
    return buf;
}

bool report_first_finding(const diff_report *r, char *buf, size_t n)
{
    buf[0] = '\0';
    const compare_result *fr = report_first_rank(r);
    const compare_nonfinite *nf = report_first_nonfinite(r);
    if (r->bad_unrecorded)
        snprintf(buf, n, "BAD recorded nothing: %s", r->bad_unrecorded_what);
    else if (fr)
        report_sentence_rank(fr, buf, n);
    else if (nf && !nf->in_golden)
        report_sentence_nonfinite(nf, buf, n);
    else if (r->ndesyncs)
        report_sentence_desync(r, buf, n);
    else if (r->nleaks)
        report_sentence_leak(&r->leaks[0], buf, n);
    for (int i = 0; !buf[0] && i < r->nranks; i++)
        report_sentence_rank(&r->ranks[i], buf, n);
    char why[320];
    if (!buf[0] && report_incomplete_reason(r, 0, why, sizeof(why)))
        snprintf(buf, n, "incomplete: %s", why);
    return buf[0] != '\0';
}

/* The order of report_first_finding. */
int64_t report_first_step(const diff_report *r)
{
    const compare_result *fr = report_first_rank(r);
    const compare_nonfinite *nf = report_first_nonfinite(r);
    if (r->bad_unrecorded)
        return TFT_STEP_NONE;
    if (fr)
        return fr->first.step;
    if (nf && !nf->in_golden)
        return nf->step;
    if (r->ndesyncs)
        return r->desyncs[0].step;
    if (r->nleaks) {
        const leak_finding *l = &r->leaks[0];
        return l->how == LEAK_GROWTH && l->from_step != TFT_STEP_NONE ? l->from_step
               : l->how == LEAK_PEAK ? l->peak_step : l->first_alloc_step;
    }
    for (int i = 0; i < r->nranks; i++) {
        const compare_result *x = &r->ranks[i];
        if (x->bad_ended_early && !x->lost_tail)
            return x->bad_last_step;
    }
    return TFT_STEP_NONE;
}
