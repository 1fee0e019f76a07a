/*
 * stats_ring.c — FIFO of pending records with a circular payload arena
 * (tft_stats_ring.h). Held bytes are always the circular range
 * [wpos - used, wpos): a reservation takes bytes at wpos (or skips to 0 when
 * the payload would cross the end, charging the skipped tail to itself) and
 * a release gives back the oldest slot's span, which is at the front of
 * that range because slots leave in the order they came.
 */
#include "tft_stats_ring.h"

#include <errno.h>
#include <string.h>

#define ALIGN 16u

int tft_sring_init(tft_sring *r, void *arena, size_t arena_bytes, tft_sring_slot *slots, uint32_t nslots)
{
    if (!r || !slots || nslots == 0 || (arena_bytes && !arena) || ((uintptr_t)arena % ALIGN))
        return -EINVAL;
    memset(r, 0, sizeof(*r));
    r->arena = arena;
    r->arena_bytes = arena_bytes & ~(size_t)(ALIGN - 1);
    r->slots = slots;
    r->nslots = nslots;
    return 0;
}

int tft_sring_reserve(tft_sring *r, size_t len, void **payload)
{
    size_t need = (len + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (len > r->arena_bytes || need > r->arena_bytes)
        return -E2BIG;
    if (r->count == r->nslots)
        return -EAGAIN;
    if (r->used == 0)
        r->wpos = 0; /* empty arena: start over, no wrap needed */
    size_t start = r->wpos, skip = 0;
    if (need && start + need > r->arena_bytes) {
        skip = r->arena_bytes - start;
        start = 0;
    }
    if (r->used + skip + need > r->arena_bytes)
        return -EAGAIN;
    uint32_t i = (r->head + r->count) % r->nslots;
    r->slots[i] = (tft_sring_slot){.off = start, .len = len, .span = skip + need};
    if (need)
        r->wpos = start + need;
    r->used += skip + need;
    r->count++;
    *payload = len ? r->arena + start : NULL;
    return (int)i;
}

int tft_sring_head(const tft_sring *r)
{
    return r->count ? (int)r->head : -ENOENT;
}

void tft_sring_pop(tft_sring *r)
{
    if (!r->count)
        return;
    r->used -= r->slots[r->head].span;
    r->head = (r->head + 1) % r->nslots;
    r->count--;
}

void *tft_sring_payload(const tft_sring *r, uint32_t i)
{
    return i < r->nslots && r->slots[i].len ? r->arena + r->slots[i].off : NULL;
}
