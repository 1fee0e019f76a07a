/*
 * report_text.c — tfdiff's report for a terminal: the verdict, the first
 * finding with both sides' statistics, then every other finding.
 */
#include "core_common.h"
#include "report_internal.h"

#include <inttypes.h>
#include <string.h>

/* "steps A..B", "no steps (windows A..B)" (a trace without steps) or "no
 * steps". */
static const char *range_text(int64_t a, int64_t b, char *buf, size_t n)
{
    if (a == TFT_STEP_NONE)
        snprintf(buf, n, "no steps");
    else if (CORE_IS_STEPLESS(a))
        snprintf(buf, n, "no steps (windows %lld..%lld)", (long long)(a - CORE_STEPLESS_BASE),
                 (long long)(b - CORE_STEPLESS_BASE));
    else
        snprintf(buf, n, "steps %lld..%lld", (long long)a, (long long)b);
    return buf;
}

static void shape_str(const compare_tensor_side *t, char *b, size_t n)
{
    size_t k = (size_t)snprintf(b, n, "%s[", tft_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && i < TFT_MAX_NDIM && k < n; i++)
        k += (size_t)snprintf(b + k, n - k, "%s%lld", i ? "," : "", (long long)t->shape[i]);
    if (k < n)
        snprintf(b + k, n - k, "]");
}

