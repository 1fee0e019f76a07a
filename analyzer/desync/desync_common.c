/*
 * desync_common.c — what every part of the desync analysis shares: rank
 * files and their world ranks, the strings the extracts bring, small text
 * helpers, index maps, program order of stuck calls, and a finding's
 * initial fields and evidence (desync_internal.h). Calls nothing else of
 * the room.
 */
#include "desync_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The world rank of rank file i. */
int desync_rank_id(const desync_state *s, int i) { return tft_trace_rank_id(s->t, i); }

/* Index of the rank file of world rank w, -1 none. */
int desync_rank_index(const desync_state *s, int w)
{
    for (int i = 0; i < s->nranks; i++)
        if (desync_rank_id(s, i) == w)
            return i;
    return -1;
}

/* The text of string id (the extracts bring every string an entry names;
 * ids are hashes of the text, so one table serves all ranks). */
const char *desync_str_of(const desync_state *s, uint64_t id)
{
    const uint64_t *off = tft_u64map_find(&s->strs, id, NULL, NULL);
    return off ? s->pool + *off : "?";
}

/* Keeps txt[0, n) as the text of string id (a SPILL_STR entry), once.
 * 0, or -ENOMEM; past the table's limit the text is dropped (shown "?"). */
int desync_str_add(desync_state *s, uint64_t id, const char *txt, size_t n)
{
    if (tft_u64map_find(&s->strs, id, NULL, NULL))
        return 0;
    if (s->pool_len + n + 1 > s->pool_cap) {
        size_t nc = s->pool_cap ? s->pool_cap : 4096;
        while (nc < s->pool_len + n + 1)
            nc *= 2;
        char *p = realloc(s->pool, nc);
        if (!p)
            return -ENOMEM;
        s->pool = p;
        s->pool_cap = nc;
    }
    void *v;
    int e = tft_u64map_insert(&s->strs, id, NULL, NULL, &v);
    if (e < 0)
        return e == -ENOSPC ? 0 : e;
    memcpy(s->pool + s->pool_len, txt, n);
    s->pool[s->pool_len + n] = '\0';
    *(uint64_t *)v = s->pool_len;
    s->pool_len += n + 1;
    return 0;
}

/* "step N", or "no step" for records outside any step. */
const char *desync_step_text(int64_t step, char *buf, size_t len)
{
    if (step == TFT_STEP_NONE)
        snprintf(buf, len, "no step");
    else
        snprintf(buf, len, "step %" PRId64, step);
    return buf;
}

/* Appends s to the NUL-terminated buf of len bytes, cut to fit. */
void desync_str_append(char *buf, size_t len, const char *s)
{
    size_t o = strlen(buf), n = strlen(s);
    if (o + 1 >= len)
        return;
    if (n > len - o - 1)
        n = len - o - 1;
    memcpy(buf + o, s, n);
    buf[o + n] = '\0';
}

/* Adds world rank `rank` to d's ranks at fault (the first 16 are kept). */
void desync_add_rank(desync_finding *d, int rank)
{
    if (d->nranks < (int)(sizeof(d->ranks) / sizeof(d->ranks[0])))
        d->ranks[d->nranks++] = rank;
}

/* An index map: tft_u64map_hash2 of a longer key -> a u32 index into the array
 * that holds the longer key (eq compares it), at most half full. */
void desync_ix_init(tft_u64map *m)
{
    tft_u64map_init(m, &(tft_u64map_opts){.vsize = sizeof(uint32_t), .min_cap = 256, .hashed = true});
}

/* Whether st comes before (step, seq, t_enter) in program order: by step,
 * then by op sequence number (ranks of one SPMD program number their ops
 * alike, and unlike times this holds across hosts and under load), then,
 * without sequence numbers, by enter time on one host. */
bool desync_stuck_before(const stuck_at *st, int64_t step, int64_t seq, uint64_t t_enter, bool one_host)
{
    if (!st->valid)
        return false;
    if (st->step != step)
        return st->step < step;
    if (st->seq != TFT_SEQ_NONE && seq != TFT_SEQ_NONE)
        return st->seq < seq;
    return one_host && st->t_enter < t_enter;
}

/* d, zeroed, as a finding of `kind` on entry q of c at (step, seq). */
void desync_finding_init(desync_finding *d, const comm_state *c, uint64_t q, int64_t step, int64_t seq, int kind)
{
    memset(d, 0, sizeof(*d));
    d->comm = c->comm;
    d->coll_seq = q;
    d->step = step;
    d->seq = seq;
    d->kind = kind;
    d->peer = -1;
    d->tag = TFT_TAG_NONE;
}

/* Stores d into f with the evidence in s->inv_tmp / s->miss_tmp (then:
 * the hang's "ranks ... waited in ..." or NULL). Allocation failures leave
 * the finding without evidence (it is then never linked). */
void desync_found_set(const desync_state *s, found *f, const desync_finding *d, const char *then)
{
    size_t n = (size_t)s->nranks;
    if (!f->inv)
        f->inv = malloc(n);
    if (!f->miss)
        f->miss = malloc(n);
    if (f->inv)
        memcpy(f->inv, s->inv_tmp, n);
    if (f->miss)
        memcpy(f->miss, s->miss_tmp, n);
    f->valid = true;
    f->d = *d;
    f->peer_idx = -1;
    snprintf(f->then, sizeof(f->then), "%s", then ? then : "");
}
