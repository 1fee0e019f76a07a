/*
 * compare_match.c — the edit script of one step (compare_internal.h): the
 * two sides' tensors paired, or left on one side (inserted in BAD,
 * deleted from GOLDEN).
 *
 * Alignment.  Within a step, tensors are matched by name in order, like a
 * text diff: the common prefix and suffix of the two name sequences are
 * paired, the middle is aligned by a longest common subsequence (or, when
 * the middle is too large for the table, by a greedy bounded lookahead).
 * So an extra or missing tensor costs one insertion or deletion and does
 * not shift the pairs after it; each step is aligned on its own, so a
 * structural difference never cascades into later steps.  Steps recorded
 * by several threads, and ranks that dropped records, are matched without
 * regard to order (compare_threads.c).
 */
#include "core.h"
#include "compare.h"
#include "compare_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define LCS_MAX_CELLS (1u << 22) /* table of the middle of a step: 8 MiB of u16 */
#define LOOKAHEAD 64             /* greedy resync window when the table is too big */

static int edit_push(align_script *c, int32_t g, int32_t b)
{
    if (compare_grow((void **)&c->edits, &c->cap_edits, c->n_edits + 1, sizeof *c->edits) < 0)
        return -ENOMEM;
    c->edits[c->n_edits++] = (align_edit){g, b};
    return 0;
}

#define GNAME(i) (c->g->tensors[c->gi[i]].name_id)
#define BNAME(j) (c->b->tensors[c->bi[j]].name_id)

/* LCS of gi[g0..g1) and bi[b0..b1) (both non-empty, table small enough). */
static int align_lcs(align_script *c, size_t g0, size_t g1, size_t b0, size_t b1)
{
    size_t n = g1 - g0, m = b1 - b0, w = m + 1;
    if (compare_grow((void **)&c->lcs, &c->cap_lcs, (n + 1) * w, sizeof *c->lcs) < 0)
        return -ENOMEM;
    uint16_t *L = c->lcs; /* L[i*w+j]: LCS of g[g0+i..g1) and b[b0+j..b1) */
    for (size_t j = 0; j <= m; j++)
        L[n * w + j] = 0;
    for (size_t i = n; i-- > 0;) {
        L[i * w + m] = 0;
        for (size_t j = m; j-- > 0;) {
            uint16_t v;
            if (GNAME(g0 + i) == BNAME(b0 + j))
                v = (uint16_t)(L[(i + 1) * w + j + 1] + 1);
            else
                v = L[(i + 1) * w + j] >= L[i * w + j + 1] ? L[(i + 1) * w + j] : L[i * w + j + 1];
            L[i * w + j] = v;
        }
    }
    size_t i = 0, j = 0;
    int rc = 0;
    while (rc == 0 && (i < n || j < m)) {
        if (i < n && j < m && GNAME(g0 + i) == BNAME(b0 + j)) {
            rc = edit_push(c, c->gi[g0 + i], c->bi[b0 + j]);
            i++, j++;
        } else if (i < n && (j == m || L[(i + 1) * w + j] >= L[i * w + j + 1])) {
            rc = edit_push(c, c->gi[g0 + i++], -1);
        } else {
            rc = edit_push(c, -1, c->bi[b0 + j++]);
        }
    }
    return rc;
}

/* Greedy resync for a middle too large for the table: on a mismatch, skip
 * to the nearest re-occurrence within LOOKAHEAD on either side. */
static int align_greedy(align_script *c, size_t g0, size_t g1, size_t b0, size_t b1)
{
    size_t i = g0, j = b0;
    int rc = 0;
    while (rc == 0 && i < g1 && j < b1) {
        if (GNAME(i) == BNAME(j)) {
            rc = edit_push(c, c->gi[i++], c->bi[j++]);
            continue;
        }
        size_t dg = 0, db = 0;
        for (size_t k = 1; k <= LOOKAHEAD && i + k < g1 && !dg; k++)
            if (GNAME(i + k) == BNAME(j))
                dg = k;
        for (size_t k = 1; k <= LOOKAHEAD && j + k < b1 && !db; k++)
            if (BNAME(j + k) == GNAME(i))
                db = k;
        if (dg && (!db || dg <= db)) {
            while (rc == 0 && dg--)
                rc = edit_push(c, c->gi[i++], -1);
        } else if (db) {
            while (rc == 0 && db--)
                rc = edit_push(c, -1, c->bi[j++]);
        } else {
            rc = edit_push(c, c->gi[i++], -1);
            if (rc == 0)
                rc = edit_push(c, -1, c->bi[j++]);
        }
    }
    while (rc == 0 && i < g1)
        rc = edit_push(c, c->gi[i++], -1);
    while (rc == 0 && j < b1)
        rc = edit_push(c, -1, c->bi[j++]);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The name ids of tensors idx[0..n) of s into *out, sorted. */
static int sorted_names(const align_side *s, const int32_t *idx, size_t n, uint64_t **out, size_t *cap)
{
    if (compare_grow((void **)out, cap, n + 1, sizeof **out) < 0)
        return -ENOMEM;
    for (size_t k = 0; k < n; k++)
        (*out)[k] = s->tensors[idx[k]].name_id;
    qsort(*out, n, sizeof **out, cmp_u64);
    return 0;
}

/* How many times name occurs in sorted v[0..n). */
static size_t name_count(const uint64_t *v, size_t n, uint64_t name)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < name)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t k = lo;
    while (k < n && v[k] == name)
        k++;
    return k - lo;
}

