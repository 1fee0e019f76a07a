/*
 * desync_window.c — the collectives of each communicator aligned by
 * coll_seq: a window of the entries not yet complete on every rank
 * ([base, top), a power-of-two ring), each entry holding one slot per rank
 * file that records on the communicator. The slots of all windows together
 * stay under DESYNC_SLOT_BUDGET bytes; past it the callers judge old
 * entries instead of growing (desync_collectives.c).
 */
#include "desync_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The state of communicator comm, NULL none yet. */
comm_state *desync_comm_find(const desync_state *s, uint64_t comm)
{
    for (int k = 0; k < s->ncomms; k++)
        if (s->comms[k].comm == comm)
            return &s->comms[k];
    return NULL;
}

/* The state of communicator comm, added (empty window) when new; NULL
 * past DESYNC_MAX_COMMS or out of memory. */
comm_state *desync_comm_get(desync_state *s, uint64_t comm)
{
    comm_state *c = desync_comm_find(s, comm);
    if (c)
        return c;
    if (s->ncomms == DESYNC_MAX_COMMS)
        return NULL;
    if (s->ncomms == s->comms_cap) {
        int ncap = s->comms_cap ? s->comms_cap * 2 : 8;
        comm_state *n = realloc(s->comms, (size_t)ncap * sizeof(*n));
        if (!n)
            return NULL;
        s->comms = n;
        s->comms_cap = ncap;
    }
    c = &s->comms[s->ncomms];
    memset(c, 0, sizeof(*c));
    c->comm = comm;
    c->member = calloc((size_t)s->nranks, 1);
    c->local = malloc((size_t)s->nranks * sizeof(*c->local));
    if (!c->member || !c->local) {
        free(c->member);
        free(c->local);
        return NULL;
    }
    for (int i = 0; i < s->nranks; i++)
        c->local[i] = -1;
    const comm_def *d = desync_def_find(s, comm);
    if (d && d->inter) {
        c->inter = true;
        c->size = d->size;
    }
    s->ncomms++;
    return c;
}

/* Entry q of c's window (q in [base, top)). */
coll_entry *desync_entry_at(comm_state *c, uint64_t q) { return &c->win[q & (c->cap - 1)]; }

/* Entry q's slots, one per rank file with records on c (c->local). */
coll_slot *desync_slots_at(comm_state *c, uint64_t q)
{
    return &c->slots[(size_t)(q & (c->cap - 1)) * (size_t)c->wcap];
}

/* Entry q's slots by rank file index (rank files without records on c:
 * empty), for the checks: s->dense, valid until the next call. */
const coll_slot *desync_entry_dense(const desync_state *s, comm_state *c, uint64_t q)
{
    dense_view *dv = s->dense;
    if (dv->owner >= 0) { /* O(members), not O(rank files) */
        const comm_state *o = &s->comms[dv->owner];
        for (int k = 0; k < o->width; k++)
            memset(&dv->v[o->global[k]], 0, sizeof(coll_slot));
    }
    const coll_slot *sl = desync_slots_at(c, q);
    for (int k = 0; k < c->width; k++)
        dv->v[c->global[k]] = sl[k];
    dv->owner = (int)(c - s->comms);
    return dv->v;
}

/* Doubles c's window. -ENOSPC when the slots of all windows would pass
 * DESYNC_SLOT_BUDGET (the caller judges old entries instead). */
int desync_window_grow(desync_state *s, comm_state *c)
{
    size_t ncap = c->cap ? c->cap * 2 : 16;
    size_t grow_by = (ncap - c->cap) * (size_t)c->wcap * sizeof(coll_slot);
    if (s->slot_bytes + grow_by > DESYNC_SLOT_BUDGET)
        return -ENOSPC;
    coll_entry *nw = calloc(ncap, sizeof(*nw));
    coll_slot *ns = calloc(ncap * (size_t)c->wcap, sizeof(*ns));
    if (!nw || !ns) {
        free(nw);
        free(ns);
        return -ENOMEM;
    }
    for (uint64_t q = c->base; q < c->top; q++) {
        nw[q & (ncap - 1)] = *desync_entry_at(c, q);
        memcpy(&ns[(size_t)(q & (ncap - 1)) * (size_t)c->wcap], desync_slots_at(c, q),
               (size_t)c->wcap * sizeof(*ns));
    }
    free(c->win);
    free(c->slots);
    c->win = nw;
    c->slots = ns;
    c->cap = ncap;
    s->slot_bytes += grow_by;
    return 0;
}

/* The slot of rank file i in c's entries, added (widening every entry)
 * when i records on c for the first time. -ENOSPC past DESYNC_SLOT_BUDGET. */
int desync_comm_slot(desync_state *s, comm_state *c, int i)
{
    if (c->local[i] >= 0)
        return c->local[i];
    if (c->width == c->wcap) {
        int nw = c->wcap ? c->wcap * 2 : 4;
        if (nw > s->nranks)
            nw = s->nranks;
        size_t grow_by = c->cap * (size_t)(nw - c->wcap) * sizeof(coll_slot);
        if (s->slot_bytes + grow_by > DESYNC_SLOT_BUDGET)
            return -ENOSPC;
        int *ng = realloc(c->global, (size_t)nw * sizeof(*ng));
        if (!ng)
            return -ENOMEM;
        c->global = ng;
        int *no = realloc(c->order, (size_t)nw * sizeof(*no));
        if (!no)
            return -ENOMEM;
        c->order = no;
        if (c->cap) {
            coll_slot *ns = calloc(c->cap * (size_t)nw, sizeof(*ns));
            if (!ns)
                return -ENOMEM;
            for (size_t p = 0; p < c->cap; p++)
                memcpy(&ns[p * (size_t)nw], &c->slots[p * (size_t)c->wcap], (size_t)c->wcap * sizeof(*ns));
            free(c->slots);
            c->slots = ns;
        }
        c->wcap = nw;
        s->slot_bytes += grow_by;
    }
    c->global[c->width] = i;
    c->local[i] = c->width;
    int k = c->width;
    while (k > 0 && c->order[k - 1] > i) { /* insertion: members join one at a time */
        c->order[k] = c->order[k - 1];
        k--;
    }
    c->order[k] = i;
    return c->width++;
}

/* Frees entry q and drops judged entries from the bottom of the window
 * (an entry's slots are cleared when it is used again). */
void desync_entry_close(comm_state *c, uint64_t q)
{
    desync_entry_at(c, q)->used = false;
    while (c->base < c->top && !desync_entry_at(c, c->base)->used)
        c->base++;
}
