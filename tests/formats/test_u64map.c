/*
 * test_u64map.c — the internal hash map (formats/util/tft_u64map.h):
 * insert, find, update, remove; growth at the load factor; backward-shift
 * deletion across the table's end; keys that share a hash told apart by
 * eq; the max_n bound; failed growth (allocations made to fail) leaving
 * the map intact; iteration and drain; and a long random sequence of
 * operations compared with a plain array, for a plain map and for a
 * hashed one whose keys collide on purpose.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Allocation failures on demand: fail_in = 0 fails the next allocation,
 * > 0 counts allocations down first, < 0 never fails. */
static long fail_in = -1;
static void *test_malloc(size_t n)
{
    if (fail_in == 0)
        return NULL;
    if (fail_in > 0)
        fail_in--;
    return malloc(n);
}
#define TFT_U64MAP_MALLOC(n) test_malloc(n)
#define TFT_U64MAP_FREE(p) free(p)
#include "tft_u64map.h"

#include "tft_test.h"
#include "tft_test_rng.h"

/* A value that holds its own longer key, for hashed maps. */
typedef struct item {
    uint64_t id;
    uint64_t val;
} item;

static bool item_eq(const void *ctx, const void *val) { return ((const item *)val)->id == *(const uint64_t *)ctx; }

/* The map's invariants: n matches the occupied slots, the load bound holds,
 * and every entry is reachable: the slots from its home to it are full. */
static bool well_formed(const tft_u64map *m)
{
    size_t used = 0;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->used[i])
            continue;
        used++;
        for (size_t j = u64map_home(m, m->keys[i]); j != i; j = (j + 1) & (m->cap - 1))
            if (!m->used[j])
                return false;
    }
    return used == m->n && (m->cap == 0 || (m->cap & (m->cap - 1)) == 0) && m->n * 100 <= m->cap * m->load_pct;
}

static uint64_t *u64_at(tft_u64map *m, uint64_t key) { return tft_u64map_find(m, key, NULL, NULL); }

static int put(tft_u64map *m, uint64_t key, uint64_t v)
{
    void *p;
    int rc = tft_u64map_insert(m, key, NULL, NULL, &p);
    if (rc >= 0)
        *(uint64_t *)p = v;
    return rc;
}

static void test_basic(void)
{
    tft_u64map m;
    tft_u64map_init(&m, &(tft_u64map_opts){.vsize = sizeof(uint64_t)});
    CHECK(u64_at(&m, 0) == NULL && m.cap == 0);
    tft_u64map odd;
    tft_u64map_init(&odd, &(tft_u64map_opts){.vsize = 4, .min_cap = 100});
    CHECK(odd.min_cap == 128); /* rounded up to a power of two */
    const uint64_t keys[] = {0, 1, UINT64_MAX, 64, 128, 0x8000000000000000ull};
    for (size_t k = 0; k < 6; k++)
        CHECK(put(&m, keys[k], k + 100) == 1);
    CHECK(tft_u64map_count(&m) == 6 && m.cap == 64);
    for (size_t k = 0; k < 6; k++) {
        uint64_t *v = u64_at(&m, keys[k]);
        CHECKF(v && *v == k + 100, "key %llu", (unsigned long long)keys[k]);
    }
    CHECK(u64_at(&m, 2) == NULL);
    CHECK(put(&m, UINT64_MAX, 7) == 0 && *u64_at(&m, UINT64_MAX) == 7 && m.n == 6); /* update */
    void *p;
    CHECK(tft_u64map_insert(&m, 5, NULL, NULL, &p) == 1 && *(uint64_t *)p == 0); /* new values are zeroed */
    tft_u64map_remove(&m, u64_at(&m, 0));
    CHECK(u64_at(&m, 0) == NULL && m.n == 6 && *u64_at(&m, 1) == 101 && well_formed(&m));
    tft_u64map_clear(&m);
    CHECK(m.n == 0 && m.cap == 64 && u64_at(&m, 1) == NULL);
    CHECK(put(&m, 1, 9) == 1 && *u64_at(&m, 1) == 9);
    tft_u64map_free(&m);
    CHECK(m.cap == 0 && m.n == 0 && u64_at(&m, 1) == NULL && m.vsize == sizeof(uint64_t));
    tft_u64map_free(&m); /* twice: harmless */
}

