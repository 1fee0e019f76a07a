/*
 * report_html_charts.c — the charts of tfdiff --html's page
 * (report_html_internal.h): the loss, gradient-norm, learning-rate and
 * layer curves of both sides, the heatmap of where the difference starts
 * and spreads, and a desync's timeline of collective calls.
 */
#include "report_html_internal.h"
#include "html_page.h"
#include "html_svg.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- curves ---------------------------------------------------------------- */

static const double *series_of(const html_series_run *x, const char *name, int which)
{
    const html_series_name *n = x ? html_series_run_name(x, name) : NULL;
    if (!n)
        return NULL;
    return which == 0 ? n->std : n->absmax;
}

/* Whether name is a block's output in a PyTorch module path: PREFIX then a
 * block list and its index as the last two parts (blocks.N nanoGPT,
 * layers.N Llama and most HF models, h.N GPT-2, layer.N BERT); *plen gets
 * the length of PREFIX + "blocks." (up to the index). */
static bool block_output(const char *name, size_t *plen)
{
    static const char *const lists[] = {"blocks", "layers", "h", "layer"};
    size_t len = strlen(name), d = len;
    while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9')
        d--;
    if (d == len || d < 2 || name[d - 1] != '.')
        return false;
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        size_t ll = strlen(lists[i]);
        if (d - 1 >= ll && !strncmp(name + d - 1 - ll, lists[i], ll) && (d - 1 == ll || name[d - 2 - ll] == '.')) {
            *plen = d;
            return true;
        }
    }
    return false;
}

/* The layer outputs' names: tftrain's "L%d.res2", else the PyTorch prefix
 * ("model.layers.") most block outputs share; false when neither. */
static bool layer_scheme(const html_series_run *x, char *prefix, size_t n)
{
    if (html_series_run_name(x, "L0.res2")) {
        prefix[0] = 0;
        return true;
    }
    int best = 0;
    for (int i = 0; i < x->nnames; i++) {
        size_t pl;
        if (!block_output(x->names[i].name, &pl) || pl >= n)
            continue;
        int count = 0;
        for (int j = 0; j < x->nnames; j++) {
            size_t pj;
            count += block_output(x->names[j].name, &pj) && pj == pl && !strncmp(x->names[j].name, x->names[i].name, pl);
        }
        if (count > best) {
            best = count;
            memcpy(prefix, x->names[i].name, pl);
            prefix[pl] = 0;
        }
    }
    return best > 0;
}

static void layer_curves(FILE *f, const page *p, const shown *s)
{
    const html_series_run *ref = s->b ? s->b : s->g;
    char prefix[96];
    if (!layer_scheme(ref, prefix, sizeof(prefix)))
        return;
    int done = 0;
    for (int l = 0; l < 1000 && done < LAYERS_MAX; l++) {
        char name[128];
        if (prefix[0])
            snprintf(name, sizeof(name), "%s%d", prefix, l);
        else
            snprintf(name, sizeof(name), "L%d.res2", l);
        if (!html_series_run_name(ref, name))
            break;
        done++;
        for (int w = 0; w < 2; w++) {
            char title[200];
            snprintf(title, sizeof(title), "rank %d: layer %d output (%s) %s", s->rank, l, name, w ? "absmax" : "std");
            const double *g = series_of(s->g, name, w), *b = series_of(s->b, name, w);
            if ((g && html_series_any_finite(g, p->bins.nbins)) || (b && html_series_any_finite(b, p->bins.nbins)))
                report_html_chart2(f, p, title, g, b, p->mark, HTML_Y_AUTO);
        }
    }
}

void report_html_curves(FILE *f, const page *p)
{
    if (!p->have_bins)
        return;
    bool any = false;
    for (int i = 0; i < p->ns && i < 2; i++) {
        const shown *s = &p->s[i];
        any |= html_series_run_has_curves(s->g) || html_series_run_has_curves(s->b);
    }
    if (!any)
        return;
    html_page_section(f, "curves", "Curves");
    fputs("<p>GOLDEN (green) and BAD (red, dashed) over the steps; the dashed vertical line marks the first "
          "finding's step. Drawn for rank 0 and the rank of the first finding.</p>\n", f);
    report_html_downsampled(f, p);
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
                report_html_chart2(f, p, title, g, b, p->mark, HTML_Y_AUTO);
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

void report_html_heatmap(FILE *f, const page *p)
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
    report_html_downsampled(f, p);
    int mark_col = fr ? html_series_bin_of(&p->bins, fr->first.step) : -1;
    html_svg_heatmap(f, labels, nr, p->bins.rep, nc, v, mark_row, mark_col, fr ? fr->first.step : 0);
    fputs("</section>\n", f);
    free(v);
    free(labels);
}

/* ---- desyncs ---------------------------------------------------------------- */

/* A desync's timeline being drawn: a lane per rank, its calls and bars. */
typedef struct timeline {
    int lanes[TIMELINE_LANES], nlanes, more;   /* the ranks drawn, and how many more are not */
    uint64_t lo, hi;                            /* the collectives drawn (coll_seq) */
    html_series_call (*calls)[CALLS_PER_LANE]; /* per lane, ncalls[lane] of them */
    int *ncalls;
    uint64_t t0, t1;                            /* the first entry; the last exit (or entry) */
    html_svg_bar *bars;                         /* nbars of them, each with its tooltip in tips */
    char (*tips)[160];
    int nbars;
    char (*labels)[48];                         /* per lane; lp points to them, lc their classes */
    const char **lp, **lc;
} timeline;

