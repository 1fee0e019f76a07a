/*
 * desync_p2p_judge.c — at the end of the trace, the point-to-point call
 * each rank is blocked in: the first of its open calls (of the first
 * DESYNC_OPEN_JUDGED) for which the counters hold no matching message or
 * receive. The sums each call needs are asked first and filled in one pass
 * over the counters, so that judging costs O(open calls + counters).
 * Reported as DS_P2P (desync_p2p_peer.c).
 */
#include "desync_internal.h"

#include <errno.h>
#include <stdlib.h>

/* Sums the judging needs, one per (kind, space, src, dst, tag) asked,
 * filled in one pass over the point-to-point counters (p2p_sums): a rank's
 * open calls are judged in O(1) each, whatever the number of counters. */
enum { Q_RECV = 1, Q_POSTED = 2 };
#define SRC_ALL INT32_MIN       /* any source (a receive from any rank) */
#define SRC_NEG (INT32_MIN + 1) /* the receives posted for any source (src < 0) */
#define TAG_ALL INT32_MIN       /* any tag */

typedef struct p2p_query {
    uint64_t space;
    int32_t src, dst, tag;
    int kind;
    int64_t sum;
} p2p_query;

typedef struct p2p_sums {
    p2p_query *q;
    size_t n, cap;
    tft_u64map ix;            /* query_hash -> index in q (desync_ix_init) */
} p2p_sums;

typedef struct query_key {
    const p2p_sums *ps;
    const p2p_query *want;
} query_key;

static bool query_eq(const void *ctx, const void *val)
{
    const query_key *k = ctx;
    const p2p_query *a = &k->ps->q[*(const uint32_t *)val], *b = k->want;
    return a->space == b->space && a->src == b->src && a->dst == b->dst && a->tag == b->tag && a->kind == b->kind;
}

static uint64_t query_hash(const p2p_query *w)
{
    return tft_u64map_hash2(w->space ^ (uint64_t)w->kind << 60,
                   ((uint64_t)(uint32_t)w->src << 32 | (uint32_t)w->dst) ^ (uint64_t)(uint32_t)w->tag * 0x51ull);
}

/* The query w in ps (added when add), NULL when absent or no memory. */
static p2p_query *query_get(p2p_sums *ps, const p2p_query *w, bool add)
{
    query_key key = {ps, w};
    uint64_t h = query_hash(w);
    if (!add) {
        const uint32_t *ix = tft_u64map_find(&ps->ix, h, query_eq, &key);
        return ix ? &ps->q[*ix] : NULL;
    }
    void *v;
    int rc = tft_u64map_insert(&ps->ix, h, query_eq, &key, &v);
    if (rc < 0)
        return NULL;
    if (rc == 0)
        return &ps->q[*(uint32_t *)v];
    if (ps->n == ps->cap) {
        size_t ncap = ps->cap ? ps->cap * 2 : 256;
        p2p_query *nq = realloc(ps->q, ncap * sizeof(*nq));
        if (!nq) {
            tft_u64map_remove(&ps->ix, v);
            return NULL;
        }
        ps->q = nq;
        ps->cap = ncap;
    }
    ps->q[ps->n] = *w;
    ps->q[ps->n].sum = 0;
    *(uint32_t *)v = (uint32_t)ps->n;
    return &ps->q[ps->n++];
}

/* The sums open call o needs (what p2p_satisfied asks). */
static int p2p_ask(p2p_sums *ps, const p2p_open *o)
{
    if (o->type == TFT_COLL_RECV) {
        p2p_query w = {o->space, o->peer < 0 ? SRC_ALL : o->peer, o->me, o->tag == TFT_TAG_ANY ? TAG_ALL : o->tag,
                       Q_RECV, 0};
        return query_get(ps, &w, true) ? 0 : -ENOMEM;
    }
    int32_t srcs[2] = {o->me < 0 ? SRC_NEG : o->me, SRC_NEG}, tags[2] = {o->tag, TFT_TAG_ANY};
    for (int a = 0; a < (o->me < 0 ? 1 : 2); a++)
        for (int b = 0; b < (o->tag == TFT_TAG_ANY ? 1 : 2); b++) {
            p2p_query w = {o->space, srcs[a], o->peer, tags[b], Q_POSTED, 0};
            if (!query_get(ps, &w, true))
                return -ENOMEM;
        }
    return 0;
}

