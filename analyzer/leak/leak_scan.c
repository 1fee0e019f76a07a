/*
 * leak_scan.c — one rank file streamed once (leak_scan_new, then
 * leak_scan_record for every record, leak_scan_free): ALLOC/FREE records
 * maintain a map of live allocations (ptr, device) -> (bytes, site), and
 * per site its live bytes, the most it held at once and two growth streaks
 * that leak_rules.c judges at the end:
 *
 * - over steps: at the end of every step the live bytes of each site are
 *   compared with the previous step's. A streak survives a few steps
 *   without growth (at most one in LEAK_SLACK_DIV steps of the streak), so
 *   a leak that skips a step now and then is still found, while a site that
 *   only grows during warm-up and then stays flat (a cache, the parameters)
 *   is not.
 * - in traces without steps (unmodified programs under the allocation
 *   interposers), over the site's own allocations: after each ALLOC the
 *   site's live bytes are compared with what they were at its previous
 *   ALLOC, and the same growth streak is kept over those events, with the
 *   record positions (the step-less clock) where it started and where it
 *   last grew.
 *
 * - the process's name, from its main thread's THREAD records, which
 *   leak_exempt.c reads to tell a compiler from the job.
 *
 * Memory: one entry per live allocation and one per site; nothing grows with
 * the number of steps. A FREE of an unknown pointer (allocated before
 * recording started, or its ALLOC lost with a damaged chunk) is ignored.
 *
 * Order: a rank file holds each thread's records in order, but the threads'
 * records interleaved as the collector drained their rings, so thread A's
 * FREE of an address can follow thread B's later ALLOC of the same address.
 * Timestamps settle it: a FREE older than the live block's ALLOC belongs
 * to an earlier block and is ignored, and so is an ALLOC older than the
 * live one (that earlier block's FREE, older still, follows it).
 */
#include "leak_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

enum {
    LEAK_SLACK_DIV = 10,     /* a streak tolerates one flat step per this many */
};

static uint64_t live_hash(const live_alloc *a)
{
    return tft_u64map_mix(a->ptr ^ ((uint64_t)(uint32_t)a->dev << 48));
}

static bool live_eq(const void *ctx, const void *val)
{
    const live_alloc *a = ctx, *b = val;
    return a->ptr == b->ptr && a->dev == b->dev;
}

static int site_index(leak_state *s, uint64_t id, uint32_t *out)
{
    void *v;
    int rc = tft_u64map_insert(&s->site_idx, id, NULL, NULL, &v);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        *out = *(uint32_t *)v;
        return 0;
    }
    if (s->nsites == s->sites_cap) {
        size_t ncap = s->sites_cap ? s->sites_cap * 2 : 32;
        leak_site *n = realloc(s->sites, ncap * sizeof(*n));
        if (!n) {
            tft_u64map_remove(&s->site_idx, v);
            return -ENOMEM;
        }
        s->sites = n;
        s->sites_cap = ncap;
    }
    s->sites[s->nsites] = (leak_site){.id = id};
    *(uint32_t *)v = (uint32_t)s->nsites;
    *out = (uint32_t)s->nsites++;
    return 0;
}

/* st->name from r's strings once they hold it ("site:<hex id>" until). */
void leak_site_name(leak_site *st, const tft_reader *r)
{
    if (st->named)
        return;
    const char *txt = tft_reader_string(r, st->id);
    if (txt) {
        snprintf(st->name, sizeof(st->name), "%s", txt);
        st->named = true;
    } else if (!st->name[0]) {
        snprintf(st->name, sizeof(st->name), "site:%016" PRIx64, st->id);
    }
}

