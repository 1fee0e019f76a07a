/*
 * attach_stream.c — `tftrace attach` writes the calls into the trace as
 * they come, in bounded memory, whatever the duration.
 *
 * One thing needs waiting: the probes start in each process a moment
 * apart, so the first MPI_COMM_WORLD call recorded need not be the same
 * call on every rank. A collective's calls overlap in time on all ranks
 * (none returns before the last enters it): the offset d of a rank against
 * the reference rank (the first target whose MPI is probed) is the one
 * (-3..3) for which the reference's call j and the rank's call j+d overlap
 * for the first 32 calls. Until every rank has 35 world calls (or a queue
 * is full, or the attach ends), calls wait in their target's queue. Then:
 *  - world calls before the first one every rank recorded are left out;
 *  - a world call is written once every rank has recorded the same global
 *    call (a rank ahead of the others waits for them: a collective cannot
 *    run far ahead), so at the end the calls after the last one every rank
 *    recorded are still queued and left out;
 *  - other calls (allocations, NCCL, other communicators) are written as
 *    soon as no world call waits before them in their process's queue.
 * A queue holds at most QUEUE_MAX calls (~128 bytes each): when a rank
 * waits longer than that for another (it stopped calling MPI while the
 * others go on), its oldest call is written anyway, so memory stays
 * bounded and the sequence numbers may then count calls other ranks lack.
 *
 * The targets' table (att_T, att_NT), whose entries are mostly the queues,
 * is defined here; attach_cmd.c fills it.
 */
#ifdef TFT_HAVE_BPF   /* the whole file: BPF builds only */
#include "attach_cmd_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

att_target att_T[ATT_MAX_TARGETS];
int att_NT;

enum { QUEUE_MAX = 16384, ALIGN_CALLS = 32, ALIGN_SPAN = 3 };

static int aligned;
static long lo;       /* the first global world call every rank recorded */

static att_target *find(pid_t pid)
{
    for (int i = 0; i < att_NT; i++)
        if (att_T[i].pid == pid)
            return &att_T[i];
    return NULL;
}

static int overlap(const att_target *x, long j, const att_target *y, long k)
{
    return x->first_world_enter[j] < y->first_world_exit[k] && y->first_world_enter[k] < x->first_world_exit[j];
}

/* Aligns the world calls now: force when the queues cannot wait longer. */
static void try_align(int force)
{
    att_target *ref = NULL;
    int ready = 1;
    for (int i = 0; i < att_NT; i++) {
        att_target *t = &att_T[i];
        if (!t->mpi_probed)
            continue;
        ref = ref ? ref : t;
        ready &= t->nworld >= ALIGN_CALLS + ALIGN_SPAN;
    }
    if (!ready && !force)
        return;
    lo = 0;
    long nref = ref ? (long)(ref->nworld < ALIGN_CALLS ? ref->nworld : ALIGN_CALLS) : 0;
    for (int b = 0; b < att_NT; b++) {
        att_target *t = &att_T[b];
        if (!t->mpi_probed || t == ref)
            continue;
        long n = (long)(t->nworld < ALIGN_CALLS + ALIGN_SPAN ? t->nworld : ALIGN_CALLS + ALIGN_SPAN);
        long best = 0, best_ok = -1;
        for (long d = -ALIGN_SPAN; d <= ALIGN_SPAN; d++) {
            long ok = 0, tried = 0;
            for (long j = 0; j < nref; j++) {
                long k = j + d;
                if (k < 0 || k >= n)
                    continue;
                tried++;
                ok += overlap(ref, j, t, k);
            }
            if (tried && ok == tried && ok > best_ok)
                best = d, best_ok = ok;
        }
        t->off = best;
        if (-best > lo)
            lo = -best;
    }
    aligned = 1;
}

/* The global world calls every probed rank has recorded: [0, have()). */
static long have(void)
{
    long h = LONG_MAX;
    for (int i = 0; i < att_NT; i++)
        if (att_T[i].mpi_probed && (long)att_T[i].nworld - att_T[i].off < h)
            h = (long)att_T[i].nworld - att_T[i].off;
    return h;
}

static int all_have(long g) { return g < have(); }

static void pop(att_target *t)
{
    t->qhead = (t->qhead + 1) % t->qcap;
    t->qlen--;
}

/* Writes the head of t's queue while it may be written; force: also one
 * that would wait. hi: at the end, world calls from hi on are left out. */
static void drain(att_target *t, int force, long hi)
{
    while (t->qlen) {
        att_pending *p = &t->q[t->qhead];
        if (p->world) {
            if (!aligned && !force)
                return;
            long g = (long)p->k - t->off;
            if (g < lo || g >= hi) {
                t->dropped_edge++;
                pop(t);
                continue;
            }
            if (!force && !all_have(g))
                return;
        }
        att_write_call(t, &p->c);
        pop(t);
        if (force == 1)
            force = 0;   /* once: the one call that makes room */
    }
}

static int push(att_target *t, const att_pending *p)
{
    if (t->qlen == t->qcap) {
        if (t->qcap == QUEUE_MAX) {
            if (!aligned)
                try_align(1);
            drain(t, 1, LONG_MAX);
        } else {
            size_t cap = t->qcap ? t->qcap * 2 : 256;
            att_pending *v = malloc(cap * sizeof(*v));
            if (!v)
                return -1;
            for (size_t i = 0; i < t->qlen; i++)
                v[i] = t->q[(t->qhead + i) % t->qcap];
            free(t->q);
            t->q = v, t->qhead = 0, t->qcap = cap;
        }
    }
    t->q[(t->qhead + t->qlen++) % t->qcap] = *p;
    if (t->qlen > t->qmax)
        t->qmax = t->qlen;
    return 0;
}

void att_stream_call(void *ctx, const struct tft_acall *c)
{
    (void)ctx;
    att_target *t = find(c->pid);
    if (!t)
        return;
    att_pending p = {.c = *c, .world = t->mpi_probed && att_is_world(t, c)};
    if (p.world) {
        p.k = t->nworld++;
        if (p.k < ALIGN_CALLS + ALIGN_SPAN)
            t->first_world_enter[p.k] = c->t_enter, t->first_world_exit[p.k] = c->t_exit;
    }
    if (push(t, &p) < 0) {
        att_write_call(t, c);   /* out of memory: written unaligned rather than lost */
        return;
    }
    if (!aligned)
        try_align(0);
    /* a world call can only unblock the other ranks when it raises the
     * count every rank has (the one that was behind caught up) */
    static long had = LONG_MIN;
    long now = p.world && aligned ? have() : had;
    if (now == had) {
        drain(t, 0, LONG_MAX);
        return;
    }
    had = now;
    for (int i = 0; i < att_NT; i++)
        drain(&att_T[i], 0, LONG_MAX);
}

void att_stream_finish(void)
{
    if (!aligned)
        try_align(1);
    long hi = have();
    for (int i = 0; i < att_NT; i++)
        drain(&att_T[i], 2, hi);
}

#endif
