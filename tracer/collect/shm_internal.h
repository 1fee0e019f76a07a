/*
 * shm_internal.h — the shared-memory region between traced processes and
 * the collector: a header with process slots, and per-thread SPSC byte rings
 * of variable-length records (the trace format's records, 8-byte aligned).
 *
 * Producers (traced threads) never lock, allocate or do I/O: a ring write is
 * a bounds check, a memcpy and a release store. The collector trusts nothing
 * in the region: lengths and indices are checked before use, because the
 * traced program can scribble over its own memory.
 */
#ifndef TFT_SHM_INTERNAL_H
#define TFT_SHM_INTERNAL_H

#include "tft_clock.h" /* tft_clock_mono_ns: stamps without the TSC */
#include "tft_format.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SHM_MAGIC 0x314d4853745466ull /* "fTtSHM1" */
#define SHM_VERSION 4u /* 2: thread index and name in the ring; 3: stalled drops, collector pid; 4: drop kinds and steps, wait */
#define SHM_MAX_PROCS 256u
#define SHM_SENT_IDS 1024u            /* per-ring cache of string ids already sent */
#define RING_PAD_KIND 0xFFFFu         /* filler to the end of the ring buffer */
#define SHM_NODROP_TIMEOUT_DEFAULT_NS 5000000000ull /* --no-drop-timeout default: 5 s */
#define SHM_DROP_WAIT_DEFAULT_NS 200000000ull /* TFT_RING_WAIT_MS default: 200 ms */
#define SHM_DROP_KINDS 16u            /* per-kind drop counters: record kinds 0..15 (TFT_REC_*) */

enum { PROC_FREE = 0, PROC_ACTIVE = 1, PROC_DONE = 2 };
enum { RING_FREE = 0, RING_ACTIVE = 1, RING_RETIRED = 2 };
enum { SHM_NO_DROP = 1u, SHM_TSC = 2u /* record timestamps are raw TSC ticks */ };

typedef struct shm_proc {
    _Atomic uint32_t state;     /* PROC_* */
    int32_t pid;
    int32_t rank;               /* from the launcher environment, -1 none */
    int32_t world_size;         /* -1 unknown */
    uint32_t index;             /* process index in the session */
    uint32_t pad;
} shm_proc;

typedef struct shm_ring {
    _Atomic uint64_t head;      /* bytes published by the producer */
    char pad0[56];
    _Atomic uint64_t tail;      /* bytes consumed by the collector */
    char pad1[56];
    _Atomic uint32_t state;     /* RING_* */
    uint32_t proc;              /* index of the owning shm_proc */
    int32_t tid;
    uint32_t thread_index;      /* the thread's number in its process (THREAD records) */
    _Atomic uint64_t dropped;   /* records the producer could not fit */
    _Atomic uint64_t dropped_stalled; /* of those, --no-drop gave up on a stalled or dead collector */
    char thread_name[16];       /* the thread's name at claim time, NUL-terminated */
    /* What was dropped (SHM_VERSION 4). The producer counts each drop in
     * drop_kind[kind] (kinds >= SHM_DROP_KINDS in slot 0) before dropped,
     * and spans the steps of the drops since the collector last looked:
     * a drop that finds dropped == drop_ack (all drops so far attributed)
     * starts a new span. The collector reads dropped, then the span and
     * the kinds, then stores drop_ack = the dropped it read. A drop that
     * races the collector's read widens the next span (never narrows it);
     * kind counts are exact in total once the ring is idle. */
    _Atomic uint64_t drop_kind[SHM_DROP_KINDS];
    _Atomic int64_t drop_first_step;  /* lowest step of the span (TFT_STEP_NONE: drops outside steps only) */
    _Atomic int64_t drop_last_step;   /* highest step of the span */
    _Atomic uint64_t drop_ack;        /* collector-written: dropped when it last attributed */
    uint64_t cached_tail;       /* producer-private: last tail seen, saves a shared read */
    uint64_t gave_up_tail;      /* producer-private: tail when a bounded wait last gave up, ~0 none */
    uint64_t sent_ids[SHM_SENT_IDS]; /* producer-private */
    /* data[ring_bytes] follows at offsetof(shm_ring, data) */
    _Alignas(64) char data[];
} shm_ring;

