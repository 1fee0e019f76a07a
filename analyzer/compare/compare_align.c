/*
 * compare_align.c — alignment and first divergence of one rank of GOLDEN vs
 * BAD (docs/TFDIFF.md, "What it reports" and "Alignment"; the contract is core.h).
 *
 * Both rank files are streamed step by step: the TENSOR and OP records of
 * one step of each side are collected, aligned, compared and discarded.
 * Memory is one step per side, id -> state maps for the current and the
 * previous step, and a capped map of the leaf tensors of the first step
 * (tensors whose op has no recorded inputs: the parameters at
 * initialisation), which ops of any later step may read by id.  Nothing
 * grows with the number of steps.
 *
 * Alignment.  Within a step, tensors are matched by name in order, like a
 * text diff: the common prefix and suffix of the two name sequences are
 * paired, the middle is aligned by a longest common subsequence (or, when
 * the middle is too large for the table, by a greedy bounded lookahead).
 * So an extra or missing tensor costs one insertion or deletion and does
 * not shift the pairs after it; each step is aligned on its own, so a
 * structural difference never cascades into later steps.  Steps are paired
 * by number: steps only one side has before the other starts (BAD resumed
 * from a checkpoint) or after it ended (a crash, a timeout) are outside
 * the common range and not compared; a step missing in the middle is a
 * structural difference.
 *
 * Comparison of a pair: shape, then dtype, then equal fingerprints
 * (identical), then non-finite counts that grow in BAD, then the statistics
 * valid in both modes with |g-b| <= atol + rtol*max(|g|, |b|, scale), scale
 * = max(|golden mean|, golden std, golden absmax*1e-3) (optimizer moments
 * with means near 1e-12 need a scale of their own).  rtol = atol = 0 asks
 * for bitwise equality: any fingerprint difference diverges.
 *
 * Filters: collective results (names MPI_* or nccl*, or ops of kind
 * collective) are left out unless o->collectives; steps outside
 * [step_lo, step_hi] are not compared; the name glob narrows what is
 * counted and reported (first, nonfinite, context, counts, structure).
 * The origin is searched over every compared tensor, glob or not, because
 * it answers where the bug is: asked about grad.*, the first divergence
 * is a gradient but its origin may be `targets`.
 */
#include "core.h"
#include "compare.h"
#include "compare_internal.h"
#include "core_drops.h"

#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LCS_MAX_CELLS (1u << 22) /* table of the middle of a step: 8 MiB of u16 */
#define LOOKAHEAD 64             /* greedy resync window when the table is too big */
#define LEAF_MAX (1u << 16)      /* leaf tensors of the first step, remembered across steps */
#define OP_SEARCH 64             /* ops searched back for a tensor's producer */

/* Classes of a compared pair. */
enum pair_class { PC_UNCHECKED = 0, PC_IDENTICAL, PC_WITHIN, PC_DIVERGED };

typedef struct align_ctx {
    const compare_opts *o;
    compare_result *out;
    align_side g, b;
    align_edit *edits;
    size_t n_edits, cap_edits;
    uint16_t *lcs;
    size_t cap_lcs;
    int32_t *gi, *bi; /* indices of the non-skipped tensors of the step */
    size_t cap_gi, cap_bi;
    compare_tensor_side ring_g[4], ring_b[4]; /* the last aligned pairs, for context */
    int ring_n, ring_pos;
    int64_t structure_step;
    bool models_flagged;
    match_scratch ms;  /* order-free matching of steps recorded by several threads */
    bool lossy;        /* a side dropped records: a missing tensor may be a lost one */
    uint64_t *gnames, *bnames; /* lossy: the step's tensor names per side, sorted */
    size_t n_gnames, n_bnames, cap_gnames, cap_bnames;
} align_ctx;

const char *compare_kind_name(int kind)
{
    switch (kind) {
    case DK_VALUE: return "value";
    case DK_SHAPE: return "shape";
    case DK_DTYPE: return "dtype";
    case DK_NONFINITE: return "nonfinite";
    case DK_MISSING: return "missing";
    case DK_EXTRA: return "extra";
    default: return "?";
    }
}

/* ---- small containers ----------------------------------------------------- */

/* Grows *p (elements of size sz, capacity *cap) to hold n. 0 or -ENOMEM. */
static int grow(void **p, size_t *cap, size_t n, size_t sz)
{
    if (n <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < n)
        nc *= 2;
    void *q = realloc(*p, nc * sz);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = nc;
    return 0;
}

/* State of tensor id in m (enum align_state), AS_UNKNOWN when absent. */
static uint8_t map_get(const tft_u64map *m, uint64_t id)
{
    const uint8_t *v = tft_u64map_find(m, id, NULL, NULL);
    return v ? *v : AS_UNKNOWN;
}

/* Sets id -> st. A bounded map that is full ignores new ids. */
static int map_put(tft_u64map *m, uint64_t id, uint8_t st)
{
    void *v;
    int rc = tft_u64map_insert(m, id, NULL, NULL, &v);
    if (rc == -ENOSPC)
        return 0;
    if (rc < 0)
        return rc;
    *(uint8_t *)v = st;
    return 0;
}

/* ---- reading one step of one side ---------------------------------------- */

static bool is_collective_name(const char *s)
{
    return strncmp(s, "MPI_", 4) == 0 || strncmp(s, "nccl", 4) == 0;
}

/* Copies the text of string id into dst; "#<hex id>" when the file never
 * defined it (a torn chunk, a writer bug). */
/* snprintf(dst, n, "%.*s", max, src) without its cost (two per record on
 * the hot path): at most max bytes and n - 1, NUL-terminated; returns the
 * length copied. */
static size_t copy_text(char *dst, size_t n, const char *src, size_t max)
{
    size_t k = strnlen(src, max < n - 1 ? max : n - 1);
    memcpy(dst, src, k);
    dst[k] = '\0';
    return k;
}

static void string_or_hex(const tft_reader *r, uint64_t id, char *dst, size_t n)
{
    const char *s = id ? tft_reader_string(r, id) : NULL;
    if (s)
        copy_text(dst, n, s, n - 1);
    else
        snprintf(dst, n, "#%016" PRIx64, id);
}

