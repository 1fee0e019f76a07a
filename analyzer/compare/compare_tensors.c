/*
 * compare_tensors.c — `tfdiff --tensors GOLDEN BAD`: element-wise comparison
 * of the whole tensors both traces captured (tftrace --capture, tftrace
 * replay), and where in each tensor the differences lie
 * (compare_tensors.h; report/report_tensors.c words and draws them).
 *
 * Captured tensors are paired by (rank, step, name, occurrence within the
 * step); a tensor captured twice in one trace (as one op's output and as a
 * later op's input) counts once. For each pair: the count of differing
 * elements, max and mean absolute difference, max relative difference, the
 * first differing indices with both values, and the structure over the
 * last two dimensions (rows x columns): above / on / below the diagonal,
 * which rows, columns and leading indices, differences at padded positions
 * (when the step's `tokens` were captured too), and a constant BAD/GOLDEN
 * ratio.
 *
 * Memory: both traces' captured tensors are loaded (their size is what the
 * capture spec asked for: the captured bytes both traces hold), plus one
 * byte per row and column per pair. Pairing sorts (O(n log n)).
 */
#include "compare_tensors.h"

#include "tft_stats.h"

#include <fnmatch.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Element i of a captured tensor as a double. */
static double elem(const core_capture_tensor *t, uint64_t i)
{
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case TFT_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case TFT_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case TFT_F16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return tft_f16_to_f32(v); }
    case TFT_BF16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return tft_bf16_to_f32(v); }
    case TFT_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case TFT_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case TFT_U8: case TFT_BOOL: return p[i];
    case TFT_I8: return (int8_t)p[i];
    case TFT_I16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case TFT_U16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case TFT_U32: { uint32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case TFT_U64: { uint64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case TFT_F8E4M3: return tft_f8e4m3_to_f32(p[i]);
    case TFT_F8E5M2: return tft_f8e5m2_to_f32(p[i]);
    default: return 0;
    }
}

static uint64_t numel_of(const core_capture_tensor *t)
{
    uint64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d] > 0 ? (uint64_t)t->shape[d] : 0;
    return n;
}

/* ---- pairing ---------------------------------------------------------- */

/* Orders of compare_tensors_item arrays: by (rank, id) then first position; by
 * position; by (rank, step, name) then position; by (rank, step, name, occ). */
typedef struct td_cand {
    const core_capture_tensor *t;
    size_t pos;     /* index in the capture list (of the first capture of its tensor) */
    int occ;
} td_cand;

