/*
 * dump_coll.c — collective calls in a summary pass: ENTER records (written
 * when a rank enters the call) are matched with their EXIT records by
 * (communicator, coll_seq) within the rank; what stays unmatched at the end
 * of a rank file is a call the rank never returned from. Memory: one entry
 * per call in flight (a handful, unless the rank hung).
 */
#include "dump_internal.h"

#include <stdlib.h>

void coll_rank_begin(coll_track *t) { t->rank_start = t->n; }

static void open_push(coll_track *t, const tft_rec_collective *c, int idx)
{
    if (t->n == t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 16;
        coll_open *nv = realloc(t->open, ncap * sizeof(*nv));
        if (!nv) {
            t->lost++;
            return;
        }
        t->open = nv;
        t->cap = ncap;
    }
    t->open[t->n++] = (coll_open){c->comm, c->coll_seq, c->name, c->h.step, idx};
}

/* Removes this rank's unmatched ENTER of the same call; false when none. */
static bool open_match(coll_track *t, const tft_rec_collective *c)
{
    for (size_t i = t->n; i > t->rank_start; i--) {
        coll_open *o = &t->open[i - 1];
        if (o->comm == c->comm && o->coll_seq == c->coll_seq) {
            for (size_t k = i; k < t->n; k++) /* keep the order */
                t->open[k - 1] = t->open[k];
            t->n--;
            return true;
        }
    }
    return false;
}

void coll_note(coll_track *t, const tft_rec_collective *c, int idx)
{
    uint16_t f = c->h.flags & (TFT_COLL_FLAG_ENTER | TFT_COLL_FLAG_EXIT);
    if (f == TFT_COLL_FLAG_ENTER) {
        open_push(t, c, idx);
        return;
    }
    if (f & TFT_COLL_FLAG_EXIT)
        open_match(t, c);
    t->calls++;
}

uint64_t coll_calls(const coll_track *t) { return t->calls + t->n + t->lost; }

void coll_free(coll_track *t)
{
    free(t->open);
    *t = (coll_track){0};
}
