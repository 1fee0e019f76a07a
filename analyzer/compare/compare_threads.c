/*
 * compare_threads.c — the order-free matching of one step's tensors, for
 * ranks that record from several threads (format 1.2 THREAD and SYNC
 * records; docs/TFDIFF.md, "Several recording threads"; FORMAT.md
 * §5.13-5.14). The stash that gathers such a step is compare_stash.c.
 *
 * Why: a process's threads record into rings of their own, and the
 * collector writes the rings one after another, so in the file the
 * records of one step of several threads are interleaved in an order that
 * depends on timing, and records of step S of a slow thread may follow
 * records of step S+1 of a fast one. Within one thread the order is the
 * program's. So a step is gathered from the stash until nothing of it can
 * follow (a SYNC watermark above it, every live thread past it, the end of
 * the file, or a memory bound), and its tensors are matched by name and
 * occurrence within their thread, never by position in the file.
 *
 * Matching one step (both sides' tensors, collective results left out):
 *  1. occurrence: the k-th tensor of a name recorded by one thread in the
 *     step has occurrence k;
 *  2. bit-identical pairs first: equal name, dtype, shape and fingerprint,
 *     in occurrence order — so threads that run the same model on other
 *     data (a thread per device) pair with their counterpart whatever
 *     thread number they got, and which thread did which task does not
 *     matter as long as the results are equal;
 *  3. the rest of a name: equal occurrence and corresponding threads (the
 *     thread whose tensors paired with this one's in step 2) first, then
 *     in order; what is left over is inserted (BAD) or deleted (GOLDEN);
 *  4. the edit script is ordered by BAD's op sequence numbers (program
 *     order across threads), a deletion right after the pair that precedes
 *     it in its GOLDEN thread.
 * Cost: O(n log n) per step, plus a quadratic pass over the unmatched
 * tensors of one name, capped at MATCH_GREEDY_MAX pairs.
 */
#include "compare_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MATCH_GREEDY_MAX 65536u /* |G| x |B| of one name's leftovers matched greedily */
#define SUB_PAIR (1u << 20)     /* sort sub-key of pairs; deletions before/after it */

/* ---- order-free matching ---------------------------------------------------- */

typedef struct match_item {
    int32_t idx;        /* index into the side's tensors */
    uint32_t pos;       /* position in the step (file order: program order per thread) */
    uint32_t thread;
    uint32_t occ;       /* occurrence of its name within its thread in the step */
    uint64_t name;
    uint64_t exact;     /* hash of dtype, shape and fingerprint; 0 = not comparable bitwise */
    int64_t seq;
    int32_t partner;    /* index into the other side's items, -1 none */
} match_item;

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static uint64_t exact_key(const align_tensor *t)
{
    if (t->mode < TFT_STATS_HEALTH)
        return 0;
    uint64_t h = mix(t->dtype + 1u, t->ndim);
    for (int i = 0; i < t->ndim; i++)
        h = mix(h, (uint64_t)t->shape[i]);
    h = mix(h, t->stats.fingerprint);
    return h ? h : 1;
}

static int fill_items(const align_side *s, const int32_t *idx, size_t n, match_item **items, size_t *cap)
{
    if (n >= *cap) { /* never NULL, even for no items: qsort(NULL, 0) is undefined */
        match_item *p = realloc(*items, (n + 1) * sizeof *p);
        if (!p)
            return -ENOMEM;
        *items = p;
        *cap = n + 1;
    }
    for (size_t k = 0; k < n; k++) {
        const align_tensor *t = &s->tensors[idx[k]];
        (*items)[k] = (match_item){.idx = idx[k], .pos = (uint32_t)k, .thread = t->thread, .name = t->name_id,
                                   .exact = exact_key(t), .seq = t->seq, .partner = -1};
    }
    return 0;
}

#define CMP(a, b) ((a) < (b) ? -1 : (a) > (b))

static int by_name_thread_pos(const void *pa, const void *pb)
{
    const match_item *a = pa, *b = pb;
    int c = CMP(a->name, b->name);
    if (!c)
        c = CMP(a->thread, b->thread);
    return c ? c : CMP(a->pos, b->pos);
}

static int by_name_exact_occ(const void *pa, const void *pb)
{
    const match_item *a = pa, *b = pb;
    int c = CMP(a->name, b->name);
    if (!c)
        c = CMP(a->exact, b->exact);
    if (!c)
        c = CMP(a->occ, b->occ);
    return c ? c : CMP(a->pos, b->pos);
}

