/*
 * core.h — tfdiff's analyses: alignment and first divergence of one rank of
 * GOLDEN vs BAD (compare_align.c), leaks and desyncs of one trace
 * (leak.c, desync.c). Programs (tfdiff, tfdump --check) format the
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
 * by seq in windows of CORE_STEPLESS_WINDOW ops, each window standing in
 * for a step: step = CORE_STEPLESS_BASE + window (ordered like steps;
 * reports show "no step (window N)" / "step": null, "window": N). */
#define CORE_STEPLESS_WINDOW 4096
#define CORE_STEPLESS_BASE (-(INT64_C(1) << 40))
#define CORE_STEPLESS_STEP(seq) (CORE_STEPLESS_BASE + (int64_t)((seq) / CORE_STEPLESS_WINDOW))
#define CORE_IS_STEPLESS(step) ((step) != INT64_MIN && (step) < CORE_STEPLESS_BASE / 2)

/* Kinds of a divergence ("kind" in the JSON schema). */
enum diff_kind { DK_VALUE = 0, DK_SHAPE, DK_DTYPE, DK_NONFINITE, DK_MISSING, DK_EXTRA };
const char *compare_kind_name(int kind);

typedef struct diff_opts {
    double rtol, atol;        /* statistics tolerance: |g-b| <= atol + rtol*max(|g|,|b|,scale) */
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
    bool leaf;                /* its op records no inputs (data, parameters, a GEMM's operands) */
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
    bool lost_tail;           /* ... but BAD dropped records and exited as GOLDEN did: its last
                               * steps were lost, not skipped (not a finding) */
    bool bad_exit_known;
    int bad_exit_code, bad_exit_signal;
    bool golden_exit_known;
    int golden_exit_code, golden_exit_signal;
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
} diff_rank_result;

/* Compares rank reader g (GOLDEN) with b (BAD). Returns 0 or a negative
 * errno (I/O); damaged chunks are skipped by the reader (callers check its
 * status). */
int compare_rank(tft_reader *g, tft_reader *b, const diff_opts *o, diff_rank_result *out);

/* ---- single-trace analyses ----------------------------------------------- */

/* How a leak was found (the "how" key of the JSON schemas). */
enum leak_how {
    LEAK_GROWTH = 0,     /* live bytes grew step after step (allocation after allocation) */
    LEAK_AT_EXIT,        /* what the site holds at the end: tfdiff, more than GOLDEN holds;
                               * tfdump --check, more than its --leak-min-bytes threshold */
    LEAK_PEAK,           /* tfdiff: the most the site held at once, in more blocks than
                               * GOLDEN's (kept during the run, freed at teardown) */
};

typedef struct leak_finding {
    int rank;
    char site[128];
    int how;                  /* enum leak_how */
    int64_t from_step;        /* growth: first step of sustained growth (TFT_STEP_NONE when per_alloc);
                               * at-exit: first_alloc_step */
    double bytes_per_step;    /* per_alloc: bytes per allocation of the site; at-exit: the mean
                               * size of the site's blocks live at the end */
    uint64_t live_bytes_at_end;
    uint64_t live_allocs_at_end;
    bool per_alloc;           /* an iteration is one allocation of the site (always for at-exit) */
    uint64_t from_alloc;      /* per_alloc: index of the site's allocation where growth starts
                               * (at-exit: its oldest allocation still live at the end) */
    uint64_t iterations;      /* steps (per_alloc: allocations) the rate is taken over;
                               * at-exit: live_allocs_at_end */
    bool first_known;         /* something is live at the end: the two fields below hold */
    uint64_t first_alloc_ns;  /* the oldest allocation live at the end: ns after the rank's start
                               * (its earliest record or file header clock) */
    int64_t first_alloc_step; /* ... and its step, TFT_STEP_NONE outside steps */
    uint64_t min_bytes;       /* tfdump --check at-exit: the threshold it exceeded */
    bool golden_known;        /* tfdiff: the golden_* fields hold GOLDEN's same rank and site */
    uint64_t golden_live_bytes_at_end, golden_live_allocs_at_end;
    uint64_t golden_peak_live_bytes; /* the most GOLDEN's site held at once ... */
    uint64_t golden_peak_live_allocs; /* ... and the most blocks */
    uint64_t peak_live_bytes, peak_live_allocs; /* BAD's site: the most it held at once */
    uint64_t peak_ns;         /* when BAD's site reached peak_live_bytes: ns after the rank's start */
    int64_t peak_step;        /* ... its step, TFT_STEP_NONE outside steps */
    bool vs_golden_peak;      /* at-exit: BAD did not run to its end, so its live bytes were
                               * compared with GOLDEN's peak rather than GOLDEN's end */
} leak_finding;

