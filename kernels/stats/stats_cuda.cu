/*
 * stats_cuda.cu — device tensor statistics (tft_stats_cuda.h).
 *
 * Everything that computes is __host__ __device__, so the host emulation
 * (tft_stats_cuda_emulate, tft_stats_cuda_xxh3) runs the very code the GPU
 * runs and the tests can check it on machines without a GPU. Compiled with
 * --fmad=false so the device rounds like the host.
 *
 * Workload: one launch per recorded device tensor, on the tensor's stream,
 * right after the op that produced it; a few microseconds of launch
 * overhead plus one read of the tensor.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <new>

#include <cuda_runtime.h>

#include "tft_stats_cuda.h"
#include "xxh3_cuda_internal.h"

#define THREADS 256                       /* both stages */
#define TILE_BYTES ((size_t)TFT_FP_BLOCK_BYTES)

/* ------------------------------------------------------------------------ */
/* Statistics: per-thread Welford, Chan merges                               */
/* ------------------------------------------------------------------------ */

/* Partial statistics of some elements (a thread's share, a tile, ...). */
struct dpart {
    unsigned long long nfin, nan, pinf, ninf, zero;
    unsigned long long tiny;   /* finite |x| < 2^-14, zeros included */
    unsigned long long over16; /* finite |x| > 65504 */
    unsigned long long overbf; /* finite |x| > bf16 max */
    double min, max;           /* finite; +Inf / -Inf when none */
    double mean, m2;           /* Welford mean (minus the frame shift) and sum of
                                * squared deviations */
    double l1, sumsq;          /* sum |x|, sum x^2 */
};

static HD void dp_init(dpart *p)
{
    memset(p, 0, sizeof *p);
    p->min = INFINITY;
    p->max = -INFINITY;
}

static HD size_t dtype_bytes(int dtype)
{
    switch (dtype) {
    case TFT_F64: case TFT_I64: case TFT_U64: return 8;
    case TFT_F32: case TFT_I32: case TFT_U32: return 4;
    case TFT_F16: case TFT_BF16: case TFT_I16: case TFT_U16: return 2;
    case TFT_U8: case TFT_I8: case TFT_BOOL: case TFT_F8E4M3: case TFT_F8E5M2: return 1;
    default: return 0;
    }
}

static HD float f16_decode(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu, u;
    if (em >= 0x7c00u) {
        uint32_t m = (em & 0x3ffu) << 13;
        u = sign | 0x7f800000u | m | (m ? 0x00400000u : 0);
    } else if (em >= 0x0400u) {
        u = sign | ((em << 13) + 0x38000000u);
    } else {
        float f = (float)em * 0x1p-24f;
        memcpy(&u, &f, 4);
        u |= sign;
    }
    float r;
    memcpy(&r, &u, 4);
    return r;
}

/* OCP E4M3FN (bias 7, no Inf, NaN only S.1111.111) -> binary32, exact, by
 * bit arithmetic (the CPU side uses a table; the tests compare the two). */
static HD float f8e4m3_decode(uint8_t b)
{
    uint32_t sign = (uint32_t)(b & 0x80u) << 24, em = b & 0x7fu, u;
    if (em == 0x7fu) {
        u = sign | 0x7fc00000u;
    } else if (em >= 0x08u) {
        u = sign | ((em << 20) + 0x3c000000u); /* exponent e - 7 + 127 */
    } else {
        float f = (float)em * 0x1p-9f;
        memcpy(&u, &f, 4);
        u |= sign;
    }
    float r;
    memcpy(&r, &u, 4);
    return r;
}

/* E5M2 is the top byte of an IEEE binary16. */
static HD float f8e5m2_decode(uint8_t b) { return f16_decode((uint16_t)(b << 8)); }

/* Element i of an element-aligned array of T (the host reads through
 * memcpy, so emulated data needs no alignment). */
template <class T> static HD T ld(const uint8_t *base, size_t i)
{
#ifdef __CUDA_ARCH__
    return ((const T *)base)[i];
#else
    T v;
    memcpy(&v, base + i * sizeof(T), sizeof(T));
    return v;
#endif
}

