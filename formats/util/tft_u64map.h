/*
 * tft_u64map.h — the hash map of our sources: a u64 key to a value of a
 * fixed size, by open addressing with linear probing and backward-shift
 * deletion (no tombstones). Internal: static inline functions for every
 * component's sources (util/, like tft_msg.h), never a public header and
 * never exported.
 *
 * Contract.
 * - Keys: any u64, 0 and UINT64_MAX included (occupancy is a byte per
 *   slot, not a reserved key). A plain map takes the whole key (an id, a
 *   rank) and mixes it (tft_u64map_mix) before masking, so that ids which
 *   share their low bits (a crafted file) do not share a probe chain. A
 *   hashed map (opts.hashed) takes the caller's hash of a longer key
 *   ((communicator, sequence number), (pointer, device)) as it is.
 * - Equality: key equality, and, where the key is a hash, eq(ctx, value):
 *   the caller compares the longer key its value holds (NULL: keys alone).
 * - Values: vsize bytes each (a type T with vsize = sizeof(T) is aligned
 *   for T, up to 8 bytes), zeroed by the insert that creates them. A
 *   pointer to a value stays valid until the next insert of a new key,
 *   reserve, remove, clear, drain or free: growth and removal move entries.
 * - Growth: the table is 0 or a power of two >= min_cap slots; it doubles
 *   before an insert would pass load_pct percent (50 by default, at most
 *   90). So a free slot always exists: every probe stops at one, within
 *   the table size, and expected O(1) at these loads.
 * - Bound: with max_n, a new key beyond max_n entries is refused
 *   (-ENOSPC); existing keys can still be found, updated and removed.
 *   Callers that bound their memory for hostile input keep their bound.
 * - Errors: -ENOMEM when growth fails (or its size would overflow); the
 *   map is then left as it was. -ENOSPC at max_n.
 * - Memory: cap * (8 + vsize + 1) bytes, one allocation. Not thread-safe.
 * - Order: iteration (tft_u64map_next, tft_u64map_drain) is slot order:
 *   deterministic for one sequence of operations, meaningless otherwise.
 *
 * A test may define TFT_U64MAP_MALLOC(bytes) and TFT_U64MAP_FREE(p)
 * before including this header to inject allocation failures.
 */
#ifndef TFT_U64MAP_H
#define TFT_U64MAP_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef TFT_U64MAP_MALLOC
#define TFT_U64MAP_MALLOC(bytes) malloc(bytes)
#define TFT_U64MAP_FREE(p) free(p)
#endif

/* Whether the value val (of the entry whose key matched) is the caller's
 * longer key; ctx is the caller's. */
typedef bool (*tft_u64map_eq_fn)(const void *ctx, const void *val);

typedef struct tft_u64map_opts {
    size_t vsize;      /* bytes of a value (>= 1) */
    size_t max_n;      /* most entries; 0: no bound */
    size_t min_cap;    /* first table size (rounded up to a power of two); 0: 64 */
    unsigned load_pct; /* the table grows before passing this load (percent); 0: 50 */
    bool hashed;       /* keys are the caller's hashes: used unmixed */
} tft_u64map_opts;

typedef struct tft_u64map {
    uint64_t *keys;      /* cap keys; keys, vals and used are one allocation */
    unsigned char *vals; /* cap values of vsize bytes */
    unsigned char *used; /* cap bytes: 1 where a slot holds an entry */
    size_t cap;          /* 0 or a power of two */
    size_t n;            /* entries */
    size_t vsize, max_n, min_cap;
    unsigned load_pct;
    bool hashed;
} tft_u64map;

/* murmur3's 64-bit finaliser: a bijection, so distinct ids stay distinct. */
static inline uint64_t tft_u64map_mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

/* A hash of a two-part key (a, b), for hashed maps: a multiply of b, then
 * half of murmur3's finaliser. */
