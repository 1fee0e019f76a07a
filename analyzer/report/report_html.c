/*
 * report_html.c — tfdiff --html FILE (report_html.h): the verdict and the
 * first finding, then a section per class of finding, drawn as inline
 * SVG. The findings come from the report (report.h); the curves,
 * heatmap, memory and timelines from a second streaming pass over a few
 * rank files (html_series.h): rank 0 and the ranks of the findings, both
 * sides, so the page costs a bounded number of passes however many ranks
 * the traces have (the desync timeline reads the collectives of at most
 * TIMELINE_LANES ranks).
 */
#include "report_html.h"
#include "report_internal.h"
#include "report_check.h"
#include "html_series.h"
#include "html_page.h"
#include "html_svg.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { SHOWN_MAX = 4, HEAT_ROWS = 64, LAYERS_MAX = 12, LEAKS_SHOWN = 6, DESYNCS_SHOWN = 4, TIMELINE_LANES = 32,
       CALLS_PER_LANE = 8 };

/* One rank as both sides recorded it (either may be NULL). */
typedef struct shown {
    int rank;
    html_series_run *g, *b;
} shown;

typedef struct page {
    const diff_report *r;
    tft_trace *g, *b;
    html_series_bins bins;
    bool have_bins;
    shown s[SHOWN_MAX];
    int ns;
    double x[HC_BINS];  /* the bins' representative steps */
    int64_t mark;       /* the first finding's step, INT64_MIN none */
} page;

static int index_of(const tft_trace *t, int rank)
{
    for (int k = 0; t && k < tft_trace_nranks(t); k++)
        if (tft_trace_rank_id(t, k) == rank)
            return k;
    return -1;
}

static void add_rank(page *p, int rank)
{
    for (int i = 0; i < p->ns; i++)
        if (p->s[i].rank == rank)
            return;
    if (p->ns < SHOWN_MAX && (index_of(p->g, rank) >= 0 || index_of(p->b, rank) >= 0))
        p->s[p->ns++] = (shown){.rank = rank};
}

/* The ranks drawn: the finding's first, then rank 0 (or the first rank),
 * the first non-finite's and the first leak's. */
static void pick_ranks(page *p)
{
    const compare_result *fr = report_first_rank(p->r);
    const compare_nonfinite *nf = report_first_nonfinite(p->r);
    int nl;
    const leak_finding *l = report_leaks(p->r, &nl);
    if (fr)
        add_rank(p, fr->rank);
    add_rank(p, 0);
    if (p->b && tft_trace_nranks(p->b))
        add_rank(p, tft_trace_rank_id(p->b, 0));
    if (nf)
        add_rank(p, nf->rank);
    if (nl)
        add_rank(p, l[0].rank);
}

static int read_side(page *p, tft_trace *t, int rank, html_series_run **out)
{
    int i = index_of(t, rank);
    if (i < 0)
        return 0;
    tft_reader *rd = tft_trace_reader(t, i);
    if (!rd)
        return 0; /* an unreadable file: drawn without it */
    const compare_result *fr = report_first_rank(p->r);
    *out = html_series_run_new(&p->bins, rank, fr ? fr->first.tensor : NULL);
    int e = *out ? html_series_run_read(*out, rd) : -ENOMEM;
    tft_trace_release(t, i);
    return e == -ENOMEM ? e : 0;
}

static int collect(page *p)
{
    pick_ranks(p);
    html_series_span s = {0};
    for (int i = 0; i < p->ns; i++) {
        html_series_span_add(&s, p->g, index_of(p->g, p->s[i].rank));
        html_series_span_add(&s, p->b, index_of(p->b, p->s[i].rank));
    }
    if (!s.any || CORE_IS_STEPLESS(s.lo))
        return 0;
    html_series_bins_x(&p->bins, p->x, s.lo, s.hi, p->mark);
    p->have_bins = true;
    for (int i = 0; i < p->ns; i++) {
        int e = read_side(p, p->g, p->s[i].rank, &p->s[i].g);
        if (!e)
            e = read_side(p, p->b, p->s[i].rank, &p->s[i].b);
        if (e)
            return e;
    }
    return 0;
}

static const shown *shown_rank(const page *p, int rank)
{
    for (int i = 0; i < p->ns; i++)
        if (p->s[i].rank == rank)
            return &p->s[i];
    return NULL;
}

