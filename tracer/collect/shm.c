/*
 * shm.c — the shared-memory region: layout, ring claim, the producer's ring
 * write (hot path: no locks, no allocation, no I/O) and the collector's drain.
 */
#include "shm_internal.h"
#include "tft_procstat.h" /* the collector gone: no allocation on the program's thread */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void shm_setup_clock(shm_hdr *h)
{
#if defined(__x86_64__)
    char cs[32] = "";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (f) {
        if (!fgets(cs, sizeof(cs), f))
            cs[0] = '\0';
        fclose(f);
    }
    if (strncmp(cs, "tsc", 3) != 0 || getenv("TFT_NO_TSC"))
        return;
    uint64_t n0 = tft_clock_mono_ns(), t0 = __rdtsc(), n1, t1;
    do {
        n1 = tft_clock_mono_ns();
        t1 = __rdtsc();
    } while (n1 - n0 < 2000000u);
    if (t1 <= t0)
        return;
    h->tsc0 = t0;
    h->ns0 = n0;
    h->ns_per_tick = (double)(n1 - n0) / (double)(t1 - t0);
    h->flags |= SHM_TSC;
#else
    (void)h;
#endif
}

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

size_t shm_region_size(uint32_t n_rings, size_t ring_bytes)
{
    size_t stride = round_up(sizeof(shm_ring) + ring_bytes, 4096);
    return round_up(sizeof(shm_hdr), 4096) + (size_t)n_rings * stride;
}

void shm_region_init(shm_hdr *h, size_t bytes, uint32_t n_rings, size_t ring_bytes, uint32_t flags)
{
    h->version = SHM_VERSION;
    h->flags = flags;
    h->total_bytes = bytes;
    h->ring_bytes = ring_bytes;
    h->ring_stride = round_up(sizeof(shm_ring) + ring_bytes, 4096);
    h->rings_offset = round_up(sizeof(shm_hdr), 4096);
    h->n_rings = n_rings;
    h->nodrop_timeout_ns = SHM_NODROP_TIMEOUT_DEFAULT_NS;
    h->drop_wait_ns = SHM_DROP_WAIT_DEFAULT_NS;
    h->collector_pid = (int32_t)getpid();
    atomic_store(&h->heartbeat_ns, tft_clock_mono_ns());
    atomic_store_explicit((_Atomic uint64_t *)&h->magic, SHM_MAGIC, memory_order_release);
}

void shm_drop_wait_from_env(shm_hdr *h)
{
    const char *v = getenv("TFT_RING_WAIT_MS");
    char *end;
    if (!v || !*v)
        return;
    unsigned long long ms = strtoull(v, &end, 10);
    if (*end || v[0] == '-' || ms > 600000u) {
        fprintf(stderr, "tftrace: TFT_RING_WAIT_MS=%s is not a number of ms from 0 to 600000; using %llu\n", v,
                (unsigned long long)(SHM_DROP_WAIT_DEFAULT_NS / 1000000u));
        return;
    }
    h->drop_wait_ns = ms * 1000000u;
}

bool shm_region_valid(const shm_hdr *h, size_t bytes)
{
    if (bytes < sizeof(*h) || h->magic != SHM_MAGIC || h->version != SHM_VERSION)
        return false;
    if (h->total_bytes != bytes || h->ring_bytes < 4096 || h->ring_bytes % 4096 ||
        h->ring_stride < sizeof(shm_ring) + h->ring_bytes || h->rings_offset < sizeof(*h))
        return false;
    return h->rings_offset + (uint64_t)h->n_rings * h->ring_stride <= bytes;
}

/* Maps the ring's pages into this process now, once per thread, so page
 * faults stay off the record path. */
static void prefault(char *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
    if (madvise(p, n, MADV_POPULATE_WRITE) == 0)
        return;
#endif
    for (size_t i = 0; i < n; i += 4096)
        atomic_fetch_add_explicit((_Atomic char *)(p + i), 0, memory_order_relaxed);
}

shm_ring *ring_claim(shm_hdr *h, uint32_t proc, int32_t tid, uint32_t index, const char *name)
{
    for (uint32_t i = 0; i < h->n_rings; i++) {
        shm_ring *r = shm_ring_at(h, i);
        uint32_t expect = RING_FREE;
        if (atomic_load_explicit(&r->state, memory_order_relaxed) != RING_FREE)
            continue;
        /* the collector resets head/tail before marking a ring FREE; the
         * fields below are published to it by the first record's head store */
        if (atomic_compare_exchange_strong(&r->state, &expect, RING_ACTIVE)) {
            r->proc = proc;
            r->tid = tid;
            r->thread_index = index;
            memset(r->thread_name, 0, sizeof(r->thread_name));
            if (name)
                strncpy(r->thread_name, name, sizeof(r->thread_name) - 1);
            r->cached_tail = 0;
            r->gave_up_tail = UINT64_MAX;
            prefault(r->data, h->ring_bytes);
            memset(r->sent_ids, 0, sizeof(r->sent_ids));
            return r;
        }
    }
    return NULL;
}

