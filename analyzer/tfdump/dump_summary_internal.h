/*
 * dump_summary_internal.h — the summary of a trace (tfdump TRACE): what
 * dump_summary.c counts in its pass over the rank files, and the pieces
 * that write it as text (dump_summary_text.c) or JSON
 * (dump_summary_json.c), which dump_unrecorded.c also uses for a trace
 * that recorded nothing.
 */
#ifndef TFT_DUMP_SUMMARY_INTERNAL_H
#define TFT_DUMP_SUMMARY_INTERNAL_H

#include "core_exception.h"
#include "dump_internal.h"
#include "tft_drops.h"

#define KINDS 65536 /* counters by record kind */

typedef struct rank_sum {
    int rank;
    int exit_known;          /* from a PROCESS exit record or the manifest */
    int exit_code, exit_signal;
    int64_t step_first, step_last; /* TFT_STEP_NONE when no record has a step */
    uint64_t records;
    tft_reader_status st;
    uint64_t alloc_bytes;    /* blocks the file takes on disk (st_blocks x 512; a --keep-steps file
                              * left sparse takes fewer than its size says), 0 unknown */
    tft_drop_sum drops;      /* its DROPPED records; count: the chunk headers' total */
    dump_clock_sum clock;    /* its CLOCK records (dump_clock.c) */
    uint64_t rss_samples, rss_peak, rss_last; /* its PROCESS RSS samples, bytes */
    core_exception raised;   /* its uncaught exception (EXCEPTION record, format 1.7) */
} rank_sum;

typedef struct trace_sum {
    uint64_t *by_kind;       /* KINDS counters */
    int kind_hi;             /* one past the largest kind counted */
    uint64_t records, dropped;
    int64_t step_first, step_last;
    int64_t full_first;      /* --keep-steps traces: first step every rank has in full */
    long long keep_steps;    /* largest N of a rank file written with --keep-steps, 0 none */
    uint64_t bytes, raw_bytes;
    uint64_t alloc_bytes;    /* the rank files' allocated blocks (rank_sum.alloc_bytes) */
    int integrity;           /* worst over the rank files and the checks */
    rank_sum *ranks;         /* one per rank file */
    coll_track coll;         /* collective calls, unfinished ones kept */
} trace_sum;

/* ---- dump_summary_text.c ------------------------------------------------------ */

/* The summary's lines on stdout. */
void dump_summary_text(dump_trace *d, const dump_opts *o, const trace_sum *s);
/* The lines of what the manifest says of the run ("manifest none" without one). */
void dump_text_manifest(const tft_manifest *m);

/* ---- dump_summary_json.c ------------------------------------------------------ */

/* The summary as one JSON object (NULL: no memory); d->unrecorded: a trace
 * without rank files, s all zero. */
cJSON *dump_summary_json(dump_trace *d, const dump_opts *o, const trace_sum *s);
/* The keys recorded, duration_ns and command_exit (the manifest's). */
void dump_json_run(cJSON *j, const tft_manifest *m, bool recorded);
/* Prints j (indented) on stdout; NULL (no memory): a message and *status DUMP_USAGE. */
void dump_print_json(cJSON *j, int *status);

#endif
