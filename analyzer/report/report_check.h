/*
 * report_check.h — tfdump --check's findings, one trace on its own
 * (docs/CHECK.md): the model tfdump's scan fills (tfdump/dump_check.c) and
 * the renderings of it: text lines and the verdict line (report_check.c),
 * the JSON keys findings/verdict/counts, and the HTML table of the
 * detectors' findings (report_check_html.c, for tfdump --html and tfdiff
 * --html).
 */
#ifndef TFT_REPORT_CHECK_H
#define TFT_REPORT_CHECK_H

#include "core.h"
#include "desync.h"
#include "desync_stacks.h"
#include "detect.h"
#include "leak.h"
#include "tft_format.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct tft_drop_sum;

/* The first tensor with a NaN or Inf across ranks. */
typedef struct report_check_nonfinite {
    bool found;
    int rank;
    int64_t step, seq;
    char name[96];
    uint64_t nan, inf;        /* its NaN and Inf elements */
} report_check_nonfinite;

/* What --check found in a trace. */
typedef struct report_check_result {
    report_check_nonfinite nf; /* the first non-finite tensor across ranks */
    leak_finding leaks[64];
    int nl;
    desync_finding ds[64];
    int nd;
    struct tft_drop_sum *drops; /* per rank file: the records it lost (owned) */
    int lossy;                /* rank files that lost records */
    detect_finding *findings;    /* the detectors' findings, sorted (owned; docs/CHECK.md) */
    int nfind;
    int nerr, nwarn, ninfo;   /* findings by severity */
    desync_stacks stacks;       /* STACK records: where each thread was at --timeout (owned) */
} report_check_result;

/* Whether --check found anything that sets exit status 1: a non-finite
 * value, a leak, a desync, or a detector's error or warning (notes do not). */
bool report_check_found(const report_check_result *res);
/* Frees what res owns (drops, findings, stacks); res stays valid, empty. */
void report_check_result_free(report_check_result *res);

/* report_check.c: a finding as one text line; the verdict line; the JSON
 * keys findings, verdict and counts; tftrain's clip threshold from the
 * recorded command line (0 when the command is not tftrain). */
void report_check_print(FILE *f, const detect_finding *x);
void report_check_verdict(const report_check_result *r, int lossy, char *buf, size_t n);
void report_check_json(cJSON *o, const report_check_result *r);
double report_check_clip_of(const tft_manifest *m);
/* One line per rank file of t that lost records: the findings below cover
 * only what was recorded. Returns how many ranks lost records. */
int report_check_drops_text(FILE *f, const report_check_result *res, const tft_trace *t);
/* tfdump --check's text after the drops' lines: every finding, the
 * verdict line last. */
void report_check_text(FILE *f, const report_check_result *res, int lossy);

/* report_check_html.c: the detectors' findings as a table, class "checks",
 * one row per finding with data-kind and data-step; nothing for n <= 0. */
void report_check_html_table(FILE *f, const detect_finding *x, int n);

#endif
