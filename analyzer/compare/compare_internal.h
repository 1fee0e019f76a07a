/*
 * compare_internal.h — the private pieces of compare_rank (compare.h),
 * shared by its files and by nothing outside compare/:
 *   compare_side.c    one side (GOLDEN or BAD) read a step at a time, and
 *                     the divergence state of its tensors
 *   compare_stash.c   threaded sides: records held until their step is complete
 *   compare_match.c   a step's edit script: the two sides' tensors aligned
 *   compare_threads.c ... by the order-free matcher when several threads recorded
 *   compare_judge.c   the edits of a step judged: first divergence, origin,
 *                     non-finite, structure
 *   compare_roundoff.c  ... with the round-off model: a difference within
 *                     the envelope of the differences before it matches
 *   compare_align.c   the driver: the rank's steps paired, the result finished
 * Calls go one way, down this list (the driver calls the judge, the judge
 * the matcher and the sides).
 *
 * Memory: one step of records per side (tensors, ops, op input ids), two
 * id maps per side (this step and the previous one) and a capped map of
 * leaf tensors (parameters at initialisation, tokens, lr), which ops of
 * any later step may reference by id.
 */
#ifndef TFT_COMPARE_INTERNAL_H
#define TFT_COMPARE_INTERNAL_H

#include "core.h"
#include "compare.h"
#include "tft_u64map.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Divergence state of a recorded tensor, as seen by the ops that read it. */
enum align_state {
    AS_UNKNOWN = 0, /* not in any map: treated as matching */
    AS_MATCH = 1,   /* aligned counterpart identical or within tolerance */
    AS_DIVERGED = 2 /* differs, or has no counterpart */
};

/* Thread key of a record: its THREAD index, THREAD_UNKNOWN in files (or
 * chunks) that name no thread. */
#define THREAD_UNKNOWN UINT32_MAX

/* One op record of the current step. */
typedef struct align_op {
    int64_t seq;
    uint32_t thread;       /* thread key */
    uint32_t in_off, n_in; /* input ids: side->inputs[in_off .. in_off+n_in) */
    uint16_t op_kind;      /* enum tft_op_kind */
    char name[96];         /* "scope/name", or "name" without a scope */
} align_op;

/* One tensor record of the current step, with what the diff needs. */
typedef struct align_tensor {
    uint64_t id, name_id;
    int64_t step, seq;
    int32_t op;            /* index into side->ops, -1 when no op record */
    uint32_t thread;       /* thread key */
    uint8_t dtype, mode, ndim;
    bool skip;             /* collective result, left out of the alignment */
    bool report;           /* passes the name glob: counted and reported */
    int64_t shape[TFT_MAX_NDIM];
    tft_stats stats;
    char name[96];
    /* a side merged over ranks (compare_layout.c): this rank's tensor with
     * the same one of the other ranks folded in */
    uint16_t merged;       /* other ranks' tensors folded in, 0 none */
    bool replicated;       /* ... each bit-identical to this one */
    bool cat_ok;           /* ... each of this shape past dimension 0: cat holds their concatenation */
    int64_t cat_dim0;      /* the concatenation's dimension 0 */
    tft_stats cat;         /* its statistics (a scalar's: the mean over the ranks) */
    double mean_avg;       /* the ranks' means averaged (the mean of their element-wise average) */
    bool mean_only;        /* a view of that average: its mean alone is known (compare_layout_view) */
} align_tensor;

/* What a side knows of one recording thread of its rank. */
typedef struct align_thread {
    uint32_t key;          /* thread key */
    int64_t last_step;     /* highest (window) step stashed from it */
    bool ops;              /* it recorded ops or tensors */
    int32_t last_op;       /* its latest op in the loaded step (index into ops), -1 none */
} align_thread;

#define ALIGN_OP_SEARCH 64          /* ops searched back for a tensor's producer */
#define ALIGN_MAX_THREADS 256        /* threads told apart per rank; more share the last entry */
#define ALIGN_STASH_MAX (64u << 20)  /* bytes of later steps held before a step is closed anyway */

