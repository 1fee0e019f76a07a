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
const detect_finding *report_checks(const diff_report *r, int *n);
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
/* The most important finding as one sentence (causes first: BAD recorded
 * nothing, the first divergence with its origin, a non-finite GOLDEN lacks,
 * a desync, a leak, a structural difference, an early or different end),
 * else why the comparison is incomplete. Returns false (buf "") on a match. */
bool report_first_finding(const diff_report *r, char *buf, size_t n);
/* Findings by class, for summaries. */
typedef struct report_counts {
    int divergence;   /* ranks with a first divergence */
    int nonfinite;    /* ranks whose BAD has a non-finite GOLDEN lacks */
    int leaks, desyncs;
    int structure;    /* ranks whose op streams differ in structure */
    int ended;        /* ranks where BAD ended early or exited otherwise than GOLDEN */
    int incomplete;   /* reasons the comparison is incomplete */
    int unrecorded;   /* 1 when BAD recorded nothing */
    int ranks;        /* ranks compared */
    uint64_t compared, identical, within_tolerance; /* tensors, summed over ranks */
} report_counts;
void report_count(const diff_report *r, report_counts *c);
const char *report_verdict_name(int verdict); /* "match", "diverged", "incomplete" */
/* Paths as given, and the options' tolerances. */
const char *report_golden(const diff_report *r);
const char *report_bad(const diff_report *r);
const compare_opts *report_opts(const diff_report *r);
/* The outputs of report_set_outputs (NULL / 0 when not set). */
const char *report_html(const diff_report *r);
int report_argv(const diff_report *r, char ***argv);
/* Writes the Markdown summary (report_markdown.c) to path, "-" for stdout.
 * Returns 0, or -1 with errno. */
int report_markdown(const diff_report *r, const char *path);

/* The findings themselves, for the HTML report (report_html.c): the rank
 * with the earliest first divergence (NULL none), the earliest non-finite
 * of BAD (NULL none), the ranks' results, leaks and desyncs (n of each),
 * and the step of the finding report_first_finding names (TFT_STEP_NONE
 * when it has none). */
const compare_result *report_first_rank(const diff_report *r);
const compare_nonfinite *report_first_nonfinite(const diff_report *r);
const compare_result *report_ranks(const diff_report *r, int *n);
const leak_finding *report_leaks(const diff_report *r, int *n);
const desync_finding *report_desyncs(const diff_report *r, int *n);
int64_t report_first_step(const diff_report *r);

/* Adds the keys of desync finding ds[i] after comm, coll_seq and step
 * (docs/TFDIFF.md): kind, ranks, detail, seq, clock_error_ns (a
 * straggler), comm_name, members, caused_by (the cause's index in
 * ds[0..nd)), peer, tag. */
void report_desync_json_keys(cJSON *x, const desync_finding *ds, int nd, int i);

/* ---- records lost (report_drops.c) ---- */
/* " in steps A..B" / " in step A" / " outside steps" / "" (unknown) for
 * side (0 GOLDEN, 1 BAD) of x, into buf. Returns buf. */
const char *report_drops_span(const compare_result *x, int side, char *buf, size_t n);
/* "steps A..B of rank N (BAD) dropped records[; ...]" ("rank N (BAD)
 * dropped records outside steps") for every rank a side of which dropped
 * records, into buf ("" when none). Returns buf. */
const char *report_drops_where(const compare_result *ranks, int nranks, char *buf, size_t n);

/* The world rank whose BAD records were dropped in d's step (or in steps
 * unknown) among the ranks d blames (and d's peer), for a finding a lost
 * record can fake: a collective a rank "never entered" (DS_MISSING), a
 * point-to-point call "never completed" (DS_P2P). -1 when none. */
int report_drops_explain(const compare_result *ranks, int nranks, const desync_finding *d);

#endif
