/*
 * diff.h — tfdiff's analyses: alignment and first divergence of one rank of
 * GOLDEN vs BAD (diff_align.c), leaks and desyncs of one trace
 * (diff_leak.c, diff_desync.c). Programs (tfdiff, tfdump --check) format the
 * results; nothing here prints.
 *
 * Streaming: every analysis reads its rank files once, in order, holding at
 * most one step's records per rank (plus small per-name state), so memory
 * does not grow with the number of steps.
 */
#ifndef TFT_DIFF_H
#define TFT_DIFF_H

#include "tft_format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Traces without steps (programs that never call tft_step_begin, e.g. an
 * unmodified program under the interposers): ops and tensors are aligned
 * by seq in windows of DIFF_STEPLESS_WINDOW ops, each window standing in
 * for a step: step = DIFF_STEPLESS_BASE + window (ordered like steps;
 * reports show "window N" / "step": null, "window": N). */
#define DIFF_STEPLESS_WINDOW 4096
#define DIFF_STEPLESS_BASE (-(INT64_C(1) << 40))
#define DIFF_STEPLESS_STEP(seq) (DIFF_STEPLESS_BASE + (int64_t)((seq) / DIFF_STEPLESS_WINDOW))
#define DIFF_IS_STEPLESS(step) ((step) != INT64_MIN && (step) < DIFF_STEPLESS_BASE / 2)

/* Kinds of a divergence ("kind" in the JSON schema). */
enum diff_kind { DK_VALUE = 0, DK_SHAPE, DK_DTYPE, DK_NONFINITE, DK_MISSING, DK_EXTRA };
const char *diff_kind_name(int kind);

typedef struct diff_opts {
    double rtol, atol;        /* statistics tolerance: |g-b| <= atol + rtol*max(|g|,|b|,scale) */
    int64_t step_lo, step_hi; /* inclusive step range compared (INT64_MIN/INT64_MAX = all) */
    const char *name_glob;    /* only tensors whose name matches (fnmatch), NULL = all */
    bool collectives;         /* also compare collective result tensors (default: skip, names MPI_* / nccl*) */
    /* called after each step of a rank (from the thread comparing it), NULL = none */
    void (*progress)(void *ctx, int rank, int64_t step);
    void *progress_ctx;
} diff_opts;
#define DIFF_OPTS_DEFAULT { .rtol = 1e-4, .atol = 1e-6, .step_lo = INT64_MIN, .step_hi = INT64_MAX }

/* One side of a tensor comparison. */
typedef struct diff_tensor {
    bool present;
    int64_t step, seq;
    char name[96];
    char op[96];              /* the op that produced it */
    int dtype, ndim;
    int64_t shape[TFT_MAX_NDIM];
    int mode;
    tft_stats stats;
} diff_tensor;

typedef struct diff_point {
    bool found;
    int rank;
    int64_t step, seq;        /* BAD's step and seq */
    char tensor[96], op[96];
    int kind;                 /* enum diff_kind */
    int thread;               /* BAD's recording thread (its number in the process), -1 unknown */
    diff_tensor golden, bad;
    char stat[32];            /* for DK_VALUE: the statistic most out of tolerance ("mean") */
} diff_point;

typedef struct diff_nonfinite {
    bool found;
    int rank;
    int64_t step, seq;
    char tensor[96], op[96];
    bool in_golden;           /* GOLDEN has a non-finite at the same aligned tensor */
} diff_nonfinite;

/* Result of comparing one rank. */
typedef struct diff_rank_result {
    int rank;
    diff_point first;         /* first divergence in program order */
    diff_point origin;        /* first op whose recorded inputs match but outputs do not */
    diff_nonfinite nonfinite; /* first non-finite (NaN or +-Inf count > 0) tensor in BAD */
    diff_tensor context_g[4], context_b[4]; /* the aligned tensors just before first (oldest first) */
    int n_context;
    uint64_t compared;        /* tensor pairs compared */
    uint64_t identical;       /* equal fingerprints */
    uint64_t within_tolerance;/* bitwise different but within tolerance */
    int64_t golden_first_step, golden_last_step, bad_first_step, bad_last_step;
    int64_t common_first_step, common_last_step; /* the steps both have */
    bool bad_ended_early;     /* BAD's last step < GOLDEN's */
    bool bad_exit_known;
    int bad_exit_code, bad_exit_signal;
    uint64_t inserted, deleted; /* structural: tensors only in BAD / only in GOLDEN, reported once each run */
    int threads;              /* threads that recorded ops or tensors in BAD (0: a file naming none) */
    char structure[256];      /* first structural difference, "" when none */
} diff_rank_result;

