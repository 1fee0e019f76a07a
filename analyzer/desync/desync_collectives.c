/*
 * desync_collectives.c — the COMM and COLLECTIVE records of the extracts,
 * as they come in the merged order: COMM records define communicators
 * (desync_comm_names.c); every COLLECTIVE ENTER or EXIT fills its rank's
 * slot of the entry (communicator, coll_seq) of the window
 * (desync_window.c), and an entry every member has left is judged
 * (desync_checks.c) and closed. Point-to-point calls go elsewhere
 * (desync_p2p.c).
 */
#include "desync_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A COMM record of rank file i. */
void desync_on_comm(desync_state *s, int i, const tft_rec_comm *cr)
{
    comm_def *d = desync_def_get(s, cr->comm);
    if (!d)
        return;
    bool inter = (cr->h.flags & TFT_COMM_FLAG_INTER) != 0;
    /* listed members: all of them (an intercommunicator: its local group of
     * cr->size first, then the remote one) */
    if (cr->n_members > 0 && !d->listed && cr->n_members <= DESYNC_MAX_MEMBERS &&
        (inter ? cr->size > 0 && (uint32_t)cr->size <= cr->n_members : cr->n_members == (uint32_t)cr->size)) {
        free(d->mem);
        d->mem = malloc(cr->n_members * sizeof(*d->mem));
        if (d->mem) {
            memcpy(d->mem, cr->members, cr->n_members * sizeof(*d->mem));
            d->size = (int)cr->n_members;
            d->local = inter ? cr->size : d->size;
            d->inter = inter;
            d->listed = true;
        } else {
            d->size = 0;
        }
    } else if (!inter && cr->n_members == 0) {
        desync_def_assemble(s, d, i, cr->rank, cr->size);
    }
    comm_state *c = desync_comm_find(s, cr->comm);
    if (c && d->inter) {
        c->inter = true;
        c->size = d->size > c->size ? d->size : c->size;
    }
}

/* Judges the oldest entry of c as if the trace ended, and drops it. */
static void entry_evict(const desync_state *s, comm_state *c, uint64_t q)
{
    if (desync_entry_at(c, c->base)->used)
        desync_entry_check(s, c, c->base, true, NULL);
    desync_entry_close(c, c->base);
    if (c->base == c->top)
        c->base = c->top = q;
}

static void slot_fill(const desync_state *s, int i, coll_slot *x, const tft_rec_collective *cr, int64_t step)
{
    if (!x->has_fields) {
        x->has_fields = 1;
        x->type = cr->type;
        x->dtype = cr->dtype;
        x->redop = cr->redop;
        x->root = cr->root;
        x->count = cr->count;
        x->name = cr->name;
        x->step = step;
        x->seq = cr->h.seq;
    }
    if (!x->t_enter) {
        x->t_enter = cr->t_enter;
        x->rt = s->clk ? s->clk[i].real_minus_mono : 0;
        x->rt_err = s->clk ? core_clock_pair_error(&s->clk[i]) : UINT64_MAX;
    }
    if (cr->h.flags & TFT_COLL_FLAG_ENTER)
        x->entered = 1;
    if (cr->h.flags & TFT_COLL_FLAG_EXIT) {
        x->exited = 1;
        /* its result: its rank's extract resolved it among the rank's last
         * tensors (core_spill.c) */
        if (cr->result) {
            x->fp = s->cur_fp;
            if (s->cur_has_fp)
                x->has_fp = 1;
        }
    }
}

/* Records name MPI_COMM_WORLD by communicator rank = world rank: its
 * members without a COMM record that lists them (tftrain, 1.0/1.1). */
static void world_member(desync_state *s, int i, const tft_rec_collective *cr)
{
    if (cr->comm != s->world || cr->nranks <= 0 || cr->nranks > s->nranks)
        return;
    comm_def *d = desync_def_get(s, cr->comm);
    if (d)
        desync_def_assemble(s, d, i, cr->rank, cr->nranks);
}

/* Makes room for entry q in c's window: judges the oldest entries when the
 * window would pass DESYNC_WINDOW_MAX entries or the slot budget, and
 * marks the coll_seq numbers skipped up to q unused. 1 when q has its
 * place, 0 when it is left out (damaged, already judged, an implausible
 * jump, no room), or a negative errno. */
static int window_reach(desync_state *s, comm_state *c, uint64_t q)
{
    /* The recorder's sequence numbers are int64 tokens >= 0: anything above
     * is damage, and would overflow the window arithmetic below. */
    if (q > (uint64_t)INT64_MAX || q < c->base || (c->fin.valid && q > c->fin.d.coll_seq))
        return 0;
    if (c->base == c->top)
        c->base = c->top = q;
    else if (q >= c->top + DESYNC_WINDOW_MAX)
        return 0; /* an implausible jump: leave it out */
    while (q >= c->base + DESYNC_WINDOW_MAX) /* judge the oldest as if the trace ended */
        entry_evict(s, c, q);
    while (q >= c->base + c->cap) {
        int e = desync_window_grow(s, c);
        if (e == -ENOSPC && !c->cap)
            return 0; /* no window left for another communicator: not judged */
        if (e == -ENOSPC) { /* the windows hold DESYNC_SLOT_BUDGET: this one stops growing */
            while (q >= c->base + c->cap)
                entry_evict(s, c, q);
            break;
        }
        if (e)
            return e;
    }
    if (q >= c->top) {
        for (uint64_t k = c->top; k <= q; k++) /* coll_seq numbers skipped so far stay unused */
            desync_entry_at(c, k)->used = false;
        c->top = q + 1;
    }
    return 1;
}

/* A COLLECTIVE ENTER or EXIT of rank file i (step: its step) into its
 * entry; the entry is judged and closed once every member left it. 0, or
 * -ENOMEM (past the limits the record is left out, not an error). */
int desync_on_collective(desync_state *s, int i, const tft_rec_collective *cr, int64_t step)
{
    if (!(cr->h.flags & (TFT_COLL_FLAG_ENTER | TFT_COLL_FLAG_EXIT)))
        return 0;
    comm_state *c = desync_comm_get(s, cr->comm);
    if (!c)
        return s->ncomms == DESYNC_MAX_COMMS ? 0 : -ENOMEM;
    world_member(s, i, cr);
    int li = desync_comm_slot(s, c, i);
    if (li == -ENOSPC)
        return 0; /* the windows hold DESYNC_SLOT_BUDGET: this rank is not judged here */
    if (li < 0)
        return li;
    c->member[i] = 1;
    if (cr->nranks > c->size && !c->inter)
        c->size = cr->nranks;
    uint64_t q = cr->coll_seq;
    int room = window_reach(s, c, q);
    if (room <= 0)
        return room;
    coll_entry *e = desync_entry_at(c, q);
    coll_slot *x = &desync_slots_at(c, q)[li];
    if (!e->used) {
        *e = (coll_entry){.used = true, .coll_seq = q};
        memset(desync_slots_at(c, q), 0, (size_t)c->wcap * sizeof(coll_slot));
    }
    bool was_out = x->exited;
    slot_fill(s, i, x, cr, step);
    if (x->exited && !was_out)
        e->nexit++;
    int expect = c->size > 0 && c->size < s->nranks ? c->size : s->nranks;
    if (e->nexit >= expect) {
        desync_entry_check(s, c, q, false, NULL);
        desync_entry_close(c, q);
    }
    return 0;
}
