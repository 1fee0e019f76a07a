/*
 * leak_rules.c — the leaks of one rank (leak_find, leak_find_mem,
 * leak_scan_finish) from the sites a scan kept (leak_scan.c):
 *
 * - growth over steps: a site leaks when its streak reaches the last step
 *   and holds at least LEAK_MIN_GROWTH growing steps (LEAK_MIN_GROWTH_FEW
 *   in runs of at most LEAK_FEW_STEPS steps).
 * - growth without steps: a site leaks when its streak holds at least
 *   LEAK_MIN_GROWTH growing allocations, its live bytes at the end exceed
 *   the streak's base, the growth was interleaved with other work (between
 *   its first and last growing allocation, at least one other record per
 *   allocation of the site, on average: a loop, not a burst), and it lasted
 *   over a fair part of the run: the records after its last growing
 *   allocation are at most LEAK_TAIL_RATIO times the records its streak
 *   spanned (the clock is the record's position in the rank file, so the
 *   verdict does not depend on timing). A site that grows only while the
 *   program starts (weights, caches, an interpreter's arenas) and is then
 *   flat for most of the run is not a leak; one that grows in the main loop
 *   until its end is, even with some teardown after it. The rate is bytes
 *   per allocation of the site, over the streak up to its last growth.
 * - tfdump --check's at-exit rule (exit_min_bytes > 0): a site leaks when
 *   it holds at least exit_min_bytes at the end, in at least
 *   LEAK_EXIT_MIN_BLOCKS blocks of which none holds half the bytes (not
 *   one big arena), allocated over a fair part of the run: the records
 *   between its oldest and newest live block are at least 1 /
 *   LEAK_EXIT_SPREAD_DIV of the rank's records (what a program loads at
 *   start and keeps, then works on for most of the run, is not reported).
 *   This catches a loop that keeps a block per iteration and records
 *   nothing else — the case the growth rule cannot tell from a table
 *   filled at start — at the price of flagging a program that keeps that
 *   much, from one site, to its end (see docs/INTERPOSE.md).
 *
 * No rule reports an allocator's own pool (CPython's arenas) or anything
 * of a helper process (a compiler the job ran): leak_exempt.c.
 */
#include "leak_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

enum {
    LEAK_MIN_GROWTH = 3,     /* growing steps a streak needs */
    LEAK_MIN_GROWTH_FEW = 2, /* ... in a run of few steps */
    LEAK_FEW_STEPS = 4,      /* "few steps": at most this many steps seen */
    LEAK_TAIL_RATIO = 4,     /* step-less: records after the last growth <= this x the streak's span */
    LEAK_EXIT_MIN_BLOCKS = 4,/* at-exit rule: blocks live at the end, at least */
    LEAK_EXIT_SPREAD_DIV = 4,/* ... allocated over at least 1/this of the rank's records */
};

/* Step-less verdict for one site (see the top of the file). */
static bool leaks_per_alloc(const leak_site *st, uint64_t end_pos)
{
    const streak *k = &st->ev;
    if (!k->on || k->steps - k->flat < LEAK_MIN_GROWTH || st->live_bytes <= k->base)
        return false;
    uint64_t span = st->ev_last_pos - st->ev_from_pos;      /* records between first and last growth */
    uint64_t others = span + 1 - st->ev_last_steps;         /* of those, not the site's allocations */
    if (others + 1 < st->ev_last_steps)
        return false; /* a burst of allocations, not a loop doing other work too */
    return end_pos - st->ev_last_pos <= LEAK_TAIL_RATIO * span;
}

/* Single-trace at-exit verdict for one site (see the top of the file). */
static bool leaks_at_exit(const leak_site *st, uint64_t min_bytes, uint64_t records)
{
    if (!min_bytes || st->live_bytes < min_bytes || st->live_allocs < LEAK_EXIT_MIN_BLOCKS)
        return false;
    if (st->end_max_block > st->live_bytes / 2)
        return false; /* one big block (an arena, a weight file) and a few small ones */
    return (st->end_last_pos - st->end_first_pos) * LEAK_EXIT_SPREAD_DIV >= records;
}

