/*
 * report_html_findings.c — the sections of tfdiff --html's page that show
 * the findings (report_html_internal.h): the verdict and counts, the first
 * divergence with both sides' statistics and its origin, non-finite
 * values, desyncs (with their timelines), the detectors' findings BAD
 * alone has, and leaks.
 */
#include "report_html_internal.h"
#include "html_page.h"
#include "html_svg.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- verdict --------------------------------------------------------------- */

void report_html_verdict(FILE *f, const page *p)
{
    int v = report_verdict(p->r);
    char finding[1400];
    bool has = report_first_finding(p->r, finding, sizeof(finding));
    int64_t step = report_first_step(p->r);
    fprintf(f, "<p id=\"verdict\" data-status=\"%s\"", report_verdict_word(v, false));
    if (has && step != TFT_STEP_NONE && !CORE_IS_STEPLESS(step))
        fprintf(f, " data-step=\"%" PRId64 "\"", step);
    fputs(">tfdiff: ", f);
    html_text(f, report_verdict_word(v, true));
    fputs(has ? " — " : " — no difference found", f);
    html_text(f, finding);
    fputs("</p>\n", f);
    report_counts c;
    report_count(p->r, &c);
    fputs("<p class=\"meta\">GOLDEN <code>", f);
    html_text(f, p->r->golden);
    fputs("</code>, BAD <code>", f);
    html_text(f, p->r->bad);
    char cmp[512];
    fputs("</code>: compared ", f);
    html_text(f, report_sentence_compared(p->r, &c, cmp, sizeof(cmp)));
    fputs(".</p>\n", f);
    char ro[1024];
    if (report_sentence_roundoff(p->r, ro, sizeof(ro))) {
        fputs("<p class=\"meta roundoff\">", f);
        html_text(f, ro);
        fputs("</p>\n", f);
    }
    fprintf(f, "<table class=\"counts\"><tr><th>finding</th><th>count</th></tr>"
               "<tr><td>first divergence</td><td class=\"num\">%d</td></tr>"
               "<tr><td>non-finite BAD alone has</td><td class=\"num\">%d</td></tr>"
               "<tr><td>desync</td><td class=\"num\">%d</td></tr><tr><td>leak</td><td class=\"num\">%d</td></tr>"
               "<tr><td>structure</td><td class=\"num\">%d</td></tr>"
               "<tr><td>BAD ended early or otherwise</td><td class=\"num\">%d</td></tr>"
               "<tr><td>incomplete (reasons)</td><td class=\"num\">%d</td></tr></table>\n",
            c.divergence, c.nonfinite, c.desyncs, c.leaks, c.structure, c.ended, c.incomplete);
}

/* ---- first divergence ------------------------------------------------------- */

/* "Rank R, STEP, seq S: TENSOR made by OP (KIND, STAT)." */
static void divergence_line(FILE *f, const compare_point *d)
{
    char sb[48];
    fprintf(f, "<p>Rank %d, %s, seq %lld: <code>", d->rank, core_step_text(d->step, sb, sizeof(sb)),
            (long long)d->seq);
    html_text(f, d->tensor);
    fputs("</code>", f);
    if (d->op[0] && strcmp(d->op, d->tensor)) {
        fputs(" made by <code>", f);
        html_text(f, d->op);
        fputs("</code>", f);
    }
    fprintf(f, " (%s%s", compare_kind_name(d->kind), d->stat[0] ? ", " : "");
    html_text(f, d->stat);
    fputs(").</p>\n", f);
}

/* Both sides' shapes and statistics, the one most out of tolerance hot. */
static void stats_table(FILE *f, const compare_point *d)
{
    char gs[96], bs[96];
    report_shape_text(&d->golden, gs, sizeof(gs));
    report_shape_text(&d->bad, bs, sizeof(bs));
    fputs("<table class=\"stats\"><tr><th></th><th>GOLDEN</th><th>BAD</th></tr><tr><td>shape</td><td>", f);
    html_text(f, d->golden.present ? gs : "-");
    fputs("</td><td>", f);
    html_text(f, d->bad.present ? bs : "-");
    fputs("</td></tr>", f);
    report_stat_row rows[REPORT_STAT_ROWS];
    report_stat_rows(d, rows);
    for (int i = 0; i < REPORT_STAT_ROWS; i++)
        fprintf(f, "<tr%s><td>%s</td><td class=\"num\">%.8g</td><td class=\"num\">%.8g</td></tr>",
                !strcmp(rows[i].name, d->stat) ? " class=\"hot\"" : "", rows[i].name, rows[i].g, rows[i].b);
    fprintf(f, "<tr><td>fingerprint</td><td class=\"num\">%016" PRIx64 "</td><td class=\"num\">%016" PRIx64
               "</td></tr></table>\n",
            d->golden.stats.fingerprint, d->bad.stats.fingerprint);
}