static void side_by_side(FILE *f, const compare_point *p)
{
    char gs[64], bs[64];
    shape_str(&p->golden, gs, sizeof(gs));
    shape_str(&p->bad, bs, sizeof(bs));
    fprintf(f, "    %-12s %-24s %-24s\n", "", "golden", "bad");
    fprintf(f, "    %-12s %-24s %-24s\n", "shape", p->golden.present ? gs : "-", p->bad.present ? bs : "-");
    const tft_stats *g = &p->golden.stats, *b = &p->bad.stats;
    struct { const char *n; double g, b; } rows[] = {
        {"mean", g->mean, b->mean}, {"std", g->std, b->std}, {"min", g->min, b->min},
        {"max", g->max, b->max}, {"absmax", g->absmax, b->absmax}, {"l1", g->l1, b->l1}, {"l2", g->l2, b->l2},
        {"nan", (double)g->nan, (double)b->nan}, {"inf", (double)(g->pinf + g->ninf), (double)(b->pinf + b->ninf)},
        {"zero", (double)g->zero, (double)b->zero},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        fprintf(f, "    %-12s %-24.8g %-24.8g%s\n", rows[i].n, rows[i].g, rows[i].b,
                !strcmp(rows[i].n, p->stat) ? "  <--" : "");
    fprintf(f, "    %-12s %016" PRIx64 "         %016" PRIx64 "\n", "fingerprint", g->fingerprint, b->fingerprint);
}

static void text_ranks(const diff_report *r, FILE *f)
{
    char a[64], b[64];
    for (int i = 0; i < r->nranks; i++) {
        const compare_result *x = &r->ranks[i];
        if (x->structure[0])
            fprintf(f, "rank %d: structure: %s (%" PRIu64 " inserted, %" PRIu64 " deleted)\n", x->rank,
                    x->structure, x->inserted, x->deleted);
        if (x->bad_ended_early && CORE_IS_STEPLESS(x->bad_last_step))
            fprintf(f, "rank %d: BAD ended early, in window %lld of its ops (no steps; golden ran to window %lld)%s\n",
                    x->rank, (long long)(x->bad_last_step - CORE_STEPLESS_BASE),
                    (long long)(x->golden_last_step - CORE_STEPLESS_BASE), x->bad_exit_known ? "" : ", exit unknown");
        else if (x->lost_tail)
            fprintf(f, "rank %d: BAD's records end at %s (golden's at %s), but it exited as GOLDEN did: "
                       "the rest was lost, not skipped\n", x->rank, core_step_text(x->bad_last_step, a, sizeof(a)),
                    core_step_text(x->golden_last_step, b, sizeof(b)));
        else if (x->bad_ended_early)
            fprintf(f, "rank %d: BAD ended early at %s (golden ran to %s)%s\n", x->rank,
                    core_step_text(x->bad_last_step, a, sizeof(a)), core_step_text(x->golden_last_step, b, sizeof(b)),
                    x->bad_exit_known ? "" : ", exit unknown");
        if (x->bad_exit_known && (x->bad_exit_code || x->bad_exit_signal || x->exit_differs)) {
            fprintf(f, "rank %d: BAD exited with %s %d", x->rank, x->bad_exit_signal ? "signal" : "code",
                    x->bad_exit_signal ? x->bad_exit_signal : x->bad_exit_code);
            if (x->exit_differs && x->golden_exit_known)
                fprintf(f, " (GOLDEN with %s %d)", x->golden_exit_signal ? "signal" : "code",
                        x->golden_exit_signal ? x->golden_exit_signal : x->golden_exit_code);
            fputc('\n', f);
        }
        if (x->common_first_step != x->golden_first_step && x->common_first_step != TFT_STEP_NONE)
            fprintf(f, "rank %d: compared %s only (BAD has %s)\n", x->rank,
                    range_text(x->common_first_step, x->common_last_step, a, sizeof(a)),
                    range_text(x->bad_first_step, x->bad_last_step, b, sizeof(b)));
    }
}

void report_text(const diff_report *r, FILE *f)
{
    const compare_result *fr = report_first_rank(r);
    char sb[48];
    fprintf(f, "tfdiff: %s\n", report_verdict_word(report_verdict(r), true));
    char why[320];
    for (int k = 0; report_incomplete_reason(r, k, why, sizeof(why)); k++)
        fprintf(f, "incomplete: %s\n", why);
    char lost_where[1024];
    if (report_verdict(r) == VERDICT_INCOMPLETE &&
        report_drops_where(r->ranks, r->nranks, lost_where, sizeof(lost_where))[0])
        fprintf(f, "no divergence found, but the comparison is incomplete: %s\n", lost_where);
    if (r->bad_unrecorded)
        fprintf(f, "BAD recorded nothing: %s\n", r->bad_unrecorded_what);
    if (fr) {
        const compare_point *p = &fr->first;
        char th[32] = "", op[128] = "";
        if (fr->threads > 1 && p->thread >= 0)
            snprintf(th, sizeof(th), ", thread %d", p->thread);
        if (p->op[0] && strcmp(p->op, p->tensor) != 0)
            snprintf(op, sizeof(op), " [%s]", p->op);
        fprintf(f, "first divergence: rank %d, %s, seq %lld%s: %s%s (%s%s%s)\n", p->rank,
                core_step_text(p->step, sb, sizeof(sb)), (long long)p->seq, th, p->tensor, op,
                compare_kind_name(p->kind), p->stat[0] ? ", " : "", p->stat);
        side_by_side(f, p);
        if (fr->n_context)
            fprintf(f, "  the %d tensors before it (golden mean / bad mean):\n", fr->n_context);
        for (int k = 0; k < fr->n_context; k++)
            fprintf(f, "    %-18s %-24s %-16.8g %-16.8g%s\n", core_step_text(fr->context_b[k].step, sb, sizeof(sb)),
                    fr->context_b[k].name, fr->context_g[k].stats.mean, fr->context_b[k].stats.mean,
                    fr->context_g[k].stats.fingerprint == fr->context_b[k].stats.fingerprint ? "identical"
                                                                                             : "within tolerance");
        if (fr->origin.found && (fr->origin.step != p->step || fr->origin.seq != p->seq))
            fprintf(f, "origin: %s, seq %lld: %s — its inputs match GOLDEN, its output does not\n",
                    core_step_text(fr->origin.step, sb, sizeof(sb)), (long long)fr->origin.seq, fr->origin.tensor);
        else if (fr->origin.found && fr->origin.leaf)
            fprintf(f, "origin: the same tensor — no recorded op produced it (data, a parameter, an operand):"
                       " it changed before it was recorded\n");
        else if (fr->origin.found)
            fprintf(f, "origin: the same op — its inputs match GOLDEN, its output does not\n");
    }
    const compare_nonfinite *nf = report_first_nonfinite(r);
    if (nf)
        fprintf(f, "first non-finite in BAD: rank %d, %s, %s (%s)\n", nf->rank, core_step_text(nf->step, sb, sizeof(sb)),
                nf->tensor, nf->in_golden ? "GOLDEN has it too" : "GOLDEN has none");
    for (int i = 0; i < r->nleaks; i++) {
        char what[400];
        leak_describe(&r->leaks[i], what, sizeof(what));
        fprintf(f, "leak: rank %d, %s\n", r->leaks[i].rank, what);
    }
    for (int i = 0; i < r->ndesyncs; i++) {
        char where[160];
        desync_where(r->desyncs, r->ndesyncs, i, where, sizeof(where));
        fprintf(f, "desync: %s at %s (%s): %s\n", desync_kind_name(r->desyncs[i].kind),
                core_step_text(r->desyncs[i].step, sb, sizeof(sb)), where,
                r->desyncs[i].detail);
    }
    if (r->stacks.n) {
        fprintf(f, "stacks: where each rank's main thread in BAD was when tftrace --timeout stopped it"
                   " (tfdump --events --kind stack BAD: every thread's frames):\n");
        desync_stacks_print(f, &r->stacks, "  ");
    }
    text_ranks(r, f);
    uint64_t cmp = 0, same = 0, tol = 0;
    for (int i = 0; i < r->nranks; i++)
        cmp += r->ranks[i].compared, same += r->ranks[i].identical, tol += r->ranks[i].within_tolerance;
    fprintf(f, "compared %" PRIu64 " tensors on %d rank%s: %" PRIu64 " bit-identical, %" PRIu64
               " different but within tolerance (rtol %g, atol %g)\n",
            cmp, r->nranks, r->nranks == 1 ? "" : "s", same, tol, r->o.rtol, r->o.atol);
    for (int i = 0; i < r->nchecks; i++) {
        const detect_finding *c = &r->checks[i];
        fprintf(f, "only in BAD: %s: %s: rank %d, %s, %s: %s\n", detect_severity_name(c->severity), c->kind, c->rank,
                core_step_text(c->step, sb, sizeof(sb)), c->tensor[0] ? c->tensor : "-", c->evidence);
    }
    for (int i = 0; i < r->nnotes; i++)
        fprintf(f, "note: %s\n", r->notes[i]);
}