/* Element i of an array of dtype, as a double. */
static HD double load_elem(int dtype, const uint8_t *base, size_t i)
{
    switch (dtype) {
    case TFT_F32: return ld<float>(base, i);
    case TFT_F64: return ld<double>(base, i);
    case TFT_F16: return f16_decode(ld<uint16_t>(base, i));
    case TFT_BF16: {
        uint32_t u = (uint32_t)ld<uint16_t>(base, i) << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case TFT_I32: return ld<int32_t>(base, i);
    case TFT_I64: return (double)ld<int64_t>(base, i);
    case TFT_U8: case TFT_BOOL: return ld<uint8_t>(base, i);
    case TFT_I8: return ld<int8_t>(base, i);
    case TFT_I16: return ld<int16_t>(base, i);
    case TFT_U16: return ld<uint16_t>(base, i);
    case TFT_U32: return ld<uint32_t>(base, i);
    case TFT_U64: return (double)ld<uint64_t>(base, i);
    case TFT_F8E4M3: return f8e4m3_decode(ld<uint8_t>(base, i));
    case TFT_F8E5M2: return f8e5m2_decode(ld<uint8_t>(base, i));
    default: return 0.0;
    }
}

/* The frame shift k: the first finite element among the first 256 (0 if
 * none). Moments are accumulated about it, so means stay small numbers and
 * data like 1e8 + noise keep their std to ~1e-15. Every thread computes it
 * (element 0 is almost always finite: one load). */
static HD double frame_shift(int dtype, const uint8_t *data, size_t numel)
{
    for (size_t i = 0; i < numel && i < 256; i++) {
        double v = load_elem(dtype, data, i);
        if (isfinite(v))
            return v;
    }
    return 0.0;
}

static HD void dp_add(dpart *p, double v, double k, int full)
{
    if (isnan(v)) {
        p->nan++;
        return;
    }
    if (isinf(v)) {
        if (v > 0)
            p->pinf++;
        else
            p->ninf++;
        return;
    }
    double a = fabs(v);
    p->nfin++;
    p->zero += v == 0.0;
    p->min = v < p->min ? v : p->min;
    p->max = v > p->max ? v : p->max;
    if (!full)
        return;
    p->tiny += a < 0x1p-14;
    p->over16 += a > 65504.0;
    p->overbf += a > 0x1.fep127;
    double x = v - k, d = x - p->mean;
    p->mean += d / (double)p->nfin;
    p->m2 += d * (x - p->mean);
    p->l1 += a;
    p->sumsq += v * v;
}

/* a := a followed by b (Chan et al.); the order is fixed by the callers. */
static HD void dp_merge(dpart *a, const dpart *b)
{
    unsigned long long na = a->nfin, nb = b->nfin;
    a->nan += b->nan;
    a->pinf += b->pinf;
    a->ninf += b->ninf;
    a->zero += b->zero;
    a->tiny += b->tiny;
    a->over16 += b->over16;
    a->overbf += b->overbf;
    a->min = b->min < a->min ? b->min : a->min;
    a->max = b->max > a->max ? b->max : a->max;
    a->nfin = na + nb;
    if (nb == 0)
        return;
    double nt = (double)(na + nb), delta = b->mean - a->mean;
    a->mean += delta * ((double)nb / nt);
    a->m2 += b->m2 + delta * delta * ((double)na * (double)nb / nt);
    a->l1 += b->l1;
    a->sumsq += b->sumsq;
}

/* Thread t's share of tile elements [0, n): t, t + THREADS, ... */
static HD void thread_partial(int dtype, const uint8_t *tile, size_t n, int t, double k,
                              int full, dpart *p)
{
    dp_init(p);
    for (size_t i = (size_t)t; i < n; i += THREADS)
        dp_add(p, load_elem(dtype, tile, i), k, full);
}

/* One level of the fixed tree: sh[t] := sh[t] + sh[t + half], t < half. */
static HD void tree_level(dpart *sh, int t, int half)
{
    if (t < half)
        dp_merge(&sh[t], &sh[t + half]);
}

static HD void dp_finish(const dpart *p, double k, size_t numel, int mode, uint64_t fp,
                         tft_stats *out)
{
    memset(out, 0, sizeof *out);
    out->numel = numel;
    if (mode == TFT_STATS_SHAPE)
        return;
    out->fingerprint = fp;
    out->nan = p->nan;
    out->pinf = p->pinf;
    out->ninf = p->ninf;
    out->zero = p->zero;
    if (p->nfin > 0) {
        out->min = p->min + 0.0;
        out->max = p->max + 0.0;
    }
    if (mode != TFT_STATS_FULL)
        return;
    out->over_fp16 = p->over16;
    out->over_bf16 = p->overbf;
    out->under_fp16 = p->tiny - p->zero;
    if (p->nfin == 0)
        return;
    out->mean = k + p->mean;
    out->std = sqrt(p->m2 / (double)p->nfin);
    out->l1 = p->l1;
    out->l2 = sqrt(p->sumsq);
    out->absmax = fabs(out->min) > fabs(out->max) ? fabs(out->min) : fabs(out->max);
}

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */
/* ------------------------------------------------------------------------ */

/* Stage 1's work for block b, which handles tile b - first_tile of a
 * tensor (numel elements of dtype at data), by every thread of the block
 * (it syncs): the tile's partial statistics into parts[b] and its XXH3
 * into hashes[b] (thread 0 writes both). sh and lanes are the block's shared memory; inlined, so
 * they stay shared-memory accesses. stats_tiles and stats_tiles_many run
 * it. */
static __device__ __forceinline__ void tile_stats(int dtype, const uint8_t *data, size_t numel, unsigned first_tile,
                                                  int full, dpart *sh, uint64_t *lanes, dpart *parts,
                                                  uint64_t *hashes)
{
    unsigned b = blockIdx.x;
    size_t esz = dtype_bytes(dtype), per = TILE_BYTES / esz, tile = b - first_tile;
    size_t first = tile * per, n = numel - first < per ? numel - first : per;
    const uint8_t *tp = data + first * esz;
    int t = (int)threadIdx.x;
    thread_partial(dtype, tp, n, t, frame_shift(dtype, data, numel), full, &sh[t]);
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        tree_level(sh, t, half);
        __syncthreads();
    }
    if (t == 0)
        parts[b] = sh[0];
    size_t bytes = n * esz;
    if (bytes > 240) {
        if (t < 8)
            lanes[t] = xxh3_long_lane(tp, bytes, t);
        __syncthreads();
        if (t == 0)
            hashes[b] = xxh3_long_merge(lanes, bytes);
    } else if (t == 0) {
        hashes[b] = xxh3_short(tp, bytes);
    }
}

