/*
 * report_sentence.c — the words of each finding, written once
 * (report_internal.h): tfdiff's findings as the text report's lines and as
 * the one-line summaries JUnit and the HTML and Markdown reports lead
 * with; the leak, desync and detector sentences tfdump --check shares; the
 * first finding of a report (report.h) and its step.
 */
#include "core_common.h"
#include "report_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const char *report_sentence_divergence(const compare_result *x, bool full, char *buf, size_t n)
{
    char sb[48], ob[48], th[32] = "", op[128] = "";
    const compare_point *p = &x->first;
    if (full && x->threads > 1 && p->thread >= 0)
        snprintf(th, sizeof(th), ", thread %d", p->thread);
    if (full && p->op[0] && strcmp(p->op, p->tensor) != 0)
        snprintf(op, sizeof(op), " [%s]", p->op);
    char kept[96] = "";
    if (p->kept) /* a --keep-steps trace: only its scalars reach back this far */
        snprintf(kept, sizeof(kept), "; a kept scalar: full records from step %lld only", (long long)p->full_from);
    int w = snprintf(buf, n, "first divergence: rank %d, %s, seq %lld%s: %s%s (%s%s%s%s)", p->rank,
                     core_step_text(p->step, sb, sizeof(sb)), (long long)p->seq, th, p->tensor, op,
                     compare_kind_name(p->kind), p->stat[0] ? ", " : "", p->stat, kept);
    const compare_point *o = &x->origin;
    if (!full && w > 0 && (size_t)w < n && o->found && (o->step != p->step || o->seq != p->seq))
        snprintf(buf + w, n - (size_t)w, "; origin: %s, seq %lld: %s (its inputs match GOLDEN, its output does not)",
                 core_step_text(o->step, ob, sizeof(ob)), (long long)o->seq, o->tensor);
    return buf;
}

const char *report_sentence_structure(const compare_result *x, bool full, char *buf, size_t n)
{
    if (full)
        snprintf(buf, n, "rank %d: structure: %s (%" PRIu64 " inserted, %" PRIu64 " deleted)", x->rank, x->structure,
                 x->inserted, x->deleted);
    else
        snprintf(buf, n, "rank %d: structure: %s", x->rank, x->structure);
    return buf;
}

/* The text report (full) says "golden" and whether BAD's exit is known, and
 * has words of its own for a trace without steps and for records that lost
 * their tail; the summary has only the early end. */
const char *report_sentence_ended(const compare_result *x, bool full, char *buf, size_t n)
{
    char a[48], b[48];
    const char *unknown = full && !x->bad_exit_known ? ", exit unknown" : "";
    if (full && x->bad_ended_early && CORE_IS_STEPLESS(x->bad_last_step))
        snprintf(buf, n, "rank %d: BAD ended early, in window %lld of its ops (no steps; golden ran to window %lld)%s",
                 x->rank, (long long)(x->bad_last_step - CORE_STEPLESS_BASE),
                 (long long)(x->golden_last_step - CORE_STEPLESS_BASE), unknown);
    else if (full && x->lost_tail)
        snprintf(buf, n, "rank %d: BAD's records end at %s (golden's at %s), but it exited as GOLDEN did: "
                         "the rest was lost, not skipped", x->rank, core_step_text(x->bad_last_step, a, sizeof(a)),
                 core_step_text(x->golden_last_step, b, sizeof(b)));
    else if (x->bad_ended_early && (full || !x->lost_tail))
        snprintf(buf, n, "rank %d: BAD ended early at %s (%s ran to %s)%s", x->rank,
                 core_step_text(x->bad_last_step, a, sizeof(a)), full ? "golden" : "GOLDEN",
                 core_step_text(x->golden_last_step, b, sizeof(b)), unknown);
    else
        return NULL;
    return buf;
}

/* The summary: BAD's exit and that GOLDEN's differs; the text report's
 * line (full): GOLDEN's exit too when it differs and is known. */
const char *report_sentence_exit(const compare_result *x, bool full, char *buf, size_t n)
{
    int w = snprintf(buf, n, "rank %d: BAD exited with %s %d", x->rank, x->bad_exit_signal ? "signal" : "code",
                     x->bad_exit_signal ? x->bad_exit_signal : x->bad_exit_code);
    if (w < 0 || (size_t)w >= n)
        return buf;
    if (!full)
        snprintf(buf + w, n - (size_t)w, ", GOLDEN otherwise");
    else if (x->exit_differs && x->golden_exit_known)
        snprintf(buf + w, n - (size_t)w, " (GOLDEN with %s %d)", x->golden_exit_signal ? "signal" : "code",
                 x->golden_exit_signal ? x->golden_exit_signal : x->golden_exit_code);
    return buf;
}

const char *report_sentence_raised(const compare_result *x, bool golden, char *buf, size_t n)
{
    const core_exception *e = golden ? &x->golden_raised : &x->bad_raised;
    if (!e->known)
        return NULL;
    char what[700];
    snprintf(buf, n, "rank %d: %s raised %s", x->rank, golden ? "GOLDEN" : "BAD",
             core_exception_text(e, what, sizeof(what)));
    return buf;
}