/* The tensors before the divergence, both sides' means. */
static void context_table(FILE *f, const compare_result *fr)
{
    char sb[48];
    if (!fr->n_context)
        return;
    fprintf(f, "<h3>The %d tensors before it</h3>\n<table class=\"context\"><tr><th>step</th><th>tensor</th>"
               "<th>GOLDEN mean</th><th>BAD mean</th><th></th></tr>",
            fr->n_context);
    for (int k = 0; k < fr->n_context; k++) {
        fprintf(f, "<tr><td>%s</td><td><code>", core_step_text(fr->context_b[k].step, sb, sizeof(sb)));
        html_text(f, fr->context_b[k].name);
        fprintf(f, "</code></td><td class=\"num\">%.8g</td><td class=\"num\">%.8g</td><td>%s</td></tr>",
                fr->context_g[k].stats.mean, fr->context_b[k].stats.mean,
                fr->context_g[k].stats.fingerprint == fr->context_b[k].stats.fingerprint ? "identical"
                                                                                       : "within tolerance");
    }
    fputs("</table>\n", f);
}

/* Where the divergence began: an earlier op, the tensor itself, the op
 * that made it, or not found. */
static void origin(FILE *f, const compare_result *fr)
{
    const compare_point *d = &fr->first, *o = &fr->origin;
    char sb[48];
    fputs("<h3>Origin</h3>\n<p class=\"origin\">", f);
    if (o->found && (o->step != d->step || o->seq != d->seq)) {
        fprintf(f, "%s, seq %lld: <code>", core_step_text(o->step, sb, sizeof(sb)), (long long)o->seq);
        html_text(f, o->tensor);
        fputs("</code>", f);
        if (o->op[0] && strcmp(o->op, o->tensor)) {
            fputs(" (op <code>", f);
            html_text(f, o->op);
            fputs("</code>)", f);
        }
        fputs(" — its inputs match GOLDEN, its output does not.", f);
    } else if (o->found && o->leaf && o->op[0] && strcmp(o->op, o->tensor)) {
        fputs("The same op (<code>", f);
        html_text(f, o->op);
        fputs("</code>) — it records no inputs, so none could be checked; its output is the first to differ.", f);
    } else if (o->found && o->leaf) {
        fputs("The same tensor — no recorded op produced it (data, a parameter, an operand): it changed before it "
              "was recorded.", f);
    } else if (o->found) {
        fputs("The same op", f);
        if (d->op[0]) {
            fputs(" (<code>", f);
            html_text(f, d->op);
            fputs("</code>)", f);
        }
        fputs(" — its inputs match GOLDEN, its output does not.", f);
    } else {
        fputs("Not found: the ops before it record no inputs that tell.", f);
    }
    fputs("</p>\n", f);
}

void report_html_first_divergence(FILE *f, const page *p)
{
    const compare_result *fr = report_first_rank(p->r);
    if (!fr)
        return;
    html_page_section(f, "first-divergence", "First divergence");
    divergence_line(f, &fr->first);
    stats_table(f, &fr->first);
    context_table(f, fr);
    origin(f, fr);
    const compare_result *down = report_downstream_rank(p->r, fr);
    if (down) { /* the rank the cause reached through a collective */
        char line[1024];
        fputs("<p class=\"through\">", f);
        html_text(f, report_sentence_through(fr, down, line, sizeof(line)));
        fputs("</p>\n", f);
    }
    fputs("</section>\n", f);
}

/* ---- non-finite ------------------------------------------------------------ */

void report_html_nonfinite(FILE *f, const page *p)
{
    const compare_nonfinite *nf = report_first_nonfinite(p->r);
    if (!nf)
        return;
    char sb[48];
    html_page_section(f, "nonfinite", "Non-finite values");
    fprintf(f, "<p>First non-finite in BAD: rank %d, %s, seq %lld: <code>", nf->rank,
            core_step_text(nf->step, sb, sizeof(sb)), (long long)nf->seq);
    html_text(f, nf->tensor);
    fputs("</code>", f);
    if (nf->op[0] && strcmp(nf->op, nf->tensor)) {
        fputs(" (op <code>", f);
        html_text(f, nf->op);
        fputs("</code>)", f);
    }
    fprintf(f, "; %s.</p>\n", nf->in_golden ? "GOLDEN has it too" : "GOLDEN has none");
    const shown *s = report_html_shown(p, nf->rank);
    if (s && p->have_bins) {
        report_html_downsampled(f, p);
        char title[64];
        snprintf(title, sizeof(title), "rank %d: NaN and Inf elements per step", nf->rank);
        report_html_chart2(f, p, title, s->g ? s->g->nonfinite : NULL, s->b ? s->b->nonfinite : NULL,
               CORE_IS_STEPLESS(nf->step) ? INT64_MIN : nf->step, 0);
    }
    fputs("</section>\n", f);
}