/* Stage 2's fold, by every thread of the block (it syncs): the ntiles
 * partials in tile order and a fixed tree into sh[0]; returns the
 * fingerprint, the one tile's hash or the XXH3 of the tile hashes
 * (little-endian, as the device stores them). stats_final and
 * stats_final_many run it. */
static __device__ __forceinline__ uint64_t tiles_fold(const dpart *parts, const uint64_t *hashes, size_t ntiles,
                                                      dpart *sh, uint64_t *lanes)
{
    int t = (int)threadIdx.x;
    dp_init(&sh[t]);
    for (size_t i = (size_t)t; i < ntiles; i += THREADS)
        dp_merge(&sh[t], &parts[i]);
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        tree_level(sh, t, half);
        __syncthreads();
    }
    const uint8_t *hb = (const uint8_t *)hashes;
    size_t hbytes = 8 * ntiles;
    uint64_t fp = 0;
    if (ntiles == 1) {
        fp = hashes[0];
    } else if (hbytes > 240) {
        if (t < 8)
            lanes[t] = xxh3_long_lane(hb, hbytes, t);
        __syncthreads();
        fp = xxh3_long_merge(lanes, hbytes);
    } else {
        fp = xxh3_short(hb, hbytes);
    }
    return fp;
}

/* Stage 1: block b handles tile b: its partial statistics and its XXH3. */
__global__ void __launch_bounds__(THREADS)
stats_tiles(int dtype, const uint8_t *data, size_t numel, int full, dpart *parts,
            uint64_t *hashes)
{
    __shared__ dpart sh[THREADS];
    __shared__ uint64_t lanes[8];
    tile_stats(dtype, data, numel, 0, full, sh, lanes, parts, hashes);
}

/* Stage 2, one block: fold the tiles in order and a fixed tree, hash the
 * tile hashes, write *out. */
__global__ void __launch_bounds__(THREADS)
stats_final(int dtype, const uint8_t *data, size_t numel, int mode, size_t ntiles,
            const dpart *parts, const uint64_t *hashes, tft_stats *out)
{
    __shared__ dpart sh[THREADS];
    __shared__ uint64_t lanes[8];
    uint64_t fp = tiles_fold(parts, hashes, ntiles, sh, lanes);
    if (threadIdx.x == 0)
        dp_finish(&sh[0], frame_shift(dtype, data, numel), numel, mode, fp, out);
}

