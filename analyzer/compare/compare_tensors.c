/*
 * compare_tensors.c — `tfdiff --tensors GOLDEN BAD`: element-wise comparison
 * of the whole tensors both traces captured (tftrace --capture, tftrace
 * replay), and where in each tensor the differences lie.
 *
 * Captured tensors are paired by (rank, step, name, occurrence within the
 * step); a tensor captured twice in one trace (as one op's output and as a
 * later op's input) counts once. For each pair: the count and fraction of
 * differing elements, max and mean absolute difference, max relative
 * difference, the first differing indices with both values, and a
 * structural summary over the last two dimensions (rows x columns):
 * above / on / below the diagonal, which rows, columns and leading indices,
 * differences only at padded positions (when the step's `tokens` were
 * captured too), and a constant BAD/GOLDEN ratio.
 *
 * Memory: both traces' captured tensors are loaded (their size is what the
 * capture spec asked for: the captured bytes both traces hold), plus one
 * byte per row and column per pair. Pairing sorts (O(n log n)).
 */
#include "compare_tensors.h"

#include "core_capture.h"
#include "html_page.h"
#include "html_svg.h"
#include "tft_stats.h"

#include <inttypes.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TD_FIRST 8      /* differing indices listed per tensor */
#define TD_RANGES 8     /* index ranges listed per dimension */

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

typedef struct td_item {
    const core_capture_tensor *t;
    int occ;        /* occurrence of (rank, step, name) in this trace */
    int paired;
} td_item;

/* Orders of td_item arrays: by (rank, id) then first position; by
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
    const td_item *x = *(td_item *const *)a, *y = *(td_item *const *)b;
    int c = cmp_key(x->t, y->t);
    return c ? c : (x->occ > y->occ) - (x->occ < y->occ);
}

/* The usable captured tensors of a trace: complete, with data, one per
 * (rank, tensor id) at the place of its first capture, the output capture
 * preferred, matching the name filter; in the capture list's order, each
 * with its occurrence of (rank, step, name). O(n log n): a trace may hold
 * many captures. */
static td_item *usable(const core_capture_tensor *t, size_t n, const char *glob, size_t *out_n)
{
    td_cand *c = malloc((n ? n : 1) * sizeof(*c));
    td_item *v = calloc(n ? n : 1, sizeof(*v));
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
        v[a] = (td_item){.t = c[a].t, .occ = c[a].occ};
    free(c);
    *out_n = k;
    return v;
}

/* ---- index sets ------------------------------------------------------- */

/* "0..3, 7, 9..12" from a bitmap of n entries (at most TD_RANGES ranges). */
static void ranges_text(const unsigned char *bits, int64_t n, char *buf, size_t len, cJSON *arr)
{
    size_t k = 0;
    int shown = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < n;) {
        if (!bits[i]) {
            i++;
            continue;
        }
        int64_t j = i;
        while (j + 1 < n && bits[j + 1])
            j++;
        if (arr) {
            cJSON *r = cJSON_CreateArray();
            cJSON_AddItemToArray(r, cJSON_CreateNumber((double)i));
            cJSON_AddItemToArray(r, cJSON_CreateNumber((double)j));
            cJSON_AddItemToArray(arr, r);
        }
        if (shown < TD_RANGES && k < len) {
            if (j > i)
                k += (size_t)snprintf(buf + k, len - k, "%s%lld..%lld", shown ? ", " : "", (long long)i,
                                      (long long)j);
            else
                k += (size_t)snprintf(buf + k, len - k, "%s%lld", shown ? ", " : "", (long long)i);
        } else if (shown == TD_RANGES && k < len) {
            k += (size_t)snprintf(buf + k, len - k, ", ...");
        }
        shown++;
        i = j + 1;
    }
}

static int64_t count_bits(const unsigned char *bits, int64_t n)
{
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++)
        c += bits[i] != 0;
    return c;
}

/* ---- one pair ---------------------------------------------------------- */