static int side_take_op(align_side *s, const tft_rec *rec, uint32_t key)
{
    const tft_rec_op *op = (const tft_rec_op *)rec;
    if (rec->len < sizeof *op ||
        sizeof *op + 8u * ((size_t)op->n_in + op->n_out + op->n_attr) > rec->len)
        return 0; /* malformed: ignored (the reader already checks) */
    if (grow((void **)&s->ops, &s->cap_ops, s->n_ops + 1, sizeof *s->ops) < 0 ||
        grow((void **)&s->inputs, &s->cap_inputs, s->n_inputs + op->n_in, sizeof *s->inputs) < 0)
        return -ENOMEM;
    align_op *a = &s->ops[s->n_ops++];
    a->seq = rec->seq;
    a->thread = key;
    if (s->threaded) {
        align_thread *th = compare_side_thread(s, key);
        if (th)
            th->last_op = (int32_t)(s->n_ops - 1);
    }
    a->op_kind = op->op_kind;
    a->in_off = (uint32_t)s->n_inputs;
    a->n_in = op->n_in;
    if (op->n_in)
        memcpy(&s->inputs[s->n_inputs], op->ids, 8u * op->n_in);
    s->n_inputs += op->n_in;
    char name[96];
    string_or_hex(s->r, op->name, name, sizeof name);
    const char *sc = op->scope ? tft_reader_string(s->r, op->scope) : NULL;
    if (sc && *sc) { /* "%.46s/%.47s" */
        size_t k = copy_text(a->name, sizeof a->name, sc, 46);
        a->name[k++] = '/';
        copy_text(a->name + k, sizeof a->name - k, name, 47);
    } else {
        copy_text(a->name, sizeof a->name, name, sizeof a->name - 1);
    }
    return 0;
}

static int side_take_tensor(align_side *s, const compare_opts *o, const tft_rec *rec, uint32_t key)
{
    const tft_rec_tensor *t = (const tft_rec_tensor *)rec;
    if (rec->len < sizeof *t)
        return 0;
    if (grow((void **)&s->tensors, &s->cap_tensors, s->n_tensors + 1, sizeof *s->tensors) < 0)
        return -ENOMEM;
    align_tensor *a = &s->tensors[s->n_tensors++];
    memset(a, 0, sizeof *a);
    a->id = t->id;
    a->name_id = t->name;
    a->step = rec->step;
    a->seq = rec->seq;
    a->dtype = t->dtype;
    a->mode = t->mode;
    a->ndim = t->ndim <= TFT_MAX_NDIM ? t->ndim : TFT_MAX_NDIM;
    memcpy(a->shape, t->shape, sizeof a->shape);
    a->stats = t->stats;
    string_or_hex(s->r, t->name, a->name, sizeof a->name);
    a->op = -1;
    a->thread = key;
    if (s->threaded && rec->seq != TFT_SEQ_NONE) { /* its op is its thread's latest */
        const align_thread *th = compare_side_thread(s, key);
        if (th && th->last_op >= 0 && s->ops[th->last_op].seq == rec->seq)
            a->op = th->last_op;
    }
    size_t lo = s->n_ops > OP_SEARCH ? s->n_ops - OP_SEARCH : 0;
    for (size_t i = s->n_ops; a->op < 0 && i > lo; i--) {
        if (s->ops[i - 1].seq == rec->seq && rec->seq != TFT_SEQ_NONE) {
            a->op = (int32_t)(i - 1);
            break;
        }
    }
    bool coll = is_collective_name(a->name) ||
                (a->op >= 0 && s->ops[a->op].op_kind == TFT_OP_COLLECTIVE);
    a->skip = coll && !o->collectives;
    a->report = !o->name_glob || fnmatch(o->name_glob, a->name, 0) == 0;
    return 0;
}

static void side_take_process(align_side *s, const tft_rec *rec)
{
    const tft_rec_process *p = (const tft_rec_process *)rec;
    if (rec->len < sizeof *p || p->event != TFT_PROC_EXIT)
        return;
    s->exit_known = true;
    s->exit_code = p->exit_code;
    s->exit_signal = p->signal;
}

static int side_take(align_side *s, const compare_opts *o, const tft_rec *rec, uint32_t key)
{
    switch (rec->kind) {
    case TFT_REC_OP: return side_take_op(s, rec, key);
    case TFT_REC_TENSOR: return side_take_tensor(s, o, rec, key);
    default: return 0;
    }
}

static void side_note_step(align_side *s, int64_t step)
{
    if (s->first_step == TFT_STEP_NONE || step < s->first_step)
        s->first_step = step;
    if (s->last_step == TFT_STEP_NONE || step > s->last_step)
        s->last_step = step;
}

/* The thread key of the record the reader returned last. */
static uint32_t rec_thread_key(const align_side *s)
{
    tft_thread_info ti;
    tft_reader_thread(s->r, &ti);
    return ti.known ? ti.index : THREAD_UNKNOWN;
}

/* The next record of s: 1 with *rec and its thread key, 0 at the end of
 * the file (s->eof set), or a negative errno. */
static int side_next(align_side *s, const tft_rec **rec, uint32_t *key)
{
    int rc = tft_reader_next(s->r, rec);
    if (rc > 0 && s->tap) {
        int e = s->tap(s->tap_ctx, s->tap_side, *rec);
        if (e < 0)
            return e;
    }
    if (rc == 0) {
        s->eof = true;
    } else if (rc > 0) {
        *key = rec_thread_key(s);
        /* a kind this build does not know (a newer minor's) counts: it may be anything */
        const tft_rec_kind_info *k = tft_rec_kind((*rec)->kind);
        s->records += !k || (k->flags & TFT_KIND_SUBSTANCE);
    }
    return rc;
}

/* Records that are neither ops nor tensors: the exit, SYNC watermarks;
 * the others (allocations, collectives, kernels) only widen the step range
 * — they may arrive late from another thread's ring. */
static void side_note_other(align_side *s, const tft_rec *rec, uint32_t key)
{
    if (rec->kind == TFT_REC_PROCESS)
        side_take_process(s, rec);
    if (rec->kind == TFT_REC_THREAD)
        return;
    if (rec->kind == TFT_REC_SYNC) {
        if (s->sync_step == TFT_STEP_NONE || rec->step > s->sync_step)
            s->sync_step = rec->step;
        return;
    }
    if (rec->step != TFT_STEP_NONE) {
        side_note_step(s, rec->step);
        align_thread *th = key != THREAD_UNKNOWN ? compare_side_thread(s, key) : NULL;
        if (th && (th->last_step == TFT_STEP_NONE || rec->step > th->last_step))
            th->last_step = rec->step;
    }
}

/* An op or tensor record as the step aligner sees it: a step-less record
 * (a program that never calls tft_step_begin, e.g. an unmodified one under
 * the interposers) gets the window step of its seq. With several threads
 * recording ops, seqs interleave across threads, so a window's edge may
 * fall elsewhere in another run (docs/TFDIFF.md). Returns NULL for records
 * to leave out. */
