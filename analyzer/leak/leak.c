/*
 * leak.c — leaks of one rank: allocation sites whose live bytes grow
 * step after step until the end of the run.
 *
 * The rank file is streamed once. ALLOC/FREE records maintain a map of live
 * allocations (ptr, device) -> (bytes, site); at the end of every step the
 * live bytes of each site are compared with the previous step's and a growth
 * streak is kept per site. A site leaks when its streak reaches the last
 * step and holds at least LEAK_MIN_GROWTH growing steps (LEAK_MIN_GROWTH_FEW
 * in runs of at most LEAK_FEW_STEPS steps). A streak survives a few steps
 * without growth (at most one in LEAK_SLACK_DIV steps of the streak), so a
 * leak that skips a step now and then is still found, while a site that only
 * grows during warm-up and then stays flat (a cache, the parameters) is not.
 *
 * Traces without steps (unmodified programs under the allocation
 * interposers): an iteration is one allocation of the site itself. After
 * each ALLOC the site's live bytes are compared with what they were at its
 * previous ALLOC, and the same growth streak is kept over those events. A
 * site leaks when its streak holds at least LEAK_MIN_GROWTH growing
 * allocations, its live bytes at the end exceed the streak's base, the
 * growth was interleaved with other work (between its first and last
 * growing allocation, at least one other record per allocation of the
 * site, on average: a loop, not a burst), and it lasted over a fair part
 * of the run: the records after its last growing allocation are at most
 * LEAK_TAIL_RATIO times the records its streak spanned (the clock is the
 * record's position in the rank file, so the verdict does not depend on
 * timing). A site that grows only while the program starts (weights,
 * caches, an interpreter's arenas) and is then flat for most of the run is
 * not a leak; one that grows in the main loop until its end is, even with
 * some teardown after it. The rate is bytes per allocation of the site,
 * over the streak up to its last growth.
 *
 * At the end (both kinds of traces), every site's blocks still live are
 * summed up (leak_rank_mem): bytes, count, the largest block, the oldest
 * block's time, step and record position, and the most the site ever held
 * (its peak, in bytes and in blocks, and whether one thread made all its
 * allocations). Two uses:
 *
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
 * - tfdiff (leak_compare): BAD's sites against GOLDEN's, at the end
 *   or against GOLDEN's peak when BAD stopped early; and peak against peak
 *   for sites one thread allocates at, since a program may keep blocks for
 *   its whole run and free them at teardown (CPython frees every object
 *   when it exits): the bytes and, by LEAK_PEAK_MIN_EXTRA_BLOCKS, the
 *   blocks it held at once, so a bigger batch (bigger blocks) is not a
 *   leak, more blocks kept is.
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
#include "core.h"
#include "leak.h"
#include "tft_u64map.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    LEAK_MIN_GROWTH = 3,     /* growing steps a streak needs */
    LEAK_MIN_GROWTH_FEW = 2, /* ... in a run of few steps */
    LEAK_FEW_STEPS = 4,      /* "few steps": at most this many steps seen */
    LEAK_SLACK_DIV = 10,     /* a streak tolerates one flat step per this many */
    LEAK_TAIL_RATIO = 4,     /* step-less: records after the last growth <= this x the streak's span */
    LEAK_EXIT_MIN_BLOCKS = 4,/* at-exit rule: blocks live at the end, at least */
    LEAK_EXIT_SPREAD_DIV = 4,/* ... allocated over at least 1/this of the rank's records */
};

/* Growth of one site's live bytes over a sequence of snapshots (the ends
 * of steps, or in step-less traces the site's own allocations). */
typedef struct streak {
    bool on;
    int64_t from;          /* first step (step-less: allocation index) of the streak */
    uint64_t base;         /* live bytes just before it */
    uint32_t steps;        /* snapshots since from (inclusive) */
    uint32_t flat;         /* of those, snapshots without growth */
} streak;