static void fill_common(leak_finding *l, int rank, const leak_site *st, uint64_t start)
{
    memset(l, 0, sizeof(*l));
    l->rank = rank;
    snprintf(l->site, sizeof(l->site), "%s", st->name);
    l->live_bytes_at_end = st->live_bytes;
    l->live_allocs_at_end = st->live_allocs;
    l->first_alloc_step = TFT_STEP_NONE;
    if (st->live_allocs) {
        l->first_known = true;
        l->first_alloc_ns = st->end_first_ts > start ? st->end_first_ts - start : 0;
        l->first_alloc_step = st->end_first_step;
    }
}

/* The rate and start of an at-exit leak: what the site's live blocks are. */
void leak_fill_at_exit(leak_finding *l)
{
    l->how = LEAK_AT_EXIT;
    l->per_alloc = true;
    l->from_step = l->first_alloc_step;
    l->iterations = l->live_allocs_at_end;
    l->bytes_per_step = l->live_allocs_at_end ? (double)l->live_bytes_at_end / (double)l->live_allocs_at_end : 0;
}

static int collect(leak_state *s, tft_reader *r, int rank, uint64_t exit_min_bytes, leak_finding *out, int max)
{
    uint32_t need = s->steps_seen <= LEAK_FEW_STEPS ? LEAK_MIN_GROWTH_FEW : LEAK_MIN_GROWTH;
    bool stepless = s->steps_seen == 0;
    uint64_t start = leak_rank_start(s, r);
    int n = 0;
    if (leak_process_is_helper(s->process))
        return 0;
    for (size_t k = 0; k < s->nsites && n < max; k++) {
        leak_site *st = &s->sites[k];
        leak_site_name(st, r);
        if (leak_site_is_pool(st))
            continue;
        bool growth = stepless ? leaks_per_alloc(st, s->pos)
                               : st->st.on && st->st.steps - st->st.flat >= need && st->live_bytes > st->st.base;
        if (!growth && (leak_site_is_tensor_heap(st) || !leaks_at_exit(st, exit_min_bytes, s->pos)))
            continue;
        leak_finding *l = &out[n++];
        fill_common(l, rank, st, start);
        if (!growth) {
            leak_fill_at_exit(l);
            l->from_alloc = st->end_first_alloc;
            l->min_bytes = exit_min_bytes;
            continue;
        }
        l->how = LEAK_GROWTH;
        l->per_alloc = stepless;
        if (stepless) {
            l->from_step = TFT_STEP_NONE;
            l->from_alloc = (uint64_t)st->ev.from;
            l->iterations = st->ev_last_steps;
            l->bytes_per_step = (double)(st->ev_last_bytes - st->ev.base) / st->ev_last_steps;
        } else {
            l->from_step = st->st.from;
            l->iterations = st->st.steps;
            l->bytes_per_step = (double)(st->prev_bytes - st->st.base) / st->st.steps;
        }
    }
    return n;
}

int leak_scan_finish(leak_scan *x, tft_reader *r, int rank, uint64_t exit_min_bytes, leak_finding *out,
                          int max, leak_rank_mem *mem)
{
    if (!x)
        return -EINVAL;
    leak_state *s = &x->s;
    int e = 0;
    if ((max > 0 && !out) || (mem && mem->max_sites > 0 && !mem->sites))
        e = -EINVAL;
    /* A step cut short (crash, hang) is not counted: its growth is partial. */
    if (e == 0) {
        leak_site_ends(s);
        e = collect(s, r, rank, exit_min_bytes, out, max > 0 ? max : 0);
    }
    if (e >= 0 && mem)
        leak_fill_mem(s, r, mem);
    leak_scan_free(x);
    return e;
}

int leak_find(tft_reader *r, int rank, leak_finding *out, int max)
{
    return leak_find_mem(r, rank, 0, out, max, NULL);
}

int leak_find_mem(tft_reader *r, int rank, uint64_t exit_min_bytes, leak_finding *out, int max,
                   leak_rank_mem *mem)
{
    if (!r || (max > 0 && !out) || (mem && mem->max_sites > 0 && !mem->sites))
        return -EINVAL;
    leak_scan *x = leak_scan_new();
    if (!x)
        return -ENOMEM;
    int e = tft_reader_rewind(r);
    const tft_rec *rec;
    while (e == 0 && (e = tft_reader_next(r, &rec)) == 1)
        e = leak_scan_record(x, r, rec);
    if (e < 0) {
        leak_scan_free(x);
        return e;
    }
    return leak_scan_finish(x, r, rank, exit_min_bytes, out, max, mem);
}
