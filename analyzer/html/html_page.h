/*
 * html_page.h — what both HTML reports share (html_page.c): the atomic
 * write of the page (a temporary file beside it, renamed over it once
 * complete, so a reader never sees half a page) and the page's head and
 * style. The DOM the pages follow is described in docs/REPORTS.md.
 */
#ifndef TFT_HTML_PAGE_H
#define TFT_HTML_PAGE_H

#include <stddef.h>
#include <stdio.h>

typedef struct html_out {
    FILE *f;
    char tmp[4096];   /* the temporary file, renamed to path by html_out_commit */
    const char *path; /* borrowed */
} html_out;

/* Creates the temporary file beside path. 0, or -1 with errno. */
int html_out_open(html_out *o, const char *path);
/* Closes and renames it to path. 0, or -1 with errno (the temporary file
 * removed). */
int html_out_commit(html_out *o);
/* Closes and removes it. */
void html_out_abort(html_out *o);

/* <!doctype html> ... <body>: report is "diff" or "dump" (data-tft-report),
 * title is escaped. */
void html_page_head(FILE *f, const char *report, const char *title);
void html_page_tail(FILE *f);
/* Opens <section id="ID"> with its <h2> title (escaped); the caller closes
 * it with "</section>". id is a constant of ours. */
void html_page_section(FILE *f, const char *id, const char *title);

#endif
