/*
 * tfdiff_internal.h — the parts of tfdiff (tfdiff.c's main wires them),
 * each a file of analyzer/tfdiff/; calls go one way, down this list:
 *   tfdiff.c           main: the options, the traces opened, the parts run
 *   tfdiff_args.c      the command line and --help
 *   tfdiff_pool.c      the jobs (one per rank file) planned, run on a pool
 *                      of threads (and MPI processes) with a progress line,
 *                      gathered and handed to the report in job order
 *   tfdiff_rank.c      one job: one pass over its files feeding the
 *                      comparison, the leak scans and the desync extracts
 *   tfdiff_keep.c      --keep-steps traces: their kept scalars compared
 *                      before the steps both sides have in full
 *   tfdiff_analyses.c  the analyses beside the comparison: leaks, desyncs,
 *                      tfdump --check's detectors on both traces
 *   tfdiff_output.c    the report written in the forms asked for; a trace
 *                      that recorded nothing
 *   tfdiff_mpi.c       the MPI transport of --mpi
 * Not installed; nothing here is a library API.
 */
#ifndef TFT_TFDIFF_INTERNAL_H
#define TFT_TFDIFF_INTERNAL_H

#include "compare.h"
#include "core_spill.h"
#include "leak.h"
#include "report.h"
#include "tfdiff_mpi.h"

#include <stdbool.h>
#include <stdint.h>

/* The command line (tfdiff_args.c). */
typedef struct tfdiff_opts {
    compare_opts d;
    int json, quiet, tensors, tol_given;
    int mpi;               /* --mpi: split the rank files over the processes of an MPI job */
    double pad_id;
    const char *junit;
    const char *markdown;  /* --markdown FILE, "-" stdout */
    const char *html;      /* --html FILE */
    const char *tensorboard; /* --tensorboard DIR: both runs as TensorBoard runs DIR/golden, DIR/bad */
    int argc;              /* the command line as given (getopt permutes argv) */
    char **argv;
    int ranks[64], nranks; /* empty = all */
    const char *golden, *bad;
    const char *noise;     /* --noise GOLDEN2: GOLDEN run again (docs/TFDIFF.md, "Round-off") */
    tft_trace *noise_trace; /* ... opened by main */
} tfdiff_opts;

/* The work on one BAD rank file (or one GOLDEN rank file BAD lacks): its
 * comparison with GOLDEN's same rank, the leaks of both, and their extracts
 * for the desync analysis (core_spill.h); one pass of each analysis over
 * each file, the files open only while the job runs. Jobs run on a pool of
 * threads (one per CPU) and, under --mpi, over the processes (job j on
 * process j % K); the report takes their results in job order, so it is
 * the same whichever ran where. */
typedef struct rank_job {
    int gi, bi;              /* rank file indices in GOLDEN and BAD, -1 none */
    bool compare;            /* compare gi with bi (compare_rank) */
    bool leaks;              /* leaks of bi (against gi when gi >= 0) */
    bool extract_g, extract_b; /* extracts of gi, bi */
    compare_result res;
    int err;
    leak_finding *found;        /* leaks to report (malloc'd), nfound of them */
    int nfound;
    uint64_t bad_dropped;    /* BAD's records lost, noted when it has leaks */
    compare_noise *noise;    /* --noise: this rank's calibration while the job runs */
} rank_job;

/* Per worker thread: the leak scans' site tables (large, reused). */
typedef struct leak_scratch {
    leak_rank_mem gm, bm;
} leak_scratch;

enum { LEAKS_MAX = 64, SITES_MAX = 16384 };

typedef struct rank_work {
    const tfdiff_opts *o;
    tft_trace *g, *b;
    rank_job *jobs;
    int njobs;
    diff_spill *gsp, *bsp;   /* extracts of GOLDEN's and BAD's rank files */
    leak_scratch *scratch;   /* one per worker */
    int me, nproc;           /* this process and their number (--mpi) */
    _Atomic int done;
} rank_work;

