/*
 * tft_stats_ring.h — the host bookkeeping of a queue of pending records
 * whose payloads (statistics, copied bytes) arrive asynchronously: a FIFO
 * of slots and a circular byte arena that holds each slot's payload in one
 * contiguous piece. Pure C, no CUDA: tft_stats_cuda_ring.h builds the
 * device side on it, and tests exercise it without a GPU.
 *
 * Records leave in the order they entered, so a trace keeps program order
 * even though statistics come back later. The arena is caller-provided
 * (pinned host memory for the CUDA ring) and never grows.
 *
 * Arena rule: payloads are 16-byte aligned and contiguous; a payload that
 * does not fit before the arena's end starts at offset 0 and the skipped
 * tail is charged to that slot until it leaves. Live payloads never
 * overlap.
 *
 * Not thread-safe: one producer-and-consumer thread per ring.
 */
#ifndef TFT_STATS_RING_H
#define TFT_STATS_RING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tft_sring_slot {
    size_t off;  /* payload offset in the arena */
    size_t len;  /* payload bytes asked for */
    size_t span; /* arena bytes the slot holds: len rounded up to 16, plus any wrap skip */
} tft_sring_slot;

typedef struct tft_sring {
    uint8_t *arena;        /* caller's memory, arena_bytes long (a multiple of 16) */
    size_t arena_bytes;
    tft_sring_slot *slots; /* caller's array of nslots */
    uint32_t nslots;
    uint32_t head, count;  /* queued slots: head .. head + count - 1 (mod nslots) */
    size_t wpos;           /* offset where the next payload goes */
    size_t used;           /* arena bytes held by queued slots */
} tft_sring;

/* Sets up r over arena (16-byte aligned; arena_bytes is rounded down to a
 * multiple of 16) and slots. Returns 0, or -EINVAL for NULL pointers, a
 * misaligned arena, nslots == 0. */
int tft_sring_init(tft_sring *r, void *arena, size_t arena_bytes, tft_sring_slot *slots, uint32_t nslots);

/* Appends a slot with len payload bytes (len 0: no payload, *payload =
 * NULL). Returns the slot index (>= 0), -EAGAIN when the queue or the arena
 * is full now (release the head and retry), -E2BIG when len can never fit.
 * *payload is set on success. */
int tft_sring_reserve(tft_sring *r, size_t len, void **payload);

/* Index of the oldest slot, or -ENOENT when the queue is empty. */
int tft_sring_head(const tft_sring *r);

/* Releases the oldest slot and its payload space. No-op when empty. */
void tft_sring_pop(tft_sring *r);

/* The payload of slot i (NULL when it has none). */
void *tft_sring_payload(const tft_sring *r, uint32_t i);

#ifdef __cplusplus
}
#endif
#endif
