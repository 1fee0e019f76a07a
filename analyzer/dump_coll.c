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
#include <string.h>

static size_t fly_home(uint64_t comm, uint64_t q, size_t mask)
{
    uint64_t h = comm ^ (q * 0x9E3779B97F4A7C15ull);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (size_t)h & mask;
}

/* The slot of (comm, q): its entry, or the empty slot where it goes. */
static coll_open *fly_slot(coll_open *tab, size_t cap, uint64_t comm, uint64_t q)
{
    size_t mask = cap - 1;
    size_t i = fly_home(comm, q, mask);
    while (tab[i].count && !(tab[i].comm == comm && tab[i].coll_seq == q))
        i = (i + 1) & mask;
    return &tab[i];
}

static int fly_grow(coll_track *t)
{
    size_t ncap = t->fly_cap ? t->fly_cap * 2 : 64;
    coll_open *n = calloc(ncap, sizeof(*n));
    if (!n)
        return -ENOMEM;
    for (size_t i = 0; i < t->fly_cap; i++)
        if (t->fly[i].count)
            *fly_slot(n, ncap, t->fly[i].comm, t->fly[i].coll_seq) = t->fly[i];
    free(t->fly);
    t->fly = n;
    t->fly_cap = ncap;
    return 0;
}

/* Backward-shift deletion: no tombstones, probe chains stay short. */
static void fly_remove(coll_track *t, coll_open *e)
{
    size_t mask = t->fly_cap - 1, i = (size_t)(e - t->fly);
    t->fly[i].count = 0;
    t->fly_n--;
    for (size_t j = (i + 1) & mask; t->fly[j].count; j = (j + 1) & mask) {
        coll_open x = t->fly[j];
        t->fly[j].count = 0;
        *fly_slot(t->fly, t->fly_cap, x.comm, x.coll_seq) = x;
    }
}

void coll_rank_begin(coll_track *t)
{
    t->rank_lost = 0;
    t->serial = 0;
}

static void enter(coll_track *t, const tft_rec_collective *c, int idx)
{
    if (t->fly_cap) {
        coll_open *e = fly_slot(t->fly, t->fly_cap, c->comm, c->coll_seq);
        if (e->count) { /* the same call entered again: one more in flight */
            if (e->count < UINT32_MAX)
                e->count++;
            else
                t->lost++, t->rank_lost++;
            return;
        }
    }
    if (t->fly_n >= COLL_INFLIGHT_MAX || ((t->fly_n + 1) * 2 > t->fly_cap && fly_grow(t) < 0)) {
        t->lost++;
        t->rank_lost++;
        return;
    }
    coll_open *e = fly_slot(t->fly, t->fly_cap, c->comm, c->coll_seq);
    *e = (coll_open){.comm = c->comm, .coll_seq = c->coll_seq, .name = c->name, .step = c->h.step,
                     .idx = idx, .count = 1, .serial = t->serial++};
    t->fly_n++;
}

/* Removes this rank's unmatched ENTER of the same call; false when none. */
static bool exit_match(coll_track *t, const tft_rec_collective *c)
{
    if (!t->fly_cap)
        return false;
    coll_open *e = fly_slot(t->fly, t->fly_cap, c->comm, c->coll_seq);
    if (!e->count)
        return false;
    if (--e->count == 0)
        fly_remove(t, e);
    return true;
}

void coll_note(coll_track *t, const tft_rec_collective *c, int idx)
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

int coll_rank_end(coll_track *t, const tft_reader *r)
{
    int e = 0;
    size_t k = 0;
    for (size_t i = 0; i < t->fly_cap; i++) /* compact in place, then restore the rank's order */
        if (t->fly[i].count)
            t->fly[k++] = t->fly[i];
    if (k > 1)
        qsort(t->fly, k, sizeof(*t->fly), cmp_serial);
    for (size_t i = 0; i < k; i++) {
        coll_open *o = &t->fly[i];
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
        const char *txt = rec_string(r, o->name, b);
        o->named = txt != NULL;
        snprintf(o->name_text, sizeof(o->name_text), "%s", txt ? txt : "");
        t->open[t->n++] = *o;
    }
    if (t->fly_cap > 1024) { /* a rank with many calls in flight: the next starts small */
        free(t->fly);
        t->fly = NULL;
        t->fly_cap = 0;
    } else if (t->fly_cap) {
        memset(t->fly, 0, t->fly_cap * sizeof(*t->fly));
    }
    t->fly_n = 0;
    t->rank_lost = 0;
    return e;
}

uint64_t coll_calls(const coll_track *t)
{
    uint64_t n = t->calls + t->lost + t->unshown;
    for (size_t i = 0; i < t->n; i++)
        n += t->open[i].count;
    return n;
}

void coll_free(coll_track *t)
{
    free(t->open);
    free(t->fly);
    *t = (coll_track){0};
}