static int by_name_occ_pos(const void *pa, const void *pb)
{
    const match_item *a = pa, *b = pb;
    int c = CMP(a->name, b->name);
    if (!c)
        c = CMP(a->occ, b->occ);
    return c ? c : CMP(a->pos, b->pos);
}

static int by_pos(const void *pa, const void *pb)
{
    const match_item *a = pa, *b = pb;
    return CMP(a->pos, b->pos);
}

static void number_occurrences(match_item *it, size_t n)
{
    qsort(it, n, sizeof *it, by_name_thread_pos);
    for (size_t k = 0; k < n; k++)
        it[k].occ = k && it[k - 1].name == it[k].name && it[k - 1].thread == it[k].thread ? it[k - 1].occ + 1 : 0;
}

/* Step 2: bit-identical pairs (both arrays sorted by name, exact, occ). */
static void pair_exact(match_item *g, size_t n, match_item *b, size_t m)
{
    size_t i = 0, j = 0;
    while (i < n && j < m) {
        int c = CMP(g[i].name, b[j].name);
        if (!c)
            c = CMP(g[i].exact, b[j].exact);
        if (c < 0) {
            i++;
        } else if (c > 0) {
            j++;
        } else {
            if (g[i].exact) {
                g[i].partner = (int32_t)j;
                b[j].partner = (int32_t)i;
            }
            i++;
            j++;
        }
    }
}

/* Thread correspondence from the exact pairs: for a BAD thread, the GOLDEN
 * thread most of its bit-identical tensors paired with (THREAD_UNKNOWN when
 * none). A small table: steps hold few threads. */
typedef struct thread_map {
    uint32_t b, g, count;
} thread_map;

static uint32_t corresponding(const thread_map *tm, size_t n, uint32_t bthread)
{
    uint32_t best = THREAD_UNKNOWN, cnt = 0;
    for (size_t k = 0; k < n; k++)
        if (tm[k].b == bthread && tm[k].count > cnt) {
            best = tm[k].g;
            cnt = tm[k].count;
        }
    return best;
}

static size_t build_thread_map(const match_item *g, const match_item *b, size_t m, thread_map *tm, size_t cap)
{
    size_t n = 0;
    for (size_t j = 0; j < m; j++) {
        if (b[j].partner < 0)
            continue;
        uint32_t gt = g[b[j].partner].thread;
        size_t k = 0;
        while (k < n && !(tm[k].b == b[j].thread && tm[k].g == gt))
            k++;
        if (k == n) {
            if (n == cap)
                continue;
            tm[n++] = (thread_map){b[j].thread, gt, 0};
        }
        tm[k].count++;
    }
    return n;
}

/* Step 3 for one name: leftovers g[gi0..gi1), b[bj0..bj1) (sorted by occ, pos). */
static void pair_rest(match_item *g, size_t g0, size_t g1, match_item *b, size_t b0, size_t b1,
                      const thread_map *tm, size_t ntm)
{
    size_t ng = 0, nb = 0;
    for (size_t i = g0; i < g1; i++)
        ng += g[i].partner < 0;
    for (size_t j = b0; j < b1; j++)
        nb += b[j].partner < 0;
    if (!ng || !nb)
        return;
    bool greedy = (uint64_t)ng * nb <= MATCH_GREEDY_MAX;
    size_t next_g = g0;
    for (size_t j = b0; j < b1; j++) {
        if (b[j].partner >= 0)
            continue;
        size_t best = SIZE_MAX;
        if (greedy) {
            uint32_t want = corresponding(tm, ntm, b[j].thread);
            int best_score = -1;
            for (size_t i = g0; i < g1; i++) {
                if (g[i].partner >= 0)
                    continue;
                int score = 2 * (g[i].occ == b[j].occ) + (want != THREAD_UNKNOWN && g[i].thread == want);
                if (score > best_score) {
                    best_score = score;
                    best = i;
                }
            }
        } else {
            while (next_g < g1 && g[next_g].partner >= 0)
                next_g++;
            if (next_g < g1)
                best = next_g;
        }
        if (best == SIZE_MAX)
            break;
        g[best].partner = (int32_t)j;
        b[j].partner = (int32_t)best;
    }
}

/* Sort key of an edit: BAD's (seq, position), then a sub-key placing
 * deletions around the pairs of their GOLDEN thread. */
typedef struct edit_key {
    int64_t seq;
    uint32_t pos, sub;
    align_edit e;
} edit_key;

static int by_edit_key(const void *pa, const void *pb)
{
    const edit_key *a = pa, *b = pb;
    int c = CMP(a->seq, b->seq);
    if (!c)
        c = CMP(a->pos, b->pos);
    return c ? c : CMP(a->sub, b->sub);
}

