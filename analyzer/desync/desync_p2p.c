/*
 * desync_p2p.c — the point-to-point records of the extracts: counters per
 * (space, source, destination, tag) of sends and posted receives (at their
 * ENTER) and completed receives (at their EXIT, actual source and tag), at
 * most DESYNC_MAX_PAIRS of them, and per rank its calls entered and not
 * left, at most DESYNC_MAX_OPEN. Judged at the end (desync_p2p_judge.c).
 */
#include "desync_internal.h"

#include <stdlib.h>

static uint64_t pair_hash(uint64_t space, int32_t src, int32_t dst, int32_t tag)
{
    uint64_t h = space ^ ((uint64_t)(uint32_t)src << 32 | (uint32_t)dst);
    h ^= (uint64_t)(uint32_t)tag * 0x9E3779B97F4A7C15ull;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static bool pair_eq(const void *ctx, const void *val)
{
    const pair_ent *a = ctx, *b = val;
    return a->space == b->space && a->src == b->src && a->dst == b->dst && a->tag == b->tag;
}

/* The counters of (space, src, dst, tag), NULL none. */
const pair_ent *desync_pair_find(const desync_state *s, uint64_t space, int32_t src, int32_t dst, int32_t tag)
{
    pair_ent want = {.space = space, .src = src, .dst = dst, .tag = tag};
    return tft_u64map_find(&s->pairs, pair_hash(space, src, dst, tag), pair_eq, &want);
}

/* The counters of (space, src, dst, tag), added when new; NULL when the
 * table is full (point-to-point is then not judged). Room is made before
 * the lookup, as DESYNC_MAX_PAIRS counts it: once the table holds that
 * many, the next call overflows, whatever it asks for. */
static pair_ent *pair_get(desync_state *s, uint64_t space, int32_t src, int32_t dst, int32_t tag)
{
    if (s->pairs_overflow || !space)
        return NULL;
    if (tft_u64map_reserve(&s->pairs) < 0) {
        s->pairs_overflow = true;
        return NULL;
    }
    pair_ent want = {.space = space, .src = src, .dst = dst, .tag = tag};
    void *v;
    if (tft_u64map_insert(&s->pairs, pair_hash(space, src, dst, tag), pair_eq, &want, &v) == 1)
        *(pair_ent *)v = want;
    return v;
}

typedef struct open_key {
    const p2p_rank *o;
    uint64_t space, q;
} open_key;

static bool open_eq(const void *ctx, const void *val)
{
    const open_key *k = ctx;
    const p2p_open *x = &k->o->v[*(const uint32_t *)val];
    return x->space == k->space && x->q == k->q;
}

/* Drops the calls marked gone and rebuilds the index: O(open calls). */
int desync_open_compact(p2p_rank *o)
{
    size_t k = 0;
    for (size_t j = 0; j < o->n; j++)
        if (!o->v[j].gone)
            o->v[k++] = o->v[j];
    o->n = k;
    o->ngone = 0;
    tft_u64map_clear(&o->ix);
    for (size_t j = 0; j < o->n; j++) {
        open_key key = {o, o->v[j].space, o->v[j].q};
        void *v;
        int rc = tft_u64map_insert(&o->ix, tft_u64map_hash2(key.space, key.q), open_eq, &key, &v);
        if (rc < 0)
            return rc;
        o->v[j].prev_same = rc == 0 ? (int32_t)*(uint32_t *)v : -1;
        *(uint32_t *)v = (uint32_t)j;
    }
    return 0;
}

static void open_add(p2p_rank *o, const tft_rec_collective *cr, int64_t step)
{
    if (o->overflow)
        return;
    if (o->n == o->cap) {
        size_t ncap = o->cap ? o->cap * 2 : 16;
        p2p_open *n = ncap <= DESYNC_MAX_OPEN ? realloc(o->v, ncap * sizeof(*n)) : NULL;
        if (!n) {
            o->overflow = true;
            return;
        }
        o->v = n;
        o->cap = ncap;
    }
    open_key key = {o, cr->comm, cr->coll_seq};
    void *v;
    int rc = tft_u64map_insert(&o->ix, tft_u64map_hash2(cr->comm, cr->coll_seq), open_eq, &key, &v);
    if (rc < 0) {
        o->overflow = true;
        return;
    }
    o->v[o->n] = (p2p_open){.space = cr->comm, .q = cr->coll_seq, .count = cr->count, .name = cr->name,
                            .step = step, .seq = cr->h.seq, .me = cr->rank, .peer = cr->root,
                            .tag = tft_rec_coll_tag(cr), .type = cr->type, .dtype = cr->dtype,
                            .prev_same = rc == 0 ? (int32_t)*(uint32_t *)v : -1};
    *(uint32_t *)v = (uint32_t)o->n++;
}

/* The call left: its newest open call of the same (space, q), O(1). */
static void open_remove(p2p_rank *o, const tft_rec_collective *cr)
{
    open_key key = {o, cr->comm, cr->coll_seq};
    uint32_t *ix = tft_u64map_find(&o->ix, tft_u64map_hash2(cr->comm, cr->coll_seq), open_eq, &key);
    if (!ix)
        return;
    p2p_open *x = &o->v[*ix];
    x->gone = true;
    o->ngone++;
    if (x->prev_same >= 0)
        *ix = (uint32_t)x->prev_same;
    else
        tft_u64map_remove(&o->ix, ix);
    if (o->ngone > 64 && o->ngone * 2 > o->n && desync_open_compact(o) < 0)
        o->overflow = true;
}

/* A send or receive record of rank file i: counters, open calls. */
void desync_on_p2p(desync_state *s, int i, const tft_rec_collective *cr, int64_t step)
{
    int32_t tag = tft_rec_coll_tag(cr);
    bool send = cr->type == TFT_COLL_SEND, enter = cr->h.flags & TFT_COLL_FLAG_ENTER,
         exit = cr->h.flags & TFT_COLL_FLAG_EXIT;
    if (enter) {
        pair_ent *p = send ? pair_get(s, cr->comm, cr->rank, cr->root, tag)
                           : pair_get(s, cr->comm, cr->root, cr->rank, tag);
        if (p && send) {
            p->sends++;
            p->last_count = cr->count;
            p->last_dtype = cr->dtype;
        } else if (p) {
            p->posted++;
        }
        if (!exit)
            open_add(&s->open[i], cr, step);
    }
    if (exit) {
        if (!send) { /* the actual source and tag, from the status */
            pair_ent *p = pair_get(s, cr->comm, cr->root, cr->rank, tag);
            if (p)
                p->done++;
        }
        if (!enter)
            open_remove(&s->open[i], cr);
    }
}
