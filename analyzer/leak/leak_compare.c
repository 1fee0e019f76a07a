/*
 * leak_compare.c — tfdiff's leaks of one rank (leak_compare): BAD's sites
 * against GOLDEN's, at the end or against GOLDEN's peak when BAD stopped
 * early; and peak against peak for sites one thread allocates at, since a
 * program may keep blocks for its whole run and free them at teardown
 * (CPython frees every object when it exits): the bytes and, by
 * LEAK_PEAK_MIN_EXTRA_BLOCKS, the blocks it held at once, so a bigger batch
 * (bigger blocks) is not a leak, more blocks kept is. Reads only the
 * leak_rank_mem of both sides and their growth leaks. An allocator's pool
 * (CPython's arenas) and a helper process of BAD (a compiler) are never
 * reported, however they differ from GOLDEN's (leak_exempt.c).
 */
#include "leak_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_site_name(const void *a, const void *b)
{
    return strcmp(((const leak_site_mem *)a)->site, ((const leak_site_mem *)b)->site);
}

static const leak_site_mem *golden_site(const leak_rank_mem *g, const char *site)
{
    int n = g->nsites < g->max_sites ? g->nsites : g->max_sites;
    leak_site_mem key;
    snprintf(key.site, sizeof(key.site), "%s", site);
    return n > 0 ? bsearch(&key, g->sites, (size_t)n, sizeof(*g->sites), cmp_site_name) : NULL;
}

static void attach_golden(leak_finding *l, const leak_site_mem *gs)
{
    l->golden_known = true;
    l->golden_live_bytes_at_end = gs ? gs->live_bytes : 0;
    l->golden_live_allocs_at_end = gs ? gs->live_allocs : 0;
    l->golden_peak_live_bytes = gs ? gs->peak_bytes : 0;
    l->golden_peak_live_allocs = gs ? gs->peak_allocs : 0;
}

/* BAD's own peak, for every leak tfdiff reports. */
static void attach_peak(leak_finding *l, const leak_site_mem *bs)
{
    if (!bs)
        return;
    l->peak_live_bytes = bs->peak_bytes;
    l->peak_live_allocs = bs->peak_allocs;
    l->peak_ns = bs->peak_ns;
    l->peak_step = bs->peak_step;
}

static const leak_site_mem *bad_site(const leak_rank_mem *b, const char *site)
{
    int n = b->nsites < b->max_sites ? b->nsites : b->max_sites;
    for (int j = 0; j < n; j++)
        if (!strcmp(b->sites[j].site, site))
            return &b->sites[j];
    return NULL;
}

/* have exceeds want by the margin: LEAK_MARGIN_RATIO times, and by at
 * least `extra`. */
static bool beyond(uint64_t have, uint64_t want, uint64_t extra)
{
    return have >= want && have - want >= extra && have / LEAK_MARGIN_RATIO >= want;
}

/* The peak rule for one site (leak.h, leak_compare). */
static bool peak_leak(const leak_site_mem *bs, const leak_site_mem *gs)
{
    if (!bs->one_thread || (gs && !gs->one_thread))
        return false; /* how threads ran moves a shared site's peak */
    uint64_t gb = gs ? gs->peak_bytes : 0, ga = gs ? gs->peak_allocs : 0;
    return beyond(bs->peak_bytes, gb, LEAK_MARGIN_BYTES) &&
           beyond(bs->peak_allocs, ga, LEAK_PEAK_MIN_EXTRA_BLOCKS);
}

static void fill_from_site(leak_finding *l, int rank, const leak_site_mem *bs)
{
    memset(l, 0, sizeof(*l));
    l->rank = rank;
    snprintf(l->site, sizeof(l->site), "%s", bs->site);
    l->live_bytes_at_end = bs->live_bytes;
    l->live_allocs_at_end = bs->live_allocs;
    l->first_known = bs->live_allocs > 0;
    l->first_alloc_ns = bs->first_ns;
    l->first_alloc_step = l->first_known ? bs->first_step : TFT_STEP_NONE;
    l->from_alloc = bs->first_alloc;
    attach_peak(l, bs);
}

static bool reported(const leak_finding *out, int n, const char *site)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(out[i].site, site))
            return true;
    return false;
}

/* Whether BAD's end can stand against GOLDEN's: both exited normally with
 * the same status, and BAD got as far in steps. */
static bool ends_comparable(const leak_rank_mem *g, const leak_rank_mem *b)
{
    return b->exit_known && g->exit_known && !b->exit_signal && !g->exit_signal &&
           b->exit_code == g->exit_code && b->last_step >= g->last_step;
}

int leak_compare(leak_rank_mem *g, const leak_finding *gl, int ng, const leak_rank_mem *b,
                       const leak_finding *bl, int nb, int rank, leak_finding *out, int max)
{
    int gn = g->nsites < g->max_sites ? g->nsites : g->max_sites;
    if (gn > 1)
        qsort(g->sites, (size_t)gn, sizeof(*g->sites), cmp_site_name);
    bool g_whole = g->nsites <= g->max_sites; /* a site not listed allocated nothing */
    bool at_end = ends_comparable(g, b);
    int n = 0;
    if (b->helper)
        return 0; /* a compiler the job ran: nothing of it is the job's leak */
    for (int j = 0; j < nb && n < max; j++) {
        bool in_golden = false;
        for (int k = 0; k < ng && !in_golden; k++)
            in_golden = !strcmp(gl[k].site, bl[j].site);
        if (in_golden)
            continue;
        out[n] = bl[j];
        out[n].rank = rank;
        attach_golden(&out[n], golden_site(g, bl[j].site));
        attach_peak(&out[n], bad_site(b, bl[j].site));
        n++;
    }
    int bn = b->nsites < b->max_sites ? b->nsites : b->max_sites;
    for (int pass = 0; pass < 2; pass++) { /* at exit first, then peaks */
        for (int j = 0; j < bn && n < max; j++) {
            const leak_site_mem *bs = &b->sites[j];
            const leak_site_mem *gs = golden_site(g, bs->site);
            if ((!gs && !g_whole) || bs->pool || reported(out, n, bs->site))
                continue;
            uint64_t want = gs ? (at_end ? gs->live_bytes : gs->peak_bytes) : 0;
            if (pass == 0 ? !bs->live_bytes || !beyond(bs->live_bytes, want, LEAK_MARGIN_BYTES)
                          : !peak_leak(bs, gs))
                continue;
            leak_finding *l = &out[n++];
            fill_from_site(l, rank, bs);
            leak_fill_at_exit(l);
            attach_golden(l, gs);
            if (pass == 0) {
                l->vs_golden_peak = !at_end;
                continue;
            }
            l->how = LEAK_PEAK;
            l->vs_golden_peak = true;
            l->from_step = bs->peak_step;
            l->iterations = bs->peak_allocs;
            l->bytes_per_step = bs->peak_allocs ? (double)bs->peak_bytes / (double)bs->peak_allocs : 0;
        }
    }
    return n;
}