/* Compares rank reader g (GOLDEN) with b (BAD). Returns 0 or a negative
 * errno (I/O); damaged chunks are skipped by the reader (callers check its
 * status). */
int diff_rank(tft_reader *g, tft_reader *b, const diff_opts *o, diff_rank_result *out);

/* ---- single-trace analyses ----------------------------------------------- */

typedef struct diff_leak {
    int rank;
    char site[128];
    int64_t from_step;        /* first step of sustained growth; TFT_STEP_NONE when per_alloc */
    double bytes_per_step;    /* per_alloc: bytes per allocation of the site */
    uint64_t live_bytes_at_end;
    uint64_t live_allocs_at_end;
    bool per_alloc;           /* a trace without steps: an iteration is one allocation of the site */
    uint64_t from_alloc;      /* per_alloc: index of the site's allocation where growth starts */
    uint64_t iterations;      /* steps (per_alloc: allocations) the rate is taken over */
} diff_leak;

/* Finds allocation sites whose live bytes grow step after step in one rank
 * (live allocations at the end grouped by site); in a trace without steps,
 * allocation after allocation of the site until late in the run (see
 * diff_leak.c). Fills up to max leaks; returns how many, or a negative
 * errno. */
int diff_leaks(tft_reader *r, int rank, diff_leak *out, int max);

/* One line for a report, without the rank: "SITE: +N bytes/step from step
 * S, L bytes live at the end" (per_alloc: "+N bytes per allocation over K
 * allocations of the site, no steps, ..."). */
void diff_leak_describe(const diff_leak *l, char *buf, size_t n);

enum desync_kind { DS_MISSING = 0, DS_TYPE, DS_COUNT, DS_DTYPE, DS_OP, DS_ROOT, DS_VALUES, DS_STRAGGLER, DS_P2P };
const char *desync_kind_name(int kind);

/* Members a finding lists (a larger communicator is named, not listed). */
#define DIFF_DESYNC_MEMBERS 128

typedef struct diff_desync {
    uint64_t comm;            /* communicator id (DS_P2P: the communicator, not its p2p space; 0 none) */
    uint64_t coll_seq;        /* collective number on comm (DS_P2P: the call's number in the p2p space) */
    int64_t step;
    int64_t seq;              /* op seq of the earliest call involved: program order within step (TFT_SEQ_NONE) */
    int kind;                 /* enum desync_kind */
    int ranks[16];            /* the ranks at fault (DS_MISSING: missing; DS_P2P: the blocked rank) */
    int nranks;
    int nmembers;             /* members of comm as world ranks, 0 when unknown */
    int members[DIFF_DESYNC_MEMBERS]; /* listed when nmembers <= DIFF_DESYNC_MEMBERS */
    char comm_name[64];       /* "{1,3}", "{0-3}", "{0,1|2,3}" (intercommunicator); 16 hex digits when
                               * the members are unknown; "" for comm 0 */
    uint32_t id;              /* 1, 2, ... in the order diff_desyncs returns them */
    uint32_t cause;           /* id of the finding that caused this one (a hang after a mismatch), 0 none */
    int peer;                 /* DS_P2P: world rank of the peer, -1 any source / unknown */
    int tag;                  /* DS_P2P: the message tag (TFT_TAG_ANY: any tag) */
    char detail[512];
} diff_desync;

/* Aligns the collectives of all ranks of a trace by (communicator,
 * coll_seq) and reports the first mismatch per communicator: a rank
 * missing a collective others entered (a hang), type/count/dtype/op/root
 * differences, all-reduce results whose fingerprints differ across ranks,
 * and stragglers; point-to-point calls a rank never completed, with what
 * its peer did instead (DS_P2P). Findings are in program order (step, op
 * seq), a cause before the hangs it caused (their .cause = its .id),
 * stragglers last. Returns how many (<= max), or a negative errno. */
int diff_desyncs(tft_trace *t, diff_desync *out, int max);

/* Index of the finding with id in list[0, n), -1 when none (0 included). */
int diff_desync_index(const diff_desync *list, int n, uint32_t id);

/* Where finding list[k] is, for a report line: "communicator {1,3},
 * collective #3" (DS_P2P: "..., message #3"; parameters: "parameters"),
 * and ", caused by the count above" when its cause is in list[0, n). */
void diff_desync_where(const diff_desync *list, int n, int k, char *buf, size_t len);

#endif
