/*
 * report_internal.h — what the files of the report room share (not
 * installed; tfdiff and tfdump see report.h, report_check.h,
 * report_html.h and report_tensors.h):
 *
 *   the model     struct diff_report (report.c keeps it; the renderers
 *                 read it), its findings by class, the one it leads with
 *                 (report_first), the counts, the records lost
 *                 (report_drops.c)
 *   the sentences each finding's words, written once (report_sentence.c;
 *                 tfdump --check's own in report_check.c), which every
 *                 renderer prints: text (report_text.c), JUnit
 *                 (report_junit.c), Markdown (report_markdown.c), the HTML
 *                 pages (report_html*.c, report_check_html.c)
 *
 * The files call one way: renderers -> sentences -> model.
 */
#ifndef TFT_REPORT_INTERNAL_H
#define TFT_REPORT_INTERNAL_H

#include "report.h"
#include "report_check.h"
#include "desync_stacks.h"

#define MAX_RANKS 4096
#define MAX_ITEMS 256

struct diff_report {
    const char *golden, *bad;
    compare_opts o;
    compare_result *ranks;
    int nranks;
    leak_finding leaks[MAX_ITEMS];
    int nleaks;
    desync_finding desyncs[MAX_ITEMS];
    int ndesyncs;
    char notes[8][160];
    int nnotes;
    char incomplete[8][200]; /* reasons from report_incomplete */
    int nincomplete;
    bool bad_unrecorded;      /* BAD has a manifest and no rank file */
    char bad_unrecorded_what[400];
    int bad_exit_status;      /* its manifest's, -1 unknown */
    const char *html, *markdown; /* the other reports written (report_set_outputs), NULL none */
    int argc;                 /* tfdiff's command line (borrowed) */
    char **argv;
    detect_finding checks[32];   /* detector findings BAD has and GOLDEN lacks (report_add_check) */
    int nchecks;
    desync_stacks stacks;       /* BAD's STACK records, read when it has a desync (owned) */
};

/* ---- the model (report.c) ---- */

/* The rank with the earliest (step, seq, rank) first divergence, and the
 * earliest non-finite value of BAD; NULL when none. */
const compare_result *report_first_rank(const diff_report *r);
/* Another rank whose first divergence is in the same step as first's but
 * after a collective first's came before: the rank the cause reached
 * through that collective; NULL none. */
const compare_result *report_downstream_rank(const diff_report *r, const compare_result *first);
/* "rank 0 parts later in step 20, after the collective DDP.allreduce: ..." for it. */
const char *report_sentence_through(const compare_result *first, const compare_result *down, char *buf, size_t n);
const compare_nonfinite *report_first_nonfinite(const diff_report *r);

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
    uint64_t unverified; /* compared but not judged: records lost on a side (compare_result) */
    uint64_t shape_only; /* compared by shape and dtype alone (no statistics on a side) */
    uint64_t different;  /* the rest of compared: beyond tolerance (the divergence and after) */
} report_counts;
void report_count(const diff_report *r, report_counts *c);
/* "N tensors on R ranks: I bit-identical, W different but within tolerance
 * (...)[, D different][, U not judged (records lost)]" — the counts that
 * make up the compared total, each stated (report_count). */
const char *report_sentence_compared(const diff_report *r, const report_counts *c, char *buf, size_t n);
/* The run's round-off summary: every rank's folded (compare_roundoff_merge). */
void report_roundoff(const diff_report *r, compare_roundoff *out);
/* "match within round-off: ..." when the model judged and some pair
 * matched with its bits different; NULL otherwise. */
const char *report_sentence_roundoff(const diff_report *r, char *buf, size_t n);

/* The reasons the comparison is incomplete, one per call with k = 0, 1,
 * ...: writes reason k to buf and returns true, false past the last. */
bool report_incomplete_reason(const diff_report *r, int k, char *buf, size_t n);
/* "diverged", "incomplete", "match"; upper: "DIVERGED", ... */
const char *report_verdict_word(int v, bool upper);

/* The classes of tfdiff's findings, most important first: the order in
 * which report_first picks the finding a report leads with. */
typedef enum report_class {
    REPORT_NONE = 0,
    REPORT_UNRECORDED,  /* BAD recorded nothing */
    REPORT_DIVERGENCE,  /* a rank's first divergence (and its origin) */
    REPORT_NONFINITE,   /* a non-finite value GOLDEN lacks */
    REPORT_DESYNC,
    REPORT_LEAK,
    REPORT_STRUCTURE,   /* a rank's op streams differ in structure */
    REPORT_ENDED,       /* BAD ended early (its records did not just lose their tail) */
    REPORT_EXIT,        /* BAD exited otherwise than GOLDEN */
    REPORT_INCOMPLETE,  /* nothing found, but the comparison is incomplete */
} report_class;