typedef struct shm_hdr {
    uint64_t magic;
    uint32_t version;
    uint32_t flags;             /* SHM_NO_DROP */
    uint64_t total_bytes;       /* size of the mapping */
    uint64_t ring_bytes;        /* data bytes per ring, multiple of 4096 */
    uint64_t ring_stride;       /* bytes between ring headers */
    uint64_t rings_offset;
    uint32_t n_rings;
    _Atomic uint32_t next_index;      /* process index counter */
    _Atomic uint64_t heartbeat_ns;    /* collector liveness (CLOCK_MONOTONIC) */
    _Atomic uint32_t collector_done;  /* collector has stopped draining */
    uint32_t pad;
    uint64_t tsc0, ns0;         /* SHM_TSC: a TSC reading and CLOCK_MONOTONIC at the same instant */
    double ns_per_tick;         /* SHM_TSC: calibrated at region init */
    shm_proc procs[SHM_MAX_PROCS];
    /* --no-drop (SHM_NO_DROP): a producer facing a full ring waits while
     * the collector lives and drains; it gives up (drops, counted in the
     * ring's dropped_stalled) once the heartbeat is older than this (0 = no
     * limit) or the collector's process is gone. */
    uint64_t nodrop_timeout_ns;
    int32_t collector_pid;      /* the draining process (tftrace, or the program itself in-process) */
    uint32_t pad2;
    /* Without --no-drop: a producer facing a full ring waits for the
     * collector to make room while it keeps draining (the ring's tail
     * moves at least once per drop_wait_ns); a wait that sees no progress
     * for that long gives up and drops, and the ring drops at once until
     * its tail moves again, so a stalled collector costs one wait, not
     * one per record. 0: drop at once (the behaviour before SHM_VERSION 4). */
    uint64_t drop_wait_ns;
} shm_hdr;

/* Bytes of a region with n_rings rings of ring_bytes each. */
size_t shm_region_size(uint32_t n_rings, size_t ring_bytes);
/* Initialises a zeroed region of size bytes; the calling process is the
 * collector (collector_pid), the --no-drop wait limit is 5 s, the bounded
 * wait before a drop 200 ms (drop_wait_ns). */
void shm_region_init(shm_hdr *h, size_t bytes, uint32_t n_rings, size_t ring_bytes, uint32_t flags);
/* Sets drop_wait_ns from TFT_RING_WAIT_MS (milliseconds, 0 = drop at
 * once); a malformed value is reported on stderr and the default kept. */
void shm_drop_wait_from_env(shm_hdr *h);
/* Checks a region's header before a producer or collector uses it. */
bool shm_region_valid(const shm_hdr *h, size_t bytes);
static inline shm_ring *shm_ring_at(shm_hdr *h, uint32_t i)
{
    return (shm_ring *)((char *)h + h->rings_offset + (uint64_t)i * h->ring_stride);
}

/* Producer side. ring_write copies one record (rec->len bytes); returns 0,
 * or -ENOSPC when the ring is full (dropped and counted by kind and step:
 * rec->kind, rec->step). A full ring first waits: while the collector
 * drains (drop_wait_ns), or with SHM_NO_DROP while the collector is alive
 * (nodrop_timeout_ns). Keeps errno. */
int ring_write(shm_hdr *h, shm_ring *r, const tft_rec *rec);
/* Claims a free ring for the calling thread of process proc, NULL if none.
 * index and name (may be NULL) identify the thread in THREAD records. */
shm_ring *ring_claim(shm_hdr *h, uint32_t proc, int32_t tid, uint32_t index, const char *name);

/* Collector side: calls fn for each published record, then releases them.
 * Returns bytes consumed. A malformed length ends the ring's data as
 * corrupt: everything published is skipped and counted as dropped. */
typedef void (*ring_record_fn)(void *ctx, uint32_t proc, tft_rec *rec); /* rec: a private copy */
size_t ring_drain(shm_hdr *h, shm_ring *r, ring_record_fn fn, void *ctx);
/* Collector side, ring_drain's copying form: moves whole published records
 * (checked as ring_drain checks them, filler skipped) into dst, at most
 * room bytes, and releases their ring space before returning, so the
 * producer has it back without waiting for the records to be written.
 * dst gets 8-byte aligned private copies (dst 8-byte aligned) whose len is
 * the one checked. Returns the bytes written to dst; *more is set when
 * published records were left for want of room. */
size_t ring_pull(shm_hdr *h, shm_ring *r, char *dst, size_t room, bool *more);

/* Uses the TSC for record timestamps when the kernel's clocksource is the
 * (invariant, synchronised) TSC: 12 ns instead of 30 for clock_gettime here.
 * Calibrates over ~2 ms. Called by whoever initialises the region. */
void shm_setup_clock(shm_hdr *h);

/* A record timestamp: raw TSC ticks (SHM_TSC) or CLOCK_MONOTONIC ns. The
 * collector converts ticks to ns (shm_ticks_to_ns) before writing. */
#if defined(__x86_64__)
#include <x86intrin.h>
static inline uint64_t shm_stamp(const shm_hdr *h)
{
    return (h->flags & SHM_TSC) ? __rdtsc() : tft_clock_mono_ns();
}
#else
static inline uint64_t shm_stamp(const shm_hdr *h) { (void)h; return tft_clock_mono_ns(); }
#endif

#endif