typedef struct td_result {
    uint64_t numel, differing;
    double max_abs, sum_abs, max_rel;
    int nfirst;
    uint64_t first[TD_FIRST];
    double first_g[TD_FIRST], first_b[TD_FIRST];
    /* structure */
    int has_matrix;
    int64_t rows, cols, lead;
    uint64_t above, on, below, super1, sub1;
    unsigned char *rowbits, *colbits, *leadbits;
    int pad_known;             /* tokens of the step were captured */
    uint64_t at_pad_col, at_pad_row;
    int ratio_const;
    double ratio;
    char pattern[512];
} td_result;

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
static const core_capture_tensor *find_tokens(const td_item *v, size_t n, const core_capture_tensor *like)
{
    for (size_t i = 0; i < n; i++) {
        const core_capture_tensor *t = v[i].t;
        if (t->rank == like->rank && t->step == like->step && !strcmp(t->name, "tokens") && t->ndim == 2 &&
            (t->dtype == TFT_I32 || t->dtype == TFT_I64 || t->dtype == TFT_U16 || t->dtype == TFT_U8))
            return t;
    }
    return NULL;
}

static void compare_pair(const core_capture_tensor *g, const core_capture_tensor *b, const core_capture_tensor *tokens,
                         const tensors_opts *o, td_result *r)
{
    memset(r, 0, sizeof(*r));
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
    /* padding: tokens [B, T] with B = dim 0 and T = the rows or columns */
    int64_t tb = 0, tt = 0;
    if (tokens && nd >= 3 && tokens->shape[0] == g->shape[0] &&
        (tokens->shape[1] == r->cols || tokens->shape[1] == r->rows)) {
        tb = tokens->shape[0];
        tt = tokens->shape[1];
        r->pad_known = 1;
    }
    r->ratio_const = 1;
    r->ratio = NAN;
    int64_t per0 = nd >= 3 && g->shape[0] > 0 ? (int64_t)(r->numel / (uint64_t)g->shape[0]) : 1;
    for (uint64_t i = 0; i < r->numel; i++) {
        double gv = elem(g, i), bv = elem(b, i);
        if (!differs(gv, bv, o))
            continue;
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
        if (r->nfirst < TD_FIRST) {
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
        if (!r->has_matrix)
            continue;
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
        if (r->pad_known && l0 < tb) {
            if (tt == r->cols && elem(tokens, (uint64_t)(l0 * tt + col)) == o->pad_id)
                r->at_pad_col++;
            if (tt == r->rows && elem(tokens, (uint64_t)(l0 * tt + row)) == o->pad_id)
                r->at_pad_row++;
        }
    }
    if (r->differing < 2) /* one element: any ratio is "constant" */
        r->ratio_const = 0;
}

/* The structural summary line. */
static void describe(const core_capture_tensor *g, td_result *r, cJSON *pj)
{
    char *p = r->pattern;
    size_t len = sizeof(r->pattern), k = 0;
    p[0] = '\0';
    if (r->differing == 0)
        return;
    if (r->differing == r->numel)
        k += (size_t)snprintf(p + k, len - k, "everywhere");
    if (r->has_matrix) {
        const char *diag = NULL;
        if (r->rows == r->cols) {
            if (r->above == r->differing)
                diag = r->super1 == r->differing ? "only just above the diagonal (column = row + 1)"
                                                 : "only above the diagonal (column > row)";
            else if (r->below == r->differing)
                diag = r->sub1 == r->differing ? "only just below the diagonal (row = column + 1)"
                                               : "only below the diagonal (column < row)";
            else if (r->on == r->differing)
                diag = "only on the diagonal";
            else if (r->above == 0 && r->differing != r->numel)
                diag = "on and below the diagonal only";
        }
        if (diag) {
            k += (size_t)snprintf(p + k, len - k, "%s%s", k ? "; " : "", diag);
            cJSON_AddStringToObject(pj, "diagonal", diag);
        }
        if (r->pad_known) {
            const char *pad = NULL;
            if (r->at_pad_col == r->differing)
                pad = "only at padded positions (columns where tokens are padding)";
            else if (r->at_pad_row == r->differing)
                pad = "only at padded positions (rows where tokens are padding)";
            if (pad) {
                k += (size_t)snprintf(p + k, len - k, "%s%s", k ? "; " : "", pad);
                cJSON_AddStringToObject(pj, "padding", pad);
            }
        }
        char rows[256], cols[256], lead[256];
        cJSON *ra = cJSON_AddArrayToObject(pj, "rows");
        cJSON *ca = cJSON_AddArrayToObject(pj, "columns");
        ranges_text(r->rowbits, r->rows, rows, sizeof(rows), ra);
        ranges_text(r->colbits, r->cols, cols, sizeof(cols), ca);
        int64_t nr = count_bits(r->rowbits, r->rows), nc = count_bits(r->colbits, r->cols);
        if (r->differing != r->numel) {
            k += (size_t)snprintf(p + k, len - k, "%srows %s (%lld of %lld), columns %s (%lld of %lld)", k ? "; " : "",
                                  rows, (long long)nr, (long long)r->rows, cols, (long long)nc, (long long)r->cols);
            if (g->ndim >= 3) {
                cJSON *la = cJSON_AddArrayToObject(pj, "dim0");
                ranges_text(r->leadbits, g->shape[0], lead, sizeof(lead), la);
                int64_t nl = count_bits(r->leadbits, g->shape[0]);
                k += (size_t)snprintf(p + k, len - k, ", dim 0 index %s (%lld of %lld)", lead, (long long)nl,
                                      (long long)g->shape[0]);
            }
        }
    }
    if (r->ratio_const) {
        k += (size_t)snprintf(p + k, len - k, "%sBAD = %.6g x GOLDEN wherever they differ", k ? "; " : "", r->ratio);
        cJSON_AddNumberToObject(pj, "ratio", r->ratio);
    }
    cJSON_AddStringToObject(pj, "summary", p);
}

static void index_text(const core_capture_tensor *t, uint64_t i, char *buf, size_t len, cJSON *arr)
{
    int64_t idx[TFT_MAX_NDIM];
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t s = t->shape[d] > 0 ? t->shape[d] : 1;
        idx[d] = (int64_t)(i % (uint64_t)s);
        i /= (uint64_t)s;
    }
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < t->ndim; d++) {
        k += (size_t)snprintf(buf + k, k < len ? len - k : 0, "%s%lld", d ? "," : "", (long long)idx[d]);
        cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)idx[d]));
    }
    snprintf(buf + k, k < len ? len - k : 0, "]");
}