static void test_growth(void)
{
    for (unsigned load = 50; load <= 75; load += 25) {
        tft_u64map m;
        tft_u64map_init(&m, &(tft_u64map_opts){.vsize = sizeof(uint64_t), .min_cap = 16, .load_pct = load});
        bool ok = true;
        for (uint64_t k = 0; k < 20000; k++) {
            size_t before = m.cap;
            ok &= put(&m, k << 20, k) == 1; /* ids sharing their low bits: the mix spreads them */
            /* doubles exactly when the load would pass load% */
            ok &= m.cap == (before * load >= (k + 1) * 100 ? before : before ? before * 2 : 16);
        }
        CHECK(ok);
        CHECK(m.n == 20000 && well_formed(&m));
        ok = true;
        for (uint64_t k = 0; k < 20000; k++) {
            uint64_t *v = u64_at(&m, k << 20);
            ok &= v && *v == k;
        }
        CHECK(ok);
        tft_u64map_free(&m);
    }
}

/* A hashed map uses keys as they are: key & (cap - 1) is the home slot,
 * so clusters can be laid out by hand. */
static void test_backward_shift(void)
{
    tft_u64map m;
    tft_u64map_init(&m, &(tft_u64map_opts){.vsize = sizeof(item), .min_cap = 16, .hashed = true});
    /* a cluster that wraps the table's end: homes 14, 14, 15, 14, 0, 1, 1 */
    const uint64_t homes[] = {14, 14, 15, 14, 0, 1, 1};
    for (uint64_t k = 0; k < 7; k++) {
        void *p;
        uint64_t id = k + 1;
        CHECK(tft_u64map_insert(&m, homes[k], item_eq, &id, &p) == 1);
        *(item *)p = (item){id, k};
    }
    CHECK(m.cap == 16 && well_formed(&m));
    CHECK(m.used[14] && m.used[15] && m.used[0] && m.used[4] && !m.used[5] && !m.used[13]);
    for (uint64_t del = 1; del <= 7; del++) { /* remove each in turn from a fresh copy */
        tft_u64map c;
        tft_u64map_init(&c, &(tft_u64map_opts){.vsize = sizeof(item), .min_cap = 16, .hashed = true});
        for (uint64_t k = 0; k < 7; k++) {
            void *p;
            uint64_t id = k + 1;
            tft_u64map_insert(&c, homes[k], item_eq, &id, &p);
            *(item *)p = (item){id, k};
        }
        tft_u64map_remove(&c, tft_u64map_find(&c, homes[del - 1], item_eq, &del));
        CHECKF(well_formed(&c) && c.n == 6, "removing %llu", (unsigned long long)del);
        for (uint64_t id = 1; id <= 7; id++) {
            const item *it = tft_u64map_find(&c, homes[id - 1], item_eq, &id);
            CHECKF(id == del ? it == NULL : it && it->val == id - 1, "after removing %llu: %llu",
                   (unsigned long long)del, (unsigned long long)id);
        }
        tft_u64map_free(&c);
    }
    /* removing everything leaves no trace (no tombstones) */
    for (uint64_t id = 7; id >= 1; id--)
        tft_u64map_remove(&m, tft_u64map_find(&m, homes[id - 1], item_eq, &id));
    size_t left = 0;
    for (size_t i = 0; i < m.cap; i++)
        left += m.used[i];
    CHECK(m.n == 0 && left == 0);
    tft_u64map_free(&m);
}

