/*
 * dump_coll.c — collective calls in a summary pass: ENTER records (written
 * when a rank enters the call) are matched with their EXIT records by
 * (communicator, coll_seq) within the rank; what stays unmatched at the end
 * of a rank file is a call the rank never returned from.
 *
 * Memory and time (dump_internal.h): a hash of the calls in flight of the
 * rank being read, at most COLL_INFLIGHT_MAX entries, O(1) per record;
 * at most COLL_KEEP unfinished calls kept for the report.
 */
#include "dump_internal.h"

#include <errno.h>
#include <stdlib.h>

static bool fly_eq(const void *ctx, const void *val)
{
    const tft_rec_collective *c = ctx;
    const coll_open *o = val;
    return o->comm == c->comm && o->coll_seq == c->coll_seq;
}

void dump_coll_init(coll_track *t)
{
    *t = (coll_track){0};
    tft_u64map_init(&t->fly, &(tft_u64map_opts){.vsize = sizeof(coll_open), .max_n = COLL_INFLIGHT_MAX,
                                                .hashed = true});
}

void dump_coll_rank_begin(coll_track *t)
{
    t->rank_lost = 0;
    t->serial = 0;
}

static void enter(coll_track *t, const tft_rec_collective *c, int idx)
{
    void *v;
    int rc = tft_u64map_insert(&t->fly, tft_u64map_hash2(c->comm, c->coll_seq), fly_eq, c, &v);
    if (rc < 0) { /* beyond COLL_INFLIGHT_MAX, or no memory */
        t->lost++;
        t->rank_lost++;
        return;
    }
    coll_open *e = v;
    if (rc == 0) { /* the same call entered again: one more in flight */
        if (e->count < UINT32_MAX)
            e->count++;
        else
            t->lost++, t->rank_lost++;
        return;
    }
    *e = (coll_open){.comm = c->comm, .coll_seq = c->coll_seq, .name = c->name, .step = c->h.step,
                     .idx = idx, .count = 1, .serial = t->serial++};
}

/* Removes this rank's unmatched ENTER of the same call; false when none. */
static bool exit_match(coll_track *t, const tft_rec_collective *c)
{
    coll_open *e = tft_u64map_find(&t->fly, tft_u64map_hash2(c->comm, c->coll_seq), fly_eq, c);
    if (!e)
        return false;
    if (--e->count == 0)
        tft_u64map_remove(&t->fly, e);
    return true;
}

void dump_coll_note(coll_track *t, const tft_rec_collective *c, int idx)
{
    uint16_t f = c->h.flags & (TFT_COLL_FLAG_ENTER | TFT_COLL_FLAG_EXIT);
    if (f == TFT_COLL_FLAG_ENTER) {
        enter(t, c, idx);
        return;
    }
    if ((f & TFT_COLL_FLAG_EXIT) && !exit_match(t, c) && t->rank_lost) {
        t->rank_lost--; /* the EXIT of an ENTER that was not kept: one call, counted here */
        t->lost--;
    }
    t->calls++;
}

static int cmp_serial(const void *a, const void *b)
{
    const coll_open *x = a, *y = b;
    return (x->serial > y->serial) - (x->serial < y->serial);
}

int dump_coll_rank_end(coll_track *t, const tft_reader *r)
{
    int e = 0;
    size_t k;
    coll_open *fly = tft_u64map_drain(&t->fly, &k); /* then restore the rank's order */
    if (k > 1)
        qsort(fly, k, sizeof(*fly), cmp_serial);
    for (size_t i = 0; i < k; i++) {
        coll_open *o = &fly[i];
        if (t->n >= COLL_KEEP) {
            t->unshown += o->count;
            continue;
        }
        if (t->n == t->cap) {
            size_t ncap = t->cap ? t->cap * 2 : 16;
            coll_open *nv = realloc(t->open, ncap * sizeof(*nv));
            if (!nv) {
                t->lost += o->count;
                e = -ENOMEM;
                continue;
            }
            t->open = nv;
            t->cap = ncap;
        }
        char b[18];
        const char *txt = core_rec_string(r, o->name, b);
        o->named = txt != NULL;
        snprintf(o->name_text, sizeof(o->name_text), "%s", txt ? txt : "");
        t->open[t->n++] = *o;
    }
    if (t->fly.cap > 1024) /* a rank with many calls in flight: the next starts small */
        tft_u64map_free(&t->fly);
    t->rank_lost = 0;
    return e;
}

uint64_t dump_coll_calls(const coll_track *t)
{
    uint64_t n = t->calls + t->lost + t->unshown;
    for (size_t i = 0; i < t->n; i++)
        n += t->open[i].count;
    return n;
}

void dump_coll_free(coll_track *t)
{
    free(t->open);
    tft_u64map_free(&t->fly);
    dump_coll_init(t);
}
