/*
 * report_html_page.c — the data of tfdiff --html's page
 * (report_html_internal.h): the ranks drawn (the first finding's, rank 0,
 * the first non-finite's and the first leak's) and their series, read from
 * both traces' rank files in one streaming pass each (html_series.h).
 */
#include "report_html_internal.h"
#include "html_page.h"
#include "html_svg.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int report_html_index_of(const tft_trace *t, int rank)
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
    if (p->ns < SHOWN_MAX && (report_html_index_of(p->g, rank) >= 0 || report_html_index_of(p->b, rank) >= 0))
        p->s[p->ns++] = (shown){.rank = rank};
}

/* The ranks drawn: the finding's first, then rank 0 (or the first rank),
 * the first non-finite's and the first leak's. */
static void pick_ranks(page *p)
{
    const compare_result *fr = report_first_rank(p->r);
    const compare_nonfinite *nf = report_first_nonfinite(p->r);
    const leak_finding *l = p->r->leaks;
    int nl = p->r->nleaks;
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
    int i = report_html_index_of(t, rank);
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

int report_html_collect(page *p)
{
    pick_ranks(p);
    html_series_span s = {0};
    for (int i = 0; i < p->ns; i++) {
        html_series_span_add(&s, p->g, report_html_index_of(p->g, p->s[i].rank));
        html_series_span_add(&s, p->b, report_html_index_of(p->b, p->s[i].rank));
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

/* ---- the page -------------------------------------------------------------- */

void report_html_free(page *p)
{
    for (int i = 0; i < p->ns; i++) {
        html_series_run_free(p->s[i].g);
        html_series_run_free(p->s[i].b);
    }
}

const shown *report_html_shown(const page *p, int rank)
{
    for (int i = 0; i < p->ns; i++)
        if (p->s[i].rank == rank)
            return &p->s[i];
    return NULL;
}

/* A chart of one series of both sides (NULL sides left out). */
void report_html_chart2(FILE *f, const page *p, const char *title, const double *g, const double *b, int64_t mark,
                   int flags)
{
    html_svg_series s[2];
    int n = 0;
    if (g)
        s[n++] = (html_svg_series){.label = "GOLDEN", .color = "#2a6", .x = p->x, .y = g, .n = p->bins.nbins};
    if (b)
        s[n++] = (html_svg_series){.label = "BAD", .color = "#c33", .x = p->x, .y = b, .n = p->bins.nbins, .dashed = 1};
    html_svg_line_chart(f, title, s, n, mark, flags);
}

void report_html_downsampled(FILE *f, const page *p)
{
    if (!p->have_bins || !p->bins.downsampled)
        return;
    fprintf(f, "<p class=\"downsampled\">Downsampled: steps %" PRId64 " to %" PRId64 " are drawn as %d columns; each "
               "column shows one step of its range (the first finding's step where it falls in one), counts and "
               "memory the largest over the range.</p>\n",
            p->bins.lo, p->bins.hi, p->bins.nbins);
}