/* One side (GOLDEN or BAD): its reader, the current step's records and the
 * record that started the next step, held until that step is loaded.
 * Threaded mode (a file naming its threads, format 1.2): a step's records
 * need not be contiguous in the file, so records are stashed (in file
 * order, each with its thread key) until the step is known complete: a
 * SYNC above it, the end of the file, ALIGN_STASH_MAX bytes held, or —
 * for a step-less window while one thread alone records ops — that thread
 * past it. */
typedef struct align_side {
    tft_reader *r;
    bool eof;              /* reader returned 0 */
    bool has;              /* a step is loaded in tensors/ops */
    int64_t step;          /* the loaded step */
    uint64_t groups;       /* steps loaded so far */
    unsigned char *pend;   /* copy of the first record of the next step */
    size_t pend_cap;
    bool has_pend;
    align_tensor *tensors;
    size_t n_tensors, cap_tensors;
    align_op *ops;
    size_t n_ops, cap_ops;
    uint64_t *inputs;
    size_t n_inputs, cap_inputs;
    int64_t first_step, last_step;
    bool exit_known;
    int exit_code, exit_signal;
    core_exception raised;  /* its first EXCEPTION record */
    tft_u64map cur, prev, leaf; /* tensor id -> enum align_state (u8); leaf holds at most LEAF_MAX */
    /* threads */
    bool threaded;         /* THREAD records (format 1.2) or a second thread key seen */
    uint32_t op_threads;   /* threads that recorded ops or tensors */
    uint32_t first_key;    /* the thread key of the first op/tensor record */
    bool have_first;
    align_thread *threads;
    size_t n_threads;
    int64_t sync_step;     /* highest SYNC watermark read, TFT_STEP_NONE none */
    unsigned char *stash;  /* entries: u32 thread key, u32 pad, then the record */
    size_t stash_len, stash_cap;
    uint64_t late;         /* records that arrived after their step was closed */
    uint64_t records;      /* records of substance read (not process, thread, sync, dropped) */
    int (*tap)(void *ctx, int side, const tft_rec *rec); /* compare_opts.tap, NULL none */
    void *tap_ctx;
    int tap_side;          /* 0 GOLDEN, 1 BAD */
    _Alignas(8) unsigned char stepless[TFT_REC_MAX_BYTES]; /* a step-less record given a window step */
} align_side;

/* One entry of a step's edit script: a pair, or a tensor on one side only. */
typedef struct align_edit {
    int32_t g, b;          /* indices into the sides' tensors, -1 = absent */
} align_edit;

/* ---- compare_side.c: one side, a step at a time --------------------------- */

/* Grows *p (elements of size sz, capacity *cap) to hold n. 0 or -ENOMEM. */
int compare_grow(void **p, size_t *cap, size_t n, size_t sz);
/* snprintf(dst, n, "%.*s", max, src) without its cost: at most max bytes
 * and n - 1, NUL-terminated; returns the length copied. */
size_t compare_copy_text(char *dst, size_t n, const char *src, size_t max);

/* An empty side reading r (not owned); compare_side_free releases it. */
void compare_side_init(align_side *s, tft_reader *r);
void compare_side_free(align_side *s);
/* Loads the next step of s: returns 1 with s->has set, 0 at the end, or a
 * negative errno. The previous step's id map becomes s->prev. */
int compare_side_load(align_side *s, const compare_opts *o);
/* Whether the loaded step is the side's last (nothing left to read). */
bool compare_side_is_last_step(const align_side *s);
/* Whether t's op has no recorded inputs (or t no op): parameters, data. */
bool compare_tensor_is_leaf(const align_side *s, const align_tensor *t);
/* Records t's divergence state (enum align_state) for the ops that read it. */
int compare_side_set_state(align_side *s, const align_tensor *t, uint8_t st);
/* True when no recorded input of t's op has diverged. */
bool compare_side_inputs_match(const align_side *s, const align_tensor *t);

/* ---- compare_stash.c: threaded sides -------------------------------------- */