static void shape_text(const core_capture_tensor *t, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < t->ndim; d++)
        k += (size_t)snprintf(buf + k, k < len ? len - k : 0, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    snprintf(buf + k, k < len ? len - k : 0, "]");
}

static cJSON *shape_json(const core_capture_tensor *t)
{
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; d < t->ndim; d++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)t->shape[d]));
    return a;
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

/* ---- the whole comparison --------------------------------------------- */

/* ---- the HTML page ------------------------------------------------------ */

#define TD_IMG 64       /* an image has at most TD_IMG x TD_IMG cells */
#define TD_IMAGES 16    /* differing pairs drawn */

/* The element-wise difference of one matrix (the last two dimensions, at
 * leading index lead) of a pair as an SVG image: a cell per element, or
 * per block of elements when the matrix is larger than TD_IMG x TD_IMG
 * (the largest |BAD - GOLDEN| of the block), white where they agree. */
static void html_image(FILE *f, const core_capture_tensor *g, const core_capture_tensor *b, const td_result *r, const tensors_opts *o,
                       int64_t lead)
{
    int64_t rows = r->has_matrix ? r->rows : 1, cols = r->has_matrix ? r->cols : (int64_t)r->numel;
    if (rows <= 0 || cols <= 0)
        return;
    int br = rows > TD_IMG ? TD_IMG : (int)rows, bc = cols > TD_IMG ? TD_IMG : (int)cols;
    double cell[TD_IMG * TD_IMG];
    unsigned char any[TD_IMG * TD_IMG];
    memset(any, 0, sizeof(any));
    memset(cell, 0, sizeof(cell));
    uint64_t base = (uint64_t)lead * (uint64_t)rows * (uint64_t)cols;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            uint64_t k = base + (uint64_t)i * (uint64_t)cols + (uint64_t)j;
            double gv = elem(g, k), bv = elem(b, k);
            if (!differs(gv, bv, o))
                continue;
            int ci = (int)(i * br / rows), cj = (int)(j * bc / cols);
            double d = isfinite(gv) && isfinite(bv) ? fabs(gv - bv) : INFINITY;
            any[ci * TD_IMG + cj] = 1;
            cell[ci * TD_IMG + cj] = fmax(cell[ci * TD_IMG + cj], d);
        }
    double top = isfinite(r->max_abs) && r->max_abs > 0 ? r->max_abs : 1;
    int px = 320 / (bc > br ? bc : br);
    px = px < 4 ? 4 : px;
    fprintf(f, "<figure class=\"chart\"><svg viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" "
               "class=\"tensor-diff\"><title>|BAD - GOLDEN|</title><rect class=\"same\" x=\"0\" y=\"0\" width=\"%d\" "
               "height=\"%d\"/>",
            bc * px, br * px, bc * px, br * px, bc * px, br * px);
    for (int i = 0; i < br; i++)
        for (int j = 0; j < bc; j++) {
            if (!any[i * TD_IMG + j])
                continue;
            double t = isfinite(cell[i * TD_IMG + j]) ? 0.25 + 0.75 * fmin(1, cell[i * TD_IMG + j] / top) : 1;
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#c00\" fill-opacity=\"%.2f\"/>",
                    j * px, i * px, px, px, t);
        }
    fputs("</svg><figcaption>", f);
    html_textf(f, "rows 0-%lld by columns 0-%lld%s; red where BAD differs from GOLDEN (darker: larger |difference|)",
               (long long)rows - 1, (long long)cols - 1, rows > TD_IMG || cols > TD_IMG ? ", in blocks" : "");
    if (r->has_matrix && r->lead > 1)
        html_textf(f, "; leading index %lld of %lld", (long long)lead, (long long)r->lead);
    fputs("</figcaption></figure>\n", f);
}