/* Finds allocation sites whose live bytes grow step after step in one rank
 * (live allocations at the end grouped by site); in a trace without steps,
 * allocation after allocation of the site until late in the run (see
 * leak.c). Fills up to max leaks; returns how many, or a negative
 * errno. Same as leak_find_mem(r, rank, 0, out, max, NULL). */
int leak_find(tft_reader *r, int rank, leak_finding *out, int max);

/* What one allocation site holds, over a rank and at its end. */
typedef struct leak_site_mem {
    char site[128];
    uint64_t allocs;          /* its ALLOC records */
    uint64_t live_bytes, live_allocs; /* at the end of the rank */
    uint64_t peak_bytes;      /* the most it held at once ... */
    uint64_t peak_ns;         /* ... first reached this many ns after the rank's start ... */
    int64_t peak_step;        /* ... in this step (TFT_STEP_NONE outside steps) */
    uint64_t peak_allocs;     /* the most blocks it held at once */
    bool one_thread;          /* no two recorded threads allocated here (its peak does not
                               * depend on how threads ran); true when the trace records no
                               * threads (format < 1.2, or a collector that writes no THREAD
                               * records): then only the block margin guards the peak rule */
    uint64_t max_block;       /* the largest of its blocks live at the end */
    uint64_t first_ns;        /* its oldest block live at the end: ns after the rank's start ... */
    int64_t first_step;       /* ... its step (TFT_STEP_NONE outside steps) ... */
    uint64_t first_alloc;     /* ... and its index among the site's allocations */
    uint64_t first_pos, last_pos; /* record positions (1 = the rank's first record) of the oldest
                               * and the newest of its blocks live at the end */
} leak_site_mem;

/* One rank's allocations as a whole, for comparing two traces. The caller
 * provides sites[max_sites]; the scan fills them sorted by peak_bytes, the
 * largest first (sites that never allocated are left out), and sets nsites
 * to the number of sites that allocated, which exceeds max_sites when the
 * smaller ones did not fit. */
typedef struct leak_rank_mem {
    leak_site_mem *sites;     /* in: caller's array */
    int max_sites;            /* in */
    int nsites;               /* out */
    uint64_t records;         /* out: records read */
    uint64_t dropped;         /* out: records the recorder lost (a lost FREE leaves a block live) */
    int64_t last_step;        /* out: the rank's last step, TFT_STEP_NONE without steps */
    bool exit_known;          /* out: a PROCESS exit record was read (callers may fill it from
                               * the manifest when not) */
    int exit_code, exit_signal;
} leak_rank_mem;

/* Single-trace at-exit rule (tfdump --check): a site holding at least
 * LEAK_EXIT_MIN_BYTES live at the end, in several blocks, is a leak
 * even without growth (leak.c says what "several" means). */
#define LEAK_EXIT_MIN_BYTES ((uint64_t)32 << 20)

/* leak_find, plus: exit_min_bytes > 0 turns on the single-trace at-exit
 * rule with that threshold (0: growth only, as tfdiff wants it), and mem,
 * when not NULL, receives what every site holds (see leak_rank_mem). One
 * pass over the rank file. Returns the number of leaks or a negative errno. */
int leak_find_mem(tft_reader *r, int rank, uint64_t exit_min_bytes, leak_finding *out, int max,
                   leak_rank_mem *mem);

/* leak_find_mem a record at a time, for a caller that reads the rank file
 * itself (one pass feeding several analyses): new, then every record of
 * the file from its start in order (with its reader, for the strings),
 * then finish — leak_find_mem's result; finish frees the scan (free alone
 * abandons it). record returns 0 or -ENOMEM. */
typedef struct leak_scan leak_scan;
leak_scan *leak_scan_new(void);
int leak_scan_record(leak_scan *x, tft_reader *r, const tft_rec *rec);
int leak_scan_finish(leak_scan *x, tft_reader *r, int rank, uint64_t exit_min_bytes, leak_finding *out,
                          int max, leak_rank_mem *mem);
void leak_scan_free(leak_scan *x); /* NULL-safe */

/* tfdiff's at-exit margin: a site is a leak of BAD when it holds at the end
 * at least LEAK_MARGIN_BYTES more than GOLDEN's and at least
 * LEAK_MARGIN_RATIO times as much (any amount over nothing counts
 * once it reaches the byte margin). */
#define LEAK_MARGIN_BYTES ((uint64_t)1 << 20)
#define LEAK_MARGIN_RATIO 2

/* Peak rule: at least this many blocks more than GOLDEN's peak (and the
 * byte margin and ratio above, on bytes and on blocks). */
