/*
 * html_page.h — what both HTML reports share (html_page.c): the page's
 * head and style (the page is written with core_out.h: a temporary file
 * renamed over it once complete). The DOM the pages follow is described in docs/REPORTS.md.
 */
#ifndef TFT_HTML_PAGE_H
#define TFT_HTML_PAGE_H

#include <stddef.h>
#include <stdio.h>

/* <!doctype html> ... <body>: report is "diff" or "dump" (data-tft-report),
 * title is escaped. */
void html_page_head(FILE *f, const char *report, const char *title);
void html_page_tail(FILE *f);
/* Opens <section id="ID"> with its <h2> title (escaped); the caller closes
 * it with "</section>". id is a constant of ours. */
void html_page_section(FILE *f, const char *id, const char *title);

#endif