static const tft_rec *side_window(align_side *s, const tft_rec *rec, uint32_t key)
{
    align_thread *th = compare_side_thread(s, key);
    if (th && !th->ops) {
        th->ops = true;
        s->op_threads++;
    }
    if (rec->step == TFT_STEP_NONE) {
        if (rec->seq == TFT_SEQ_NONE || rec->len > sizeof(s->stepless))
            return NULL;
        memcpy(s->stepless, rec, rec->len);
        ((tft_rec *)s->stepless)->step = CORE_STEPLESS_STEP(rec->seq);
        rec = (const tft_rec *)s->stepless;
    }
    if (th && (th->last_step == TFT_STEP_NONE || rec->step > th->last_step))
        th->last_step = rec->step;
    side_note_step(s, rec->step);
    return rec;
}

typedef struct take_ctx {
    align_side *s;
    const compare_opts *o;
} take_ctx;

static int take_stashed(void *ctx, const tft_rec *rec, uint32_t key)
{
    take_ctx *t = ctx;
    if (t->s->has && rec->step < t->s->step)
        t->s->late++;
    return side_take(t->s, t->o, rec, key);
}

/* Threaded mode: stashes records until the smallest pending step (or the
 * loaded one) is complete, then takes its records. Returns like side_load. */
static int side_load_threaded(align_side *s, const compare_opts *o)
{
    if (s->has_pend) { /* held by the single-threaded reading before the switch */
        s->has_pend = false;
        if (compare_stash_push(s, (const tft_rec *)s->pend, s->first_key) < 0)
            return -ENOMEM;
    }
    int64_t target = s->has ? s->step : TFT_STEP_NONE;
    bool have = s->has || compare_stash_min_step(s, &target);
    for (;;) {
        if (have && compare_side_step_complete(s, target))
            break;
        if (s->eof)
            break;
        const tft_rec *rec;
        uint32_t key;
        int rc = side_next(s, &rec, &key);
        if (rc <= 0) {
            if (rc < 0)
                return rc;
            continue;
        }
        if (rec->kind != TFT_REC_OP && rec->kind != TFT_REC_TENSOR) {
            side_note_other(s, rec, key);
            continue;
        }
        rec = side_window(s, rec, key);
        if (!rec)
            continue;
        if (compare_stash_push(s, rec, key) < 0)
            return -ENOMEM;
        if (!s->has && (!have || rec->step < target)) {
            target = rec->step;
            have = true;
        }
    }
    if (!have)
        return s->has;
    if (!s->has) {
        s->has = true;
        s->step = target;
        s->groups++;
    }
    take_ctx tc = {s, o};
    int rc = compare_stash_take(s, target, take_stashed, &tc);
    return rc < 0 ? rc : 1;
}

/* Loads the next step of s: returns 1 with s->has set, 0 at the end, or a
 * negative errno. The previous step's id map becomes s->prev. In a file
 * that names no threads (before format 1.2), a step's ops and tensors are
 * contiguous in the file and are read straight through; at the first
 * THREAD record (or a second thread) the side switches to threaded mode
 * for good (side_load_threaded). */
static int side_load(align_side *s, const compare_opts *o)
{
    tft_u64map t = s->prev;
    s->prev = s->cur;
    s->cur = t;
    tft_u64map_clear(&s->cur);
    s->n_tensors = s->n_ops = s->n_inputs = 0;
    s->has = false;
    for (size_t i = 0; i < s->n_threads; i++)
        s->threads[i].last_op = -1;
    if (s->threaded)
        return side_load_threaded(s, o);
    if (s->has_pend) {
        const tft_rec *rec = (const tft_rec *)s->pend;
        s->has_pend = false;
        s->has = true;
        s->step = rec->step;
        s->groups++;
        int rc = side_take(s, o, rec, s->first_key);
        if (rc < 0)
            return rc;
    }
    while (!s->eof) {
        const tft_rec *rec;
        uint32_t key;
        int rc = side_next(s, &rec, &key);
        if (rc <= 0) {
            if (rc < 0)
                return rc;
            break;
        }
        if (rec->kind == TFT_REC_THREAD) {
            /* a file that names its threads (format 1.2): any of them may
             * lag behind another, so steps are gathered across threads */
            side_note_other(s, rec, key);
            s->threaded = true;
            return side_load_threaded(s, o);
        }
        if (rec->kind != TFT_REC_OP && rec->kind != TFT_REC_TENSOR) {
            side_note_other(s, rec, key);
            continue;
        }
        if (!s->have_first) {
            s->have_first = true;
            s->first_key = key;
        } else if (key != s->first_key) { /* a second thread: switch to threaded mode */
            s->threaded = true;
            rec = side_window(s, rec, key);
            if (rec && compare_stash_push(s, rec, key) < 0)
                return -ENOMEM;
            return side_load_threaded(s, o);
        }
        rec = side_window(s, rec, key);
        if (!rec)
            continue;
        if (s->has && rec->step != s->step) {
            if (grow((void **)&s->pend, &s->pend_cap, rec->len, 1) < 0)
                return -ENOMEM;
            memcpy(s->pend, rec, rec->len);
            s->has_pend = true;
            break;
        }
        if (!s->has) {
            s->has = true;
            s->step = rec->step;
            s->groups++;
        }
        rc = side_take(s, o, rec, key);
        if (rc < 0)
            return rc;
    }
    return s->has;
}

static bool side_is_last_step(const align_side *s)
{
    return s->eof && !s->has_pend && s->stash_len == 0;
}

/* State of tensor id as an input: this step, the previous one, the leaves. */
static uint8_t side_lookup(const align_side *s, uint64_t id)
{
    uint8_t st = map_get(&s->cur, id);
    if (st == AS_UNKNOWN)
        st = map_get(&s->prev, id);
    if (st == AS_UNKNOWN)
        st = map_get(&s->leaf, id);
    return st;
}

static bool tensor_is_leaf(const align_side *s, const align_tensor *t)
{
    return t->op < 0 || s->ops[t->op].n_in == 0;
}

/* Leaves of the first step loaded (parameters at initialisation, which ops
 * of every later step name as inputs) are kept for the whole run; later
 * leaves (the batch, the learning rate) are used within their step, so the
 * memory stays bounded whatever the number of steps. */
static int side_set_state(align_side *s, const align_tensor *t, uint8_t st)
{
    int rc = map_put(&s->cur, t->id, st);
    if (rc == 0 && tensor_is_leaf(s, t) && s->groups <= 1)
        rc = map_put(&s->leaf, t->id, st);
    return rc;
}