/* Site si's live bytes changed: the next snapshot looks at it. */
static int mark_active(leak_state *s, uint32_t si)
{
    if (s->sites[si].active)
        return 0;
    if (s->nactive == s->active_cap) {
        size_t ncap = s->active_cap ? s->active_cap * 2 : 64;
        uint32_t *n = realloc(s->active, ncap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        s->active = n;
        s->active_cap = ncap;
    }
    s->active[s->nactive++] = si;
    s->sites[si].active = true;
    return 0;
}

static int32_t dev_key(uint8_t kind, int16_t device) { return (int32_t)((uint32_t)kind << 16 | (uint16_t)device); }

/* One snapshot: live bytes now vs prev at the previous one, at step (or
 * allocation index) at. Returns whether they grew. */
static bool streak_advance(streak *k, uint64_t now, uint64_t prev, int64_t at)
{
    bool grew = now > prev;
    if (k->on) {
        k->steps++;
        if (!grew && ++k->flat > k->steps / LEAK_SLACK_DIV)
            k->on = false;
        if (k->on && now <= k->base)
            k->on = false; /* everything since the start was freed */
    }
    if (!k->on && grew)
        *k = (streak){.on = true, .from = at, .base = prev, .steps = 1, .flat = 0};
    return grew;
}

/* Step-less snapshot of site st after one of its ALLOCs. */
static void alloc_event(leak_site *st, uint64_t pos)
{
    bool grew = streak_advance(&st->ev, st->live_bytes, st->ev_prev, (int64_t)st->allocs);
    if (st->ev.on && st->ev.from == (int64_t)st->allocs) /* started here */
        st->ev_from_pos = pos;
    if (st->ev.on && grew) {
        st->ev_last_pos = pos;
        st->ev_last_bytes = st->live_bytes;
        st->ev_last_steps = st->ev.steps;
    }
    st->ev_prev = st->live_bytes;
    st->allocs++;
}

static int on_alloc(leak_state *s, const tft_reader *r, const tft_rec_alloc *a)
{
    uint32_t si;
    int e = site_index(s, a->site, &si);
    if (e)
        return e;
    leak_site_name(&s->sites[si], r);
    /* room first, as the table has always grown: the slot order, which
     * leak_site_ends visits, stays what it was */
    if ((e = tft_u64map_reserve(&s->live)))
        return e;
    live_alloc want = {.ptr = a->ptr, .dev = dev_key(a->device_kind, a->device)};
    void *v;
    int rc = tft_u64map_insert(&s->live, live_hash(&want), live_eq, &want, &v);
    if (rc < 0)
        return rc;
    live_alloc *l = v;
    if (rc == 0 && a->h.ts < l->ts)
        return 0; /* an older block at this address, drained late; its FREE will be too */
    if (rc == 0) { /* its FREE was lost, or comes later from another thread: the old block is gone */
        leak_site *old = &s->sites[l->site];
        old->live_bytes -= l->bytes;
        old->live_allocs--;
        if ((e = mark_active(s, l->site)))
            return e;
    }
    if ((e = mark_active(s, si))) {
        if (rc == 1)
            tft_u64map_remove(&s->live, l);
        return e;
    }
    leak_site *st = &s->sites[si];
    *l = (live_alloc){.ptr = a->ptr, .dev = want.dev, .site = si, .bytes = a->bytes, .ts = a->h.ts,
                      .step = a->h.step, .pos = s->pos, .idx = st->allocs};
    st->live_bytes += a->bytes;
    st->live_allocs++;
    if (st->live_bytes > st->peak_bytes) {
        st->peak_bytes = st->live_bytes;
        st->peak_ts = a->h.ts;
        st->peak_step = a->h.step;
    }
    if (st->live_allocs > st->peak_allocs)
        st->peak_allocs = st->live_allocs;
    tft_thread_info ti;
    tft_reader_thread(r, &ti);
    if (ti.known && st->thread_known && st->thread != ti.index)
        st->threads_many = true; /* unknown threads (no THREAD records) count as one */
    if (ti.known && !st->thread_known) {
        st->thread_known = true;
        st->thread = ti.index;
    }
    if (!st->allocs)
        st->one_size = a->bytes;
    else if (a->bytes != st->one_size)
        st->sizes_mixed = true;
    alloc_event(st, s->pos);
    return 0;
}

static int on_free(leak_state *s, const tft_rec_free *f)
{
    live_alloc want = {.ptr = f->ptr, .dev = dev_key(f->device_kind, f->device)};
    live_alloc *l = tft_u64map_find(&s->live, live_hash(&want), live_eq, &want);
    if (!l || f->h.ts < l->ts)
        return 0; /* unknown, or the FREE of an earlier block at this address */
    int e = mark_active(s, l->site);
    leak_site *st = &s->sites[l->site];
    st->live_bytes -= l->bytes;
    st->live_allocs--;
    tft_u64map_remove(&s->live, l);
    return e;
}

/* End of step `step`: advances the growth streak of every site that can
 * move (s->active; a site whose bytes did not change and whose streak is
 * off stays as it is), keeping those still growing. */
static void snapshot(leak_state *s, int64_t step)
{
    size_t keep = 0;
    for (size_t k = 0; k < s->nactive; k++) {
        leak_site *st = &s->sites[s->active[k]];
        streak_advance(&st->st, st->live_bytes, st->prev_bytes, step);
        st->prev_bytes = st->live_bytes;
        if (st->st.on)
            s->active[keep++] = s->active[k];
        else
            st->active = false;
    }
    s->nactive = keep;
    s->steps_seen++;
    s->step_open = false;
    s->snapped = true;
    s->snap_step = step;
}

/* Steps are delimited by STEP END records, or by a change of h.step when a
 * producer writes none. Records stamped with a step already snapshotted
 * (written after its END) do not reopen it. */
static void on_step(leak_state *s, const tft_rec *rec)
{
    if (rec->kind == TFT_REC_STEP && rec->len >= sizeof(tft_rec_step) &&
        ((const tft_rec_step *)rec)->phase == TFT_STEP_END) {
        if (!s->snapped || s->snap_step != rec->step)
            snapshot(s, rec->step);
        s->cur_step = rec->step;
        return;
    }
    if (rec->step == TFT_STEP_NONE)
        return;
    if (rec->step != s->cur_step) {
        if (s->step_open)
            snapshot(s, s->cur_step);
        s->cur_step = rec->step;
    }
    s->step_open = !s->snapped || s->snap_step != rec->step;
}

static void on_process(leak_state *s, const tft_rec *rec)
{
    if (rec->len < sizeof(tft_rec_process))
        return;
    const tft_rec_process *p = (const tft_rec_process *)rec;
    if (p->event != TFT_PROC_EXIT)
        return;
    s->exit_known = true;
    s->exit_code = p->exit_code;
    s->exit_signal = p->signal;
}

/* The process's name: its main thread's (tid = pid), else the first
 * recording thread's until the main thread records. */
static void on_thread(leak_state *s, const tft_reader *r, const tft_rec *rec)
{
    if (rec->len < sizeof(tft_rec_thread) || s->process_main)
        return;
    const tft_rec_thread *t = (const tft_rec_thread *)rec;
    const tft_file_info *fi = tft_reader_info(r);
    bool main = fi && fi->pid > 0 && t->tid == fi->pid;
    if (t->event != TFT_THREAD_SWITCH || !t->name || (!main && s->process[0]))
        return;
    const char *name = tft_reader_string(r, t->name);
    if (!name)
        return;
    snprintf(s->process, sizeof(s->process), "%s", name);
    s->process_main = main;
}

leak_scan *leak_scan_new(void)
{
    leak_scan *x = calloc(1, sizeof(*x));
    if (!x)
        return NULL;
    x->s = (leak_state){.cur_step = TFT_STEP_NONE, .ts_min = UINT64_MAX, .last_step = TFT_STEP_NONE};
    tft_u64map_init(&x->s.live, &(tft_u64map_opts){.vsize = sizeof(live_alloc), .min_cap = 1024, .load_pct = 75,
                                                   .hashed = true});
    tft_u64map_init(&x->s.site_idx, &(tft_u64map_opts){.vsize = sizeof(uint32_t)});
    return x;
}

int leak_scan_record(leak_scan *x, tft_reader *r, const tft_rec *rec)
{
    leak_state *s = &x->s;
    s->pos++;
    if (rec->ts < s->ts_min)
        s->ts_min = rec->ts;
    if (rec->step != TFT_STEP_NONE && (s->last_step == TFT_STEP_NONE || rec->step > s->last_step))
        s->last_step = rec->step;
    on_step(s, rec);
    if (rec->kind == TFT_REC_ALLOC && rec->len >= sizeof(tft_rec_alloc))
        return on_alloc(s, r, (const tft_rec_alloc *)rec);
    if (rec->kind == TFT_REC_FREE && rec->len >= sizeof(tft_rec_free))
        return on_free(s, (const tft_rec_free *)rec);
    if (rec->kind == TFT_REC_PROCESS)
        on_process(s, rec);
    if (rec->kind == TFT_REC_THREAD)
        on_thread(s, r, rec);
    return 0;
}

void leak_scan_free(leak_scan *x)
{
    if (!x)
        return;
    tft_u64map_free(&x->s.live);
    free(x->s.sites);
    tft_u64map_free(&x->s.site_idx);
    free(x->s.active);
    free(x);
}
