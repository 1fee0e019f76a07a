/*
 * compare.h — GOLDEN vs BAD, one rank at a time: alignment of the two op
 * and tensor streams by (step, name, occurrence), the first divergence,
 * its origin and the first non-finite (compare_align.c, compare_threads.c).
 * Nothing here prints.
 */
#ifndef TFT_COMPARE_H
#define TFT_COMPARE_H

#include "core.h"
#include "core_exception.h"

/* Kinds of a divergence ("kind" in the JSON schema). */
enum compare_kind { DK_VALUE = 0, DK_SHAPE, DK_DTYPE, DK_NONFINITE, DK_MISSING, DK_EXTRA };
const char *compare_kind_name(int kind);

/* The per-rank calibration of tfdiff --noise (compare_roundoff.c): how far
 * GOLDEN and a rerun of it (GOLDEN2) differ, per tensor and step. Filled
 * by compare_rank(GOLDEN, GOLDEN2) with compare_opts.noise_out, read by
 * compare_rank(GOLDEN, BAD) with compare_opts.noise. */
typedef struct compare_noise compare_noise;
compare_noise *compare_noise_new(void);
void compare_noise_free(compare_noise *n);
uint64_t compare_noise_entries(const compare_noise *n); /* (tensor, step) differences held */

typedef struct compare_opts {
    double rtol, atol;        /* statistics tolerance: |g-b| <= atol + rtol*max(|g|,|b|,scale) */
    /* the round-off model (docs/TFDIFF.md, "Round-off"): a pair beyond the
     * tolerance above is still a match when its difference stays within
     * the envelope of the differences before it (its own in earlier steps,
     * the rank's so far); false: the tolerance alone (--rtol/--atol given) */
    bool roundoff;
    const compare_noise *noise; /* --noise: the calibration of this rank, NULL none */
    compare_noise *noise_out;   /* filled with this comparison's differences (the calibration pass) */
    int64_t step_lo, step_hi; /* inclusive step range compared (INT64_MIN/INT64_MAX = all) */
    const char *name_glob;    /* only tensors whose name matches (fnmatch), NULL = all */
    bool collectives;         /* also compare collective result tensors (default: skip, names MPI_* / nccl*) */
    /* called after each step of a rank (from the thread comparing it), NULL = none */
    void (*progress)(void *ctx, int rank, int64_t step);
    void *progress_ctx;
    /* called with every record compare_rank reads, side 0 GOLDEN and 1 BAD, in
     * file order from the readers' positions to their ends (so that other
     * analyses share the one pass); a negative result ends compare_rank with
     * it. NULL = none */
    int (*tap)(void *ctx, int side, const tft_rec *rec);
    void *tap_ctx;
} compare_opts;
#define COMPARE_OPTS_DEFAULT { .rtol = 1e-4, .atol = 1e-6, .roundoff = true, .step_lo = INT64_MIN, .step_hi = INT64_MAX }

/* One side of a tensor comparison. */
typedef struct compare_tensor_side {
    bool present;
    int64_t step, seq;
    char name[96];
    char op[96];              /* the op that produced it */
    int dtype, ndim;
    int64_t shape[TFT_MAX_NDIM];
    int mode;
    tft_stats stats;
} compare_tensor_side;

typedef struct compare_point {
    bool found;
    int rank;
    int64_t step, seq;        /* BAD's step and seq */
    char tensor[96], op[96];
    int kind;                 /* enum compare_kind */
    int thread;               /* BAD's recording thread (its number in the process), -1 unknown */
    bool leaf;                /* its op records no inputs (data, parameters, a GEMM's operands) */
    compare_tensor_side golden, bad;
    char stat[32];            /* for DK_VALUE: the statistic most out of tolerance ("mean") */
    int colls_before;         /* collective ops of BAD's rank in this step before it: a rank whose
                               * first divergence follows fewer is nearer the cause */
    char coll[64];            /* the last of them, "" none */
    bool kept;                /* found among the kept scalars of a --keep-steps trace, before the steps
                               * both sides have in full (tfdiff_keep.c; FORMAT.md §3.6) ... */
    int64_t full_from;        /* ... the first of those steps: the records beyond scalars start there */
} compare_point;

typedef struct compare_nonfinite {
    bool found;
    int rank;
    int64_t step, seq;
    char tensor[96], op[96];
    bool in_golden;           /* GOLDEN has a non-finite at the same aligned tensor */
} compare_nonfinite;

/* What the round-off model saw on a rank (compare_roundoff.c): the relative
 * differences of pairs judged to match (the largest of a pair's statistics,
 * each relative to its own magnitude: |dmean| / mean |x|, |dl2| / l2, ...). */
