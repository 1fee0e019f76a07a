/*
 * compare_side.c — one side of a rank comparison (GOLDEN or BAD) read a
 * step at a time (compare_internal.h): the step's TENSOR and OP records,
 * the side's exit, its step range, and the divergence state of its
 * tensors as the ops that read them see it.
 *
 * Memory: one step of records (tensors, ops, op input ids), two id maps
 * (this step and the previous one) and a capped map of the leaf tensors of
 * the first step (tensors whose op has no recorded inputs: the parameters
 * at initialisation), which ops of any later step may read by id. Nothing
 * grows with the number of steps.
 *
 * Filters applied as records are taken: collective results (names MPI_*
 * or nccl*, or ops of kind collective) are marked skip unless
 * o->collectives; the name glob marks what is reported (the origin is
 * searched over every compared tensor, glob or not: compare_judge.c).
 */
#include "core.h"
#include "compare.h"
#include "compare_internal.h"

#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEAF_MAX (1u << 16)      /* leaf tensors of the first step, remembered across steps */

/* Grows *p (elements of size sz, capacity *cap) to hold n. 0 or -ENOMEM. */
int compare_grow(void **p, size_t *cap, size_t n, size_t sz)
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

static bool is_collective_name(const char *s)
{
    return strncmp(s, "MPI_", 4) == 0 || strncmp(s, "nccl", 4) == 0;
}

/* snprintf(dst, n, "%.*s", max, src) without its cost (two per record on
 * the hot path): at most max bytes and n - 1, NUL-terminated; returns the
 * length copied. */
size_t compare_copy_text(char *dst, size_t n, const char *src, size_t max)
{
    size_t k = strnlen(src, max < n - 1 ? max : n - 1);
    memcpy(dst, src, k);
    dst[k] = '\0';
    return k;
}

/* Copies the text of string id into dst; "#<hex id>" when the file never
 * defined it (a torn chunk, a writer bug). */
static void string_or_hex(const tft_reader *r, uint64_t id, char *dst, size_t n)
{
    const char *s = id ? tft_reader_string(r, id) : NULL;
    if (s)
        compare_copy_text(dst, n, s, n - 1);
    else
        snprintf(dst, n, "#%016" PRIx64, id);
}

static int side_take_op(align_side *s, const tft_rec *rec, uint32_t key)
{
    const tft_rec_op *op = (const tft_rec_op *)rec;
    if (rec->len < sizeof *op ||
        sizeof *op + 8u * ((size_t)op->n_in + op->n_out + op->n_attr) > rec->len)
        return 0; /* malformed: ignored (the reader already checks) */
    if (compare_grow((void **)&s->ops, &s->cap_ops, s->n_ops + 1, sizeof *s->ops) < 0 ||
        compare_grow((void **)&s->inputs, &s->cap_inputs, s->n_inputs + op->n_in, sizeof *s->inputs) < 0)
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
        size_t k = compare_copy_text(a->name, sizeof a->name, sc, 46);
        a->name[k++] = '/';
        compare_copy_text(a->name + k, sizeof a->name - k, name, 47);
    } else {
        compare_copy_text(a->name, sizeof a->name, name, sizeof a->name - 1);
    }
    return 0;
}

static int side_take_tensor(align_side *s, const compare_opts *o, const tft_rec *rec, uint32_t key)
{
    const tft_rec_tensor *t = (const tft_rec_tensor *)rec;
    if (rec->len < sizeof *t)
        return 0;
    if (compare_grow((void **)&s->tensors, &s->cap_tensors, s->n_tensors + 1, sizeof *s->tensors) < 0)
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
    size_t lo = s->n_ops > ALIGN_OP_SEARCH ? s->n_ops - ALIGN_OP_SEARCH : 0;
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
    core_exception_take(&s->raised, s->r, rec);
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

/* Step `step` becomes the loaded one (its records follow). */
static void side_open_step(align_side *s, int64_t step)
{
    s->has = true;
    s->step = step;
    s->groups++;
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
    if (!s->has)
        side_open_step(s, target);
    take_ctx tc = {s, o};
    int rc = compare_stash_take(s, target, take_stashed, &tc);
    return rc < 0 ? rc : 1;
}

/* A file that names no threads (before format 1.2): a step's ops and
 * tensors are contiguous in the file and are read straight through, up to
 * the first record of the next step (held in s->pend). At the first THREAD
 * record (or a second thread) the side switches to threaded mode for good
 * (side_load_threaded). Returns like compare_side_load. */
static int side_load_contiguous(align_side *s, const compare_opts *o)
{
    if (s->has_pend) {
        const tft_rec *rec = (const tft_rec *)s->pend;
        s->has_pend = false;
        side_open_step(s, rec->step);
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
            if (compare_grow((void **)&s->pend, &s->pend_cap, rec->len, 1) < 0)
                return -ENOMEM;
            memcpy(s->pend, rec, rec->len);
            s->has_pend = true;
            break;
        }
        if (!s->has)
            side_open_step(s, rec->step);
        rc = side_take(s, o, rec, key);
        if (rc < 0)
            return rc;
    }
    return s->has;
}

int compare_side_load(align_side *s, const compare_opts *o)
{
    tft_u64map t = s->prev;
    s->prev = s->cur;
    s->cur = t;
    tft_u64map_clear(&s->cur);
    s->n_tensors = s->n_ops = s->n_inputs = 0;
    s->has = false;
    for (size_t i = 0; i < s->n_threads; i++)
        s->threads[i].last_op = -1;
    return s->threaded ? side_load_threaded(s, o) : side_load_contiguous(s, o);
}

bool compare_side_is_last_step(const align_side *s)
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

bool compare_tensor_is_leaf(const align_side *s, const align_tensor *t)
{
    return t->op < 0 || s->ops[t->op].n_in == 0;
}

/* Leaves of the first step loaded (parameters at initialisation, which ops
 * of every later step name as inputs) are kept for the whole run; later
 * leaves (the batch, the learning rate) are used within their step, so the
 * memory stays bounded whatever the number of steps. */
int compare_side_set_state(align_side *s, const align_tensor *t, uint8_t st)
{
    int rc = map_put(&s->cur, t->id, st);
    if (rc == 0 && compare_tensor_is_leaf(s, t) && s->groups <= 1)
        rc = map_put(&s->leaf, t->id, st);
    return rc;
}

/* True when no recorded input of t's op has diverged (unknown ids count as
 * matching: they lie outside the maps, e.g. before the compared range). */
bool compare_side_inputs_match(const align_side *s, const align_tensor *t)
{
    if (!t || t->op < 0)
        return true;
    const align_op *op = &s->ops[t->op];
    for (uint32_t i = 0; i < op->n_in; i++)
        if (side_lookup(s, s->inputs[op->in_off + i]) == AS_DIVERGED)
            return false;
    return true;
}

void compare_side_init(align_side *s, tft_reader *r)
{
    memset(s, 0, sizeof *s);
    s->r = r;
    s->first_step = s->last_step = TFT_STEP_NONE;
    tft_u64map_init(&s->cur, &(tft_u64map_opts){.vsize = 1});
    tft_u64map_init(&s->prev, &(tft_u64map_opts){.vsize = 1});
    tft_u64map_init(&s->leaf, &(tft_u64map_opts){.vsize = 1, .max_n = LEAF_MAX});
    s->sync_step = TFT_STEP_NONE;
}

void compare_side_free(align_side *s)
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