enum { WAIT_ON = 0, WAIT_DONE = 1, WAIT_STALLED = 2 };

/* Whether a --no-drop producer facing a full ring keeps waiting. The
 * collector polls (and beats) every millisecond or so while it lives; it
 * can stall for longer than a program should wait — a slow disk under a
 * close's fsync, SIGSTOP, a debugger — or die (SIGKILL, OOM) and never
 * drain again. WAIT_DONE: the collector finished (the run is ending: an
 * ordinary drop). WAIT_STALLED: its heartbeat is older than the limit, or
 * its process is gone (and silent for 200 ms, so a pid from another pid
 * namespace is not taken for a dead one). *pid_checked_ns paces the probe
 * to one per 10 ms. */
static int nodrop_wait(shm_hdr *h, uint64_t *pid_checked_ns)
{
    if (atomic_load_explicit(&h->collector_done, memory_order_acquire))
        return WAIT_DONE;
    uint64_t now = tft_clock_mono_ns();
    uint64_t hb = atomic_load_explicit(&h->heartbeat_ns, memory_order_relaxed);
    uint64_t age = now > hb ? now - hb : 0;
    uint64_t limit = h->nodrop_timeout_ns;
    if (limit && age >= limit)
        return WAIT_STALLED;
    if (age > 200000000u && h->collector_pid > 0 && now - *pid_checked_ns > 10000000u) {
        *pid_checked_ns = now;
        if (tft_procstat_gone((pid_t)h->collector_pid))
            return WAIT_STALLED;
    }
    return WAIT_ON;
}

/* Whether a producer facing a full ring (tail as just read) keeps waiting
 * without --no-drop: while the collector drains this ring (its tail moved
 * within the last drop_wait_ns). *since and *seen hold the last tail seen
 * moving and when; a wait that gives up marks the ring (gave_up_tail), and
 * later records drop at once until the tail moves again. */
static int bounded_wait(shm_hdr *h, shm_ring *r, uint64_t tail, uint64_t *since, uint64_t *seen)
{
    if (!h->drop_wait_ns || atomic_load_explicit(&h->collector_done, memory_order_acquire) ||
        r->gave_up_tail == tail)
        return WAIT_DONE;
    uint64_t now = tft_clock_mono_ns();
    if (!*since || tail != *seen) {
        *since = now;
        *seen = tail;
        r->gave_up_tail = UINT64_MAX;
        return WAIT_ON;
    }
    if (now - *since < h->drop_wait_ns)
        return WAIT_ON;
    r->gave_up_tail = tail;
    return WAIT_DONE;
}

/* Counts one dropped record: its kind, its step in the ring's span of
 * unattributed drops (shm_ring: the protocol), then the total (release:
 * the collector that sees the total sees the rest). */
