/*
 * diff_clock.c — record times of ranks on several hosts on one timeline
 * (diff_clock.h). Limits (docs/MULTINODE.md): the offsets are measured once,
 * at MPI_Init; a host clock that drifts or is stepped later (NTP) is not
 * followed, and the monotonic-to-realtime mapping is the one of the file's
 * start.
 */
#include "diff_clock.h"

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

int diff_clock_align(tft_trace *t, int n, int64_t *adj, uint64_t *err_ns)
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
        int64_t real_minus_mono = (int64_t)(fi->start_realtime_ns - fi->start_monotonic_ns);
        adj[i] = real_minus_mono - r->clock_offset_ns;
        if (r->clock_error_ns > err)
            err = r->clock_error_ns;
    }
    *err_ns = err;
    return 1;
}