/* One pass over the counters into the sums asked. */
static void p2p_fill(const desync_state *s, p2p_sums *ps)
{
    const pair_ent *p;
    for (size_t pos = 0; ps->n && (p = tft_u64map_next(&s->pairs, &pos, NULL));) {
        if (p->src >= 0) { /* messages sent and not yet received, for the receives */
            int32_t srcs[2] = {p->src, SRC_ALL}, tags[2] = {p->tag, TAG_ALL};
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 2; b++) {
                    p2p_query w = {p->space, srcs[a], p->dst, tags[b], Q_RECV, 0};
                    p2p_query *x = query_get(ps, &w, false);
                    if (x)
                        x->sum += (int64_t)p->sends - (int64_t)p->done;
                }
        }
        p2p_query w = {p->space, p->src < 0 ? SRC_NEG : p->src, p->dst, p->tag, Q_POSTED, 0};
        p2p_query *x = query_get(ps, &w, false);
        if (x)
            x->sum += p->posted;
    }
}

/* Whether open call o of a rank can still complete from what the trace
 * holds: a receive for which more matching messages were sent than it
 * (with its rank's other receives) took, a send for which its peer posted
 * as many matching receives as were sent. The sums come from p2p_fill. */
static bool p2p_satisfied(const desync_state *s, p2p_sums *ps, const p2p_open *o)
{
    int64_t have = 0;
    if (o->type == TFT_COLL_RECV) {
        p2p_query w = {o->space, o->peer < 0 ? SRC_ALL : o->peer, o->me, o->tag == TFT_TAG_ANY ? TAG_ALL : o->tag,
                       Q_RECV, 0};
        const p2p_query *x = query_get(ps, &w, false);
        return x && x->sum > 0;
    }
    int32_t srcs[2] = {o->me < 0 ? SRC_NEG : o->me, SRC_NEG}, tags[2] = {o->tag, TFT_TAG_ANY};
    for (int a = 0; a < (o->me < 0 ? 1 : 2); a++)
        for (int b = 0; b < (o->tag == TFT_TAG_ANY ? 1 : 2); b++) {
            p2p_query w = {o->space, srcs[a], o->peer, tags[b], Q_POSTED, 0};
            const p2p_query *x = query_get(ps, &w, false);
            have += x ? x->sum : 0;
        }
    const pair_ent *p = desync_pair_find(s, o->space, o->me, o->peer, o->tag);
    if (p)
        have -= p->sends;
    return have >= 0;
}

/* Index in s->open[i] of the call rank i is blocked in, -1 none: its
 * first open call (of the first DESYNC_OPEN_JUDGED) that cannot complete. */
static int p2p_blocked(const desync_state *s, p2p_sums *ps, int i)
{
    const p2p_rank *r = &s->open[i];
    if (r->overflow || s->pairs_overflow)
        return -1;
    for (size_t k = 0; k < r->n && k < DESYNC_OPEN_JUDGED; k++)
        if (!p2p_satisfied(s, ps, &r->v[k]))
            return (int)k;
    return -1;
}

/* The end of the trace: every rank blocked in point-to-point. */
int desync_p2p_judge(desync_state *s)
{
    int n = s->nranks;
    int *blocked = malloc((size_t)n * sizeof(*blocked));
    s->p2p = calloc((size_t)n, sizeof(*s->p2p));
    if (!blocked || !s->p2p) {
        free(blocked);
        return -ENOMEM;
    }
    p2p_sums ps = {0};
    desync_ix_init(&ps.ix);
    int e = 0;
    for (int i = 0; !e && i < n; i++) { /* the calls judged, and the sums they need */
        p2p_rank *r = &s->open[i];
        if (r->ngone && desync_open_compact(r) < 0)
            r->overflow = true;
        for (size_t k = 0; !e && !r->overflow && !s->pairs_overflow && k < r->n && k < DESYNC_OPEN_JUDGED; k++)
            e = p2p_ask(&ps, &r->v[k]);
    }
    if (!e) {
        p2p_fill(s, &ps);
        e = desync_pairs_sort(s);
    }
    for (int i = 0; !e && i < n; i++)
        blocked[i] = p2p_blocked(s, &ps, i);
    for (int i = 0; !e && i < n; i++)
        if (blocked[i] >= 0 && !desync_send_peer_stuck(s, i, blocked[i], blocked))
            blocked[i] = -1;
    for (int i = 0; !e && i < n; i++)
        if (blocked[i] >= 0)
            desync_p2p_report(s, i, &s->open[i].v[blocked[i]], blocked, &s->p2p[s->np2p++]);
    free(blocked);
    free(ps.q);
    tft_u64map_free(&ps.ix);
    return e;
}