/* True when no recorded input of t's op has diverged (unknown ids count as
 * matching: they lie outside the maps, e.g. before the compared range). */
static bool inputs_match(const align_side *s, const align_tensor *t)
{
    if (!t || t->op < 0)
        return true;
    const align_op *op = &s->ops[t->op];
    for (uint32_t i = 0; i < op->n_in; i++)
        if (side_lookup(s, s->inputs[op->in_off + i]) == AS_DIVERGED)
            return false;
    return true;
}

static const char *tensor_op(const align_side *s, const align_tensor *t)
{
    return t->op >= 0 ? s->ops[t->op].name : "";
}

/* An op name without its scope path ("L0/attn/x" -> "x"). */
static const char *base_name(const char *op)
{
    const char *sl = strrchr(op, '/');
    return sl ? sl + 1 : op;
}

/* The op of t as reports name it. The GEMM interposers record a call's
 * operands (cblas_sgemm.A, .B, a gemv's .x) just before the call, each as
 * an op of its own without inputs; such a tensor is named as what it is:
 * "input B of cblas_sgemm (seq 48)", after the op of its thread that
 * follows and reads it. */
static void describe_op(const align_side *s, const align_tensor *t, char *buf, size_t n)
{
    const char *own = tensor_op(s, t);
    if (t->op >= 0 && s->ops[t->op].n_in == 0 && strcmp(base_name(own), t->name) == 0) {
        uint32_t thread = s->ops[t->op].thread;
        for (size_t i = (size_t)t->op + 1; i < s->n_ops && i <= (size_t)t->op + OP_SEARCH; i++) {
            const align_op *c = &s->ops[i];
            if (c->thread != thread)
                continue;
            for (uint32_t k = 0; k < c->n_in; k++) {
                if (s->inputs[c->in_off + k] != t->id)
                    continue;
                const char *cn = base_name(c->name);
                size_t ln = strlen(cn);
                const char *role = strncmp(t->name, cn, ln) == 0 && t->name[ln] == '.' ? t->name + ln + 1 : "";
                snprintf(buf, n, "input %s%sof %.60s (seq %lld)", role, *role ? " " : "", c->name,
                         (long long)c->seq);
                return;
            }
        }
    }
    copy_text(buf, n, own, n - 1);
}

/* ---- comparing a pair ----------------------------------------------------- */

static uint64_t nonfinite_count(const align_tensor *t)
{
    if (t->mode < TFT_STATS_HEALTH)
        return 0;
    return t->stats.nan + t->stats.pinf + t->stats.ninf;
}

/* How far b's value v is outside the tolerance around golden's g: <= 1
 * within, > 1 outside (the ratio to the tolerance).  With rtol = atol = 0
 * every difference is outside. */
static double excess(const compare_opts *o, double g, double b, double scale)
{
    if (isnan(g) && isnan(b))
        return 0;
    double d = fabs(g - b);
    if (isnan(d))
        return INFINITY;
    if (d == 0)
        return 0;
    double mag = fmax(fmax(fabs(g), fabs(b)), scale);
    double tol = o->atol + o->rtol * mag;
    if (!(tol > 0))
        return 1.0 + d / (fmax(fabs(g), fabs(b)) + 1e-300);
    return d / tol;
}

/* Compares an aligned pair: returns its class; for PC_DIVERGED sets *kind
 * and, for DK_VALUE, the worst statistic's name in stat. */
static int compare_pair(const compare_opts *o, const align_tensor *g, const align_tensor *b,
                        int *kind, char stat[32])
{
    stat[0] = 0;
    bool shape_eq = g->ndim == b->ndim;
    for (int i = 0; shape_eq && i < g->ndim; i++)
        shape_eq = g->shape[i] == b->shape[i];
    if (!shape_eq) {
        *kind = DK_SHAPE;
        return PC_DIVERGED;
    }
    if (g->dtype != b->dtype) {
        *kind = DK_DTYPE;
        return PC_DIVERGED;
    }
    if (g->mode < TFT_STATS_HEALTH || b->mode < TFT_STATS_HEALTH)
        return PC_UNCHECKED; /* shape and dtype only: nothing more to compare */
    const tft_stats *gs = &g->stats, *bs = &b->stats;
    if (gs->fingerprint == bs->fingerprint)
        return PC_IDENTICAL;
    *kind = DK_VALUE;
    if (bs->nan > gs->nan || bs->pinf > gs->pinf || bs->ninf > gs->ninf) {
        *kind = DK_NONFINITE;
        snprintf(stat, 32, "%s", bs->nan > gs->nan ? "nan" : bs->pinf > gs->pinf ? "pinf" : "ninf");
        return PC_DIVERGED;
    }
    const struct { const char *name; uint64_t g, b; } counts[] = {
        {"numel", gs->numel, bs->numel}, {"nan", gs->nan, bs->nan},
        {"pinf", gs->pinf, bs->pinf}, {"ninf", gs->ninf, bs->ninf},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        if (counts[i].g != counts[i].b) {
            snprintf(stat, 32, "%s", counts[i].name);
            return PC_DIVERGED;
        }
    }
    bool full = g->mode >= TFT_STATS_FULL && b->mode >= TFT_STATS_FULL;
    double scale = full ? fmax(fmax(fabs(gs->mean), gs->std), gs->absmax * 1e-3)
                        : fmax(fabs(gs->min), fabs(gs->max)) * 1e-3;
    if (isnan(scale))
        scale = 0;
    const struct { const char *name; double g, b; } st[] = {
        {"min", gs->min, bs->min}, {"max", gs->max, bs->max},
        {"mean", gs->mean, bs->mean}, {"std", gs->std, bs->std},
        {"l1", gs->l1, bs->l1}, {"l2", gs->l2, bs->l2}, {"absmax", gs->absmax, bs->absmax},
    };
    size_t n = full ? sizeof st / sizeof st[0] : 2;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = excess(o, st[i].g, st[i].b, scale);
        if (e > worst) {
            worst = e;
            snprintf(stat, 32, "%s", st[i].name);
        }
    }
    if (worst > 1)
        return PC_DIVERGED;
    if (o->rtol == 0 && o->atol == 0) {
        snprintf(stat, 32, "fingerprint"); /* bitwise asked: the bytes differ */
        return PC_DIVERGED;
    }
    stat[0] = 0;
    return PC_WITHIN;
}

/* ---- aligning the name sequences of a step ------------------------------- */