/* Step 4: the edit script. g sorted by (thread, pos) so that a deletion
 * finds the pair before (or after) it in its own thread. */
static int build_edits(match_item *g, size_t n, match_item *b, size_t m, align_edit **edits, size_t *n_edits,
                       size_t *cap_edits)
{
    size_t total = m;
    for (size_t i = 0; i < n; i++)
        total += g[i].partner < 0;
    edit_key *keys = malloc((total ? total : 1) * sizeof *keys);
    if (!keys)
        return -ENOMEM;
    size_t k = 0;
    for (size_t j = 0; j < m; j++)
        keys[k++] = (edit_key){b[j].seq, b[j].pos, SUB_PAIR,
                               {b[j].partner >= 0 ? g[b[j].partner].idx : -1, b[j].idx}};
    /* deletions: anchor on the nearest paired tensor of the same GOLDEN thread */
    for (size_t i = 0; i < n; i++) {
        if (g[i].partner >= 0)
            continue;
        size_t before = i, after = i;
        while (before > 0 && g[before - 1].thread == g[i].thread && g[before - 1].partner < 0)
            before--;
        while (after < n && g[after].thread == g[i].thread && g[after].partner < 0)
            after++;
        edit_key key = {g[i].seq, g[i].pos, 0, {g[i].idx, -1}};
        if (before > 0 && g[before - 1].thread == g[i].thread) {
            const match_item *a = &b[g[before - 1].partner];
            key.seq = a->seq;
            key.pos = a->pos;
            key.sub = SUB_PAIR + 1 + (uint32_t)(i - before);
        } else if (after < n && g[after].thread == g[i].thread) {
            const match_item *a = &b[g[after].partner];
            key.seq = a->seq;
            key.pos = a->pos;
            key.sub = (uint32_t)(i - before);
        }
        keys[k++] = key;
    }
    qsort(keys, k, sizeof *keys, by_edit_key);
    if (k > *cap_edits) {
        align_edit *p = realloc(*edits, k * sizeof *p);
        if (!p) {
            free(keys);
            return -ENOMEM;
        }
        *edits = p;
        *cap_edits = k;
    }
    for (size_t q = 0; q < k; q++)
        (*edits)[q] = keys[q].e;
    *n_edits = k;
    free(keys);
    return 0;
}

static int by_thread_pos(const void *pa, const void *pb)
{
    const match_item *a = pa, *b = pb;
    int c = CMP(a->thread, b->thread);
    return c ? c : CMP(a->pos, b->pos);
}

/* Re-sorts an item array and keeps the partner indices of the other side
 * pointing at the right items. */
static void resort(match_item *x, size_t n, match_item *other, int (*cmp)(const void *, const void *))
{
    qsort(x, n, sizeof *x, cmp);
    for (size_t i = 0; i < n; i++)
        if (x[i].partner >= 0)
            other[x[i].partner].partner = (int32_t)i;
}

int compare_match_order_free(const align_side *gs, const align_side *bs, const int32_t *gi, size_t n,
                     const int32_t *bi, size_t m, match_scratch *sc, align_edit **edits, size_t *n_edits,
                     size_t *cap_edits)
{
    if (fill_items(gs, gi, n, &sc->g, &sc->cap_g) < 0 || fill_items(bs, bi, m, &sc->b, &sc->cap_b) < 0)
        return -ENOMEM;
    match_item *g = sc->g, *b = sc->b;
    number_occurrences(g, n);
    number_occurrences(b, m);
    qsort(g, n, sizeof *g, by_name_exact_occ);
    qsort(b, m, sizeof *b, by_name_exact_occ);
    pair_exact(g, n, b, m);
    thread_map tm[64];
    size_t ntm = build_thread_map(g, b, m, tm, 64);
    resort(g, n, b, by_name_occ_pos);
    resort(b, m, g, by_name_occ_pos);
    for (size_t i = 0, j = 0; i < n || j < m;) {
        uint64_t name = i < n && (j >= m || g[i].name <= b[j].name) ? g[i].name : b[j].name;
        size_t i1 = i, j1 = j;
        while (i1 < n && g[i1].name == name)
            i1++;
        while (j1 < m && b[j1].name == name)
            j1++;
        pair_rest(g, i, i1, b, j, j1, tm, ntm);
        i = i1;
        j = j1;
    }
    resort(b, m, g, by_pos);
    resort(g, n, b, by_thread_pos);
    return build_edits(g, n, b, m, edits, n_edits, cap_edits);
}

void compare_match_scratch_free(match_scratch *sc)
{
    free(sc->g);
    free(sc->b);
    memset(sc, 0, sizeof *sc);
}
