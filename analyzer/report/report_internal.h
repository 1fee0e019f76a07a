/*
 * report_internal.h — what the files of tfdiff's report share (not
 * installed): the report itself (report.c keeps it; the renderers read it)
 * and the sentences of its findings (report_sentence.c).
 */
#ifndef TFT_REPORT_INTERNAL_H
#define TFT_REPORT_INTERNAL_H

#include "report.h"
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

/* The reasons the comparison is incomplete, one per call with k = 0, 1,
 * ...: writes reason k to buf and returns true, false past the last. */
bool report_incomplete_reason(const diff_report *r, int k, char *buf, size_t n);
/* "diverged", "incomplete", "match"; upper: "DIVERGED", ... */
const char *report_verdict_word(int v, bool upper);

/* ---- sentences (report_sentence.c) ---- */
/* A rank's divergence sentence: its first divergence and origin, else a
 * structural difference or an early or different end; NULL when none. */
const char *report_sentence_rank(const compare_result *x, char *buf, size_t n);
const char *report_sentence_nonfinite(const compare_nonfinite *nf, char *buf, size_t n);
const char *report_sentence_leak(const leak_finding *l, char *buf, size_t n);
const char *report_sentence_desync(const diff_report *r, char *buf, size_t n);

#endif