/* ------------------------------------------------------------------------ */
/* Host entry points                                                         */
/* ------------------------------------------------------------------------ */

/* Scratch layout: per-tile partials, per-tile hashes, the final stats,
 * each 256-byte aligned. */
struct layout {
    size_t ntiles, parts, hashes, final, total;
};

static size_t align256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

static int layout_of(int dtype, size_t numel, struct layout *L)
{
    size_t esz = dtype_bytes(dtype);
    if (esz == 0 || numel > SIZE_MAX / esz)
        return -EINVAL;
    size_t per = TILE_BYTES / esz;
    L->ntiles = numel / per + (numel % per != 0);
    L->parts = 0;
    L->hashes = align256(L->ntiles * sizeof(dpart));
    L->final = L->hashes + align256(L->ntiles * 8);
    L->total = L->final + align256(sizeof(tft_stats));
    return 0;
}

extern "C" size_t tft_stats_cuda_scratch_bytes(int dtype, size_t numel)
{
    struct layout L;
    return layout_of(dtype, numel, &L) == 0 ? L.total : 0;
}

extern "C" int tft_stats_cuda_available(void)
{
    static int cached = -1; /* benign race: every thread computes the same */
    if (cached < 0) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) {
            (void)cudaGetLastError();
            n = 0;
        }
        cached = n > 0;
    }
    return cached;
}

static int check_args(int dtype, const void *data, size_t numel, int mode, const tft_stats *out)
{
    if (dtype_bytes(dtype) == 0 || mode < TFT_STATS_SHAPE || mode > TFT_STATS_FULL || !out ||
        (!data && numel > 0))
        return -EINVAL;
    return 0;
}

/* Records the completion event of everything enqueued on st into pend. */
static int record_pending(cudaStream_t st, tft_stats_cuda_pending *pend)
{
    cudaEvent_t ev;
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
        (void)cudaGetLastError();
        return -EIO;
    }
    if (cudaEventRecord(ev, st) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaEventDestroy(ev);
        return -EIO;
    }
    pend->event = (void *)ev;
    return 0;
}

extern "C" int tft_stats_cuda_launch(int dtype, const void *dev_data, size_t numel,
                                     int mode, void *stream, void *dev_scratch,
                                     size_t scratch_bytes, tft_stats *host_out,
                                     tft_stats_cuda_pending *pend)
{
    struct layout L;
    if (!pend || check_args(dtype, dev_data, numel, mode, host_out) != 0 ||
        layout_of(dtype, numel, &L) != 0 || L.ntiles > 0x7fffffff)
        return -EINVAL;
    pend->event = NULL;
    if (!tft_stats_cuda_available())
        return -ENODEV;
    cudaStream_t st = (cudaStream_t)stream;
    if (mode == TFT_STATS_SHAPE || numel == 0) {
        dpart empty;
        dp_init(&empty);
        dp_finish(&empty, 0.0, numel, mode, xxh3_short(NULL, 0), host_out);
        return record_pending(st, pend);
    }
    if (!dev_scratch || scratch_bytes < L.total)
        return -ENOSPC;
    uint8_t *scr = (uint8_t *)dev_scratch;
    dpart *parts = (dpart *)(scr + L.parts);
    uint64_t *hashes = (uint64_t *)(scr + L.hashes);
    tft_stats *fin = (tft_stats *)(scr + L.final);
    stats_tiles<<<(unsigned)L.ntiles, THREADS, 0, st>>>(dtype, (const uint8_t *)dev_data, numel,
                                                        mode == TFT_STATS_FULL, parts, hashes);
    stats_final<<<1, THREADS, 0, st>>>(dtype, (const uint8_t *)dev_data, numel, mode, L.ntiles,
                                       parts, hashes, fin);
    if (cudaGetLastError() != cudaSuccess ||
        cudaMemcpyAsync(host_out, fin, sizeof *fin, cudaMemcpyDeviceToHost, st) != cudaSuccess) {
        (void)cudaGetLastError();
        return -EIO;
    }
    return record_pending(st, pend);
}

