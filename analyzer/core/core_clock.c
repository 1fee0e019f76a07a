/*
 * core_clock.c — record times of ranks on several hosts on one timeline
 * (core_clock.h). Limits (docs/MULTINODE.md): the MPI offsets are measured
 * once, at MPI_Init, and anchored on the monotonic clock through the file's
 * start pair: a later realtime step changes nothing (monotonic clocks do
 * not step), a difference of the hosts' clock rates is not followed. The
 * realtime path follows steps through CLOCK records; rate errors are within
 * the NTP bound it states.
 */
#include "core_clock.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The manifest entry of rank file i (same rank and pid) with an estimate. */
static const tft_manifest_rank *entry_of(const tft_manifest *m, const tft_file_info *fi)
{
    for (int k = 0; k < m->nranks; k++) {
        const tft_manifest_rank *r = &m->ranks[k];
        if (r->rank == fi->rank && r->pid == fi->pid && r->clock_known)
            return r;
    }
    return NULL;
}

int core_clock_align(tft_trace *t, int n, int64_t *adj, uint64_t *err_ns)
{
    const tft_manifest *m = t ? tft_trace_manifest(t) : NULL;
    if (!m || n < 1)
        return 0;
    uint64_t err = 0;
    for (int i = 0; i < n; i++) {
        const tft_file_info *fi = tft_trace_file_info(t, i);
        const tft_manifest_rank *r = fi ? entry_of(m, fi) : NULL;
        if (!r)
            return 0;
        /* the pair of the estimate's moment (1.6), else the file's start */
        int64_t real_minus_mono = r->clock_anchored ? r->clock_anchor_ns
                                                    : (int64_t)(fi->start_realtime_ns - fi->start_monotonic_ns);
        adj[i] = real_minus_mono - r->clock_offset_ns;
        if (r->clock_error_ns > err)
            err = r->clock_error_ns;
    }
    *err_ns = err;
    return 1;
}

void core_clock_pair_start(core_clock_pair *p, const tft_file_info *fi)
{
    *p = (core_clock_pair){.real_minus_mono = (int64_t)(fi->start_realtime_ns - fi->start_monotonic_ns),
                           .ntp = TFT_NTP_UNKNOWN};
}

int core_clock_pair_update(core_clock_pair *p, const tft_rec *rec)
{
    if (rec->kind != TFT_REC_CLOCK || rec->len < sizeof(tft_rec_clock))
        return 0;
    const tft_rec_clock *c = (const tft_rec_clock *)rec;
    int64_t rm = (int64_t)(c->realtime_ns - c->h.ts);
    int64_t d = rm - p->real_minus_mono;
    uint32_t ntp = c->ntp <= TFT_NTP_UNSYNCED ? c->ntp : TFT_NTP_UNKNOWN;
    uint64_t maxerr = ntp == TFT_NTP_SYNCED ? c->maxerror_ns : 0, was = p->said_maxerror_ns;
    int changed = d > 1000 || d < -1000 || ntp != p->ntp || maxerr > was + was / 4 || maxerr < was - was / 4;
    p->real_minus_mono = rm;
    p->ntp = ntp;
    p->maxerror_ns = maxerr;
    p->window_ns = c->window_ns;
    if (changed)
        p->said_maxerror_ns = maxerr;
    return changed;
}

uint64_t core_clock_pair_error(const core_clock_pair *p)
{
    if (p->ntp != TFT_NTP_SYNCED || p->maxerror_ns > UINT64_MAX / 4)
        return UINT64_MAX;
    return p->maxerror_ns + p->window_ns;
}

static int track_add(core_clock_track *tr, const core_clock_pair *p, uint64_t at)
{
    if (tr->n == tr->cap) {
        size_t cap = tr->cap ? 2 * tr->cap : 16;
        core_clock_pair *np = realloc(tr->p, cap * sizeof(*np));
        if (np)
            tr->p = np;
        uint64_t *na = np ? realloc(tr->at, cap * sizeof(*na)) : NULL;
        if (!na)
            return -ENOMEM;
        tr->at = na;
        tr->cap = cap;
    }
    tr->p[tr->n] = *p;
    tr->at[tr->n++] = at;
    return 0;
}

int core_clock_track_read(core_clock_track *tr, tft_reader *r, const tft_file_info *fi)
{
    *tr = (core_clock_track){0};
    core_clock_pair cur = {.ntp = TFT_NTP_UNKNOWN};
    if (fi)
        core_clock_pair_start(&cur, fi);
    int e = track_add(tr, &cur, 0);
    const tft_rec *rec;
    tft_reader_rewind(r);
    while (e == 0 && (e = tft_reader_next(r, &rec)) > 0) {
        e = 0;
        if (core_clock_pair_update(&cur, rec))
            e = track_add(tr, &cur, rec->ts);
    }
    tft_reader_rewind(r);
    tr->use = tr->n ? malloc(tr->n * sizeof(*tr->use)) : NULL;
    if (tr->n && !tr->use)
        return -ENOMEM;
    size_t next = SIZE_MAX; /* the next synchronised pair, from the end */
    for (size_t j = tr->n; j-- > 0;) {
        if (tr->p[j].ntp == TFT_NTP_SYNCED)
            next = j;
        tr->use[j] = next != SIZE_MAX ? next : j;
    }
    return e < 0 ? e : 0;
}

const core_clock_pair *core_clock_track_at(const core_clock_track *tr, uint64_t t)
{
    if (!tr->n)
        return NULL;
    size_t lo = 0, hi = tr->n; /* the last j with at[j] <= t: at[0] = 0 */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (tr->at[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return &tr->p[tr->use ? tr->use[lo] : lo];
}

void core_clock_track_free(core_clock_track *tr)
{
    if (!tr)
        return;
    free(tr->p);
    free(tr->at);
    free(tr->use);
    *tr = (core_clock_track){0};
}