/* An early or other end that came with an uncaught exception in BAD is said
 * by the exception (its cause). */
const char *report_sentence_rank(const compare_result *x, char *buf, size_t n)
{
    report_class c = report_rank_class(x);
    if ((c == REPORT_ENDED || c == REPORT_EXIT) && x->bad_raised.known)
        return report_sentence_raised(x, false, buf, n);
    switch (c) {
    case REPORT_DIVERGENCE: return report_sentence_divergence(x, false, buf, n);
    case REPORT_STRUCTURE: return report_sentence_structure(x, false, buf, n);
    case REPORT_ENDED: return report_sentence_ended(x, false, buf, n);
    case REPORT_EXIT: return report_sentence_exit(x, false, buf, n);
    default: return NULL;
    }
}

const char *report_sentence_nonfinite(const compare_nonfinite *nf, char *buf, size_t n)
{
    char sb[48];
    snprintf(buf, n, "first non-finite in BAD: rank %d, %s, %s (%s)", nf->rank,
             core_step_text(nf->step, sb, sizeof(sb)), nf->tensor, nf->in_golden ? "GOLDEN has it too" : "GOLDEN has none");
    return buf;
}

const char *report_sentence_leak(const leak_finding *l, char *buf, size_t n)
{
    char what[400];
    leak_describe(l, what, sizeof(what));
    snprintf(buf, n, "leak: rank %d, %s", l->rank, what);
    return buf;
}

const char *report_sentence_desync(const desync_finding *ds, int nd, int i, char *buf, size_t n)
{
    char sb[48], where[160];
    desync_where(ds, nd, i, where, sizeof(where));
    snprintf(buf, n, "desync: %s at %s (%s): %s", desync_kind_name(ds[i].kind),
             core_step_text(ds[i].step, sb, sizeof(sb)), where, ds[i].detail);
    return buf;
}

const char *report_sentence_unrecorded(const diff_report *r, char *buf, size_t n)
{
    snprintf(buf, n, "BAD recorded nothing: %s", r->bad_unrecorded_what);
    return buf;
}

const char *report_sentence_through(const compare_result *first, const compare_result *down, char *buf, size_t n)
{
    char at[48];
    snprintf(buf, n, "rank %d parts later in %s, after the collective %s (%s): its result carries rank %d's "
             "difference; the cause is on rank %d",
             down->rank, core_step_text(down->first.step, at, sizeof(at)), down->first.coll, down->first.tensor,
             first->rank, first->rank);
    return buf;
}

const char *report_sentence_roundoff(const diff_report *r, char *buf, size_t n)
{
    compare_roundoff ro;
    report_roundoff(r, &ro);
    if (!ro.on || !ro.differing)
        return NULL;
    char a[48], b[48], m[48];
    const char *lead = report_verdict(r) == VERDICT_DIVERGED ? "before that, a match" : "match";
    int k;
    if (ro.first_step == ro.last_step)
        k = snprintf(buf, n, "%s within round-off: differences up to %.2g at %s (%s)", lead, ro.max_diff,
                     core_step_text(ro.max_step, m, sizeof(m)), ro.max_tensor);
    else
        k = snprintf(buf, n, "%s within round-off: differences grow from %.2g at %s to %.2g at %s (largest %.2g at %s, %s)",
                     lead, ro.first_diff, core_step_text(ro.first_step, a, sizeof(a)), ro.last_diff,
                     core_step_text(ro.last_step, b, sizeof(b)), ro.max_diff, core_step_text(ro.max_step, m, sizeof(m)),
                     ro.max_tensor);
    if (k < 0 || (size_t)k >= n)
        return buf;
    char own[64] = "no earlier difference of its own", run[48] = "none in the run before it";
    if (ro.jump < INFINITY)
        snprintf(own, sizeof(own), "%.3gx its own earlier difference", ro.jump);
    if (ro.jump_run < INFINITY)
        snprintf(run, sizeof(run), "%.3gx the run's", ro.jump_run);
    if (ro.explained && ro.jump_share > 0)
        snprintf(buf + k, n - (size_t)k, "; %llu beyond the fixed tolerance, none jumping beyond the envelope"
                 " (the nearest: %s at %s, %s and %s, thresholds %gx and %gx)%s",
                 (unsigned long long)ro.explained, ro.jump_tensor, core_step_text(ro.jump_step, a, sizeof(a)), own, run,
                 RO_KEY_GROWTH, RO_RUN_GROWTH, ro.noise ? "; calibrated with --noise" : "");
    else if (ro.explained)
        snprintf(buf + k, n - (size_t)k, "; %llu beyond the fixed tolerance, none jumping beyond the envelope%s",
                 (unsigned long long)ro.explained, ro.noise ? "; calibrated with --noise" : "");
    else
        snprintf(buf + k, n - (size_t)k, "; all within the fixed tolerance%s", ro.noise ? "; calibrated with --noise" : "");
    size_t len = strlen(buf);
    if (ro.wide_step != TFT_STEP_NONE && len < n)
        snprintf(buf + len, n - len, "; from %s on, the forward tensors' differences reach %g: the runs decorrelate, and"
                 " a bug smaller than the envelope cannot be told from round-off",
                 core_step_text(ro.wide_step, a, sizeof(a)), RO_WIDE);
    len = strlen(buf);
    if (ro.optimizer_noise && len < n)
        snprintf(buf + len, n - len, "; %llu optimizer output%s parted without the next step parting (the first: %s at %s:"
                 " Adam moves a parameter whose gradient is only round-off, such as an attention key's bias, by"
                 " its full step)",
                 (unsigned long long)ro.optimizer_noise, ro.optimizer_noise == 1 ? "" : "s", ro.optimizer_noise_tensor,
                 core_step_text(ro.optimizer_noise_step, a, sizeof(a)));
    return buf;
}