static int edit_push(align_ctx *c, int32_t g, int32_t b)
{
    if (grow((void **)&c->edits, &c->cap_edits, c->n_edits + 1, sizeof *c->edits) < 0)
        return -ENOMEM;
    c->edits[c->n_edits++] = (align_edit){g, b};
    return 0;
}

#define GNAME(i) (c->g.tensors[c->gi[i]].name_id)
#define BNAME(j) (c->b.tensors[c->bi[j]].name_id)

/* LCS of gi[g0..g1) and bi[b0..b1) (both non-empty, table small enough). */
static int align_lcs(align_ctx *c, size_t g0, size_t g1, size_t b0, size_t b1)
{
    size_t n = g1 - g0, m = b1 - b0, w = m + 1;
    if (grow((void **)&c->lcs, &c->cap_lcs, (n + 1) * w, sizeof *c->lcs) < 0)
        return -ENOMEM;
    uint16_t *L = c->lcs; /* L[i*w+j]: LCS of g[g0+i..g1) and b[b0+j..b1) */
    for (size_t j = 0; j <= m; j++)
        L[n * w + j] = 0;
    for (size_t i = n; i-- > 0;) {
        L[i * w + m] = 0;
        for (size_t j = m; j-- > 0;) {
            uint16_t v;
            if (GNAME(g0 + i) == BNAME(b0 + j))
                v = (uint16_t)(L[(i + 1) * w + j + 1] + 1);
            else
                v = L[(i + 1) * w + j] >= L[i * w + j + 1] ? L[(i + 1) * w + j] : L[i * w + j + 1];
            L[i * w + j] = v;
        }
    }
    size_t i = 0, j = 0;
    int rc = 0;
    while (rc == 0 && (i < n || j < m)) {
        if (i < n && j < m && GNAME(g0 + i) == BNAME(b0 + j)) {
            rc = edit_push(c, c->gi[g0 + i], c->bi[b0 + j]);
            i++, j++;
        } else if (i < n && (j == m || L[(i + 1) * w + j] >= L[i * w + j + 1])) {
            rc = edit_push(c, c->gi[g0 + i++], -1);
        } else {
            rc = edit_push(c, -1, c->bi[b0 + j++]);
        }
    }
    return rc;
}

/* Greedy resync for a middle too large for the table: on a mismatch, skip
 * to the nearest re-occurrence within LOOKAHEAD on either side. */
static int align_greedy(align_ctx *c, size_t g0, size_t g1, size_t b0, size_t b1)
{
    size_t i = g0, j = b0;
    int rc = 0;
    while (rc == 0 && i < g1 && j < b1) {
        if (GNAME(i) == BNAME(j)) {
            rc = edit_push(c, c->gi[i++], c->bi[j++]);
            continue;
        }
        size_t dg = 0, db = 0;
        for (size_t k = 1; k <= LOOKAHEAD && i + k < g1 && !dg; k++)
            if (GNAME(i + k) == BNAME(j))
                dg = k;
        for (size_t k = 1; k <= LOOKAHEAD && j + k < b1 && !db; k++)
            if (BNAME(j + k) == GNAME(i))
                db = k;
        if (dg && (!db || dg <= db)) {
            while (rc == 0 && dg--)
                rc = edit_push(c, c->gi[i++], -1);
        } else if (db) {
            while (rc == 0 && db--)
                rc = edit_push(c, -1, c->bi[j++]);
        } else {
            rc = edit_push(c, c->gi[i++], -1);
            if (rc == 0)
                rc = edit_push(c, -1, c->bi[j++]);
        }
    }
    while (rc == 0 && i < g1)
        rc = edit_push(c, c->gi[i++], -1);
    while (rc == 0 && j < b1)
        rc = edit_push(c, -1, c->bi[j++]);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The name ids of tensors idx[0..n) of s into *out, sorted. */
static int sorted_names(const align_side *s, const int32_t *idx, size_t n, uint64_t **out, size_t *cap)
{
    if (grow((void **)out, cap, n + 1, sizeof **out) < 0)
        return -ENOMEM;
    for (size_t k = 0; k < n; k++)
        (*out)[k] = s->tensors[idx[k]].name_id;
    qsort(*out, n, sizeof **out, cmp_u64);
    return 0;
}

/* How many times name occurs in sorted v[0..n). */
static size_t name_count(const uint64_t *v, size_t n, uint64_t name)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < name)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t k = lo;
    while (k < n && v[k] == name)
        k++;
    return k - lo;
}

/* Lossy ranks: a difference involving a name whose tensors differ in
 * number between the sides cannot be told from a lost record (which of
 * them was lost, and so which pairs with which, is unknown). */
static bool unverifiable(const align_ctx *c, const align_tensor *gt, const align_tensor *bt)
{
    if (!c->lossy)
        return false;
    uint64_t name = gt ? gt->name_id : bt->name_id;
    return name_count(c->gnames, c->n_gnames, name) != name_count(c->bnames, c->n_bnames, name);
}

/* Whether the tensors idx[0..n) of s come from more than one thread. */
static bool several_threads(const align_side *s, const int32_t *idx, size_t n)
{
    for (size_t k = 1; k < n; k++)
        if (s->tensors[idx[k]].thread != s->tensors[idx[0]].thread)
            return true;
    return false;
}

/* Builds c->edits for the loaded step: the non-skipped tensors of both
 * sides, in BAD's order, deletions where GOLDEN has them. Tensors of one
 * thread per side are aligned like a text diff (the order is the
 * program's); tensors of several threads by the order-free matcher
 * (compare_threads.c), since their order in the file is the collector's. */