/* The entry of thread key in s (created on first use), NULL on ENOMEM. */
align_thread *compare_side_thread(align_side *s, uint32_t key);
/* Stashes a copy of rec (with its thread key). 0 or -ENOMEM. */
int compare_stash_push(align_side *s, const tft_rec *rec, uint32_t key);
/* Smallest step held in the stash; false when it is empty. */
bool compare_stash_min_step(const align_side *s, int64_t *step);
/* Whether step is complete for s: nothing of it can follow in the file. */
bool compare_side_step_complete(const align_side *s, int64_t step);
/* Calls take(ctx, rec, key) for every stashed record with a step <= step,
 * in file order, and drops them. Returns the first negative result. */
int compare_stash_take(align_side *s, int64_t step, int (*take)(void *ctx, const tft_rec *rec, uint32_t key),
               void *ctx);

/* ---- compare_threads.c: order-free matching -------------------------------- */

/* Scratch of the order-free matcher (reused from step to step). */
typedef struct match_scratch {
    struct match_item *g, *b;
    size_t cap_g, cap_b;
} match_scratch;

/* Pairs the tensors gi[0..n) of GOLDEN with bi[0..m) of BAD without regard
 * to how their threads interleaved: by name and, among tensors of one name,
 * bit-identical ones first, then by occurrence within their thread, then in
 * order; writes the edit script in BAD's program order (seq), deletions
 * after the pair that precedes them in their GOLDEN thread. Returns 0 or
 * -ENOMEM. */
int compare_match_order_free(const align_side *g, const align_side *b, const int32_t *gi, size_t n,
                     const int32_t *bi, size_t m, match_scratch *sc, align_edit **edits, size_t *n_edits,
                     size_t *cap_edits);
void compare_match_scratch_free(match_scratch *sc);

/* ---- compare_match.c: a step's edit script ------------------------------ */

/* The edit script of the step loaded in two sides, and the scratch that
 * builds it (reused from step to step; compare_match_free releases it). */
typedef struct align_script {
    const align_side *g, *b; /* the sides matched last (not owned) */
    bool lossy;        /* a side dropped records: a missing tensor may be a lost one (set
                        * once per rank by its driver) */
    align_edit *edits; /* the script: pairs and one-sided tensors, in BAD's order */
    size_t n_edits, cap_edits;
    uint16_t *lcs;
    size_t cap_lcs;
    int32_t *gi, *bi;  /* indices of the non-skipped tensors of the step */
    size_t cap_gi, cap_bi;
    match_scratch ms;  /* order-free matching of steps recorded by several threads */
    uint64_t *gnames, *bnames; /* lossy: the step's tensor names per side, sorted */
    size_t n_gnames, n_bnames, cap_gnames, cap_bnames;
} align_script;

/* Builds sc->edits for the step loaded in g and b (the same step). 0 or -ENOMEM. */
int compare_match_step(align_script *sc, const align_side *g, const align_side *b);
/* Lossy ranks: whether a difference involving gt/bt's name cannot be told
 * from a lost record (the name's tensors differ in number between the sides). */
bool compare_match_unverifiable(const align_script *sc, const align_tensor *gt, const align_tensor *bt);
void compare_match_free(align_script *sc);

/* ---- compare_judge.c: a step judged ---------------------------------------- */

/* One rank's comparison: the two sides, the step's script, the result. */
/* ---- compare_roundoff.c: the round-off model ------------------------------ */

/* A rank's envelope of round-off. Keys: a tensor's name and occurrence in
 * its step. */
typedef struct ro_state {
    const compare_opts *o;
    compare_roundoff *sum;  /* the rank's summary (compare_result.roundoff) */
    tft_u64map env;         /* key -> double: the key's largest difference in earlier steps */
    tft_u64map nenv;        /* --noise: key -> double: the calibration's, up to this step */
    tft_u64map occ;         /* name hash -> u32: occurrences so far in the step */
    double genv[2], ngenv[2]; /* the rank's largest difference so far, of forward tensors [0] and
                               * of gradients [1]; the calibration's up to this step */
    int64_t step;
} ro_state;