/* One allocation site (string id of its name). */
typedef struct leak_site {
    uint64_t id;
    char name[128];
    bool named;
    uint64_t live_bytes, live_allocs;
    uint64_t prev_bytes;   /* live bytes at the end of the previous step */
    streak st;             /* over steps */
    bool active;           /* in leak_state.active: changed since the last snapshot, or growing */
    /* step-less: over this site's allocations */
    uint64_t allocs;       /* ALLOC records of the site so far */
    uint64_t ev_prev;      /* live bytes after its previous ALLOC */
    streak ev;
    uint64_t ev_from_pos;  /* record position where ev started */
    uint64_t ev_last_pos;  /* ... of its last growing ALLOC */
    uint64_t ev_last_bytes;/* live bytes then */
    uint32_t ev_last_steps;/* ev.steps then */
    uint64_t peak_bytes;   /* the most live at once ... */
    uint64_t peak_ts;      /* ... first reached then ... */
    int64_t peak_step;     /* ... in this step */
    uint64_t peak_allocs;  /* the most blocks live at once */
    bool thread_known;     /* the thread of an ALLOC of it was recorded ... */
    uint32_t thread;       /* ... its index */
    bool threads_many;     /* another recorded thread allocated here too */
    /* at the end (leak_site_ends): its blocks still live */
    uint64_t end_max_block;
    uint64_t end_first_ts, end_first_alloc;
    int64_t end_first_step;
    uint64_t end_first_pos, end_last_pos;
} leak_site;

/* A live allocation, keyed by (ptr, dev). */
typedef struct live_alloc {
    uint64_t ptr;
    int32_t dev;   /* device_kind << 16 | (uint16_t)device */
    uint32_t site; /* index into sites */
    uint64_t bytes;
    uint64_t ts;   /* of its ALLOC */
    int64_t step;  /* ... its step */
    uint64_t pos;  /* ... its record position */
    uint64_t idx;  /* ... its index among the site's allocations */
} live_alloc;

typedef struct leak_state {
    tft_u64map live;      /* live_hash -> live_alloc, at most 3/4 full */
    leak_site *sites;
    size_t nsites, sites_cap;
    tft_u64map site_idx;  /* site id -> index in sites */
    uint32_t *active;     /* sites a snapshot must look at: live bytes changed since the last
                           * one, or a growth streak on. The others cannot change their streak,
                           * so a snapshot costs O(active), not O(sites): O(records) in all */
    size_t nactive, active_cap;
    int64_t cur_step;     /* step in progress, TFT_STEP_NONE before the first */
    bool step_open;       /* cur_step has records and no snapshot yet */
    bool snapped;         /* a snapshot was taken ... */
    int64_t snap_step;    /* ... of this step, the latest */
    uint64_t steps_seen;  /* snapshots taken */
    uint64_t pos;         /* records read: the step-less clock */
    uint64_t ts_min;      /* the earliest timestamp seen (UINT64_MAX before any) */
    int64_t last_step;    /* the latest step seen, TFT_STEP_NONE before any */
    bool exit_known;      /* a PROCESS exit record was read */
    int exit_code, exit_signal;
} leak_state;

/* ---- live allocations -------------------------------------------------- */

static uint64_t live_hash(const live_alloc *a)
{
    return tft_u64map_mix(a->ptr ^ ((uint64_t)(uint32_t)a->dev << 48));
}

static bool live_eq(const void *ctx, const void *val)
{
    const live_alloc *a = ctx, *b = val;
    return a->ptr == b->ptr && a->dev == b->dev;
}

/* ---- sites ------------------------------------------------------------- */

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

static void leak_site_name(leak_site *st, const tft_reader *r)
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

/* ---- records ----------------------------------------------------------- */

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