extern "C" int tft_stats_cuda_query(tft_stats_cuda_pending *pend)
{
    if (!pend || !pend->event)
        return -EINVAL;
    cudaError_t e = cudaEventQuery((cudaEvent_t)pend->event);
    if (e == cudaErrorNotReady)
        return 0;
    cudaEventDestroy((cudaEvent_t)pend->event);
    pend->event = NULL;
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return -EIO;
    }
    return 1;
}

extern "C" int tft_stats_cuda_wait(tft_stats_cuda_pending *pend)
{
    if (!pend || !pend->event)
        return -EINVAL;
    cudaError_t e = cudaEventSynchronize((cudaEvent_t)pend->event);
    cudaEventDestroy((cudaEvent_t)pend->event);
    pend->event = NULL;
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return -EIO;
    }
    return 0;
}

/* Stage 1 for one tile on the host: the same threads, tree and hash. */
static void emulate_tile(int dtype, const uint8_t *tp, size_t n, double k, int full, dpart *sh,
                         dpart *part, uint64_t *hash)
{
    for (int t = 0; t < THREADS; t++)
        thread_partial(dtype, tp, n, t, k, full, &sh[t]);
    for (int half = THREADS / 2; half > 0; half /= 2)
        for (int t = 0; t < half; t++)
            tree_level(sh, t, half);
    *part = sh[0];
    *hash = xxh3_host(tp, n * dtype_bytes(dtype));
}

extern "C" int tft_stats_cuda_emulate(int dtype, const void *data, size_t numel, int mode,
                                      tft_stats *out)
{
    struct layout L;
    if (check_args(dtype, data, numel, mode, out) != 0 || layout_of(dtype, numel, &L) != 0)
        return -EINVAL;
    if (mode == TFT_STATS_SHAPE || numel == 0) {
        dpart empty;
        dp_init(&empty);
        dp_finish(&empty, 0.0, numel, mode, xxh3_short(NULL, 0), out);
        return 0;
    }
    size_t esz = dtype_bytes(dtype), per = TILE_BYTES / esz;
    double k = frame_shift(dtype, (const uint8_t *)data, numel);
    dpart *parts = new (std::nothrow) dpart[L.ntiles];
    uint64_t *hashes = new (std::nothrow) uint64_t[L.ntiles];
    dpart *sh = new (std::nothrow) dpart[THREADS];
    int rc = (parts && hashes && sh) ? 0 : -ENOMEM;
    for (size_t b = 0; rc == 0 && b < L.ntiles; b++) {
        size_t first = b * per, n = numel - first < per ? numel - first : per;
        emulate_tile(dtype, (const uint8_t *)data + first * esz, n, k, mode == TFT_STATS_FULL, sh,
                     &parts[b], &hashes[b]);
    }
    if (rc == 0) {
        for (int t = 0; t < THREADS; t++) {
            dp_init(&sh[t]);
            for (size_t i = (size_t)t; i < L.ntiles; i += THREADS)
                dp_merge(&sh[t], &parts[i]);
        }
        for (int half = THREADS / 2; half > 0; half /= 2)
            for (int t = 0; t < half; t++)
                tree_level(sh, t, half);
        uint64_t fp = L.ntiles == 1 ? hashes[0] : xxh3_host((const uint8_t *)hashes, 8 * L.ntiles);
        dp_finish(&sh[0], k, numel, mode, fp, out);
    }
    delete[] parts;
    delete[] hashes;
    delete[] sh;
    return rc;
}

extern "C" uint64_t tft_stats_cuda_xxh3(const void *data, size_t len)
{
    return xxh3_host((const uint8_t *)data, len);
}

/* ------------------------------------------------------------------------ */
/* Many tensors in one launch (tft_stats_cuda_launch_many)                   */
/* ------------------------------------------------------------------------ */
/* The same per-tensor algorithm as above (the same tiles, threads, trees
 * and hashes, so each result equals tft_stats_cuda_launch's bit for bit),
 * with the tiles of all items in one grid and one final block per item. */

struct many_item {
    const uint8_t *data;
    size_t numel;
    tft_stats *out;
    int dtype;
    unsigned first_tile; /* among the tiles of all items, in item order */
};

struct many_table {
    int n, mode;
    unsigned total_tiles;
    many_item it[TFT_STATS_CUDA_MANY];
};

/* The item tile b belongs to (items in tile order, n <= 64). */
static __device__ int many_item_of(const many_table &t, unsigned b)
{
    int i = 0;
    while (i + 1 < t.n && t.it[i + 1].first_tile <= b)
        i++;
    return i;
}

