/*
 * leak_mem.c — what every site holds at the end of a scan (both kinds of
 * traces): its blocks still live summed up (bytes, count, the largest
 * block, the oldest block's time, step and record position), and the most
 * the site ever held (its peak, in bytes and in blocks, and whether one
 * thread made all its allocations), whether it is an allocator's pool and
 * whether the process is a helper (leak_exempt.c). leak_rules.c's at-exit
 * rule reads the sites; leak_rank_mem carries them to leak_compare.
 */
#include "leak_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sums up every site's blocks still live at the end (the end_* fields). */
void leak_site_ends(leak_state *s)
{
    for (size_t k = 0; k < s->nsites; k++) {
        leak_site *st = &s->sites[k];
        st->end_max_block = 0;
        st->end_first_ts = st->end_first_pos = UINT64_MAX;
        st->end_last_pos = 0;
        st->end_first_alloc = 0;
        st->end_first_step = TFT_STEP_NONE;
    }
    const live_alloc *a;
    for (size_t pos = 0; (a = tft_u64map_next(&s->live, &pos, NULL));) {
        leak_site *st = &s->sites[a->site];
        if (a->bytes > st->end_max_block)
            st->end_max_block = a->bytes;
        if (a->ts < st->end_first_ts || (a->ts == st->end_first_ts && a->pos < st->end_first_pos)) {
            st->end_first_ts = a->ts;
            st->end_first_step = a->step;
            st->end_first_alloc = a->idx;
        }
        if (a->pos < st->end_first_pos)
            st->end_first_pos = a->pos;
        if (a->pos > st->end_last_pos)
            st->end_last_pos = a->pos;
    }
}

/* The rank's start: its earliest record, or the file header's clock when
 * that is earlier (ns, CLOCK_MONOTONIC like the records). */
uint64_t leak_rank_start(const leak_state *s, const tft_reader *r)
{
    uint64_t t = s->ts_min;
    const tft_file_info *fi = tft_reader_info(r);
    if (fi && fi->start_monotonic_ns && fi->start_monotonic_ns < t)
        t = fi->start_monotonic_ns;
    return t == UINT64_MAX ? 0 : t;
}

/* Largest peak first; equal peaks by name, so the order is the same on
 * every run. */
static int cmp_site_peak(const void *a, const void *b)
{
    const leak_site *x = a, *y = b;
    if (x->peak_bytes != y->peak_bytes)
        return x->peak_bytes > y->peak_bytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Fills mem from the sites; reorders s->sites (their index is not needed
 * any more). */
void leak_fill_mem(leak_state *s, tft_reader *r, leak_rank_mem *mem)
{
    uint64_t start = leak_rank_start(s, r);
    for (size_t k = 0; k < s->nsites; k++)
        leak_site_name(&s->sites[k], r);
    if (s->nsites > 1)
        qsort(s->sites, s->nsites, sizeof(*s->sites), cmp_site_peak);
    mem->nsites = 0;
    for (size_t k = 0; k < s->nsites; k++) {
        const leak_site *st = &s->sites[k];
        if (!st->allocs)
            continue;
        if (mem->nsites < mem->max_sites) {
            leak_site_mem *m = &mem->sites[mem->nsites];
            memset(m, 0, sizeof(*m));
            snprintf(m->site, sizeof(m->site), "%s", st->name);
            m->allocs = st->allocs;
            m->live_bytes = st->live_bytes;
            m->live_allocs = st->live_allocs;
            m->peak_bytes = st->peak_bytes;
            m->peak_ns = st->peak_ts > start ? st->peak_ts - start : 0;
            m->peak_step = st->peak_step;
            m->peak_allocs = st->peak_allocs;
            m->one_thread = !st->threads_many;
            m->max_block = st->end_max_block;
            m->pool = leak_site_is_pool(st);
            m->first_step = TFT_STEP_NONE;
            if (st->live_allocs) {
                m->first_ns = st->end_first_ts > start ? st->end_first_ts - start : 0;
                m->first_step = st->end_first_step;
                m->first_alloc = st->end_first_alloc;
                m->first_pos = st->end_first_pos;
                m->last_pos = st->end_last_pos;
            }
        }
        if (mem->nsites < INT32_MAX)
            mem->nsites++;
    }
    tft_reader_status rs;
    tft_reader_get_status(r, &rs);
    mem->records = s->pos;
    mem->dropped = rs.dropped;
    mem->last_step = s->last_step;
    mem->exit_known = s->exit_known;
    mem->exit_code = s->exit_code;
    mem->exit_signal = s->exit_signal;
    snprintf(mem->process, sizeof(mem->process), "%s", s->process);
    mem->helper = leak_process_is_helper(s->process);
}