int compare_ro_init(ro_state *r, const compare_opts *o, compare_roundoff *sum);
void compare_ro_free(ro_state *r);
/* A step begins (the keys' occurrences restart). */
void compare_ro_step(ro_state *r, int64_t step);
/* The key of GOLDEN's tensor g of a pair (counts its occurrence). */
uint64_t compare_ro_key(ro_state *r, const align_tensor *g);
/* A pair's relative difference (the file's comment); differences below
 * float's normal range count as none. */
double compare_ro_diff(const align_tensor *g, const align_tensor *b);
/* The fixed tolerance's rtol for a pair of dtypes dg, db: o->rtol, or a
 * few epsilons of a 16-bit (or 8-bit) float. */
double compare_ro_floor(const compare_opts *o, int dg, int db);
/* Two floating dtypes that differ (fp32 GOLDEN, bf16 autocast BAD). */
bool compare_ro_mixed(int dg, int db);
/* Whether d, beyond the fixed tolerance, is within the key's envelope;
 * growth: d over the key's own earlier largest, and over the rank's. */
bool compare_ro_explains(ro_state *r, uint64_t key, const align_tensor *g, double d, double growth[2]);
/* Records a judged pair: its difference d, whether it matched, whether it
 * was beyond the fixed tolerance (round-off explained it), its growths
 * (compare_ro_explains); summary: into the rank's summary too (not after
 * its first divergence); run: into the rank's envelope too (not an
 * optimizer's output, which Adam can move far on noise). */
void compare_ro_note(ro_state *r, uint64_t key, const align_tensor *g, double d, bool matched, bool beyond,
                     const double growth[2], bool summary, bool run);

/* ---- compare_layout.c: one run against another layout ----------------------- */

/* Folds the step loaded in extra (another rank of the same run, at the same
 * step) into s's tensors, paired by name and occurrence in the step. 0 or
 * -ENOMEM. */
int compare_layout_fold(align_side *s, const align_side *extra, tft_u64map *scratch);
/* The tensor m of a merged side as it compares with other (the unmerged
 * side's): a scalar as the mean over the ranks, a per-sample tensor as the
 * concatenation over dimension 0 when other has that shape (a gradient,
 * "grad.*", at 1/world: each rank's loss averages its own shard), a tensor
 * of other's shape the ranks hold different values of (a gradient summed
 * over the batch, such as a position embedding's output's) as their
 * element-wise average, of which only the mean is known (mean_only), else
 * m. tmp: storage for a view. */
const align_tensor *compare_layout_view(const align_tensor *m, const align_tensor *other, int world, align_tensor *tmp);

typedef struct align_ctx {
    const compare_opts *o;
    compare_result *out;
    align_side g, b;
    align_script script;
    compare_tensor_side ring_g[4], ring_b[4]; /* the last aligned pairs, for context */
    int ring_n, ring_pos;
    int64_t structure_step;  /* the step of out->structure */
    bool models_flagged;
    ro_state ro;             /* the round-off model */
    /* the round-off model's pending divergence: an optimizer step's output
     * (a parameter, a moment) beyond the envelope is the first divergence
     * only when the next step parts too (compare_judge.c) */
    bool has_pending, pend_now;
    int64_t pend_step;
    compare_point pend;
    compare_tensor_side pend_ctx_g[4], pend_ctx_b[4];
    int pend_nctx;
    char pend_stat[32];
    align_side *extra;       /* a merged side's other ranks (compare_rank_layout), nextra of them */
    int nextra;
    int merge_side;          /* 0: GOLDEN's ranks are merged, 1: BAD's */
    tft_u64map merge_map;    /* compare_layout_fold's scratch */
} align_ctx;

/* The loaded step of both sides aligned and judged into c->out. */
int compare_judge_step(align_ctx *c);
/* A step only one side has (bad_side: BAD's); gap: inside the other's run. */
int compare_judge_one_sided(align_ctx *c, bool bad_side, bool gap);
/* The end of the comparison: a pending divergence of the last step is one. */
void compare_judge_finish(align_ctx *c);

#endif