static int align_step(align_ctx *c)
{
    size_t n = 0, m = 0;
    if (grow((void **)&c->gi, &c->cap_gi, c->g.n_tensors + 1, sizeof *c->gi) < 0 ||
        grow((void **)&c->bi, &c->cap_bi, c->b.n_tensors + 1, sizeof *c->bi) < 0)
        return -ENOMEM;
    for (size_t k = 0; k < c->g.n_tensors; k++)
        if (!c->g.tensors[k].skip)
            c->gi[n++] = (int32_t)k;
    for (size_t k = 0; k < c->b.n_tensors; k++)
        if (!c->b.tensors[k].skip)
            c->bi[m++] = (int32_t)k;
    c->n_edits = 0;
    if (c->lossy) {
        int rc = sorted_names(&c->g, c->gi, n, &c->gnames, &c->cap_gnames);
        if (rc == 0)
            rc = sorted_names(&c->b, c->bi, m, &c->bnames, &c->cap_bnames);
        if (rc < 0)
            return rc;
        c->n_gnames = n;
        c->n_bnames = m;
    }
    if (c->lossy || several_threads(&c->g, c->gi, n) || several_threads(&c->b, c->bi, m))
        return compare_match_order_free(&c->g, &c->b, c->gi, n, c->bi, m, &c->ms, &c->edits, &c->n_edits, &c->cap_edits);
    size_t p = 0, s = 0;
    while (p < n && p < m && GNAME(p) == BNAME(p))
        p++;
    while (s < n - p && s < m - p && GNAME(n - 1 - s) == BNAME(m - 1 - s))
        s++;
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < p; k++)
        rc = edit_push(c, c->gi[k], c->bi[k]);
    size_t gm = n - p - s, bm = m - p - s;
    if (rc == 0 && (gm || bm)) {
        if (gm && bm && (double)(gm + 1) * (double)(bm + 1) <= LCS_MAX_CELLS)
            rc = align_lcs(c, p, p + gm, p, p + bm);
        else
            rc = align_greedy(c, p, p + gm, p, p + bm);
    }
    for (size_t k = 0; rc == 0 && k < s; k++)
        rc = edit_push(c, c->gi[n - s + k], c->bi[m - s + k]);
    return rc;
}

#undef GNAME
#undef BNAME

/* ---- results -------------------------------------------------------------- */

static void fill_tensor(compare_tensor_side *d, const align_side *s, const align_tensor *t)
{
    memset(d, 0, sizeof *d);
    if (!t)
        return;
    d->present = true;
    d->step = t->step;
    d->seq = t->seq;
    copy_text(d->name, sizeof d->name, t->name, sizeof d->name - 1);
    describe_op(s, t, d->op, sizeof d->op);
    d->dtype = t->dtype;
    d->ndim = t->ndim;
    memcpy(d->shape, t->shape, sizeof d->shape);
    d->mode = t->mode;
    d->stats = t->stats;
}

static void fill_point(align_ctx *c, compare_point *p, const align_tensor *gt,
                       const align_tensor *bt, int kind, const char *stat)
{
    memset(p, 0, sizeof *p);
    const align_side *s = bt ? &c->b : &c->g;
    const align_tensor *t = bt ? bt : gt;
    p->found = true;
    p->rank = c->out->rank;
    p->step = t->step;
    p->seq = t->seq;
    snprintf(p->tensor, sizeof p->tensor, "%s", t->name);
    describe_op(s, t, p->op, sizeof p->op);
    p->kind = kind;
    p->thread = t->thread == THREAD_UNKNOWN ? -1 : (int)t->thread;
    p->leaf = tensor_is_leaf(s, t);
    fill_tensor(&p->golden, &c->g, gt);
    fill_tensor(&p->bad, &c->b, bt);
    snprintf(p->stat, sizeof p->stat, "%s", stat ? stat : "");
}

static void ring_push(align_ctx *c, const align_tensor *gt, const align_tensor *bt)
{
    fill_tensor(&c->ring_g[c->ring_pos], &c->g, gt);
    fill_tensor(&c->ring_b[c->ring_pos], &c->b, bt);
    c->ring_pos = (c->ring_pos + 1) % 4;
    if (c->ring_n < 4)
        c->ring_n++;
}

static void set_first(align_ctx *c, const align_tensor *gt, const align_tensor *bt, int kind,
                      const char *stat)
{
    compare_result *out = c->out;
    fill_point(c, &out->first, gt, bt, kind, stat);
    out->n_context = c->ring_n;
    for (int k = 0; k < c->ring_n; k++) {
        int i = (c->ring_pos - c->ring_n + k + 4) % 4;
        out->context_g[k] = c->ring_g[i];
        out->context_b[k] = c->ring_b[i];
    }
}

static void note_nonfinite(align_ctx *c, const align_tensor *gt, const align_tensor *bt)
{
    compare_nonfinite *nf = &c->out->nonfinite;
    if (nf->found || !bt || !nonfinite_count(bt))
        return;
    nf->found = true;
    nf->rank = c->out->rank;
    nf->step = bt->step;
    nf->seq = bt->seq;
    snprintf(nf->tensor, sizeof nf->tensor, "%s", bt->name);
    describe_op(&c->b, bt, nf->op, sizeof nf->op);
    nf->in_golden = gt && nonfinite_count(gt) > 0;
}

static void set_structure(align_ctx *c, int64_t step, const char *msg)
{
    if (c->out->structure[0])
        return;
    snprintf(c->out->structure, sizeof c->out->structure, "%s", msg);
    c->structure_step = step;
}

/* ---- one step ------------------------------------------------------------- */

/* Reportable edits of a step; leaves (tensors whose op has no inputs:
 * parameters at init, tokens) tell one model from another. */
typedef struct step_tally {
    size_t pairs, ins, del;
    size_t leaves, leaf_shape; /* leaf pairs, those of another shape or dtype */
} step_tally;

static void structure_edit(align_ctx *c, const align_tensor *gt, const align_tensor *bt,
                           const char *prev_g, const char *prev_b, bool trailing, size_t n_trailing)
{
    char msg[256], at[40];
    int64_t step = bt ? bt->step : gt->step;
    core_step_text(step, at, sizeof at);
    if (bt)
        snprintf(msg, sizeof msg, "%.39s: BAD has an extra tensor %.64s %s%.64s", at, bt->name,
                 prev_b ? "after " : "at the start of the step", prev_b ? prev_b : "");
    else if (trailing)
        snprintf(msg, sizeof msg, "%.39s: BAD stops after %.64s; GOLDEN has %zu more tensors in this step, from %.64s",
                 at, prev_b ? prev_b : "the step's start", n_trailing, gt->name);
    else
        snprintf(msg, sizeof msg, "%.39s: BAD lacks tensor %.64s (GOLDEN has it %s%.64s)", at, gt->name,
                 prev_g ? "after " : "at the start of the step", prev_g ? prev_g : "");
    set_structure(c, step, msg);
}

/* Handles one edit of the step (a pair, an insertion or a deletion):
 * compares, records the states, updates first/origin/nonfinite/counts. */