/* One pair of the page's #tensors section. */
static void html_pair(FILE *f, const core_capture_tensor *g, const core_capture_tensor *b, const td_result *r, const tensors_opts *o,
                      const char *stepbuf, const char *shape)
{
    fputs("<div class=\"pair\"><h3><code>", f);
    html_text(f, g->name);
    fputs("</code> ", f);
    html_textf(f, "%s rank %d, %s %s", stepbuf, g->rank, shape, tft_dtype_name(g->dtype));
    fputs("</h3>\n<p>", f);
    html_textf(f, "differs: %llu of %llu elements (%.3g%%); max |diff| %.6g, mean |diff| %.6g, max rel %.3g",
               (unsigned long long)r->differing, (unsigned long long)r->numel,
               100.0 * (double)r->differing / (double)r->numel, r->max_abs, r->sum_abs / (double)r->numel, r->max_rel);
    fputs("</p>\n<p class=\"pattern\">Where: ", f);
    html_text(f, r->pattern);
    fputs("</p>\n", f);
    int64_t per = r->has_matrix ? r->rows * r->cols : (int64_t)r->numel;
    int64_t lead = r->nfirst && per > 0 ? (int64_t)(r->first[0] / (uint64_t)per) : 0;
    html_image(f, g, b, r, o, lead);
    fputs("</div>\n", f);
}