static inline uint64_t tft_u64map_hash2(uint64_t a, uint64_t b)
{
    uint64_t h = a ^ (b * 0x9E3779B97F4A7C15ull);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

/* An empty map with the options o; allocates nothing (the first insert
 * does). A zeroed map must be initialised before use. */
static inline void tft_u64map_init(tft_u64map *m, const tft_u64map_opts *o)
{
    size_t min_cap = 1;
    while (min_cap < (o->min_cap ? o->min_cap : 64) && min_cap <= SIZE_MAX / 4)
        min_cap *= 2;
    *m = (tft_u64map){.vsize = o->vsize ? o->vsize : 1,
                      .max_n = o->max_n,
                      .min_cap = min_cap,
                      .load_pct = o->load_pct ? (o->load_pct > 90 ? 90 : o->load_pct) : 50,
                      .hashed = o->hashed};
}

/* Frees the table; the map stays initialised (empty, same options).
 * Safe on a zeroed or freed map. */
static inline void tft_u64map_free(tft_u64map *m)
{
    TFT_U64MAP_FREE(m->keys);
    m->keys = NULL;
    m->vals = m->used = NULL;
    m->cap = m->n = 0;
}

/* Empties the map, keeping its table: O(cap). */
static inline void tft_u64map_clear(tft_u64map *m)
{
    if (m->n)
        memset(m->used, 0, m->cap);
    m->n = 0;
}

static inline size_t tft_u64map_count(const tft_u64map *m) { return m->n; }

static inline size_t u64map_home(const tft_u64map *m, uint64_t key)
{
    return (size_t)(m->hashed ? key : tft_u64map_mix(key)) & (m->cap - 1);
}

/* The slot of key (true), or the free slot it would take (false); at most
 * cap probes (*slot = cap: no free slot, which the load bound rules out). */
static inline bool u64map_probe(const tft_u64map *m, uint64_t key, tft_u64map_eq_fn eq, const void *ctx,
                                size_t *slot)
{
    size_t mask = m->cap - 1, i = u64map_home(m, key);
    for (size_t k = 0; k < m->cap; k++, i = (i + 1) & mask) {
        if (!m->used[i]) {
            *slot = i;
            return false;
        }
        if (m->keys[i] == key && (!eq || eq(ctx, m->vals + i * m->vsize))) {
            *slot = i;
            return true;
        }
    }
    *slot = m->cap;
    return false;
}

/* Rehashes into a table of ncap slots (a power of two), in slot order of
 * the old table. 0 or -ENOMEM (the map unchanged; also for a map never
 * initialised, whose min_cap is 0). */
static inline int u64map_rehash(tft_u64map *m, size_t ncap)
{
    size_t per = sizeof(uint64_t) + m->vsize + 1;
    if (ncap == 0 || ncap < m->cap || ncap > SIZE_MAX / per)
        return -ENOMEM;
    unsigned char *p = TFT_U64MAP_MALLOC(ncap * per);
    if (!p)
        return -ENOMEM;
    tft_u64map old = *m;
    m->keys = (uint64_t *)(void *)p;
    m->vals = p + ncap * sizeof(uint64_t);
    m->used = m->vals + ncap * m->vsize;
    m->cap = ncap;
    memset(m->used, 0, ncap);
    for (size_t j = 0; j < old.cap; j++) {
        if (!old.used[j])
            continue;
        size_t i = u64map_home(m, old.keys[j]);
        while (m->used[i])
            i = (i + 1) & (ncap - 1);
        m->used[i] = 1;
        m->keys[i] = old.keys[j];
        memcpy(m->vals + i * m->vsize, old.vals + j * m->vsize, m->vsize);
    }
    TFT_U64MAP_FREE(old.keys);
    return 0;
}

/* Room for one more entry: 0, -ENOSPC (max_n entries already) or -ENOMEM
 * (the table could not grow). A caller that must fail before it changes
 * anything reserves first; insert reserves by itself. */
static inline int tft_u64map_reserve(tft_u64map *m)
{
    if (m->max_n && m->n >= m->max_n)
        return -ENOSPC;
    if ((m->n + 1) * 100 <= m->cap * m->load_pct)
        return 0;
    return u64map_rehash(m, m->cap ? m->cap * 2 : m->min_cap);
}

/* The value of key (eq: see the contract), NULL when absent. */
static inline void *tft_u64map_find(const tft_u64map *m, uint64_t key, tft_u64map_eq_fn eq, const void *ctx)
{
    size_t i;
    if (!m->cap || !u64map_probe(m, key, eq, ctx, &i))
        return NULL;
    return m->vals + i * m->vsize;
}

/* The value of key in *val: 0 when it was there, 1 when it was added
 * (zeroed: the caller fills it, including the longer key eq compares),
 * or -ENOSPC / -ENOMEM with *val NULL and the map unchanged. */
static inline int tft_u64map_insert(tft_u64map *m, uint64_t key, tft_u64map_eq_fn eq, const void *ctx, void **val)
{
    size_t i = SIZE_MAX;
    *val = NULL;
    if (m->cap && u64map_probe(m, key, eq, ctx, &i)) {
        *val = m->vals + i * m->vsize;
        return 0;
    }
    size_t cap = m->cap;
    int rc = tft_u64map_reserve(m);
    if (rc < 0)
        return rc;
    if (m->cap != cap)
        u64map_probe(m, key, eq, ctx, &i);
    if (i >= m->cap)
        return -ENOSPC; /* no free slot: ruled out by the load bound */
    m->used[i] = 1;
    m->keys[i] = key;
    memset(m->vals + i * m->vsize, 0, m->vsize);
    m->n++;
    *val = m->vals + i * m->vsize;
    return 1;
}

/* Removes the entry whose value is val (non-NULL: from find, insert or
 * next), by backward shift: the later entries of its probe chain move up,
 * so no tombstone is left and chains stay as short as if it never was. */
static inline void tft_u64map_remove(tft_u64map *m, void *val)
{
    size_t mask = m->cap - 1, i = (size_t)((unsigned char *)val - m->vals) / m->vsize;
    m->used[i] = 0;
    m->n--;
    for (size_t j = (i + 1) & mask; m->used[j]; j = (j + 1) & mask) {
        size_t h = u64map_home(m, m->keys[j]);
        /* the entry at j may fill the hole at i when its home is not in (i, j] */
        if (i <= j ? (h > i && h <= j) : (h > i || h <= j))
            continue;
        m->keys[i] = m->keys[j];
        memcpy(m->vals + i * m->vsize, m->vals + j * m->vsize, m->vsize);
        m->used[i] = 1;
        m->used[j] = 0;
        i = j;
    }
}

/* Iteration in slot order: the next value at or after slot *pos (and its
 * key in *key, when key is not NULL), *pos moved past it; NULL at the end.
 * Start with *pos = 0. Values may be written on the way; the map's
 * entries must not change (a removal moves later entries up). */
static inline void *tft_u64map_next(const tft_u64map *m, size_t *pos, uint64_t *key)
{
    for (size_t i = *pos; i < m->cap; i++) {
        if (m->used[i]) {
            *pos = i + 1;
            if (key)
                *key = m->keys[i];
            return m->vals + i * m->vsize;
        }
    }
    *pos = m->cap;
    return NULL;
}

/* Empties the map and hands back its values, in slot order, as an array
 * of *n values of vsize bytes at the front of the table's own storage
 * (NULL when there were none): the caller may sort and read them until
 * the next insert, reserve or free. O(cap). */
static inline void *tft_u64map_drain(tft_u64map *m, size_t *n)
{
    size_t k = 0;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->used[i])
            continue;
        if (k != i)
            memmove(m->vals + k * m->vsize, m->vals + i * m->vsize, m->vsize);
        k++;
    }
    *n = k;
    tft_u64map_clear(m);
    return k ? m->vals : NULL;
}

#endif