#define COMPARE_RO_BUCKETS 64
#define RO_KEY_GROWTH 16.0 /* a match grows at most this much over its own earlier difference ... */
#define RO_RUN_GROWTH 8.0  /* ... or over the rank's largest so far (compare_roundoff.c) */
#define RO_WIDE 0.1        /* a difference this large: the runs decorrelate */
typedef struct compare_roundoff {
    bool on;                  /* the model judged (compare_opts.roundoff) */
    bool noise;               /* ... calibrated with --noise */
    uint64_t differing;       /* pairs that matched with their bits different */
    uint64_t explained;       /* ... of them beyond the fixed tolerance: round-off by the envelope */
    int64_t first_step;       /* the first step with a bitwise difference, TFT_STEP_NONE none */
    double first_diff;        /* its largest relative difference */
    int64_t last_step;        /* the last step with one */
    double last_diff;
    int64_t max_step;         /* the largest relative difference of a match, where */
    double max_diff;
    char max_tensor[96];
    /* the pair nearest to a divergence: the largest share (<= 1) of the
     * nearer threshold its growths reached, over its own earlier difference
     * (jump, threshold RO_KEY_GROWTH) and the rank's so far (jump_run,
     * RO_RUN_GROWTH); 0 none */
    double jump_share, jump, jump_run;
    int64_t jump_step;
    char jump_tensor[96];
    int64_t wide_step;        /* the first step where a forward tensor's difference reached RO_WIDE
                               * (the runs decorrelate: smaller bugs hide in round-off; the
                               * comparison is incomplete from there), TFT_STEP_NONE none */
    uint64_t optimizer_noise; /* optimizer outputs beyond the envelope whose next step did not part
                               * (Adam moving parameters on noise: a gradient zero in exact arithmetic) */
    int64_t optimizer_noise_step; /* the first of them */
    char optimizer_noise_tensor[96];
    /* the largest difference per window of steps: bucket k covers steps
     * [base + k*width, base + (k+1)*width) */
    int64_t base, width;
    double bucket[COMPARE_RO_BUCKETS];
} compare_roundoff;

/* Folds rank r into all (the run's summary). */
void compare_roundoff_merge(compare_roundoff *all, const compare_roundoff *r);
/* The summary's largest difference per window, at most n windows of
 * steps [lo[k], hi[k]]: returns how many. */
int compare_roundoff_windows(const compare_roundoff *r, int n, int64_t *lo, int64_t *hi, double *max);

/* Result of comparing one rank. */
typedef struct compare_result {
    int rank;
    compare_point first;         /* first divergence in program order */
    compare_point origin;        /* first op whose recorded inputs match but outputs do not */
    compare_nonfinite nonfinite; /* first non-finite (NaN or +-Inf count > 0) tensor in BAD */
    compare_tensor_side context_g[4], context_b[4]; /* the aligned tensors just before first (oldest first) */
    int n_context;
    uint64_t compared;        /* tensor pairs compared */
    uint64_t identical;       /* equal fingerprints */
    uint64_t within_tolerance;/* bitwise different but within tolerance */
    uint64_t shape_only;      /* recorded without statistics on a side: shape and dtype agree, nothing more to compare */
    int64_t golden_first_step, golden_last_step, bad_first_step, bad_last_step;
    int64_t common_first_step, common_last_step; /* the steps both have */
    bool bad_ended_early;     /* BAD's last step < GOLDEN's */
    bool lost_tail;           /* ... but BAD dropped records and exited as GOLDEN did: its last
                               * steps were lost, not skipped (not a finding) */
    bool bad_exit_known;
    int bad_exit_code, bad_exit_signal;
    bool golden_exit_known;
    int golden_exit_code, golden_exit_signal;
    core_exception golden_raised, bad_raised; /* each side's uncaught exception (EXCEPTION records) */
    bool exit_differs;        /* BAD ended otherwise than GOLDEN (a signal, another code; or a
                               * non-zero one where GOLDEN's is unknown): a finding */
    uint64_t inserted, deleted; /* structural: tensors only in BAD / only in GOLDEN, reported once each run */
    int threads;              /* threads that recorded ops or tensors in BAD (0: a file naming none) */
    uint64_t golden_dropped, bad_dropped; /* records the recorder lost (chunk headers' counts) */
    int64_t drop_steps[2][2]; /* [GOLDEN, BAD]: first and last step of those (core_drops.c), TFT_STEP_NONE none */
    bool drop_steps_known[2]; /* false: a side's DROPPED records name no steps (a trace before 1.4) */
    uint64_t unverified;      /* differences not judged: a side dropped records and the step's
                               * tensors of that name differ in number (which is which is unknown) */
    uint64_t golden_records, bad_records; /* records of substance read (no process/thread/sync/dropped) */
    char structure[256];      /* first structural difference, "" when none */
    int64_t cut_step[2];      /* [GOLDEN, BAD]: a side cut by its recording (core_trace_cut): its
                               * last step, partly recorded, and the steps from it not compared;
                               * TFT_STEP_NONE when not cut (set by the caller, tfdiff_rank.c) */
    char cut_why[2][200];     /* ... and why, in words */
    compare_roundoff roundoff; /* the differences that matched, by the round-off model */
} compare_result;

/* compare_rank across layouts (docs/TFDIFF.md, "Across layouts"): the side
 * merged_side (0 GOLDEN, 1 BAD) is a data-parallel run whose rank 0 is read
 * by g or b and its other ranks by extra[0..nextra); the other side ran the
 * same global batch on one process. Each step, the ranks' tensors are
 * folded into one (compare_layout.c) and compared with the single run's. */
int compare_rank_layout(tft_reader *g, tft_reader *b, tft_reader **extra, int nextra, int merged_side,
                        const compare_opts *o, compare_result *out);

/* Compares rank reader g (GOLDEN) with b (BAD). Returns 0 or a negative
 * errno (I/O); damaged chunks are skipped by the reader (callers check its
 * status). */
int compare_rank(tft_reader *g, tft_reader *b, const compare_opts *o, compare_result *out);

#endif
