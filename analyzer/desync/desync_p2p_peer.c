/*
 * desync_p2p_peer.c — the peer of a blocked point-to-point call: whether it
 * is stuck itself, what it did instead (messages with another tag, of
 * another size, nothing; a receive waiting for another tag), and the
 * DS_P2P finding that says so.
 */
#include "desync_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool tag_match(int32_t want, int32_t tag) { return want == TFT_TAG_ANY || want == tag; }

/* World rank of communicator rank k of the communicator owning space. */
static int p2p_world(const desync_state *s, uint64_t space, int k)
{
    const comm_def *d = desync_def_of_p2p(s, space);
    if (!d || !d->mem || k < 0 || k >= (d->inter ? d->local : d->size))
        return -1;
    return d->mem[k];
}

/* A send nobody posted a receive for is reported only when its peer is
 * stuck too (in a collective, or blocked in point-to-point): a peer that
 * went on may have taken the message with a call we do not see (a matched
 * probe, MPI_Mrecv, as mpi4py's comm.recv does). */
bool desync_send_peer_stuck(const desync_state *s, int i, int k, const int *blocked)
{
    const p2p_open *o = &s->open[i].v[k];
    if (o->type != TFT_COLL_SEND)
        return true;
    int pw = p2p_world(s, o->space, o->peer), pi = pw >= 0 ? desync_rank_index(s, pw) : -1;
    return pi >= 0 && (s->last_stuck[pi].valid || blocked[pi] >= 0);
}

/* Where rank index pi stands at the end, for "; rank P is itself ..." into buf:
 * its latest open collective or blocked point-to-point call; "" none. */
static void peer_state(const desync_state *s, int pi, const int *blocked, char *buf, size_t len)
{
    buf[0] = '\0';
    const stuck_at *c = &s->last_stuck[pi];
    const p2p_open *p = blocked[pi] >= 0 ? &s->open[pi].v[blocked[pi]] : NULL;
    bool coll = c->valid;
    if (coll && p && desync_stuck_before(c, p->step, p->seq, 0, false))
        coll = false;
    if (coll) {
        snprintf(buf, len, "; rank %d is itself waiting in %s (communicator " PH "%016" PRIx64
                 ", collective #%" PRIu64 ")", desync_rank_id(s, pi), desync_str_of(s, c->name), c->comm, c->q);
    } else if (p) {
        int w = p2p_world(s, p->space, p->peer);
        char who[32];
        if (w >= 0)
            snprintf(who, sizeof(who), "rank %d", w);
        else
            snprintf(who, sizeof(who), p->peer < 0 ? "any rank" : "communicator rank %d", (int)p->peer);
        snprintf(buf, len, "; rank %d is itself blocked in %s %s %s", desync_rank_id(s, pi),
                 desync_str_of(s, p->name), p->type == TFT_COLL_SEND ? "to" : "from", who);
    }
}

/* A counter's place in s->pair_order. */
typedef struct pair_key {
    uint64_t space;
    int32_t src, dst;
    uint32_t nth;             /* its place in the slot order of s->pairs */
    const pair_ent *p;
} pair_key;

/* s->pair_order: the counters by (space, src, dst), then slot. */
static int cmp_pair_key(const void *a, const void *b)
{
    const pair_key *x = a, *y = b;
    if (x->space != y->space)
        return x->space < y->space ? -1 : 1;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    return (x->nth > y->nth) - (x->nth < y->nth);
}

/* Sorts the counters into s->pair_order (for recv_instead). 0 or -ENOMEM. */
int desync_pairs_sort(desync_state *s)
{
    free(s->pair_order);
    s->pair_order = malloc((tft_u64map_count(&s->pairs) + 1) * sizeof(*s->pair_order));
    if (!s->pair_order)
        return -ENOMEM;
    size_t n = 0;
    const pair_ent *p;
    for (size_t pos = 0; (p = tft_u64map_next(&s->pairs, &pos, NULL)); n++)
        s->pair_order[n] = (pair_key){p->space, p->src, p->dst, (uint32_t)n, p};
    qsort(s->pair_order, n, sizeof(*s->pair_order), cmp_pair_key);
    return 0;
}