/* Sums up every site's blocks still live at the end (the end_* fields). */
static void leak_site_ends(leak_state *s)
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
static uint64_t leak_rank_start(const leak_state *s, const tft_reader *r)
{
    uint64_t t = s->ts_min;
    const tft_file_info *fi = tft_reader_info(r);
    if (fi && fi->start_monotonic_ns && fi->start_monotonic_ns < t)
        t = fi->start_monotonic_ns;
    return t == UINT64_MAX ? 0 : t;
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
static void leak_fill_at_exit(leak_finding *l)
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
    for (size_t k = 0; k < s->nsites && n < max; k++) {
        leak_site *st = &s->sites[k];
        bool growth = stepless ? leaks_per_alloc(st, s->pos)
                               : st->st.on && st->st.steps - st->st.flat >= need && st->live_bytes > st->st.base;
        if (!growth && !leaks_at_exit(st, exit_min_bytes, s->pos))
            continue;
        leak_site_name(st, r);
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
static void leak_fill_mem(leak_state *s, tft_reader *r, leak_rank_mem *mem)
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
}

/* ---- comparing GOLDEN and BAD ------------------------------------------ */

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

/* The peak rule for one site (see core.h). */
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
            if ((!gs && !g_whole) || reported(out, n, bs->site))
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

/* ---- text ---------------------------------------------------------------- */

/* ", the oldest allocated T s into the run (step S)" for what is live. */
static void describe_first(const leak_finding *l, char *buf, size_t n)
{
    char sb[48];
    if (!l->first_known) {
        snprintf(buf, n, "%s", "");
        return;
    }
    snprintf(buf, n, ", the oldest allocated %.3f s into the run (%s)", (double)l->first_alloc_ns * 1e-9,
             core_step_text(l->first_alloc_step, sb, sizeof(sb)));
}

void leak_describe(const leak_finding *l, char *buf, size_t n)
{
    char first[96], golden[160] = "", sb[48];
    describe_first(l, first, sizeof(first));
    if (l->how == LEAK_PEAK) {
        snprintf(buf, n, "%s: held up to %" PRIu64 " bytes in %" PRIu64 " blocks at once, %.3f s into the run (%s; "
                 "GOLDEN: at most %" PRIu64 " bytes in %" PRIu64 " blocks), %" PRIu64 " bytes live at the end",
                 l->site, l->peak_live_bytes, l->peak_live_allocs, (double)l->peak_ns * 1e-9,
                 core_step_text(l->peak_step, sb, sizeof(sb)), l->golden_peak_live_bytes, l->golden_peak_live_allocs,
                 l->live_bytes_at_end);
        return;
    }
    if (l->how == LEAK_AT_EXIT) {
        if (l->golden_known && l->vs_golden_peak)
            snprintf(golden, sizeof(golden), " (GOLDEN held at most %" PRIu64 " bytes there at once; BAD did not "
                     "run to a normal end)", l->golden_peak_live_bytes);
        else if (l->golden_known)
            snprintf(golden, sizeof(golden), " (GOLDEN: %" PRIu64 " bytes in %" PRIu64 " blocks)",
                     l->golden_live_bytes_at_end, l->golden_live_allocs_at_end);
        else if (l->min_bytes)
            snprintf(golden, sizeof(golden), " (at least %" PRIu64 " bytes: --leak-min-bytes)", l->min_bytes);
        snprintf(buf, n, "%s: %" PRIu64 " bytes in %" PRIu64 " blocks live at the end%s%s", l->site,
                 l->live_bytes_at_end, l->live_allocs_at_end, golden, first);
        return;
    }
    if (l->golden_known)
        snprintf(golden, sizeof(golden), "; GOLDEN: %" PRIu64 " bytes live at the end", l->golden_live_bytes_at_end);
    if (l->per_alloc)
        snprintf(buf, n, "%s: +%.0f bytes per allocation over %" PRIu64 " allocations of the site (no steps), %" PRIu64
                 " bytes live at the end%s%s", l->site, l->bytes_per_step, l->iterations, l->live_bytes_at_end,
                 first, golden);
    else
        snprintf(buf, n, "%s: +%.0f bytes/step from step %lld, %" PRIu64 " bytes live at the end%s%s", l->site,
                 l->bytes_per_step, (long long)l->from_step, l->live_bytes_at_end, first, golden);
}

int leak_find(tft_reader *r, int rank, leak_finding *out, int max)
{
    return leak_find_mem(r, rank, 0, out, max, NULL);
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

struct leak_scan {
    leak_state s;
};

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
    return 0;
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