const char *report_sentence_incomplete(const diff_report *r, int k, char *buf, size_t n)
{
    char why[320];
    if (!report_incomplete_reason(r, k, why, sizeof(why)))
        return NULL;
    snprintf(buf, n, "incomplete: %s", why);
    return buf;
}

const char *report_sentence_check(const detect_finding *x, int parts, char *buf, size_t n)
{
    char sb[48], layer[24] = "";
    if ((parts & REPORT_CHECK_LAYER) && x->layer >= 0)
        snprintf(layer, sizeof(layer), ", layer %d", x->layer);
    const char *tensor = (parts & REPORT_CHECK_DASH) && !x->tensor[0] ? "-" : x->tensor;
    int w = snprintf(buf, n, "%s: %s: rank %d, %s, %s%s: %s", detect_severity_name(x->severity), x->kind, x->rank,
                     core_step_text(x->step, sb, sizeof(sb)), tensor, layer, x->evidence);
    if ((parts & REPORT_CHECK_CAUSES) && x->causes && x->causes[0] && w >= 0 && (size_t)w < n)
        snprintf(buf + w, n - (size_t)w, ". Likely: %s", x->causes);
    return buf;
}

const char *report_shape_text(const compare_tensor_side *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%s[", tft_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && i < TFT_MAX_NDIM && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)t->shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

void report_stat_rows(const compare_point *p, report_stat_row rows[REPORT_STAT_ROWS])
{
    const tft_stats *g = &p->golden.stats, *b = &p->bad.stats;
    const report_stat_row r[REPORT_STAT_ROWS] = {
        {"mean", g->mean, b->mean}, {"std", g->std, b->std}, {"min", g->min, b->min},
        {"max", g->max, b->max}, {"absmax", g->absmax, b->absmax}, {"l1", g->l1, b->l1}, {"l2", g->l2, b->l2},
        {"nan", (double)g->nan, (double)b->nan}, {"inf", (double)(g->pinf + g->ninf), (double)(b->pinf + b->ninf)},
        {"zero", (double)g->zero, (double)b->zero},
    };
    memcpy(rows, r, sizeof(r));
}

bool report_first_finding(const diff_report *r, char *buf, size_t n)
{
    buf[0] = '\0';
    report_finding f = report_first(r);
    switch (f.cls) {
    case REPORT_UNRECORDED: report_sentence_unrecorded(r, buf, n); break;
    case REPORT_NONFINITE: report_sentence_nonfinite(report_first_nonfinite(r), buf, n); break;
    case REPORT_DESYNC: report_sentence_desync(r->desyncs, r->ndesyncs, 0, buf, n); break;
    case REPORT_LEAK: report_sentence_leak(&r->leaks[0], buf, n); break;
    case REPORT_INCOMPLETE: report_sentence_incomplete(r, 0, buf, n); break;
    case REPORT_NONE: break;
    default: report_sentence_rank(f.rank, buf, n); break;
    }
    return buf[0] != '\0';
}

/* The step of the first finding; after the classes that have one, BAD's
 * last step on the first rank that ended early. */
int64_t report_first_step(const diff_report *r)
{
    report_finding f = report_first(r);
    const leak_finding *l = &r->leaks[0];
    switch (f.cls) {
    case REPORT_UNRECORDED: return TFT_STEP_NONE;
    case REPORT_DIVERGENCE: return f.rank->first.step;
    case REPORT_NONFINITE: return report_first_nonfinite(r)->step;
    case REPORT_DESYNC: return r->desyncs[0].step;
    case REPORT_LEAK:
        return l->how == LEAK_GROWTH && l->from_step != TFT_STEP_NONE ? l->from_step
               : l->how == LEAK_PEAK ? l->peak_step : l->first_alloc_step;
    default: break;
    }
    for (int i = 0; i < r->nranks; i++) {
        const compare_result *x = &r->ranks[i];
        if (x->bad_ended_early && !x->lost_tail)
            return x->bad_last_step;
    }
    return TFT_STEP_NONE;
}
