/*
 * report_html.h — tfdiff --html FILE: the report as one self-contained
 * page (report_html.c; sections in docs/REPORTS.md).
 */
#ifndef TFT_REPORT_HTML_H
#define TFT_REPORT_HTML_H

#include "report.h"

/* Writes r to path atomically. g and b are the traces compared (NULL when
 * a side recorded nothing): the curves, heatmap, memory and timelines are
 * read from them again, from rank 0 and the ranks of the findings only.
 * Returns 0, or -1 with errno when the page cannot be written. */
int report_html_write(const diff_report *r, tft_trace *g, tft_trace *b, const char *path);

#endif