/* The page: the verdict first, then the pairs written to body. */
static int html_write(const tensors_opts *o, const char *golden, const char *bad, int code, const char *first,
                      int64_t first_step, int n_pairs, int n_same, int n_diff, const char *body, size_t body_len)
{
    html_out out;
    if (html_out_open(&out, o->html) < 0)
        return -1;
    FILE *f = out.f;
    html_page_head(f, "diff", "tfdiff --tensors report");
    fputs("<h1>tfdiff --tensors report</h1>\n", f);
    const char *status = code == 0 ? "match" : code == 1 ? "diverged" : "incomplete";
    fprintf(f, "<p id=\"verdict\" data-status=\"%s\"", status);
    if (code == 1 && first_step != TFT_STEP_NONE)
        fprintf(f, " data-step=\"%" PRId64 "\"", first_step);
    fputs(">tfdiff: ", f);
    fputs(code == 0 ? "MATCH — every captured pair is identical" : code == 1 ? "DIVERGED — " :
          "INCOMPLETE — no captured tensors in common", f);
    if (code == 1)
        html_text(f, first);
    fputs("</p>\n<p class=\"meta\">GOLDEN <code>", f);
    html_text(f, golden);
    fputs("</code>, BAD <code>", f);
    html_text(f, bad);
    fprintf(f, "</code>: %d captured tensor%s compared, %d identical, %d different (rtol %g, atol %g).</p>\n", n_pairs,
            n_pairs == 1 ? "" : "s", n_same, n_diff, o->rtol, o->atol);
    if (n_pairs) {
        fputs("<section id=\"tensors\">\n<h2>Captured tensors</h2>\n", f);
        fwrite(body, 1, body_len, f);
        if (n_diff > TD_IMAGES)
            fprintf(f, "<p class=\"meta\">%d more differing pairs are not drawn (tfdiff --tensors --json lists them)"
                       "</p>\n", n_diff - TD_IMAGES);
        fputs("</section>\n", f);
    }
    html_page_tail(f);
    return html_out_commit(&out);
}