static int cmp_rank_id(const void *a, const void *b)
{
    const td_cand *x = a, *y = b;
    if (x->t->rank != y->t->rank)
        return x->t->rank < y->t->rank ? -1 : 1;
    if (x->t->id != y->t->id)
        return x->t->id < y->t->id ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static int cmp_pos(const void *a, const void *b)
{
    const td_cand *x = a, *y = b;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static int cmp_key(const core_capture_tensor *x, const core_capture_tensor *y)
{
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_key_pos(const void *a, const void *b)
{
    const td_cand *x = a, *y = b;
    int c = cmp_key(x->t, y->t);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

static int cmp_item_key_occ(const void *a, const void *b)
{
    const compare_tensors_item *x = *(compare_tensors_item *const *)a, *y = *(compare_tensors_item *const *)b;
    int c = cmp_key(x->t, y->t);
    return c ? c : (x->occ > y->occ) - (x->occ < y->occ);
}

/* The usable captured tensors of a trace: complete, with data, one per
 * (rank, tensor id) at the place of its first capture, the output capture
 * preferred, matching the name filter; in the capture list's order, each
 * with its occurrence of (rank, step, name). O(n log n): a trace may hold
 * many captures. */
static compare_tensors_item *usable(const core_capture_tensor *t, size_t n, const char *glob, size_t *out_n)
{
    td_cand *c = malloc((n ? n : 1) * sizeof(*c));
    compare_tensors_item *v = calloc(n ? n : 1, sizeof(*v));
    size_t m = 0, k = 0;
    *out_n = 0;
    if (!c || !v) {
        free(c);
        free(v);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (t[i].complete && t[i].data && t[i].role != TFT_CAPTURE_PRIOR && (!glob || fnmatch(glob, t[i].name, 0) == 0))
            c[m++] = (td_cand){&t[i], i, 0};
    qsort(c, m, sizeof(*c), cmp_rank_id);
    for (size_t a = 0; a < m;) {
        size_t b = a + 1;
        const core_capture_tensor *keep = c[a].t;
        for (; b < m && c[b].t->rank == c[a].t->rank && c[b].t->id == c[a].t->id; b++)
            if (keep->role != 0 && c[b].t->role == 0)
                keep = c[b].t;
        c[k++] = (td_cand){keep, c[a].pos, 0};
        a = b;
    }
    qsort(c, k, sizeof(*c), cmp_key_pos);
    for (size_t a = 1; a < k; a++)
        if (!cmp_key(c[a - 1].t, c[a].t))
            c[a].occ = c[a - 1].occ + 1;
    qsort(c, k, sizeof(*c), cmp_pos);
    for (size_t a = 0; a < k; a++)
        v[a] = (compare_tensors_item){.t = c[a].t, .occ = c[a].occ};
    free(c);
    *out_n = k;
    return v;
}

static int differs(double g, double b, const tensors_opts *o)
{
    if (isnan(g) || isnan(b))
        return isnan(g) != isnan(b);
    if (g == b)
        return 0;
    if (isinf(g) || isinf(b))
        return 1;
    return fabs(g - b) > o->atol + o->rtol * fmax(fabs(g), fabs(b));
}

/* The step's captured `tokens` [B, T] (integer) of this rank, if any. */
static const core_capture_tensor *find_tokens(const compare_tensors_item *v, size_t n, const core_capture_tensor *like)
{
    for (size_t i = 0; i < n; i++) {
        const core_capture_tensor *t = v[i].t;
        if (t->rank == like->rank && t->step == like->step && !strcmp(t->name, "tokens") && t->ndim == 2 &&
            (t->dtype == TFT_I32 || t->dtype == TFT_I64 || t->dtype == TFT_U16 || t->dtype == TFT_U8))
            return t;
    }
    return NULL;
}

/* The padding of a pair (the step's tokens [B, T], B = dim 0, T = its
 * rows or columns): tb = B and tt = T when known. */
typedef struct pad_info {
    const core_capture_tensor *tokens;
    int64_t tb, tt;
} pad_info;

/* r's sizes, its bitmaps (has_matrix: 2 or more dimensions) and whether
 * the padding is known. */
static void pair_begin(const core_capture_tensor *g, const core_capture_tensor *tokens, compare_tensors_diff *r,
                       pad_info *pad)
{
    memset(r, 0, sizeof(*r));
    *pad = (pad_info){.tokens = tokens};
    r->numel = numel_of(g);
    int nd = g->ndim;
    if (nd >= 2 && r->numel > 0) { /* every dimension then is at most numel: the bitmaps are bounded */
        r->has_matrix = 1;
        r->rows = g->shape[nd - 2];
        r->cols = g->shape[nd - 1];
        r->lead = r->rows > 0 && r->cols > 0 ? (int64_t)(r->numel / (uint64_t)(r->rows * r->cols)) : 0;
        r->rowbits = calloc((size_t)r->rows + 1, 1);
        r->colbits = calloc((size_t)r->cols + 1, 1);
        r->leadbits = calloc((size_t)(nd >= 3 ? g->shape[0] : 1) + 1, 1);
        if (!r->rowbits || !r->colbits || !r->leadbits)
            r->has_matrix = 0;
    }
    if (tokens && nd >= 3 && tokens->shape[0] == g->shape[0] &&
        (tokens->shape[1] == r->cols || tokens->shape[1] == r->rows)) {
        pad->tb = tokens->shape[0];
        pad->tt = tokens->shape[1];
        r->pad_known = 1;
    }
    r->ratio_const = 1;
    r->ratio = NAN;
}

/* A differing element i: the differences' sizes, the first ones, the ratio. */
static void note_values(compare_tensors_diff *r, uint64_t i, double gv, double bv)
{
    r->differing++;
    double d = fabs(gv - bv);
    if (isfinite(d)) {
        r->sum_abs += d;
        if (d > r->max_abs)
            r->max_abs = d;
        double m = fmax(fabs(gv), fabs(bv));
        if (m > 0 && d / m > r->max_rel)
            r->max_rel = d / m;
    } else {
        r->max_abs = INFINITY;
    }
    if (r->nfirst < COMPARE_TENSORS_FIRST) {
        r->first[r->nfirst] = i;
        r->first_g[r->nfirst] = gv;
        r->first_b[r->nfirst++] = bv;
    }
    if (r->ratio_const) {
        if (gv == 0 || !isfinite(gv) || !isfinite(bv))
            r->ratio_const = 0;
        else if (isnan(r->ratio))
            r->ratio = bv / gv;
        else if (fabs(bv / gv - r->ratio) > 1e-4 * fabs(r->ratio))
            r->ratio_const = 0;
    }
}

/* A differing element i of a matrix: its row, column, dim-0 index, place
 * to the diagonal, and whether it is at a padded position. per0: the
 * elements per dim-0 index. */
static void note_place(compare_tensors_diff *r, int nd, uint64_t i, int64_t per0, const pad_info *pad,
                       const tensors_opts *o)
{
    int64_t col = (int64_t)(i % (uint64_t)r->cols);
    int64_t row = (int64_t)((i / (uint64_t)r->cols) % (uint64_t)r->rows);
    r->rowbits[row] = r->colbits[col] = 1;
    int64_t l0 = nd >= 3 ? (int64_t)i / per0 : 0;
    r->leadbits[l0] = 1;
    if (col > row)
        r->above++;
    else if (col == row)
        r->on++;
    else
        r->below++;
    r->super1 += col == row + 1;
    r->sub1 += row == col + 1;
    int64_t tt = pad->tt;
    if (r->pad_known && l0 < pad->tb) {
        if (tt == r->cols && elem(pad->tokens, (uint64_t)(l0 * tt + col)) == o->pad_id)
            r->at_pad_col++;
        if (tt == r->rows && elem(pad->tokens, (uint64_t)(l0 * tt + row)) == o->pad_id)
            r->at_pad_row++;
    }
}

static void compare_pair(const core_capture_tensor *g, const core_capture_tensor *b, const core_capture_tensor *tokens,
                         const tensors_opts *o, compare_tensors_diff *r)
{
    pad_info pad;
    pair_begin(g, tokens, r, &pad);
    int nd = g->ndim;
    int64_t per0 = nd >= 3 && g->shape[0] > 0 ? (int64_t)(r->numel / (uint64_t)g->shape[0]) : 1;
    for (uint64_t i = 0; i < r->numel; i++) {
        double gv = elem(g, i), bv = elem(b, i);
        if (!differs(gv, bv, o))
            continue;
        note_values(r, i, gv, bv);
        if (r->has_matrix)
            note_place(r, nd, i, per0, &pad, o);
    }
    if (r->differing < 2) /* one element: any ratio is "constant" */
        r->ratio_const = 0;
}

static int same_layout(const core_capture_tensor *g, const core_capture_tensor *b)
{
    if (g->dtype != b->dtype || g->ndim != b->ndim)
        return 0;
    for (int d = 0; d < g->ndim; d++)
        if (g->shape[d] != b->shape[d])
            return 0;
    return 1;
}

/* BAD's item paired with GOLDEN's want: the first unpaired one of the same
 * (rank, step, name, occurrence) in bix (sorted so), NULL none. */
static compare_tensors_item *partner(compare_tensors_item **bix, size_t nb, const compare_tensors_item *want)
{
    size_t lo = 0, hi = nb;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_item_key_occ(&bix[mid], &want) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < nb && !cmp_item_key_occ(&bix[lo], &want) && !bix[lo]->paired)
        return bix[lo];
    return NULL;
}

/* Pairs res's usable items and compares each pair. */
static void pair_all(compare_tensors_result *res, const tensors_opts *o)
{
    size_t ng = res->ng, nb = res->nb;
    compare_tensors_item **bix = res->bv ? malloc((nb ? nb : 1) * sizeof(*bix)) : NULL; /* by (rank, step, name, occ) */
    res->pairs = res->gv && bix ? calloc(ng ? ng : 1, sizeof(*res->pairs)) : NULL;
    for (size_t j = 0; bix && j < nb; j++)
        bix[j] = &res->bv[j];
    if (bix)
        qsort(bix, nb, sizeof(*bix), cmp_item_key_occ);
    for (size_t i = 0; res->pairs && i < ng; i++) {
        compare_tensors_item *b = partner(bix, nb, &res->gv[i]);
        if (!b)
            continue;
        b->paired = res->gv[i].paired = 1;
        compare_tensors_pair *p = &res->pairs[res->npairs++];
        *p = (compare_tensors_pair){.g = res->gv[i].t, .b = b->t, .layout_differs = !same_layout(res->gv[i].t, b->t)};
        if (!p->layout_differs)
            compare_pair(p->g, p->b, find_tokens(res->gv, ng, p->g), o, &p->d);
        if (p->layout_differs || p->d.differing)
            res->n_diff++;
        else
            res->n_same++;
    }
    free(bix);
}

int compare_tensors_run(const char *golden, const char *bad, const tensors_opts *o, compare_tensors_result *res)
{
    *res = (compare_tensors_result){0};
    char err[512] = "";
    if (core_capture_list(golden, 1, &res->gt, &res->gn, err, sizeof(err), res->lost[0], sizeof(res->lost[0])) < 0) {
        fprintf(stderr, "tfdiff: %s: %s\n", golden, err[0] ? err : "cannot read captures");
        return 2;
    }
    if (core_capture_list(bad, 1, &res->bt, &res->bn, err, sizeof(err), res->lost[1], sizeof(res->lost[1])) < 0) {
        fprintf(stderr, "tfdiff: %s: %s\n", bad, err[0] ? err : "cannot read captures");
        return 2;
    }
    res->gv = usable(res->gt, res->gn, o->name_glob, &res->ng);
    res->bv = usable(res->bt, res->bn, o->name_glob, &res->nb);
    pair_all(res, o);
    return 0;
}

void compare_tensors_free(compare_tensors_result *res)
{
    for (int i = 0; res->pairs && i < res->npairs; i++) {
        free(res->pairs[i].d.rowbits);
        free(res->pairs[i].d.colbits);
        free(res->pairs[i].d.leadbits);
    }
    free(res->pairs);
    free(res->gv);
    free(res->bv);
    core_capture_free(res->gt, res->gn);
    core_capture_free(res->bt, res->bn);
    *res = (compare_tensors_result){0};
}

void compare_tensors_grid_of(const compare_tensors_pair *p, const tensors_opts *o, int64_t lead,
                             compare_tensors_grid *out)
{
    const compare_tensors_diff *r = &p->d;
    int64_t rows = r->has_matrix ? r->rows : 1, cols = r->has_matrix ? r->cols : (int64_t)r->numel;
    enum { G = COMPARE_TENSORS_GRID };
    out->rows = rows;
    out->cols = cols;
    if (rows <= 0 || cols <= 0)
        return;
    int br = rows > G ? G : (int)rows, bc = cols > G ? G : (int)cols;
    out->br = br;
    out->bc = bc;
    memset(out->any, 0, sizeof(out->any));
    memset(out->cell, 0, sizeof(out->cell));
    uint64_t base = (uint64_t)lead * (uint64_t)rows * (uint64_t)cols;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            uint64_t k = base + (uint64_t)i * (uint64_t)cols + (uint64_t)j;
            double gv = elem(p->g, k), bv = elem(p->b, k);
            if (!differs(gv, bv, o))
                continue;
            int ci = (int)(i * br / rows), cj = (int)(j * bc / cols);
            double d = isfinite(gv) && isfinite(bv) ? fabs(gv - bv) : INFINITY;
            out->any[ci * G + cj] = 1;
            out->cell[ci * G + cj] = fmax(out->cell[ci * G + cj], d);
        }
}