static int step_edit(align_ctx *c, const align_tensor *gt, const align_tensor *bt,
                     step_tally *tally, const char *prev_g, const char *prev_b,
                     bool trailing, size_t n_trailing)
{
    compare_result *out = c->out;
    int kind = DK_VALUE, cls;
    char stat[32] = "";
    if (gt && bt) {
        cls = compare_pair(c->o, gt, bt, &kind, stat);
    } else {
        cls = PC_DIVERGED;
        kind = bt ? DK_EXTRA : DK_MISSING;
    }
    bool diverged = cls == PC_DIVERGED;
    if (diverged && unverifiable(c, gt, bt)) { /* neither a match nor a divergence: unknown */
        if (bt ? bt->report : gt->report) {
            out->unverified++;
            out->compared += gt && bt;
        }
        return 0;
    }
    if (diverged && !out->origin.found && inputs_match(&c->g, gt) && inputs_match(&c->b, bt))
        fill_point(c, &out->origin, gt, bt, kind, stat);
    uint8_t st = diverged ? AS_DIVERGED : AS_MATCH;
    int rc = 0;
    if (gt)
        rc = side_set_state(&c->g, gt, st);
    if (rc == 0 && bt)
        rc = side_set_state(&c->b, bt, st);
    if (rc < 0)
        return rc;
    if (!(bt ? bt->report : gt->report))
        return 0;
    if (gt && bt) {
        tally->pairs++;
        out->compared++;
        if (cls == PC_IDENTICAL)
            out->identical++;
        else if (cls == PC_WITHIN)
            out->within_tolerance++;
        if (tensor_is_leaf(&c->b, bt)) {
            tally->leaves++;
            tally->leaf_shape += diverged && (kind == DK_SHAPE || kind == DK_DTYPE);
        }
    } else {
        if (bt) {
            tally->ins++;
            out->inserted++;
        } else {
            tally->del += !trailing; /* a truncated last step is not another model */
            out->deleted++;
        }
        structure_edit(c, gt, bt, prev_g, prev_b, trailing, n_trailing);
    }
    if (diverged && !out->first.found)
        set_first(c, gt, bt, kind, stat);
    if (gt && bt)
        ring_push(c, gt, bt);
    note_nonfinite(c, gt, bt);
    return 0;
}

/* Flags two runs of different programs: most leaves of a step (parameters
 * at init) of another shape, or most tensors unmatched.  A shape change
 * downstream of one input (a shorter batch) changes every activation but
 * not the parameters, so only leaves count.  Replaces a structure message
 * of the same step. */
static void check_models(align_ctx *c, int64_t step, const step_tally *t)
{
    size_t total = t->leaves + t->ins + t->del, bad = t->leaf_shape + t->ins + t->del;
    if (c->models_flagged || total < 3 || bad * 2 <= total)
        return;
    c->models_flagged = true;
    if (c->out->structure[0] && c->structure_step != step)
        return;
    c->out->structure[0] = 0;
    char msg[256], at[48];
    snprintf(msg, sizeof msg,
             "%s: GOLDEN and BAD record different tensors (%zu of %zu leaf tensors differ "
             "in shape or dtype, %zu only in BAD, %zu only in GOLDEN): runs of different models?",
             core_step_text(step, at, sizeof at), t->leaf_shape, t->leaves, t->ins, t->del);
    set_structure(c, step, msg);
}

static int compare_step(align_ctx *c)
{
    int rc = align_step(c);
    if (rc < 0)
        return rc;
    size_t last_b = SIZE_MAX; /* the last edit with a BAD tensor */
    for (size_t k = 0; k < c->n_edits; k++)
        if (c->edits[k].b >= 0)
            last_b = k;
    bool bad_last = side_is_last_step(&c->b);
    step_tally tally = {0};
    const char *prev_g = NULL, *prev_b = NULL;
    for (size_t k = 0; rc == 0 && k < c->n_edits; k++) {
        const align_tensor *gt = c->edits[k].g >= 0 ? &c->g.tensors[c->edits[k].g] : NULL;
        const align_tensor *bt = c->edits[k].b >= 0 ? &c->b.tensors[c->edits[k].b] : NULL;
        bool trailing = bad_last && (last_b == SIZE_MAX || k > last_b);
        rc = step_edit(c, gt, bt, &tally, prev_g, prev_b, trailing, c->n_edits - k);
        if (gt)
            prev_g = gt->name;
        if (bt)
            prev_b = bt->name;
    }
    check_models(c, c->b.step, &tally);
    return rc;
}

/* A step only one side has.  Inside the other side's run it is a structural
 * difference (every tensor inserted or deleted); before the other side
 * starts or after it ends it is outside the common range: only BAD's
 * non-finite values are looked for. */
