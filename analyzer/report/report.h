/*
 * report.h — tfdiff's findings across ranks and their three renderings:
 * text for a terminal (the verdict and the first finding first), JSON with
 * the stable schema of docs/TFDIFF.md, and JUnit XML for CI systems.
 */
#ifndef TFT_DIFF_REPORT_H
#define TFT_DIFF_REPORT_H

#include "detect.h"
#include "core.h"
#include "desync.h"
#include "leak.h"
#include "compare.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>

typedef struct diff_report diff_report;

diff_report *report_new(const char *golden, const char *bad, const compare_opts *o);
void report_free(diff_report *r);
void report_note(diff_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void report_add_rank(diff_report *r, const compare_result *res);
void report_add_leak(diff_report *r, const leak_finding *l);
void report_add_desync(diff_report *r, const desync_finding *d);
/* A detector finding (docs/CHECK.md) BAD has and GOLDEN lacks: shown in
 * its own section (text "only in BAD: ...", JSON bad_only_findings); it
 * does not change the verdict. At most 32 are kept. */
void report_add_check(diff_report *r, const detect_finding *f);
/* BAD's STACK records (desync_stacks.h), shown with the desyncs; moved from
 * *s (left empty). */
struct desync_stacks;
void report_set_stacks(diff_report *r, struct desync_stacks *s);
/* BAD recorded nothing (a manifest and no rank file): a finding. what says
 * what its manifest knows; exit_status is the manifest's (128 + N: killed
 * by signal N; -1 unknown). */
void report_bad_unrecorded(diff_report *r, const char *what, int exit_status);
/* A reason the comparison is incomplete (a rank only GOLDEN has, ...),
 * besides those the ranks' results show (dropped records, a side that
 * recorded nothing). */
void report_incomplete(diff_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The verdict: diverged (anything found: a divergence, a non-finite BAD
 * alone has, a new leak or desync, a structural difference, BAD ending
 * early or otherwise than GOLDEN, or BAD recording nothing), else
 * incomplete (records were dropped, a side of a rank recorded nothing, a
 * rank is missing: what was compared matched, but not everything could
 * be), else match. */
enum report_verdict { VERDICT_MATCH = 0, VERDICT_DIVERGED = 1, VERDICT_INCOMPLETE = 3 };
int report_verdict(const diff_report *r);
void report_json(const diff_report *r, FILE *f);
void report_text(const diff_report *r, FILE *f);
/* The step of the most important finding (the text report's first), or
 * TFT_STEP_NONE when it has none. */
int64_t report_first_step(const diff_report *r);
/* Returns 0, or -1 with errno when the file cannot be written. Each
 * failing case carries the finding's sentence (report_first_finding's words
 * for its class) and, when report_set_outputs named an HTML or Markdown
 * report, that path as an attachment: a <property name="attachment"> and
 * a [[ATTACHMENT|PATH]] line in <system-out> (what Jenkins' JUnit
 * Attachments plugin and GitLab's test reports read). */
int report_junit(const diff_report *r, const char *path);

/* The other reports tfdiff writes and its command line, for the pointers
 * between them (JUnit attachments, the Markdown summary's link). Strings
 * are borrowed: they must outlive r. html/markdown may be NULL; markdown
 * "-" is stdout (not an attachment). */
void report_set_outputs(diff_report *r, const char *html, const char *markdown, int argc, char **argv);
/* Writes the Markdown summary (report_markdown.c) to path, "-" for stdout.
 * Returns 0, or -1 with errno. */
int report_markdown(const diff_report *r, const char *path);

/* The desyncs added (tfdiff reads how many it kept). */
const desync_finding *report_desyncs(const diff_report *r, int *n);


#endif
