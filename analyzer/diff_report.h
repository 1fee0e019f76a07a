/*
 * diff_report.h — tfdiff's findings across ranks and their three renderings:
 * text for a terminal (the verdict and the first finding first), JSON with
 * the stable schema of docs/TFDIFF.md, and JUnit XML for CI systems.
 */
#ifndef TFT_DIFF_REPORT_H
#define TFT_DIFF_REPORT_H

#include "diff.h"

#include <stdbool.h>
#include <stdio.h>

typedef struct diff_report diff_report;

diff_report *report_new(const char *golden, const char *bad, const diff_opts *o);
void report_free(diff_report *r);
void report_note(diff_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void report_add_rank(diff_report *r, const diff_rank_result *res);
void report_add_leak(diff_report *r, const diff_leak *l);
void report_add_desync(diff_report *r, const diff_desync *d);
/* BAD recorded nothing (a manifest and no rank file): a finding. what says
 * what its manifest knows; exit_status is the manifest's (128 + N: killed
 * by signal N; -1 unknown). */
void report_bad_unrecorded(diff_report *r, const char *what, int exit_status);
/* A reason the comparison is incomplete (a rank only GOLDEN has, ...),
 * besides those the ranks' results show (dropped records, a side that
 * recorded nothing). */
void report_incomplete(diff_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True when anything was found: a divergence, a non-finite BAD alone has,
 * a new leak or desync, a structural difference, BAD ending early or
 * otherwise than GOLDEN, or BAD recording nothing. */
bool report_diverged(const diff_report *r);
/* The verdict: diverged (something found), else incomplete (records were
 * dropped, a side of a rank recorded nothing, a rank is missing: what was
 * compared matched, but not everything could be), else match. */
enum report_verdict { VERDICT_MATCH = 0, VERDICT_DIVERGED = 1, VERDICT_INCOMPLETE = 3 };
int report_verdict(const diff_report *r);
void report_json(const diff_report *r, FILE *f);
void report_text(const diff_report *r, FILE *f);
/* Returns 0, or -1 with errno when the file cannot be written. */
int report_junit(const diff_report *r, const char *path);

#endif