/* Keys that are one hash: eq alone tells the entries apart. */
static void test_colliding(void)
{
    tft_u64map m;
    tft_u64map_init(&m, &(tft_u64map_opts){.vsize = sizeof(item), .hashed = true});
    for (uint64_t id = 1; id <= 500; id++) {
        void *p;
        CHECK(tft_u64map_insert(&m, 42, item_eq, &id, &p) == 1);
        ((item *)p)->id = id;
        ((item *)p)->val = id * 3;
    }
    uint64_t again = 250;
    void *p;
    CHECK(tft_u64map_insert(&m, 42, item_eq, &again, &p) == 0 && ((item *)p)->val == 750);
    uint64_t other = 250;
    CHECK(tft_u64map_find(&m, 43, item_eq, &other) == NULL); /* same longer key, another hash */
    for (uint64_t id = 1; id <= 500; id += 2)
        tft_u64map_remove(&m, tft_u64map_find(&m, 42, item_eq, &id));
    CHECK(m.n == 250 && well_formed(&m));
    bool ok = true;
    for (uint64_t id = 1; id <= 500; id++) {
        const item *it = tft_u64map_find(&m, 42, item_eq, &id);
        ok &= id % 2 ? it == NULL : it && it->val == id * 3;
    }
    CHECK(ok);
    tft_u64map_free(&m);
}

static void test_max_n(void)
{
    tft_u64map m;
    tft_u64map_init(&m, &(tft_u64map_opts){.vsize = sizeof(uint64_t), .max_n = 100});
    bool ok = true;
    for (uint64_t k = 0; k < 100; k++)
        ok &= put(&m, k, k) == 1;
    CHECK(ok);
    size_t cap = m.cap;
    void *p = (void *)&m;
    CHECK(tft_u64map_insert(&m, 1000, NULL, NULL, &p) == -ENOSPC && p == NULL);
    CHECK(tft_u64map_reserve(&m) == -ENOSPC);
    CHECK(m.n == 100 && m.cap == cap && u64_at(&m, 1000) == NULL);
    CHECK(put(&m, 7, 70) == 0 && *u64_at(&m, 7) == 70); /* existing keys: still updated */
    tft_u64map_remove(&m, u64_at(&m, 3));
    CHECK(put(&m, 1000, 1) == 1 && put(&m, 1001, 1) == -ENOSPC);
    tft_u64map_free(&m);
}

static void test_enomem(void)
{
    tft_u64map m;
    tft_u64map_init(&m, &(tft_u64map_opts){.vsize = sizeof(uint64_t), .min_cap = 8});
    fail_in = 0;
    void *p = (void *)&m;
    CHECK(tft_u64map_insert(&m, 1, NULL, NULL, &p) == -ENOMEM && p == NULL && m.cap == 0 && m.n == 0);
    fail_in = -1;
    for (uint64_t k = 0; k < 4; k++) /* 4 of 8: the next insert grows */
        CHECK(put(&m, k, k + 10) == 1);
    CHECK(m.cap == 8);
    fail_in = 0;
    CHECK(put(&m, 99, 1) == -ENOMEM);
    CHECK(tft_u64map_reserve(&m) == -ENOMEM);
    CHECK(put(&m, 2, 12) == 0); /* an existing key needs no room */
    CHECK(m.cap == 8 && m.n == 4 && u64_at(&m, 99) == NULL && well_formed(&m));
    for (uint64_t k = 0; k < 4; k++)
        CHECK(u64_at(&m, k) && *u64_at(&m, k) == k + 10);
    fail_in = -1;
    CHECK(put(&m, 99, 1) == 1 && m.cap == 16 && *u64_at(&m, 3) == 13);
    tft_u64map_free(&m);

    /* a map never initialised (zeroed) refuses to grow rather than corrupt */
    tft_u64map zero = {0};
    CHECK(tft_u64map_insert(&zero, 1, NULL, NULL, &p) == -ENOMEM && zero.cap == 0);
    CHECK(tft_u64map_find(&zero, 1, NULL, NULL) == NULL);

    /* a table whose size would overflow size_t */
    tft_u64map big;
    tft_u64map_init(&big, &(tft_u64map_opts){.vsize = SIZE_MAX / 16, .min_cap = 64});
    CHECK(tft_u64map_insert(&big, 1, NULL, NULL, &p) == -ENOMEM && big.cap == 0);
    tft_u64map_free(&big);
}