static int one_sided_step(align_ctx *c, bool bad_side, bool gap)
{
    align_side *s = bad_side ? &c->b : &c->g;
    size_t n = 0;
    for (size_t k = 0; k < s->n_tensors; k++)
        n += !s->tensors[k].skip && s->tensors[k].report;
    step_tally tally = {0};
    for (size_t k = 0; k < s->n_tensors; k++) {
        const align_tensor *t = &s->tensors[k];
        if (t->skip)
            continue;
        if (!gap || c->lossy) { /* lossy: a whole step may have been lost */
            if (bad_side && t->report)
                note_nonfinite(c, NULL, t);
            c->out->unverified += gap && t->report;
            continue;
        }
        if (n && !c->out->structure[0]) {
            char msg[256], at[48];
            snprintf(msg, sizeof msg, "%s: %s has no records of this step (%s has %zu tensors)",
                     core_step_text(s->step, at, sizeof at), bad_side ? "GOLDEN" : "BAD", bad_side ? "BAD" : "GOLDEN", n);
            set_structure(c, s->step, msg);
        }
        int rc = step_edit(c, bad_side ? NULL : t, bad_side ? t : NULL, &tally, NULL, NULL, false, 0);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- the rank ------------------------------------------------------------- */

static bool in_range(const compare_opts *o, int64_t step)
{
    return step >= o->step_lo && step <= o->step_hi;
}

static void side_init(align_side *s, tft_reader *r)
{
    memset(s, 0, sizeof *s);
    s->r = r;
    s->first_step = s->last_step = TFT_STEP_NONE;
    tft_u64map_init(&s->cur, &(tft_u64map_opts){.vsize = 1});
    tft_u64map_init(&s->prev, &(tft_u64map_opts){.vsize = 1});
    tft_u64map_init(&s->leaf, &(tft_u64map_opts){.vsize = 1, .max_n = LEAF_MAX});
    s->sync_step = TFT_STEP_NONE;
}

static void side_free(align_side *s)
{
    free(s->pend);
    free(s->threads);
    free(s->stash);
    free(s->tensors);
    free(s->ops);
    free(s->inputs);
    tft_u64map_free(&s->cur);
    tft_u64map_free(&s->prev);
    tft_u64map_free(&s->leaf);
}

/* "steps A..B", or "no steps (windows A..B)" for a trace without steps. */
static const char *range_text(int64_t a, int64_t b, char *buf, size_t n)
{
    if (CORE_IS_STEPLESS(a))
        snprintf(buf, n, "no steps (windows %lld..%lld)", (long long)(a - CORE_STEPLESS_BASE),
                 (long long)(b - CORE_STEPLESS_BASE));
    else
        snprintf(buf, n, "steps %lld..%lld", (long long)a, (long long)b);
    return buf;
}

static void finish(align_ctx *c)
{
    compare_result *out = c->out;
    out->golden_first_step = c->g.first_step;
    out->golden_last_step = c->g.last_step;
    out->bad_first_step = c->b.first_step;
    out->bad_last_step = c->b.last_step;
    out->common_first_step = out->common_last_step = TFT_STEP_NONE;
    if (c->g.first_step != TFT_STEP_NONE && c->b.first_step != TFT_STEP_NONE) {
        int64_t lo = c->g.first_step > c->b.first_step ? c->g.first_step : c->b.first_step;
        int64_t hi = c->g.last_step < c->b.last_step ? c->g.last_step : c->b.last_step;
        if (lo <= hi) {
            out->common_first_step = lo;
            out->common_last_step = hi;
        } else if (!out->structure[0]) {
            char gr[64], br[64];
            snprintf(out->structure, sizeof out->structure, "no steps in common: GOLDEN has %s, BAD %s",
                     range_text(c->g.first_step, c->g.last_step, gr, sizeof gr),
                     range_text(c->b.first_step, c->b.last_step, br, sizeof br));
        }
        /* with --steps A:B, a BAD that reaches B (a window kept by tfdump
         * --extract) has not ended early */
        int64_t g_end = c->g.last_step < c->o->step_hi ? c->g.last_step : c->o->step_hi;
        out->bad_ended_early = c->b.last_step < g_end;
    }
    out->threads = c->b.threaded ? (int)c->b.op_threads : 0;
    out->bad_exit_known = c->b.exit_known;
    out->bad_exit_code = c->b.exit_code;
    out->bad_exit_signal = c->b.exit_signal;
    out->golden_exit_known = c->g.exit_known;
    out->golden_exit_code = c->g.exit_code;
    out->golden_exit_signal = c->g.exit_signal;
    if (c->b.exit_known)
        out->exit_differs = c->g.exit_known ? c->b.exit_signal != c->g.exit_signal ||
                                                  (!c->b.exit_signal && c->b.exit_code != c->g.exit_code)
                                            : c->b.exit_signal || c->b.exit_code;
    out->lost_tail = out->bad_ended_early && out->bad_dropped && c->b.exit_known && c->g.exit_known &&
                     !out->exit_differs;
    out->unverified += out->lost_tail;
}

static int run(align_ctx *c)
{
    const compare_opts *o = c->o;
    int rc = side_load(&c->g, o);
    if (rc >= 0)
        rc = side_load(&c->b, o);
    while (rc >= 0 && (c->g.has || c->b.has)) {
        bool both = c->g.has && c->b.has && c->g.step == c->b.step;
        if (both) {
            if (in_range(o, c->b.step))
                rc = compare_step(c);
            if (o->progress)
                o->progress(o->progress_ctx, c->out->rank, c->b.step);
            if (rc >= 0)
                rc = side_load(&c->g, o);
            if (rc >= 0)
                rc = side_load(&c->b, o);
        } else if (c->g.has && (!c->b.has || c->g.step < c->b.step)) {
            /* BAD started later (resumed) or ended: outside the common range */
            bool gap = c->b.has && c->b.groups > 1;
            if (in_range(o, c->g.step))
                rc = one_sided_step(c, false, gap);
            if (rc >= 0)
                rc = side_load(&c->g, o);
        } else {
            bool gap = c->g.has && c->g.groups > 1;
            if (in_range(o, c->b.step))
                rc = one_sided_step(c, true, gap);
            if (rc >= 0)
                rc = side_load(&c->b, o);
        }
    }
    /* both sides returned 0: both files were read to the end */
    return rc < 0 ? rc : 0;
}

/* Records the recorder lost, as the chunk headers count them (known before
 * reading: the index holds them). */
static uint64_t reader_dropped(const tft_reader *r)
{
    uint64_t n = 0;
    for (size_t i = 0; i < tft_reader_chunk_count(r); i++)
        n += tft_reader_chunk(r, i)->dropped;
    return n;
}

/* The steps each side lost records in: a pass over a side's DROPPED
 * records, only for a side whose chunks count drops. */
static int drops_steps(tft_reader *g, tft_reader *b, compare_result *out)
{
    tft_reader *side[2] = {g, b};
    uint64_t lost[2] = {out->golden_dropped, out->bad_dropped};
    for (int k = 0; k < 2; k++) {
        out->drop_steps[k][0] = out->drop_steps[k][1] = TFT_STEP_NONE;
        int e = lost[k] ? core_drops_scan(side[k], out->drop_steps[k], &out->drop_steps_known[k]) : 0;
        if (e < 0)
            return e;
    }
    return 0;
}

int compare_rank(tft_reader *g, tft_reader *b, const compare_opts *o, compare_result *out)
{
    static const compare_opts defaults = COMPARE_OPTS_DEFAULT;
    if (!g || !b || !out)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    const tft_file_info *bi = tft_reader_info(b);
    out->rank = bi ? bi->rank : 0;
    out->golden_first_step = out->golden_last_step = TFT_STEP_NONE;
    out->bad_first_step = out->bad_last_step = TFT_STEP_NONE;
    out->common_first_step = out->common_last_step = TFT_STEP_NONE;
    align_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->o = o ? o : &defaults;
    c->out = out;
    out->golden_dropped = reader_dropped(g);
    out->bad_dropped = reader_dropped(b);
    int de = drops_steps(g, b, out);
    if (de < 0) {
        free(c);
        return de;
    }
    side_init(&c->g, g);
    side_init(&c->b, b);
    c->g.tap = c->b.tap = c->o->tap;
    c->g.tap_ctx = c->b.tap_ctx = c->o->tap_ctx;
    c->b.tap_side = 1;
    c->lossy = out->golden_dropped || out->bad_dropped;
    int rc = run(c);
    finish(c);
    out->golden_records = c->g.records;
    out->bad_records = c->b.records;
    side_free(&c->g);
    side_free(&c->b);
    free(c->edits);
    free(c->lcs);
    free(c->gi);
    free(c->bi);
    free(c->gnames);
    free(c->bnames);
    compare_match_scratch_free(&c->ms);
    free(c);
    return rc;
}
