/*
 * recorder_strided.c — statistics of a strided host tensor read in place
 * (tft_tensor_strided, tft.h): a transposed view, a slice, an expanded
 * tensor. The elements are visited in row-major order of the shape and
 * gathered, 16 KiB at a time, into a buffer on the stack that the
 * streaming statistics (tft_stats_stream, kernels/stats/tft_stats.h) read
 * while it is in cache; so the statistics and the fingerprint are those of
 * the dense row-major copy, bit for bit, without making that copy.
 *
 * Workload: PyTorch module outputs and gradients that are views (the
 * attention's transposes), from a few bytes to hundreds of MiB. Cost: one
 * pass over the elements plus a copy of each into the buffer (a memcpy per
 * row when the last dimension is dense). No allocation, except for the
 * rare f64 tensor whose moments overflow (|x| beyond ~1e154: the stream
 * needs the whole tensor for a second pass) — then one dense copy is made,
 * and without memory the caller records shape and dtype only.
 */
#include "recorder_internal.h"
#include "tft_stats.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GATHER_BYTES 16384u /* a multiple of the stream's 8 KiB block: pieces are read in place */

/* 1 when shape/strides (elements) describe dense row-major memory; dims
 * of size 1 may have any stride. */
int rec_strides_dense(int ndim, const int64_t *shape, const int64_t *strides)
{
    int64_t want = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] != 1 && strides[d] != want)
            return 0;
        want *= shape[d];
    }
    return 1;
}

/* The walk over the index space: idx is the index of the current row (all
 * dimensions but the last), off its element offset. */
struct walk {
    int ndim;              /* dimensions, >= 1 */
    const int64_t *shape;  /* (ndim) */
    const int64_t *stride; /* (ndim), in elements */
    int64_t idx[8];        /* row index, dims [0, ndim-1) */
    int64_t off;           /* element offset of the row's first element */
};

/* Moves to the next row; returns 0 after the last. */
static int walk_next_row(struct walk *w)
{
    for (int d = w->ndim - 2; d >= 0; d--) {
        w->off += w->stride[d];
        if (++w->idx[d] < w->shape[d])
            return 1;
        w->off -= w->stride[d] * w->shape[d];
        w->idx[d] = 0;
    }
    return 0;
}

/* Copies n elements of size es, stride st (elements), from src to dst. */
static void gather_run(unsigned char *dst, const unsigned char *src, int64_t n, int64_t st, size_t es)
{
    if (st == 1) {
        memcpy(dst, src, (size_t)n * es);
        return;
    }
    const size_t step = (size_t)st * es;
    switch (es) {
    case 1:
        for (int64_t i = 0; i < n; i++, src += step)
            dst[i] = *src;
        break;
    case 2:
        for (int64_t i = 0; i < n; i++, src += step)
            memcpy(dst + 2 * i, src, 2);
        break;
    case 4:
        for (int64_t i = 0; i < n; i++, src += step)
            memcpy(dst + 4 * i, src, 4);
        break;
    default:
        for (int64_t i = 0; i < n; i++, src += step)
            memcpy(dst + es * (size_t)i, src, es);
        break;
    }
}

/* Visits every element in row-major order, handing the gathered pieces to
 * piece(ctx, buf, n). Returns the first non-zero piece() result, or 0. */
static int gather_each(const void *data, int dtype, int ndim, const int64_t *shape, const int64_t *strides,
                       int (*piece)(void *, const void *, size_t), void *ctx)
{
    _Alignas(64) unsigned char buf[GATHER_BYTES];
    const size_t es = tft_dtype_size(dtype);
    const size_t cap = GATHER_BYTES / es;
    struct walk w = {.ndim = ndim, .shape = shape, .stride = strides};
    const int64_t row = shape[ndim - 1], st = strides[ndim - 1];
    size_t fill = 0;
    do {
        for (int64_t done = 0; done < row;) {
            int64_t n = row - done;
            if ((size_t)n > cap - fill)
                n = (int64_t)(cap - fill);
            gather_run(buf + fill * es, (const unsigned char *)data + (w.off + done * st) * (int64_t)es, n, st, es);
            fill += (size_t)n;
            done += n;
            if (fill == cap) {
                int rc = piece(ctx, buf, fill);
                if (rc)
                    return rc;
                fill = 0;
            }
        }
    } while (walk_next_row(&w));
    return fill ? piece(ctx, buf, fill) : 0;
}

static int piece_stream(void *ctx, const void *p, size_t n) { return tft_stats_stream_update(ctx, p, n); }

struct dense_ctx {
    unsigned char *at; /* where the next piece goes */
    size_t es;         /* element size */
};

static int piece_copy(void *ctx, const void *p, size_t n)
{
    struct dense_ctx *c = ctx;
    memcpy(c->at, p, n * c->es);
    c->at += n * c->es;
    return 0;
}

/* A dense row-major copy of the strided tensor (numel > 0 elements), in
 * malloc'd memory the caller frees; NULL without memory. */
void *rec_strided_dense_copy(const void *data, int dtype, int ndim, const int64_t *shape, const int64_t *strides,
                             uint64_t numel)
{
    const size_t es = tft_dtype_size(dtype);
    if (!es || numel > SIZE_MAX / es)
        return NULL;
    unsigned char *out = malloc((size_t)numel * es);
    if (!out)
        return NULL;
    struct dense_ctx c = {.at = out, .es = es};
    gather_each(data, dtype, ndim, shape, strides, piece_copy, &c);
    return out;
}

/* Statistics of the strided tensor (numel > 0 elements, ndim >= 1) in mode,
 * equal bit for bit to tft_stats_compute of its dense copy. Returns 0, or
 * a negative errno with *out zeroed (-ENOMEM: the overflow case found no
 * memory for its dense copy). */
int rec_stats_strided(const void *data, int dtype, int ndim, const int64_t *shape, const int64_t *strides,
                      uint64_t numel, int mode, tft_stats *out)
{
    tft_stats_stream s;
    int rc = tft_stats_stream_begin(&s, dtype, (size_t)numel, mode);
    if (rc == 0)
        rc = gather_each(data, dtype, ndim, shape, strides, piece_stream, &s);
    if (rc == 0)
        rc = tft_stats_stream_finish(&s, NULL, out);
    if (rc != -ERANGE)
        return rc;
    void *dense = rec_strided_dense_copy(data, dtype, ndim, shape, strides, numel);
    if (!dense) {
        memset(out, 0, sizeof(*out));
        return -ENOMEM;
    }
    rc = tft_stats_compute(dtype, dense, (size_t)numel, mode, out);
    free(dense);
    return rc;
}