static void test_iterate_drain(void)
{
    tft_u64map m;
    tft_u64map_init(&m, &(tft_u64map_opts){.vsize = sizeof(uint64_t)});
    size_t pos = 0;
    CHECK(tft_u64map_next(&m, &pos, NULL) == NULL);
    size_t n = 1;
    CHECK(tft_u64map_drain(&m, &n) == NULL && n == 0);
    for (uint64_t k = 1; k <= 300; k++)
        put(&m, k * 7, k);
    uint64_t sum = 0, key, keysum = 0;
    size_t seen = 0;
    uint64_t *v;
    for (pos = 0; (v = tft_u64map_next(&m, &pos, &key));) {
        CHECK(*v * 7 == key);
        sum += *v;
        keysum += key;
        seen++;
    }
    CHECK(seen == 300 && sum == 300 * 301 / 2 && keysum == 7 * sum);
    uint64_t *all = tft_u64map_drain(&m, &n);
    CHECK(n == 300 && m.n == 0 && u64_at(&m, 7) == NULL);
    sum = 0;
    for (size_t i = 0; all && i < n; i++)
        sum += all[i];
    CHECK(sum == 300 * 301 / 2);
    CHECK(put(&m, 5, 5) == 1 && m.n == 1 && *u64_at(&m, 5) == 5); /* usable after a drain */
    tft_u64map_free(&m);
}

/* ---- random operations against a plain array --------------------------- */

enum { SPACE = 3000 }; /* ids 1 .. SPACE-1, and UINT64_MAX in place of 0 */

static size_t ref_slot(uint64_t id) { return id == UINT64_MAX ? 0 : (size_t)id; }

/* hashed: keys are id % 61 (collisions everywhere), eq compares the id. */
static void test_random(bool hashed, uint64_t seed)
{
    enum { OPS = 200000 };
    static uint64_t ref_val[SPACE];
    static bool ref_has[SPACE];
    memset(ref_has, 0, sizeof(ref_has));
    size_t nref = 0;
    tft_u64map m;
    tft_u64map_init(&m, &(tft_u64map_opts){.vsize = sizeof(item), .min_cap = 8, .hashed = hashed,
                                           .load_pct = hashed ? 75 : 50});
    uint64_t rng = seed;
    bool ok = true;
    for (long op = 0; op < OPS && ok; op++) {
        uint64_t r = tft_test_rng(&rng);
        uint64_t id = r % SPACE;
        if (id == 0)
            id = UINT64_MAX; /* the extremes are keys like others */
        uint64_t key = hashed ? id % 61 : id;
        size_t s = ref_slot(id);
        item *it = tft_u64map_find(&m, key, hashed ? item_eq : NULL, &id);
        ok &= ref_has[s] == (it != NULL) && (!it || it->val == ref_val[s]);
        switch ((r >> 32) % 8) {
        case 0: case 1: case 2: { /* insert or update */
            void *p;
            int rc = tft_u64map_insert(&m, key, hashed ? item_eq : NULL, &id, &p);
            ok &= rc == (ref_has[s] ? 0 : 1);
            *(item *)p = (item){id, r};
            nref += !ref_has[s];
            ref_has[s] = true;
            ref_val[s] = r;
            break;
        }
        case 3: case 4: /* remove */
            if (it) {
                tft_u64map_remove(&m, it);
                ref_has[s] = false;
                nref--;
            }
            break;
        case 5: /* clear, now and then */
            if (r % 1000 == 0) {
                tft_u64map_clear(&m);
                memset(ref_has, 0, sizeof(ref_has));
                nref = 0;
            }
            break;
        default: /* find only */
            break;
        }
        ok &= m.n == nref;
        if (op % 20000 == 0 || op == OPS - 1) { /* the whole content */
            ok &= well_formed(&m);
            size_t pos = 0, seen = 0;
            uint64_t k;
            for (item *x; ok && (x = tft_u64map_next(&m, &pos, &k)); seen++) {
                size_t y = ref_slot(x->id);
                ok &= ref_has[y] && ref_val[y] == x->val && k == (hashed ? x->id % 61 : x->id);
            }
            ok &= seen == nref;
        }
    }
    CHECKF(ok, "%s map diverged from the reference", hashed ? "hashed" : "plain");
    tft_u64map_free(&m);
}

int main(void)
{
    test_basic();
    test_growth();
    test_backward_shift();
    test_colliding();
    test_max_n();
    test_enomem();
    test_iterate_drain();
    test_random(false, 0x9e3779b97f4a7c15ull);
    test_random(true, 0x2545f4914f6cdd1dull);
    return TEST_DONE();
}
