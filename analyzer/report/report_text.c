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

static void side_by_side(FILE *f, const compare_point *p)
{
    char gs[64], bs[64];
    report_shape_text(&p->golden, gs, sizeof(gs));
    report_shape_text(&p->bad, bs, sizeof(bs));
    fprintf(f, "    %-12s %-24s %-24s\n", "", "golden", "bad");
    fprintf(f, "    %-12s %-24s %-24s\n", "shape", p->golden.present ? gs : "-", p->bad.present ? bs : "-");
    report_stat_row rows[REPORT_STAT_ROWS];
    report_stat_rows(p, rows);
    for (int i = 0; i < REPORT_STAT_ROWS; i++)
        fprintf(f, "    %-12s %-24.8g %-24.8g%s\n", rows[i].name, rows[i].g, rows[i].b,
                !strcmp(rows[i].name, p->stat) ? "  <--" : "");
    fprintf(f, "    %-12s %016" PRIx64 "         %016" PRIx64 "\n", "fingerprint", p->golden.stats.fingerprint,
            p->bad.stats.fingerprint);
}

/* The first divergence: its line, both sides' statistics, the tensors
 * before it and its origin. */
static void text_first(FILE *f, const compare_result *fr)
{
    const compare_point *p = &fr->first;
    char sb[48], line[1024];
    fprintf(f, "%s\n", report_sentence_divergence(fr, true, line, sizeof(line)));
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
    else if (fr->origin.found && fr->origin.leaf && fr->origin.op[0] && strcmp(fr->origin.op, fr->origin.tensor))
        fprintf(f, "origin: the same op — it records no inputs, so none could be checked; its output is the first"
                   " to differ\n");
    else if (fr->origin.found && fr->origin.leaf)
        fprintf(f, "origin: the same tensor — no recorded op produced it (data, a parameter, an operand):"
                   " it changed before it was recorded\n");
    else if (fr->origin.found)
        fprintf(f, "origin: the same op — its inputs match GOLDEN, its output does not\n");
}

/* Each rank's structure, early or different end, and steps compared. */
static void text_ranks(const diff_report *r, FILE *f)
{
    char a[64], b[64], line[1024];
    for (int i = 0; i < r->nranks; i++) {
        const compare_result *x = &r->ranks[i];
        if (x->structure[0])
            fprintf(f, "%s\n", report_sentence_structure(x, true, line, sizeof(line)));
        if (report_sentence_raised(x, false, line, sizeof(line)))   /* the cause first */
            fprintf(f, "%s\n", line);
        if (report_sentence_raised(x, true, line, sizeof(line)))
            fprintf(f, "%s\n", line);
        if (report_sentence_ended(x, true, line, sizeof(line)))
            fprintf(f, "%s\n", line);
        if (x->bad_exit_known && (x->bad_exit_code || x->bad_exit_signal || x->exit_differs))
            fprintf(f, "%s\n", report_sentence_exit(x, true, line, sizeof(line)));
        if (x->common_first_step != x->golden_first_step && x->common_first_step != TFT_STEP_NONE)
            fprintf(f, "rank %d: compared %s only (BAD has %s)\n", x->rank,
                    range_text(x->common_first_step, x->common_last_step, a, sizeof(a)),
                    range_text(x->bad_first_step, x->bad_last_step, b, sizeof(b)));
    }
}

/* The verdict and why the comparison is incomplete. */
static void text_verdict(const diff_report *r, FILE *f)
{
    char line[1024];
    fprintf(f, "tfdiff: %s\n", report_verdict_word(report_verdict(r), true));
    for (int k = 0; report_sentence_incomplete(r, k, line, sizeof(line)); k++)
        fprintf(f, "%s\n", line);
    if (report_verdict(r) == VERDICT_INCOMPLETE && report_drops_where(r->ranks, r->nranks, line, sizeof(line))[0])
        fprintf(f, "no divergence found, but the comparison is incomplete: %s\n", line);
    if (r->bad_unrecorded)
        fprintf(f, "%s\n", report_sentence_unrecorded(r, line, sizeof(line)));
}

void report_text(const diff_report *r, FILE *f)
{
    char line[2048];
    text_verdict(r, f);
    const compare_result *fr = report_first_rank(r), *down = report_downstream_rank(r, fr);
    if (fr)
        text_first(f, fr);
    if (down)
        fprintf(f, "%s\n", report_sentence_through(fr, down, line, sizeof(line)));
    const compare_nonfinite *nf = report_first_nonfinite(r);
    if (nf)
        fprintf(f, "%s\n", report_sentence_nonfinite(nf, line, sizeof(line)));
    for (int i = 0; i < r->nleaks; i++)
        fprintf(f, "%s\n", report_sentence_leak(&r->leaks[i], line, sizeof(line)));
    for (int i = 0; i < r->ndesyncs; i++)
        fprintf(f, "%s\n", report_sentence_desync(r->desyncs, r->ndesyncs, i, line, sizeof(line)));
    if (r->stacks.n) {
        fprintf(f, "stacks: where each rank's main thread in BAD was when tftrace --timeout stopped it"
                   " (tfdump --events --kind stack BAD: every thread's frames):\n");
        desync_stacks_print(f, &r->stacks, "  ");
    }
    text_ranks(r, f);
    report_counts c;
    report_count(r, &c);
    if (report_sentence_roundoff(r, line, sizeof(line)))
        fprintf(f, "%s\n", line);
    fprintf(f, "compared %s\n", report_sentence_compared(r, &c, line, sizeof(line)));
    for (int i = 0; i < r->nchecks; i++)
        fprintf(f, "only in BAD: %s\n", report_sentence_check(&r->checks[i], REPORT_CHECK_DASH, line, sizeof(line)));
    for (int i = 0; i < r->nnotes; i++)
        fprintf(f, "note: %s\n", r->notes[i]);
}
