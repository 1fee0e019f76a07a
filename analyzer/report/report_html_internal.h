/*
 * report_html_internal.h — what the files of tfdiff --html's page share
 * (not installed): the page being written — the report, the traces, the
 * ranks drawn and their series read again from the rank files — and its
 * sections. report_html.c writes the page: report_html_page.c reads the
 * series, report_html_findings.c writes the sections of the findings,
 * report_html_charts.c the charts (curves, heatmap, desync timelines).
 */
#ifndef TFT_REPORT_HTML_INTERNAL_H
#define TFT_REPORT_HTML_INTERNAL_H

#include "report_html.h"
#include "report_internal.h"
#include "html_series.h"

#include <stdio.h>

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

/* ---- the page's data (report_html_page.c) ---- */
/* The index of rank in t (NULL: none), -1 when t has no file of it. */
int report_html_index_of(const tft_trace *t, int rank);
/* Picks the ranks drawn and reads their series from both traces. 0, or a
 * negative errno (-ENOMEM). */
int report_html_collect(page *p);
void report_html_free(page *p);
/* The rank drawn as rank, NULL when not drawn. */
const shown *report_html_shown(const page *p, int rank);
/* A chart of one series of both sides (NULL sides left out). */
void report_html_chart2(FILE *f, const page *p, const char *title, const double *g, const double *b, int64_t mark,
                        int flags);
/* The note that the steps are drawn downsampled, when they are. */
void report_html_downsampled(FILE *f, const page *p);

/* ---- the findings' sections (report_html_findings.c) ---- */
void report_html_verdict(FILE *f, const page *p);
void report_html_first_divergence(FILE *f, const page *p);
void report_html_nonfinite(FILE *f, const page *p);
void report_html_desyncs(FILE *f, const page *p);
void report_html_bad_only(FILE *f, const page *p);
void report_html_leaks(FILE *f, const page *p);

/* ---- charts (report_html_charts.c) ---- */
void report_html_curves(FILE *f, const page *p);
void report_html_heatmap(FILE *f, const page *p);
/* The collective calls of BAD around desync d, a lane per rank. */
void report_html_timeline(FILE *f, const page *p, const desync_finding *d);

#endif