int compare_tensors(const char *golden, const char *bad, const tensors_opts *o, FILE *out)
{
    char *hbody = NULL, hfirst[1400] = "";
    size_t hlen = 0;
    int64_t hstep = TFT_STEP_NONE;
    FILE *hf = o->html ? open_memstream(&hbody, &hlen) : NULL;
    if (o->html && !hf) {
        fprintf(stderr, "tfdiff: %s: cannot write the HTML report: %s\n", o->html, strerror(errno));
        return 2;
    }
    core_capture_tensor *gt = NULL, *bt = NULL;
    size_t gn = 0, bn = 0;
    char err[512] = "";
    if (core_capture_list(golden, 1, &gt, &gn, err, sizeof(err)) < 0) {
        fprintf(stderr, "tfdiff: %s: %s\n", golden, err[0] ? err : "cannot read captures");
        return 2;
    }
    if (core_capture_list(bad, 1, &bt, &bn, err, sizeof(err)) < 0) {
        fprintf(stderr, "tfdiff: %s: %s\n", bad, err[0] ? err : "cannot read captures");
        core_capture_free(gt, gn);
        return 2;
    }
    size_t ng = 0, nb = 0;
    td_item *gv = usable(gt, gn, o->name_glob, &ng);
    td_item *bv = usable(bt, bn, o->name_glob, &nb);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "golden", golden);
    cJSON_AddStringToObject(root, "bad", bad);
    cJSON *tol = cJSON_AddObjectToObject(root, "tolerance");
    cJSON_AddNumberToObject(tol, "rtol", o->rtol);
    cJSON_AddNumberToObject(tol, "atol", o->atol);
    cJSON *arr = cJSON_AddArrayToObject(root, "tensors");
    int n_diff = 0, n_same = 0, n_pairs = 0;
    td_item **bix = bv ? malloc((nb ? nb : 1) * sizeof(*bix)) : NULL; /* BAD's by (rank, step, name, occ) */
    for (size_t j = 0; bix && j < nb; j++)
        bix[j] = &bv[j];
    if (bix)
        qsort(bix, nb, sizeof(*bix), cmp_item_key_occ);
    for (size_t i = 0; gv && bix && i < ng; i++) {
        const core_capture_tensor *g = gv[i].t;
        const core_capture_tensor *b = NULL;
        size_t lo = 0, hi = nb;
        const td_item *want = &gv[i];
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (cmp_item_key_occ(&bix[mid], &want) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < nb && !cmp_item_key_occ(&bix[lo], &want) && !bix[lo]->paired) {
            b = bix[lo]->t;
            bix[lo]->paired = 1;
        }
        if (!b)
            continue;
        gv[i].paired = 1;
        n_pairs++;
        cJSON *tj = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, tj);
        cJSON_AddStringToObject(tj, "name", g->name);
        cJSON_AddNumberToObject(tj, "rank", g->rank);
        if (g->step == TFT_STEP_NONE)
            cJSON_AddNullToObject(tj, "step");
        else
            cJSON_AddNumberToObject(tj, "step", (double)g->step);
        cJSON_AddNumberToObject(tj, "seq_golden", (double)g->seq);
        cJSON_AddNumberToObject(tj, "seq_bad", (double)b->seq);
        cJSON_AddStringToObject(tj, "dtype", tft_dtype_name(g->dtype));
        cJSON_AddItemToObject(tj, "shape", shape_json(g));
        char shape[160], stepbuf[48];
        shape_text(g, shape, sizeof(shape));
        if (g->step == TFT_STEP_NONE)
            snprintf(stepbuf, sizeof(stepbuf), "seq %lld", (long long)g->seq);
        else
            snprintf(stepbuf, sizeof(stepbuf), "step %lld", (long long)g->step);
        if (!same_layout(g, b)) {
            char bshape[160];
            shape_text(b, bshape, sizeof(bshape));
            cJSON_AddStringToObject(tj, "verdict", "layout");
            cJSON_AddItemToObject(tj, "shape_bad", shape_json(b));
            cJSON_AddStringToObject(tj, "dtype_bad", tft_dtype_name(b->dtype));
            if (!o->json)
                fprintf(out, "%s  %s rank %d: layout differs: golden %s %s, bad %s %s\n", g->name, stepbuf, g->rank,
                        shape, tft_dtype_name(g->dtype), bshape, tft_dtype_name(b->dtype));
            n_diff++;
            if (hf && !hfirst[0]) {
                snprintf(hfirst, sizeof(hfirst), "%s %s rank %d: layout differs", g->name, stepbuf, g->rank);
                hstep = g->step;
            }
            continue;
        }
        const core_capture_tensor *tokens = find_tokens(gv, ng, g);
        td_result r;
        compare_pair(g, b, tokens, o, &r);
        cJSON_AddNumberToObject(tj, "numel", (double)r.numel);
        cJSON_AddNumberToObject(tj, "differing", (double)r.differing);
        cJSON_AddNumberToObject(tj, "fraction", r.numel ? (double)r.differing / (double)r.numel : 0.0);
        cJSON_AddStringToObject(tj, "verdict", r.differing ? "different" : "identical");
        cJSON *pj = cJSON_CreateObject();
        describe(g, &r, pj);
        if (r.differing) {
            n_diff++;
            cJSON_AddNumberToObject(tj, "max_abs_diff", isfinite(r.max_abs) ? r.max_abs : 1e308);
            cJSON_AddNumberToObject(tj, "mean_abs_diff", r.sum_abs / (double)r.numel);
            cJSON_AddNumberToObject(tj, "max_rel_diff", r.max_rel);
            cJSON *fa = cJSON_AddArrayToObject(tj, "first");
            char idx[TD_FIRST][96];
            for (int k = 0; k < r.nfirst; k++) {
                cJSON *e = cJSON_CreateObject();
                cJSON *ia = cJSON_AddArrayToObject(e, "index");
                index_text(g, r.first[k], idx[k], sizeof(idx[k]), ia);
                cJSON_AddNumberToObject(e, "golden", isfinite(r.first_g[k]) ? r.first_g[k] : 0);
                cJSON_AddNumberToObject(e, "bad", isfinite(r.first_b[k]) ? r.first_b[k] : 0);
                cJSON_AddItemToArray(fa, e);
            }
            cJSON_AddItemToObject(tj, "pattern", pj);
            if (!o->json) {
                fprintf(out, "%s  %s rank %d  %s %s\n", g->name, stepbuf, g->rank, shape, tft_dtype_name(g->dtype));
                fprintf(out, "  differs: %llu of %llu elements (%.3g%%); max |diff| %.6g, mean |diff| %.6g, max rel %.3g\n",
                        (unsigned long long)r.differing, (unsigned long long)r.numel,
                        100.0 * (double)r.differing / (double)r.numel, r.max_abs, r.sum_abs / (double)r.numel,
                        r.max_rel);
                fprintf(out, "  first:");
                for (int k = 0; k < r.nfirst && k < 4; k++)
                    fprintf(out, "%s %s golden %.6g bad %.6g", k ? ";" : "", idx[k], r.first_g[k], r.first_b[k]);
                fprintf(out, "\n  where: %s\n", r.pattern);
            }
            if (hf && !hfirst[0]) {
                snprintf(hfirst, sizeof(hfirst), "%s %s rank %d: %llu of %llu elements differ; where: %s", g->name,
                         stepbuf, g->rank, (unsigned long long)r.differing, (unsigned long long)r.numel, r.pattern);
                hstep = g->step;
            }
            if (hf && n_diff <= TD_IMAGES)
                html_pair(hf, g, b, &r, o, stepbuf, shape);
        } else {
            n_same++;
            cJSON_Delete(pj);
            if (!o->json)
                fprintf(out, "%s  %s rank %d  %s %s: identical\n", g->name, stepbuf, g->rank, shape,
                        tft_dtype_name(g->dtype));
        }
        free(r.rowbits);
        free(r.colbits);
        free(r.leadbits);
    }
    cJSON *og = cJSON_AddArrayToObject(root, "only_golden");
    cJSON *ob = cJSON_AddArrayToObject(root, "only_bad");
    for (size_t i = 0; gv && i < ng; i++)
        if (!gv[i].paired)
            cJSON_AddItemToArray(og, cJSON_CreateString(gv[i].t->name));
    for (size_t j = 0; bv && j < nb; j++)
        if (!bv[j].paired)
            cJSON_AddItemToArray(ob, cJSON_CreateString(bv[j].t->name));
    cJSON_AddNumberToObject(root, "compared", n_pairs);
    cJSON_AddNumberToObject(root, "identical", n_same);
    cJSON_AddNumberToObject(root, "different", n_diff);
    int code = n_pairs == 0 ? 2 : n_diff ? 1 : 0;
    if (o->json) {
        char *s = cJSON_Print(root);
        if (s)
            fprintf(out, "%s\n", s);
        free(s);
    } else {
        int ug = cJSON_GetArraySize(og), ub = cJSON_GetArraySize(ob);
        if (ug || ub)
            fprintf(out, "unpaired captures: %d only in golden, %d only in bad\n", ug, ub);
        fprintf(out, "%d captured tensor%s compared: %d identical, %d different\n", n_pairs, n_pairs == 1 ? "" : "s",
                n_same, n_diff);
    }
    if (hf) {
        int bad_w = fclose(hf) != 0;
        if (bad_w || html_write(o, golden, bad, code, hfirst, hstep, n_pairs, n_same, n_diff, hbody, hlen) < 0) {
            fprintf(stderr, "tfdiff: %s: cannot write the HTML report: %s\n", o->html, strerror(errno));
            code = 2;
        }
        free(hbody);
    }
    if (n_pairs == 0)
        fprintf(stderr, "tfdiff: no captured tensors in common (golden has %zu, bad %zu): record with "
                        "tftrace --capture or tftrace replay\n", ng, nb);
    cJSON_Delete(root);
    free(gv);
    free(bv);
    free(bix);
    core_capture_free(gt, gn);
    core_capture_free(bt, bn);
    return code;
}