/* A chart of one series of both sides (NULL sides left out). */
static void chart2(FILE *f, const page *p, const char *title, const double *g, const double *b, int64_t mark,
                   int log_y)
{
    html_svg_series s[2];
    int n = 0;
    if (g)
        s[n++] = (html_svg_series){.label = "GOLDEN", .color = "#2a6", .x = p->x, .y = g, .n = p->bins.nbins};
    if (b)
        s[n++] = (html_svg_series){.label = "BAD", .color = "#c33", .x = p->x, .y = b, .n = p->bins.nbins, .dashed = 1};
    html_svg_line_chart(f, title, s, n, mark, log_y);
}

static void downsampled_note(FILE *f, const page *p)
{
    if (!p->have_bins || !p->bins.downsampled)
        return;
    fprintf(f, "<p class=\"downsampled\">Downsampled: steps %" PRId64 " to %" PRId64 " are drawn as %d columns; each "
               "column shows one step of its range (the first finding's step where it falls in one), counts and "
               "memory the largest over the range.</p>\n",
            p->bins.lo, p->bins.hi, p->bins.nbins);
}

/* ---- verdict --------------------------------------------------------------- */

static void verdict(FILE *f, const page *p)
{
    int v = report_verdict(p->r);
    char finding[1400];
    bool has = report_first_finding(p->r, finding, sizeof(finding));
    int64_t step = report_first_step(p->r);
    fprintf(f, "<p id=\"verdict\" data-status=\"%s\"", report_verdict_name(v));
    if (has && step != TFT_STEP_NONE && !CORE_IS_STEPLESS(step))
        fprintf(f, " data-step=\"%" PRId64 "\"", step);
    fputs(">tfdiff: ", f);
    html_text(f, report_verdict_word(v, true));
    fputs(has ? " — " : " — no difference found", f);
    html_text(f, finding);
    fputs("</p>\n", f);
    report_counts c;
    report_count(p->r, &c);
    const compare_opts *o = report_opts(p->r);
    fputs("<p class=\"meta\">GOLDEN <code>", f);
    html_text(f, report_golden(p->r));
    fputs("</code>, BAD <code>", f);
    html_text(f, report_bad(p->r));
    fprintf(f, "</code>: %" PRIu64 " tensors compared on %d rank%s, %" PRIu64 " bit-identical, %" PRIu64
               " within tolerance (rtol %g, atol %g).</p>\n",
            c.compared, c.ranks, c.ranks == 1 ? "" : "s", c.identical, c.within_tolerance, o->rtol, o->atol);
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

static void first_divergence(FILE *f, const page *p)
{
    const compare_result *fr = report_first_rank(p->r);
    if (!fr)
        return;
    const compare_point *d = &fr->first;
    char sb[48], gs[96], bs[96];
    html_page_section(f, "first-divergence", "First divergence");
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
    if (fr->n_context) {
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
    const compare_point *o = &fr->origin;
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
    fputs("</p>\n</section>\n", f);
}

/* ---- curves ---------------------------------------------------------------- */

static const double *series_of(const html_series_run *x, const char *name, int which)
{
    const html_series_name *n = x ? html_series_run_name(x, name) : NULL;
    if (!n)
        return NULL;
    return which == 0 ? n->std : n->absmax;
}

static void layer_curves(FILE *f, const page *p, const shown *s)
{
    const html_series_run *ref = s->b ? s->b : s->g;
    int done = 0;
    for (int l = 0; l < 1000 && done < LAYERS_MAX; l++) {
        char name[32];
        snprintf(name, sizeof(name), "L%d.res2", l);
        if (!html_series_run_name(ref, name))
            break;
        done++;
        for (int w = 0; w < 2; w++) {
            char title[96];
            snprintf(title, sizeof(title), "rank %d: layer %d output (%s) %s", s->rank, l, name, w ? "absmax" : "std");
            const double *g = series_of(s->g, name, w), *b = series_of(s->b, name, w);
            if ((g && html_series_any_finite(g, p->bins.nbins)) || (b && html_series_any_finite(b, p->bins.nbins)))
                chart2(f, p, title, g, b, p->mark, 0);
        }
    }
}

static void curves(FILE *f, const page *p)
{
    if (!p->have_bins)
        return;
    bool any = false;
    for (int i = 0; i < p->ns && i < 2; i++) {
        const shown *s = &p->s[i];
        any |= (s->g && (html_series_any_finite(s->g->loss, p->bins.nbins) || html_series_any_finite(s->g->grad_norm, p->bins.nbins))) ||
               (s->b && (html_series_any_finite(s->b->loss, p->bins.nbins) || html_series_any_finite(s->b->grad_norm, p->bins.nbins)));
    }
    if (!any)
        return;
    html_page_section(f, "curves", "Curves");
    fputs("<p>GOLDEN (green) and BAD (red, dashed) over the steps; the dashed vertical line marks the first "
          "finding's step. Drawn for rank 0 and the rank of the first finding.</p>\n", f);
    downsampled_note(f, p);
    for (int i = 0; i < p->ns && i < 2; i++) {
        const shown *s = &p->s[i];
        struct { const char *what; size_t off; } c[] = {{"loss", offsetof(html_series_run, loss)},
                                                        {"grad_norm", offsetof(html_series_run, grad_norm)},
                                                        {"lr", offsetof(html_series_run, lr)}};
        for (size_t k = 0; k < 3; k++) {
            const double *g = s->g ? (const double *)((const char *)s->g + c[k].off) : NULL;
            const double *b = s->b ? (const double *)((const char *)s->b + c[k].off) : NULL;
            if ((g && html_series_any_finite(g, p->bins.nbins)) || (b && html_series_any_finite(b, p->bins.nbins))) {
                char title[64];
                snprintf(title, sizeof(title), "rank %d: %s", s->rank, c[k].what);
                chart2(f, p, title, g, b, p->mark, 0);
            }
        }
        layer_curves(f, p, s);
    }
    fputs("</section>\n", f);
}

/* ---- heatmap --------------------------------------------------------------- */

static double rel(double g, double b)
{
    if (g == b || (isnan(g) && isnan(b)))
        return 0;
    if (!isfinite(g) || !isfinite(b))
        return 1;
    double m = fmax(fabs(g), fabs(b)), d = fabs(g - b) / m;
    return d > 1 ? 1 : d;
}


static void heatmap(FILE *f, const page *p)
{
    if (!p->have_bins || !p->ns || !p->s[0].g || !p->s[0].b)
        return;
    const shown *s = &p->s[0];
    const compare_result *fr = report_first_rank(p->r);
    const char *mark_name = fr ? fr->first.tensor : NULL;
    const html_series_name *rows[HEAT_ROWS];
    int nr = 0, mark_row = -1;
    for (int i = 0; i < s->b->nnames; i++) {
        const html_series_name *bn = &s->b->names[i];
        bool is_mark = mark_name && !strcmp(bn->name, mark_name);
        if (!is_mark && nr >= HEAT_ROWS - (mark_row < 0 && mark_name ? 1 : 0))
            continue;
        if (nr == HEAT_ROWS)
            break;
        if (is_mark)
            mark_row = nr;
        rows[nr++] = bn;
    }
    if (!nr)
        return;
    int nc = p->bins.nbins;
    double *v = malloc((size_t)nr * (size_t)nc * sizeof(*v));
    const char **labels = malloc((size_t)nr * sizeof(*labels));
    if (!v || !labels) {
        free(v);
        free(labels);
        return;
    }
    for (int r = 0; r < nr; r++) {
        const html_series_name *gn = html_series_run_name(s->g, rows[r]->name), *bn = rows[r];
        labels[r] = bn->name;
        for (int c = 0; c < nc; c++) {
            double *cell = &v[(size_t)r * (size_t)nc + (size_t)c];
            bool gp = gn && !isnan(gn->mean[c]), bp = !isnan(bn->mean[c]);
            if (!gp && !bp)
                *cell = 0;
            else if (gp != bp)
                *cell = NAN;
            else
                *cell = fmax(rel(gn->mean[c], bn->mean[c]), fmax(rel(gn->std[c], bn->std[c]),
                                                                 rel(gn->absmax[c], bn->absmax[c])));
        }
    }
    html_page_section(f, "heatmap", "Where it starts and how it spreads");
    fprintf(f, "<p>Tensors of rank %d (rows, in the order BAD first recorded them; optimizer state left out) by "
               "steps (columns), coloured by the relative difference of their statistics (mean, std, absmax) "
               "between GOLDEN and BAD; white where they are identical or the tensor was not recorded in that step.%s</p>\n",
            s->rank, mark_row >= 0 ? " The first divergence is outlined in blue." : "");
    if (s->b->names_full || s->b->nnames > HEAT_ROWS)
        fprintf(f, "<p class=\"meta\">The first %d tensor names BAD recorded are drawn; later ones are not.</p>\n",
                nr);
    downsampled_note(f, p);
    int mark_col = fr ? html_series_bin_of(&p->bins, fr->first.step) : -1;
    html_svg_heatmap(f, labels, nr, p->bins.rep, nc, v, mark_row, mark_col, fr ? fr->first.step : 0);
    fputs("</section>\n", f);
    free(v);
    free(labels);
}

/* ---- non-finite ------------------------------------------------------------ */

static void nonfinite(FILE *f, const page *p)
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
    const shown *s = shown_rank(p, nf->rank);
    if (s && p->have_bins) {
        downsampled_note(f, p);
        char title[64];
        snprintf(title, sizeof(title), "rank %d: NaN and Inf elements per step", nf->rank);
        chart2(f, p, title, s->g ? s->g->nonfinite : NULL, s->b ? s->b->nonfinite : NULL,
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

static void leaks(FILE *f, const page *p)
{
    int nl;
    const leak_finding *l = report_leaks(p->r, &nl);
    if (!nl)
        return;
    html_page_section(f, "leaks", "Leaks");
    downsampled_note(f, p);
    for (int i = 0; i < nl && i < LEAKS_SHOWN; i++) {
        char what[400];
        leak_describe(&l[i], what, sizeof(what));
        fprintf(f, "<p class=\"leak\">Rank %d, ", l[i].rank);
        html_text(f, what);
        fputs("</p>\n", f);
        const shown *s = shown_rank(p, l[i].rank);
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
            chart2(f, p, title, g, b ? bc : NULL, mark, 0);
        else
            fputs("<p class=\"meta\">(the site is not among the sites followed for the chart)</p>\n", f);
    }
    if (nl > LEAKS_SHOWN)
        fprintf(f, "<p class=\"meta\">and %d more (tfdiff --json lists them all)</p>\n", nl - LEAKS_SHOWN);
    const shown *s = shown_rank(p, l[0].rank);
    if (s && p->have_bins) {
        double gc[HC_BINS], bc[HC_BINS];
        if (s->g)
            html_series_carried(s->g->live_total, gc, p->bins.nbins);
        if (s->b)
            html_series_carried(s->b->live_total, bc, p->bins.nbins);
        char title[64];
        snprintf(title, sizeof(title), "rank %d: live bytes, every site", s->rank);
        chart2(f, p, title, s->g ? gc : NULL, s->b ? bc : NULL, INT64_MIN, 0);
    }
    fputs("</section>\n", f);
}

/* ---- desyncs ---------------------------------------------------------------- */

static void timeline(FILE *f, const page *p, const desync_finding *d)
{
    int lanes[TIMELINE_LANES], nlanes = 0, more = 0;
    if (d->nmembers > 0 && d->nmembers <= DESYNC_MEMBERS) {
        for (int i = 0; i < d->nmembers; i++)
            nlanes < TIMELINE_LANES ? (void)(lanes[nlanes++] = d->members[i]) : (void)more++;
    } else {
        for (int i = 0; i < tft_trace_nranks(p->b); i++)
            nlanes < TIMELINE_LANES ? (void)(lanes[nlanes++] = tft_trace_rank_id(p->b, i)) : (void)more++;
    }
    uint64_t lo = d->coll_seq >= 4 ? d->coll_seq - 4 : 0, hi = d->coll_seq + 1;
    html_series_call(*calls)[CALLS_PER_LANE] = calloc((size_t)nlanes + 1, sizeof(*calls));
    int *ncalls = calloc((size_t)nlanes + 1, sizeof(int));
    html_svg_bar *bars = calloc((size_t)nlanes * CALLS_PER_LANE + 1, sizeof(*bars));
    char(*tips)[160] = calloc((size_t)nlanes * CALLS_PER_LANE + 1, sizeof(*tips));
    char(*labels)[48] = calloc((size_t)nlanes + 1, sizeof(*labels));
    const char **lp = calloc((size_t)nlanes + 1, sizeof(*lp)), **lc = calloc((size_t)nlanes + 1, sizeof(*lc));
    if (!calls || !ncalls || !bars || !tips || !labels || !lp || !lc)
        goto out;
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (int i = 0; i < nlanes; i++) {
        int k = index_of(p->b, lanes[i]);
        tft_reader *rd = k >= 0 ? tft_trace_reader(p->b, k) : NULL;
        int n = rd ? html_series_calls_read(rd, d->comm, lo, hi, calls[i], CALLS_PER_LANE) : 0;
        if (rd)
            tft_trace_release(p->b, k);
        ncalls[i] = n > 0 ? n : 0;
        for (int j = 0; j < ncalls[i]; j++) {
            const html_series_call *c = &calls[i][j];
            if (c->t_enter && c->t_enter < t0)
                t0 = c->t_enter;
            t1 = c->t_exit > t1 ? c->t_exit : c->t_enter > t1 ? c->t_enter : t1;
        }
    }
    int nb = 0;
    double span = t1 > t0 ? (double)(t1 - t0) : 1;
    for (int i = 0; i < nlanes; i++) {
        bool fault = false, has = false;
        for (int k = 0; k < d->nranks; k++)
            fault |= d->ranks[k] == lanes[i];
        for (int j = 0; j < ncalls[i]; j++) {
            const html_series_call *c = &calls[i][j];
            has |= c->coll_seq == d->coll_seq;
            if (!c->t_enter)
                continue;
            bool open = !c->t_exit;
            html_svg_bar *b = &bars[nb];
            *b = (html_svg_bar){.lane = i, .t0 = (double)(c->t_enter - t0) / span,
                           .t1 = open ? -1 : (double)(c->t_exit - t0) / span,
                           .cls = open ? "bar open" : fault && c->coll_seq == d->coll_seq ? "bar fault" : "bar",
                           .tip = tips[nb]};
            char sb[48];
            snprintf(tips[nb], sizeof(tips[nb]), "rank %d: %s #%" PRIu64 ", %s, %s", lanes[i], c->name, c->coll_seq,
                     core_step_text(c->step, sb, sizeof(sb)),
                     open ? "entered, never left" : "entered and left");
            nb++;
        }
        snprintf(labels[i], sizeof(labels[i]), "rank %d%s", lanes[i], !has ? " (missing)" : fault ? " (at fault)" : "");
        lp[i] = labels[i];
        lc[i] = fault || !has ? "fault" : "";
    }
    char left[64], right[64];
    snprintf(left, sizeof(left), "collectives #%" PRIu64 " to #%" PRIu64, lo, hi);
    snprintf(right, sizeof(right), "%.3f ms", span * 1e-6);
    html_svg_timeline(f, lp, lc, nlanes, bars, nb, left, right);
    if (more)
        fprintf(f, "<p class=\"meta\">and %d more ranks, not drawn</p>\n", more);
out:
    free(calls);
    free(ncalls);
    free(bars);
    free(tips);
    free(labels);
    free(lp);
    free(lc);
}

/* Detector findings BAD has and GOLDEN lacks (docs/CHECK.md). */
static void bad_only(FILE *f, const page *p)
{
    int n;
    const detect_finding *x = report_checks(p->r, &n);
    if (!n)
        return;
    html_page_section(f, "checks", "Only in BAD: single-trace findings (tfdump --check)");
    report_check_html_table(f, x, n);
    fputs("</section>\n", f);
}

static void desyncs(FILE *f, const page *p)
{
    int nd;
    const desync_finding *d = report_desyncs(p->r, &nd);
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
            timeline(f, p, &d[i]);
    }
    if (nd > DESYNCS_SHOWN)
        fprintf(f, "<p class=\"meta\">and %d more (tfdiff --json lists them all)</p>\n", nd - DESYNCS_SHOWN);
    fputs("</section>\n", f);
}

/* ---- the page -------------------------------------------------------------- */

static void free_page(page *p)
{
    for (int i = 0; i < p->ns; i++) {
        html_series_run_free(p->s[i].g);
        html_series_run_free(p->s[i].b);
    }
}

int report_html_write(const diff_report *r, tft_trace *g, tft_trace *b, const char *path)
{
    html_out o;
    if (html_out_open(&o, path) < 0)
        return -1;
    page *p = calloc(1, sizeof(*p));
    if (!p) {
        html_out_abort(&o);
        errno = ENOMEM;
        return -1;
    }
    *p = (page){.r = r, .g = g, .b = b, .mark = INT64_MIN};
    int64_t step = report_first_step(r);
    if (step != TFT_STEP_NONE && !CORE_IS_STEPLESS(step))
        p->mark = step;
    int e = g && b ? collect(p) : 0;
    if (e) {
        free_page(p);
        free(p);
        html_out_abort(&o);
        errno = -e;
        return -1;
    }
    FILE *f = o.f;
    html_page_head(f, "diff", "tfdiff report");
    fputs("<h1>tfdiff report</h1>\n", f);
    verdict(f, p);
    first_divergence(f, p);
    nonfinite(f, p);
    desyncs(f, p);
    bad_only(f, p);
    leaks(f, p);
    heatmap(f, p);
    curves(f, p);
    html_page_tail(f);
    free_page(p);
    free(p);
    return html_out_commit(&o);
}