/* The lanes: the communicator's members when known, else every rank of BAD. */
static void timeline_lanes(timeline *tl, const page *p, const desync_finding *d)
{
    if (d->nmembers > 0 && d->nmembers <= DESYNC_MEMBERS) {
        for (int i = 0; i < d->nmembers; i++)
            tl->nlanes < TIMELINE_LANES ? (void)(tl->lanes[tl->nlanes++] = d->members[i]) : (void)tl->more++;
    } else {
        for (int i = 0; i < tft_trace_nranks(p->b); i++)
            tl->nlanes < TIMELINE_LANES ? (void)(tl->lanes[tl->nlanes++] = tft_trace_rank_id(p->b, i))
                                        : (void)tl->more++;
    }
}

static bool timeline_alloc(timeline *tl)
{
    size_t n = (size_t)tl->nlanes;
    tl->calls = calloc(n + 1, sizeof(*tl->calls));
    tl->ncalls = calloc(n + 1, sizeof(int));
    tl->bars = calloc(n * CALLS_PER_LANE + 1, sizeof(*tl->bars));
    tl->tips = calloc(n * CALLS_PER_LANE + 1, sizeof(*tl->tips));
    tl->labels = calloc(n + 1, sizeof(*tl->labels));
    tl->lp = calloc(n + 1, sizeof(*tl->lp));
    tl->lc = calloc(n + 1, sizeof(*tl->lc));
    return tl->calls && tl->ncalls && tl->bars && tl->tips && tl->labels && tl->lp && tl->lc;
}

static void timeline_free(timeline *tl)
{
    free(tl->calls);
    free(tl->ncalls);
    free(tl->bars);
    free(tl->tips);
    free(tl->labels);
    free(tl->lp);
    free(tl->lc);
}

/* Each lane's calls on d's communicator from BAD's rank files, and the
 * time they span. */
static void timeline_read(timeline *tl, const page *p, const desync_finding *d)
{
    tl->t0 = UINT64_MAX;
    tl->t1 = 0;
    for (int i = 0; i < tl->nlanes; i++) {
        int k = report_html_index_of(p->b, tl->lanes[i]);
        tft_reader *rd = k >= 0 ? tft_trace_reader(p->b, k) : NULL;
        int n = rd ? html_series_calls_read(rd, d->comm, tl->lo, tl->hi, tl->calls[i], CALLS_PER_LANE) : 0;
        if (rd)
            tft_trace_release(p->b, k);
        tl->ncalls[i] = n > 0 ? n : 0;
        for (int j = 0; j < tl->ncalls[i]; j++) {
            const html_series_call *c = &tl->calls[i][j];
            if (c->t_enter && c->t_enter < tl->t0)
                tl->t0 = c->t_enter;
            tl->t1 = c->t_exit > tl->t1 ? c->t_exit : c->t_enter > tl->t1 ? c->t_enter : tl->t1;
        }
    }
}

/* Lane i's bars (one per call entered) and its label: at fault (a rank d
 * blames) or missing d's call. */
static void timeline_lane(timeline *tl, int i, const desync_finding *d, double span)
{
    bool fault = false, has = false;
    for (int k = 0; k < d->nranks; k++)
        fault |= d->ranks[k] == tl->lanes[i];
    for (int j = 0; j < tl->ncalls[i]; j++) {
        const html_series_call *c = &tl->calls[i][j];
        has |= c->coll_seq == d->coll_seq;
        if (!c->t_enter)
            continue;
        bool open = !c->t_exit;
        int nb = tl->nbars++;
        const char *cls = open ? "bar open" : fault && c->coll_seq == d->coll_seq ? "bar fault" : "bar";
        tl->bars[nb] = (html_svg_bar){.lane = i, .t0 = (double)(c->t_enter - tl->t0) / span,
                                      .t1 = open ? -1 : (double)(c->t_exit - tl->t0) / span, .cls = cls,
                                      .tip = tl->tips[nb]};
        char sb[48];
        snprintf(tl->tips[nb], sizeof(tl->tips[nb]), "rank %d: %s #%" PRIu64 ", %s, %s", tl->lanes[i], c->name,
                 c->coll_seq, core_step_text(c->step, sb, sizeof(sb)),
                 open ? "entered, never left" : "entered and left");
    }
    snprintf(tl->labels[i], sizeof(tl->labels[i]), "rank %d%s", tl->lanes[i],
             !has ? " (missing)" : fault ? " (at fault)" : "");
    tl->lp[i] = tl->labels[i];
    tl->lc[i] = fault || !has ? "fault" : "";
}

void report_html_timeline(FILE *f, const page *p, const desync_finding *d)
{
    timeline tl = {.lo = d->coll_seq >= 4 ? d->coll_seq - 4 : 0, .hi = d->coll_seq + 1};
    timeline_lanes(&tl, p, d);
    if (timeline_alloc(&tl)) {
        timeline_read(&tl, p, d);
        double span = tl.t1 > tl.t0 ? (double)(tl.t1 - tl.t0) : 1;
        for (int i = 0; i < tl.nlanes; i++)
            timeline_lane(&tl, i, d, span);
        char left[64], right[64];
        snprintf(left, sizeof(left), "collectives #%" PRIu64 " to #%" PRIu64, tl.lo, tl.hi);
        snprintf(right, sizeof(right), "%.3f ms", span * 1e-6);
        html_svg_timeline(f, tl.lp, tl.lc, tl.nlanes, tl.bars, tl.nbars, left, right);
        if (tl.more)
            fprintf(f, "<p class=\"meta\">and %d more ranks, not drawn</p>\n", tl.more);
    }
    timeline_free(&tl);
}