/* Lossy ranks: a difference involving a name whose tensors differ in
 * number between the sides cannot be told from a lost record (which of
 * them was lost, and so which pairs with which, is unknown). */
bool compare_match_unverifiable(const align_script *c, const align_tensor *gt, const align_tensor *bt)
{
    if (!c->lossy)
        return false;
    uint64_t name = gt ? gt->name_id : bt->name_id;
    return name_count(c->gnames, c->n_gnames, name) != name_count(c->bnames, c->n_bnames, name);
}

/* Whether the tensors idx[0..n) of s come from more than one thread. */
static bool several_threads(const align_side *s, const int32_t *idx, size_t n)
{
    for (size_t k = 1; k < n; k++)
        if (s->tensors[idx[k]].thread != s->tensors[idx[0]].thread)
            return true;
    return false;
}

/* Builds c->edits for the step loaded in g and b: the non-skipped tensors of both
 * sides, in BAD's order, deletions where GOLDEN has them. Tensors of one
 * thread per side are aligned like a text diff (the order is the
 * program's); tensors of several threads by the order-free matcher
 * (compare_threads.c), since their order in the file is the collector's. */
int compare_match_step(align_script *c, const align_side *g, const align_side *b)
{
    size_t n = 0, m = 0;
    c->g = g;
    c->b = b;
    if (compare_grow((void **)&c->gi, &c->cap_gi, c->g->n_tensors + 1, sizeof *c->gi) < 0 ||
        compare_grow((void **)&c->bi, &c->cap_bi, c->b->n_tensors + 1, sizeof *c->bi) < 0)
        return -ENOMEM;
    for (size_t k = 0; k < c->g->n_tensors; k++)
        if (!c->g->tensors[k].skip)
            c->gi[n++] = (int32_t)k;
    for (size_t k = 0; k < c->b->n_tensors; k++)
        if (!c->b->tensors[k].skip)
            c->bi[m++] = (int32_t)k;
    c->n_edits = 0;
    if (c->lossy) {
        int rc = sorted_names(c->g, c->gi, n, &c->gnames, &c->cap_gnames);
        if (rc == 0)
            rc = sorted_names(c->b, c->bi, m, &c->bnames, &c->cap_bnames);
        if (rc < 0)
            return rc;
        c->n_gnames = n;
        c->n_bnames = m;
    }
    if (c->lossy || several_threads(c->g, c->gi, n) || several_threads(c->b, c->bi, m))
        return compare_match_order_free(c->g, c->b, c->gi, n, c->bi, m, &c->ms, &c->edits, &c->n_edits, &c->cap_edits);
    size_t p = 0, s = 0;
    while (p < n && p < m && GNAME(p) == BNAME(p))
        p++;
    while (s < n - p && s < m - p && GNAME(n - 1 - s) == BNAME(m - 1 - s))
        s++;
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < p; k++)
        rc = edit_push(c, c->gi[k], c->bi[k]);
    size_t gm = n - p - s, bm = m - p - s;
    if (rc == 0 && (gm || bm)) {
        if (gm && bm && (double)(gm + 1) * (double)(bm + 1) <= LCS_MAX_CELLS)
            rc = align_lcs(c, p, p + gm, p, p + bm);
        else
            rc = align_greedy(c, p, p + gm, p, p + bm);
    }
    for (size_t k = 0; rc == 0 && k < s; k++)
        rc = edit_push(c, c->gi[n - s + k], c->bi[m - s + k]);
    return rc;
}

#undef GNAME
#undef BNAME

void compare_match_free(align_script *c)
{
    free(c->edits);
    free(c->lcs);
    free(c->gi);
    free(c->bi);
    free(c->gnames);
    free(c->bnames);
    compare_match_scratch_free(&c->ms);
}