#define LEAK_PEAK_MIN_EXTRA_BLOCKS 4

/* tfdiff's leaks of one rank: BAD's growth leaks (bl, nb) that GOLDEN's
 * (gl, ng) lack; sites whose live bytes at BAD's end exceed GOLDEN's by
 * the margin above — against GOLDEN's end when both ran to a normal exit
 * with the same status and BAD reached GOLDEN's last step, else against
 * GOLDEN's peak (BAD stopped early: what it held then is compared with the
 * most GOLDEN ever held); and sites allocating from one thread in both
 * whose peak exceeds GOLDEN's by the margin in bytes and by
 * LEAK_PEAK_MIN_EXTRA_BLOCKS and the ratio in blocks (kept during the
 * run, freed at teardown: an interpreter frees its objects at exit). A site
 * is reported once, by the first rule in that order, with the others'
 * fields filled. Sorts g->sites by name. Fills up to max leaks of rank
 * `rank`; returns how many. */
int leak_compare(leak_rank_mem *g, const leak_finding *gl, int ng, const leak_rank_mem *b,
                       const leak_finding *bl, int nb, int rank, leak_finding *out, int max);

/* One line for a report, without the rank: "SITE: +N bytes/step from step
 * S, L bytes live at the end" (per_alloc: "+N bytes per allocation over K
 * allocations of the site, no steps, ..."; at-exit: "L bytes in K blocks
 * live at the end, GOLDEN ..., the oldest allocated T s into the run"). */
void leak_describe(const leak_finding *l, char *buf, size_t n);

/* "step N", "no step" (TFT_STEP_NONE), or for a window of a trace without
 * steps "no step (window N)". */
const char *core_step_text(int64_t step, char *buf, size_t n);

enum desync_kind { DS_MISSING = 0, DS_TYPE, DS_COUNT, DS_DTYPE, DS_OP, DS_ROOT, DS_VALUES, DS_STRAGGLER, DS_P2P };
const char *desync_kind_name(int kind);

/* Members a finding lists (a larger communicator is named, not listed). */
#define DESYNC_MEMBERS 128

typedef struct desync_finding {
    uint64_t comm;            /* communicator id (DS_P2P: the communicator, not its p2p space; 0 none) */
    uint64_t coll_seq;        /* collective number on comm (DS_P2P: the call's number in the p2p space) */
    int64_t step;
    int64_t seq;              /* op seq of the earliest call involved: program order within step (TFT_SEQ_NONE) */
    int kind;                 /* enum desync_kind */
    int ranks[16];            /* the ranks at fault (DS_MISSING: missing; DS_P2P: the blocked rank) */
    int nranks;
    int nmembers;             /* members of comm as world ranks, 0 when unknown */
    int members[DESYNC_MEMBERS]; /* listed when nmembers <= DESYNC_MEMBERS */
    char comm_name[64];       /* "{1,3}", "{0-3}", "{0,1|2,3}" (intercommunicator); 16 hex digits when
                               * the members are unknown; "" for comm 0 */
    uint32_t id;              /* 1, 2, ... in the order desync_find returns them */
    uint32_t cause;           /* id of the finding that caused this one (a hang after a mismatch), 0 none */
    int peer;                 /* DS_P2P: world rank of the peer, -1 any source / unknown */
    int tag;                  /* DS_P2P: the message tag (TFT_TAG_ANY: any tag) */
    uint64_t clock_error_ns;  /* DS_STRAGGLER across hosts: the error bound of the times compared, 0 one host */
    char detail[512];
} desync_finding;

/* Aligns the collectives of all ranks of a trace by (communicator,
 * coll_seq) and reports the first mismatch per communicator: a rank
 * missing a collective others entered (a hang), type/count/dtype/op/root
 * differences, all-reduce results whose fingerprints differ across ranks,
 * and stragglers; point-to-point calls a rank never completed, with what
 * its peer did instead (DS_P2P). Findings are in program order (step, op
 * seq), a cause before the hangs it caused (their .cause = its .id),
 * stragglers last. Returns how many (<= max), or a negative errno. */
int desync_find(tft_trace *t, desync_finding *out, int max);

/* Index of the finding with id in list[0, n), -1 when none (0 included). */
int desync_index(const desync_finding *list, int n, uint32_t id);

/* Where finding list[k] is, for a report line: "communicator {1,3},
 * collective #3" (DS_P2P: "..., message #3"; parameters: "parameters"),
 * and ", caused by the count above" when its cause is in list[0, n). */
void desync_where(const desync_finding *list, int n, int k, char *buf, size_t len);

#endif