__global__ void __launch_bounds__(THREADS)
stats_tiles_many(const many_table t, dpart *parts, uint64_t *hashes)
{
    __shared__ dpart sh[THREADS];
    __shared__ uint64_t lanes[8];
    const many_item *it = &t.it[many_item_of(t, blockIdx.x)];
    tile_stats(it->dtype, it->data, it->numel, it->first_tile, t.mode == TFT_STATS_FULL, sh, lanes, parts, hashes);
}

__global__ void __launch_bounds__(THREADS)
stats_final_many(const many_table t, const dpart *parts_all, const uint64_t *hashes_all)
{
    __shared__ dpart sh[THREADS];
    __shared__ uint64_t lanes[8];
    int k = (int)blockIdx.x, th = (int)threadIdx.x, dtype = t.it[k].dtype;
    const uint8_t *data = t.it[k].data;
    size_t numel = t.it[k].numel;
    unsigned first = t.it[k].first_tile, end = k + 1 < t.n ? t.it[k + 1].first_tile : t.total_tiles;
    size_t ntiles = end - first;
    uint64_t fp = tiles_fold(parts_all + first, hashes_all + first, ntiles, sh, lanes);
    if (th == 0) {
        tft_stats r;
        /* no tiles (an empty tensor, or shape mode): what launch gives */
        dp_finish(&sh[0], ntiles ? frame_shift(dtype, data, numel) : 0.0, numel, t.mode, fp, &r);
        *t.it[k].out = r;
    }
}

/* The table and scratch layout of items; -EINVAL for a bad item. */
static int many_layout(const tft_stats_cuda_item *items, int n, int mode, many_table *t, struct layout *L)
{
    if (!items || n < 1 || n > TFT_STATS_CUDA_MANY || mode < TFT_STATS_SHAPE || mode > TFT_STATS_FULL)
        return -EINVAL;
    size_t total = 0;
    t->n = n;
    t->mode = mode;
    for (int i = 0; i < n; i++) {
        struct layout one;
        if (check_args(items[i].dtype, items[i].dev_data, items[i].numel, mode, items[i].out) != 0 ||
            layout_of(items[i].dtype, items[i].numel, &one) != 0)
            return -EINVAL;
        t->it[i].data = (const uint8_t *)items[i].dev_data;
        t->it[i].numel = items[i].numel;
        t->it[i].out = items[i].out;
        t->it[i].dtype = items[i].dtype;
        t->it[i].first_tile = (unsigned)total;
        total += mode == TFT_STATS_SHAPE ? 0 : one.ntiles;
        if (total > 0x7fffffff)
            return -EINVAL;
    }
    t->total_tiles = (unsigned)total;
    L->ntiles = total;
    L->parts = 0;
    L->hashes = align256(total * sizeof(dpart));
    L->final = L->hashes + align256(total * 8);
    L->total = L->final;
    return 0;
}

extern "C" size_t tft_stats_cuda_scratch_bytes_many(const tft_stats_cuda_item *items, int n, int mode)
{
    many_table local;
    struct layout L;
    return many_layout(items, n, mode, &local, &L) == 0 ? (L.total ? L.total : 256) : 0;
}

extern "C" int tft_stats_cuda_launch_many(const tft_stats_cuda_item *items, int n, int mode, void *stream,
                                          void *dev_scratch, size_t scratch_bytes)
{
    many_table t;
    struct layout L;
    if (many_layout(items, n, mode, &t, &L) != 0)
        return -EINVAL;
    if (!tft_stats_cuda_available())
        return -ENODEV;
    if (!dev_scratch || scratch_bytes < L.total)
        return -ENOSPC;
    cudaStream_t st = (cudaStream_t)stream;
    uint8_t *scr = (uint8_t *)dev_scratch;
    dpart *parts = (dpart *)(scr + L.parts);
    uint64_t *hashes = (uint64_t *)(scr + L.hashes);
    if (t.total_tiles > 0)
        stats_tiles_many<<<t.total_tiles, THREADS, 0, st>>>(t, parts, hashes);
    stats_final_many<<<(unsigned)n, THREADS, 0, st>>>(t, parts, hashes);
    if (cudaGetLastError() != cudaSuccess) {
        (void)cudaGetLastError();
        return -EIO;
    }
    return 0;
}