/* ---- leaks ----------------------------------------------------------------- */

static const double *site_live(const html_series_run *x, const char *site)
{
    for (int i = 0; x && i < x->nsites; i++)
        if (!strcmp(x->sites[i].name, site))
            return x->sites[i].live;
    return NULL;
}

void report_html_leaks(FILE *f, const page *p)
{
    const leak_finding *l = p->r->leaks;
    int nl = p->r->nleaks;
    if (!nl)
        return;
    html_page_section(f, "leaks", "Leaks");
    report_html_downsampled(f, p);
    for (int i = 0; i < nl && i < LEAKS_SHOWN; i++) {
        char what[400];
        leak_describe(&l[i], what, sizeof(what));
        fprintf(f, "<p class=\"leak\">Rank %d, ", l[i].rank);
        html_text(f, what);
        fputs("</p>\n", f);
        const shown *s = report_html_shown(p, l[i].rank);
        if (!s || !p->have_bins)
            continue;
        const double *g = site_live(s->g, l[i].site), *b = site_live(s->b, l[i].site);
        bool followed = g || b;
        double gc[HC_BINS], bc[HC_BINS];
        if (g)
            html_series_carried(g, gc, p->bins.nbins);
        else if (s->g && s->g->nsites < HC_SITES) /* GOLDEN never allocated there: nothing live */
            for (int k = 0; k < p->bins.nbins; k++)
                gc[k] = 0;
        if (g || (s->g && s->g->nsites < HC_SITES))
            g = gc;
        if (b)
            html_series_carried(b, bc, p->bins.nbins);
        char title[200];
        snprintf(title, sizeof(title), "rank %d: live bytes of %s", l[i].rank, l[i].site);
        int64_t mark = l[i].how == LEAK_GROWTH && l[i].from_step != TFT_STEP_NONE ? l[i].from_step : INT64_MIN;
        if (followed)
            report_html_chart2(f, p, title, g, b ? bc : NULL, mark, HTML_UNIT_BYTES);
        else
            fputs("<p class=\"meta\">(the site is not among the sites followed for the chart)</p>\n", f);
    }
    if (nl > LEAKS_SHOWN)
        fprintf(f, "<p class=\"meta\">and %d more (tfdiff --json lists them all)</p>\n", nl - LEAKS_SHOWN);
    const shown *s = report_html_shown(p, l[0].rank);
    if (s && p->have_bins) {
        double gc[HC_BINS], bc[HC_BINS];
        if (s->g)
            html_series_carried(s->g->live_total, gc, p->bins.nbins);
        if (s->b)
            html_series_carried(s->b->live_total, bc, p->bins.nbins);
        char title[64];
        snprintf(title, sizeof(title), "rank %d: live bytes, every site", s->rank);
        report_html_chart2(f, p, title, s->g ? gc : NULL, s->b ? bc : NULL, INT64_MIN, HTML_UNIT_BYTES);
    }
    fputs("</section>\n", f);
}

/* Detector findings BAD has and GOLDEN lacks (docs/CHECK.md). */
void report_html_bad_only(FILE *f, const page *p)
{
    const detect_finding *x = p->r->checks;
    int n = p->r->nchecks;
    if (!n)
        return;
    html_page_section(f, "checks", "Only in BAD: single-trace findings (tfdump --check)");
    report_check_html_table(f, x, n);
    fputs("</section>\n", f);
}

void report_html_desyncs(FILE *f, const page *p)
{
    const desync_finding *d = p->r->desyncs;
    int nd = p->r->ndesyncs;
    if (!nd)
        return;
    html_page_section(f, "desync", "Collective desyncs");
    fputs("<p>Per-rank collective calls of BAD around each finding: a bar from entering the call to leaving it "
          "(orange: entered and never left); ranks at fault or missing the call are highlighted.</p>\n", f);
    for (int i = 0; i < nd && i < DESYNCS_SHOWN; i++) {
        char sb[48], where[160];
        desync_where(d, nd, i, where, sizeof(where));
        fprintf(f, "<h3>%s at %s</h3>\n<p class=\"desync\">", desync_kind_name(d[i].kind),
                core_step_text(d[i].step, sb, sizeof(sb)));
        html_text(f, where);
        fputs(": ", f);
        html_text(f, d[i].detail);
        fputs("</p>\n", f);
        if (p->b && d[i].kind != DS_P2P)
            report_html_timeline(f, p, &d[i]);
    }
    if (nd > DESYNCS_SHOWN)
        fprintf(f, "<p class=\"meta\">and %d more (tfdiff --json lists them all)</p>\n", nd - DESYNCS_SHOWN);
    fputs("</section>\n", f);
}