/* A rank's finding, the most important of its own: REPORT_DIVERGENCE,
 * REPORT_STRUCTURE, REPORT_ENDED, REPORT_EXIT or REPORT_NONE. */
report_class report_rank_class(const compare_result *x);

/* The finding a report leads with: its class and, for a rank's finding,
 * the rank's result (NULL otherwise); the desync or leak is the first. */
typedef struct report_finding {
    report_class cls;
    const compare_result *rank;
} report_finding;
report_finding report_first(const diff_report *r);

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

/* ---- JSON (report_desync.c) ---- */
/* Desync finding ds[i] as a JSON object (docs/TFDIFF.md, docs/CHECK.md):
 * comm, coll_seq, step, kind, ranks, detail, seq, clock_error_ns (a
 * straggler), comm_name, members, caused_by (the cause's index in
 * ds[0..nd)), peer, tag. exact: coll_seq and step as exact decimal text
 * (tfdump), else cJSON numbers (tfdiff). The caller owns it. */
cJSON *report_desync_json(const desync_finding *ds, int nd, int i, bool exact);

/* ---- sentences (report_sentence.c) ----
 * Each finding's words, written once: the text report prints them, JUnit
 * carries them as failure messages, the HTML and Markdown reports lead with
 * the first (report_first_finding), tfdump --check prints the leak and
 * desync ones. Each writes at most n bytes into buf and returns buf. A
 * `full` sentence is the text report's line (more detail); the other is
 * the one-line summary of JUnit and report_first_finding. */
const char *report_sentence_divergence(const compare_result *x, bool full, char *buf, size_t n);
const char *report_sentence_structure(const compare_result *x, bool full, char *buf, size_t n);
/* NULL when the text report has no line for x (full), or x did not end
 * early (!full). */
const char *report_sentence_ended(const compare_result *x, bool full, char *buf, size_t n);
const char *report_sentence_exit(const compare_result *x, bool full, char *buf, size_t n);
/* "rank 0: BAD raised RuntimeError at step 37 in model.tok_emb: ..." (GOLDEN
 * with golden), NULL when that side had no uncaught exception. */
const char *report_sentence_raised(const compare_result *x, bool golden, char *buf, size_t n);
/* A rank's finding (report_rank_class) in one line; NULL when none. */
const char *report_sentence_rank(const compare_result *x, char *buf, size_t n);
const char *report_sentence_nonfinite(const compare_nonfinite *nf, char *buf, size_t n);
const char *report_sentence_leak(const leak_finding *l, char *buf, size_t n);
const char *report_sentence_desync(const desync_finding *ds, int nd, int i, char *buf, size_t n);
const char *report_sentence_unrecorded(const diff_report *r, char *buf, size_t n);
/* "incomplete: " and reason k; NULL past the last. */
const char *report_sentence_incomplete(const diff_report *r, int k, char *buf, size_t n);
/* The most important finding (report_first) as one sentence (causes
 * first: BAD recorded nothing, the first divergence with its origin, a
 * non-finite GOLDEN lacks, a desync, a leak, a structural difference, an
 * early or different end), else why the comparison is incomplete. Returns
 * false (buf "") on a match. */
bool report_first_finding(const diff_report *r, char *buf, size_t n);
/* A detector's finding: "SEVERITY: KIND: rank R, STEP, TENSOR: EVIDENCE",
 * with the parts flags name: the layer (", layer N" after the tensor), the
 * likely causes (". Likely: ..." at the end), "-" for no tensor. */
enum { REPORT_CHECK_LAYER = 1, REPORT_CHECK_CAUSES = 2, REPORT_CHECK_DASH = 4 };
const char *report_sentence_check(const detect_finding *x, int parts, char *buf, size_t n);
/* A tensor's dtype and shape, "f32[4,8]". */
const char *report_shape_text(const compare_tensor_side *t, char *buf, size_t n);

/* tfdump --check's own sentences (report_check.c): the first non-finite
 * tensor, a rank file's lost records, and that nothing was found. */
const char *report_check_sentence_nonfinite(const report_check_nonfinite *nf, char *buf, size_t n);
const char *report_check_sentence_drops(int rank, const struct tft_drop_sum *s, char *buf, size_t n);
const char *report_check_sentence_ok(const report_check_result *r, char *buf, size_t n);

/* The statistics both sides of a divergence are shown with, in order. */
#define REPORT_STAT_ROWS 10
typedef struct report_stat_row {
    const char *name;  /* "mean", ... ("inf": +Inf and -Inf elements) */
    double g, b;
} report_stat_row;
void report_stat_rows(const compare_point *p, report_stat_row rows[REPORT_STAT_ROWS]);

#endif
