/*
 * report_check.h — tfdump --check's findings, one trace on its own
 * (docs/CHECK.md): the model tfdump's scan fills (tfdump/dump_check.c) and
 * its renderings: the text of tfdump --check, the verdict line and the
 * first finding of tfdump --html (report_check.c); tfdump --check --json
 * (report_check_json.c); the page's section of findings and the
 * detectors' table, which tfdiff --html shows too (report_check_html.c).
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
#define REPORT_CHECK_DAMAGE_MAX 8

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
    char damage[REPORT_CHECK_DAMAGE_MAX][640]; /* what the trace lost: a cut recording, torn or damaged
                                                * rank files (said first; each an error) */
    int ndamage, damage_more;   /* ... how many, and those past the first REPORT_CHECK_DAMAGE_MAX */
} report_check_result;

/* Whether --check found anything that sets exit status 1: damage or loss
 * (a cut recording, a torn or damaged rank file), a non-finite value, a
 * leak, a desync, or a detector's error or warning (notes do not). */
bool report_check_found(const report_check_result *res);
/* Frees what res owns (drops, findings, stacks); res stays valid, empty. */
void report_check_result_free(report_check_result *res);

/* report_check.c. The verdict line: "OK: ..." or "verdict: N errors, M
 * warnings; first: ..." (its first problem: a desync, else the earlier of
 * the first non-finite value and the detectors' first error, else a leak,
 * else the first warning). */
void report_check_verdict(const report_check_result *r, char *buf, size_t n);
/* tfdump --check's text: a line per rank file of t that lost records, the
 * first non-finite tensor, leaks, desyncs, STACK records, the detectors'
 * findings, the verdict line. */
void report_check_text(FILE *f, const report_check_result *res, const tft_trace *t);
/* tfdump --check --json's object (report_check_json.c; t: the trace, for
 * the ranks of the rank files): records lost, the first non-finite
 * tensor, leaks, desyncs, STACK records, the detectors' findings, the
 * verdict, counts by severity. The caller owns it. */
cJSON *report_check_json(const report_check_result *res, const tft_trace *t);
/* The finding the HTML page leads with (the first non-finite value, else
 * the first desync, leak, detector's error or warning) as a sentence, "OK:
 * ..." when none; its step (TFT_STEP_NONE none) and rank (-1 none). */
void report_check_first_finding(const report_check_result *c, char *buf, size_t n);
int64_t report_check_first_step(const report_check_result *c, int *rank);

/* report_check_html.c: the detectors' findings as a table, class "checks",
 * one row per finding with data-kind and data-step; nothing for n <= 0
 * (tfdump --html, tfdiff --html). */
void report_check_html_table(FILE *f, const detect_finding *x, int n);
/* tfdump --html's section "check": a list item per finding of res (t: the
 * trace, for the ranks of the rank files that lost records; NULL none),
 * then the detectors' table. */
void report_check_html_section(FILE *f, const report_check_result *res, const tft_trace *t);

#endif
