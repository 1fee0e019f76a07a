/*
 * desync_straggler.c — a rank that entered a collective far later than the
 * others usually do on its communicator (DS_STRAGGLER): more than
 * STRAGGLER_NS behind the median rank and STRAGGLER_FACTOR times the
 * communicator's usual spread, once DESYNC_SPREADS_MIN spreads are known.
 * Enter times compare on one host's monotonic clock, across hosts on rank
 * 0's realtime through the MPI alignment, or on each host's realtime when
 * every host involved was NTP-synchronised (core_clock.h).
 */
#include "desync_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STRAGGLER_NS 1000000000ull /* a straggler is > 1 s behind ... */
#define STRAGGLER_FACTOR 10        /* ... and > 10x the usual spread */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The clock entry times of a collective compare on, for desync_check_straggler:
 * one host's monotonic; across hosts rank 0's realtime through the MPI
 * estimate, else each host's realtime when every host involved was
 * NTP-synchronised then. t[k]: the time of idx[k]; *late its latest rank;
 * *err the comparison's error bound (0 on one host). false: not comparable. */
static bool entry_times(const desync_state *s, const coll_slot *sl, const int *idx, int n, uint64_t *t, int *late,
                        uint64_t *err)
{
    uint64_t t_late = 0, e1 = 0, e2 = 0; /* the two largest NTP bounds */
    *err = s->aligned ? 2 * s->clock_err : 0;
    bool local = !s->one_host && !s->aligned && s->host_of; /* these ranks on one host: its monotonic clock */
    for (int k = 0; local && k < n; k++)
        local = s->host_of[idx[k]] >= 0 && s->host_of[idx[k]] == s->host_of[idx[0]];
    for (int k = 0; k < n; k++) {
        const coll_slot *x = &sl[idx[k]];
        if (!x->t_enter)
            return false;
        bool ntp = !s->one_host && !s->aligned && !local;
        if (ntp && x->rt_err == UINT64_MAX)
            return false;
        if (ntp && x->rt_err > e1) {
            e2 = e1;
            e1 = x->rt_err;
        } else if (ntp && x->rt_err > e2) {
            e2 = x->rt_err;
        }
        t[k] = x->t_enter + (uint64_t)(s->aligned ? s->adj[idx[k]] : ntp ? x->rt : 0);
        if (t[k] > t_late) {
            t_late = t[k];
            *late = idx[k];
        }
    }
    if (!s->one_host && !s->aligned)
        *err = local ? 0 : e1 + e2;
    return true;
}

/* The last rank to enter, when it came far later than usual on this comm.
 * Across hosts only with their clocks comparable (entry_times). */
void desync_check_straggler(const desync_state *s, comm_state *c, uint64_t q, const coll_slot *sl,
                            const int *idx, int n)
{
    if (n < 2)
        return;
    uint64_t *t = s->ubuf, err;
    int late = idx[0];
    if (!entry_times(s, sl, idx, n, t, &late, &err))
        return;
    qsort(t, (size_t)n, sizeof(t[0]), cmp_u64);
    uint64_t spread = t[n - 1] - t[(n - 1) / 2];
    if (c->nspreads >= DESYNC_SPREADS_MIN && !c->straggled && spread > STRAGGLER_NS) {
        int m = c->nspreads < DESYNC_SPREADS ? c->nspreads : DESYNC_SPREADS;
        uint64_t hist[DESYNC_SPREADS];
        memcpy(hist, c->spreads, (size_t)m * sizeof(hist[0]));
        qsort(hist, (size_t)m, sizeof(hist[0]), cmp_u64);
        if (spread > STRAGGLER_FACTOR * hist[m / 2]) {
            desync_finding *d = &c->straggler;
            desync_finding_init(d, c, q, sl[late].step, sl[late].seq, DS_STRAGGLER);
            desync_add_rank(d, desync_rank_id(s, late));
            char st[32], al[128] = "";
            if (s->aligned)
                snprintf(al, sizeof(al), "; hosts' clocks aligned through MPI, error within %.1f us", err / 1e3);
            else if (!s->one_host && err)
                snprintf(al, sizeof(al), "; hosts' clocks NTP-synchronised, error within %.3f ms", err / 1e6);
            d->clock_error_ns = s->one_host ? 0 : err;
            snprintf(d->detail, sizeof(d->detail), "rank %d entered %s (communicator " PH "%016" PRIx64
                     ", collective #%" PRIu64 ", %s) %.3f s after the median rank (usually %.3f ms%s)",
                     desync_rank_id(s, late), desync_str_of(s, sl[late].name), c->comm, q,
                     desync_step_text(sl[late].step, st, sizeof(st)), spread / 1e9, hist[m / 2] / 1e6, al);
            c->straggled = true;
        }
    }
    c->spreads[c->nspreads++ % DESYNC_SPREADS] = spread;
}