static void count_drop(shm_ring *r, const tft_rec *rec, bool stalled)
{
    uint32_t k = rec->kind < SHM_DROP_KINDS ? rec->kind : 0;
    int64_t step = rec->step;
    uint64_t d = atomic_load_explicit(&r->dropped, memory_order_relaxed);
    if (d == atomic_load_explicit(&r->drop_ack, memory_order_acquire)) {
        atomic_store_explicit(&r->drop_first_step, step, memory_order_relaxed);
        atomic_store_explicit(&r->drop_last_step, step, memory_order_relaxed);
    } else if (step != TFT_STEP_NONE) {
        int64_t f = atomic_load_explicit(&r->drop_first_step, memory_order_relaxed);
        int64_t l = atomic_load_explicit(&r->drop_last_step, memory_order_relaxed);
        if (f == TFT_STEP_NONE || step < f)
            atomic_store_explicit(&r->drop_first_step, step, memory_order_relaxed);
        if (l == TFT_STEP_NONE || step > l)
            atomic_store_explicit(&r->drop_last_step, step, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&r->drop_kind[k], 1, memory_order_relaxed);
    if (stalled)
        atomic_fetch_add_explicit(&r->dropped_stalled, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->dropped, 1, memory_order_release);
}

int ring_write(shm_hdr *h, shm_ring *r, const tft_rec *rec)
{
    uint64_t cap = h->ring_bytes;
    uint32_t len = rec->len;
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    /* a power-of-two ring (the default) takes a mask, not a 64-bit division */
    uint64_t pos = (cap & (cap - 1)) ? head % cap : head & (cap - 1);
    uint64_t pad = pos + len > cap ? cap - pos : 0;
    uint64_t pid_checked = 0, since = 0, seen = 0;
    unsigned spins = 0;
    int saved_errno = errno; /* the program's: our probes must not change it */
    while (head + pad + len - r->cached_tail > cap) {
        uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
        r->cached_tail = tail;
        if (head + pad + len - tail <= cap)
            break;
        int w = (h->flags & SHM_NO_DROP) ? nodrop_wait(h, &pid_checked) : bounded_wait(h, r, tail, &since, &seen);
        if (w != WAIT_ON) {
            count_drop(r, rec, w == WAIT_STALLED);
            errno = saved_errno;
            return -ENOSPC;
        }
        /* yield first; then sleep, which hands a core shared with the
         * collector (a loaded node, busy-polling MPI ranks) to it */
        if (++spins < 64 || (h->flags & SHM_NO_DROP)) {
            sched_yield();
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    errno = saved_errno;
    if (pad) {
        uint32_t filler[2] = {RING_PAD_KIND, (uint32_t)pad};
        memcpy(r->data + pos, filler, sizeof(filler));
        pos = 0;
    }
    memcpy(r->data + pos, rec, len);
    atomic_store_explicit(&r->head, head + pad + len, memory_order_release);
    return 0;
}

/* The entry at tail of ring r (capacity cap) below head: its offset in
 * the ring (*pos) and length (*len). Returns 1 for a record, 0 for the
 * padding that fills the ring's end (skip *len bytes), -1 when its header
 * is not one a producer writes (a length out of bounds: the producer's
 * memory is not trusted). */
static int ring_peek(const shm_ring *r, uint64_t cap, uint64_t tail, uint64_t head, uint64_t *pos, uint32_t *len)
{
    uint32_t w[2];
    *pos = tail % cap;
    memcpy(w, r->data + *pos, sizeof(w));
    *len = w[1];
    if ((w[0] & 0xFFFFu) == RING_PAD_KIND && *len == cap - *pos)
        return 0;
    if (*len < sizeof(tft_rec) || *len % 8 || *len > TFT_REC_MAX_BYTES || *pos + *len > cap || tail + *len > head)
        return -1;
    return 1;
}

size_t ring_drain(shm_hdr *h, shm_ring *r, ring_record_fn fn, void *ctx)
{
    uint64_t cap = h->ring_bytes;
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t start = tail;
    if (head < tail || head - tail > cap) { /* corrupt counters */
        atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
        atomic_store_explicit(&r->tail, head, memory_order_release);
        return 0;
    }
    _Alignas(8) char buf[TFT_REC_MAX_BYTES];
    while (tail < head) {
        uint64_t pos;
        uint32_t len;
        int at = ring_peek(r, cap, tail, head, &pos, &len);
        if (at == 0) {
            tail += len;
            continue;
        }
        if (at < 0) {
            atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
            tail = head;
            break;
        }
        /* copy out first: the producer's memory is not trusted to hold still */
        memcpy(buf, r->data + pos, len);
        ((tft_rec *)buf)->len = len;
        fn(ctx, r->proc, (tft_rec *)buf);
        tail += len;
    }
    atomic_store_explicit(&r->tail, tail, memory_order_release);
    return (size_t)(tail - start);
}

size_t ring_pull(shm_hdr *h, shm_ring *r, char *dst, size_t room, bool *more)
{
    uint64_t cap = h->ring_bytes;
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    size_t out = 0;
    *more = false;
    if (head < tail || head - tail > cap) { /* corrupt counters: as ring_drain */
        atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
        atomic_store_explicit(&r->tail, head, memory_order_release);
        return 0;
    }
    while (tail < head) {
        uint64_t pos;
        uint32_t len;
        int at = ring_peek(r, cap, tail, head, &pos, &len);
        if (at == 0) {
            tail += len;
            continue;
        }
        if (at < 0) {
            atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
            tail = head;
            break;
        }
        if (len > room - out) {
            *more = true;
            break;
        }
        /* the copy is private: its length is the one checked, whatever the
         * producer's memory says now */
        memcpy(dst + out, r->data + pos, len);
        ((tft_rec *)(dst + out))->len = len;
        out += len;
        tail += len;
    }
    atomic_store_explicit(&r->tail, tail, memory_order_release);
    return out;
}