/* What reads along with a job's comparison, per side (0 GOLDEN, 1 BAD):
 * the leak scan and the desync extract of each file, fed by compare_rank's
 * tap, so every file is decompressed and walked once. */
typedef struct job_tap {
    tft_reader *r[2];
    leak_scan *leak[2];
    core_spill_extractor *ex[2];
} job_tap;

/* ---- tfdiff_args.c ------------------------------------------------------- */

/* Fills *o from argv (o->argc and o->argv, the command line as given, are
 * the caller's). 0, an exit status after a message (2), or -1 when --help
 * or --version was shown (exit 0). */
int tfdiff_parse_args(int argc, char **argv, tfdiff_opts *o);

/* ---- tfdiff_pool.c ------------------------------------------------------- */

/* Turns on the progress line (d->progress): on a terminal, at most twice a
 * second, the first after half a second. */
void tfdiff_progress_begin(compare_opts *d);
/* Every analysis of GOLDEN vs BAD into rep (process 0's under --mpi; the
 * others' rep stays unused). 0, or the first error (the same on all
 * processes), -EBADMSG when a damaged input was named on stderr. */
int tfdiff_compare_all(const tfdiff_opts *o, tft_trace *g, tft_trace *b, diff_report *rep, const tfdiff_mpi *mp);

/* ---- tfdiff_rank.c ------------------------------------------------------- */

/* Job j's pass over its files (sc: the worker's scratch). 0 or a negative errno. */
int tfdiff_job_run(rank_work *w, rank_job *j, leak_scratch *sc);

/* ---- tfdiff_keep.c ------------------------------------------------------- */

typedef struct keep_scan keep_scan;
/* Starts comparing the scalars (one-element tensors) of steps lo..hi-1 of
 * g (GOLDEN) and b (BAD): o's tap is wrapped (its records still reach the
 * old tap), so compare_rank's pass feeds both. NULL on ENOMEM (o then
 * unchanged). */
keep_scan *tfdiff_keep_begin(tft_reader *g, tft_reader *b, int64_t lo, int64_t hi, compare_opts *o);
/* After compare_rank (res->rank set): judges what is left; the first
 * scalar pair that differs becomes res->first (flagged kept, origin and
 * context cleared: the ops of those steps are gone), BAD's first
 * non-finite scalar res->nonfinite when earlier; the pairs are counted in
 * res. Frees k (NULL-safe; res NULL: only frees). */
void tfdiff_keep_end(keep_scan *k, compare_result *res);

/* ---- tfdiff_analyses.c --------------------------------------------------- */

/* Leaks of BAD that GOLDEN does not have at the same rank and site, from
 * the finished scans of job j's tap, into j->found. 0 or a negative errno. */
int tfdiff_job_leaks(rank_work *w, rank_job *j, job_tap *t, leak_scratch *sc);
/* Desyncs of BAD that GOLDEN does not have, from the extracts of every rank
 * file of both, into rep (and the STACK records of a hang). 0 or -ENOMEM. */
int tfdiff_desyncs(tft_trace *g, tft_trace *b, diff_spill *gsp, diff_spill *bsp, diff_report *rep);
/* tfdump --check's detectors on both traces: BAD's findings GOLDEN lacks. */
void tfdiff_checks(tft_trace *g, tft_trace *b, diff_report *rep);

/* ---- tfdiff_output.c ----------------------------------------------------- */

/* Writes the report in the chosen forms; returns the exit status. g and b:
 * the traces compared, read again for the HTML page (NULL: none). */
int tfdiff_render(const tfdiff_opts *o, diff_report *rep, tft_trace *g, tft_trace *b);
/* GOLDEN or BAD recorded nothing: GOLDEN is unusable (2), BAD's nothing is
 * a finding (1). Returns -1 when neither is such a trace. */
int tfdiff_unrecorded(const tfdiff_opts *o);

#endif