/* The first of s->pair_order at or after (space, src, dst). */
static size_t pairs_lower(const desync_state *s, uint64_t space, int32_t src, int32_t dst)
{
    size_t lo = 0, hi = tft_u64map_count(&s->pairs);
    pair_key want = {space, src, dst, 0, NULL};
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_pair_key(&s->pair_order[mid], &want) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* What the peer of receive o sent it instead, into buf: the counters of
 * (space, peer, me) only, at most DESYNC_INSTEAD_SCAN of them. */
static void recv_instead(const desync_state *s, const p2p_open *o, int pw, char *buf, size_t len)
{
    uint32_t same = 0, done = 0;
    const pair_ent *other = NULL, *mine = NULL;
    size_t npairs = tft_u64map_count(&s->pairs);
    size_t from = s->pair_order ? pairs_lower(s, o->space, o->peer, o->me) : npairs;
    for (size_t k = from; k < npairs && k < from + DESYNC_INSTEAD_SCAN; k++) {
        const pair_ent *p = s->pair_order[k].p;
        if (p->space != o->space || p->src != o->peer || p->dst != o->me)
            break;
        if (tag_match(o->tag, p->tag)) {
            same += p->sends;
            done += p->done;
            if (p->sends)
                mine = p;
        } else if (p->sends > p->done && !other) {
            other = p;
        }
    }
    if (other)
        snprintf(buf, len, "rank %d sent it %" PRIu64 " x %s with tag %d", pw, other->last_count,
                 tft_dtype_name(other->last_dtype), (int)other->tag);
    else if (mine && mine->last_count != o->count)
        snprintf(buf, len, "rank %d's last message with tag %d had %" PRIu64 " elements where this receive posted %"
                 PRIu64, pw, (int)mine->tag, mine->last_count, o->count);
    else if (same)
        snprintf(buf, len, "rank %d sent it nothing more (%u message%s with that tag, %u received)", pw, same,
                 same > 1 ? "s" : "", done);
    else
        snprintf(buf, len, "rank %d sent it nothing", pw);
}

/* What the peer of send o did instead, into buf. */
static void send_instead(const desync_state *s, int pi, const p2p_open *o, int me_w, int pw, char *buf, size_t len)
{
    const p2p_rank *r = &s->open[pi];
    for (size_t k = 0; k < r->n; k++) {
        const p2p_open *x = &r->v[k];
        if (x->space == o->space && x->type == TFT_COLL_RECV && x->peer == o->me && !tag_match(x->tag, o->tag)) {
            snprintf(buf, len, "rank %d posted no matching receive (it waits for tag %d from rank %d)", pw,
                     (int)x->tag, me_w);
            return;
        }
    }
    snprintf(buf, len, "rank %d posted no matching receive", pw);
}

/* The DS_P2P finding of rank index i, blocked in open call o. */
void desync_p2p_report(desync_state *s, int i, const p2p_open *o, const int *blocked, found *f)
{
    int me_w = desync_rank_id(s, i), pw = o->peer >= 0 ? p2p_world(s, o->space, o->peer) : -1;
    int pi = pw >= 0 ? desync_rank_index(s, pw) : -1;
    const comm_def *def = desync_def_of_p2p(s, o->space);
    desync_finding d;
    memset(&d, 0, sizeof(d));
    d.comm = def ? def->id : o->space;
    d.coll_seq = o->q;
    d.step = o->step;
    d.seq = o->seq;
    d.kind = DS_P2P;
    d.peer = pw;
    d.tag = o->tag;
    desync_add_rank(&d, me_w);
    char who[40], tag[24], instead[200], state[200] = "", st[32];
    bool recv = o->type == TFT_COLL_RECV;
    if (pw >= 0)
        snprintf(who, sizeof(who), "rank %d", pw);
    else
        snprintf(who, sizeof(who), o->peer < 0 ? "any rank" : "communicator rank %d", (int)o->peer);
    if (o->tag == TFT_TAG_ANY)
        snprintf(tag, sizeof(tag), "any tag");
    else
        snprintf(tag, sizeof(tag), "tag %d", (int)o->tag);
    if (pi < 0)
        snprintf(instead, sizeof(instead), "%s", o->peer < 0 ? "no rank sent it a matching message"
                                                             : "the peer's records are not in the trace");
    else if (recv)
        recv_instead(s, o, pw, instead, sizeof(instead));
    else
        send_instead(s, pi, o, me_w, pw, instead, sizeof(instead));
    if (pi >= 0)
        peer_state(s, pi, blocked, state, sizeof(state));
    snprintf(d.detail, sizeof(d.detail), "rank %d never completed %s %s %s (%s, %" PRIu64 " x %s) on communicator "
             PH "%016" PRIx64 " (%s): ", me_w, desync_str_of(s, o->name), recv ? "from" : "to", who, tag, o->count,
             tft_dtype_name(o->dtype), d.comm, desync_step_text(o->step, st, sizeof(st)));
    desync_str_append(d.detail, sizeof(d.detail), instead);
    desync_str_append(d.detail, sizeof(d.detail), state);
    memset(s->inv_tmp, 0, (size_t)s->nranks);
    memset(s->miss_tmp, 0, (size_t)s->nranks);
    s->inv_tmp[i] = s->miss_tmp[i] = 1;
    if (pi >= 0)
        s->inv_tmp[pi] = 1;
    desync_found_set(s, f, &d, NULL);
    f->peer_idx = pi;
}
