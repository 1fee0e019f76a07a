/*
 * stats_block.c — one block of a tensor through the CPU statistics
 * (stats.c's file comment describes the whole pass): the block's counts
 * and sums by the kernel set, the fast float path, the double path and its
 * frame, the staging of fp16/bf16/fp8/integer/misaligned blocks, HEALTH
 * read in place, bytes, and the merge into the running totals; then the
 * block's bytes into the hash while they are still in L1.
 *
 * Workload: called once per 8 KiB block by tft_stats_compute and the
 * streaming form; every path of a block is in this file, so the block's
 * code inlines as it did when one file held the driver.
 */
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>
#ifdef TFT_XXH_DISPATCH
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#endif

#include <math.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "stats_block_internal.h"
#include "stats_internal.h"
#include "stats_scalar_internal.h"

/* Sums of a whole block about k: the kernel for the first n & ~15 elements,
 * scalar code for the rest (shared by all kernel sets). out: sum(x-k),
 * sum((x-k)^2), sum|x| over the finite elements. */
static void block_sums(const struct stats_kernels *kk, const void *x, size_t n, int is64,
                       int masked, double k, double out[3])
{
    lane_sums s = { { 0 } };
    struct part scratch;
    size_t n16 = n & ~(size_t)15;
    if (is64 && masked)
        kk->masked_f64(x, n16, 1, k, &scratch, s);
    else if (is64)
        kk->sums_f64(x, n16, k, s);
    else if (masked)
        kk->masked_f32(x, n16, 1, k, &scratch, s);
    else
        kk->sums_f32(x, n16, k, s);
    double t[3] = { 0, 0, 0 };
    for (size_t i = n16; i < n; i++) {
        double v = load_el(x, i, is64);
        if (isfinite(v)) {
            double d = v - k;
            t[0] += d;
            t[1] += d * d;
            t[2] += fabs(v);
        }
    }
    for (int q = 0; q < 3; q++)
        out[q] = lanes_fold(s[q], t[q]);
}

/* Counts, min and max of a whole block; returns 1 when the masked kernels
 * had to be used (the sums must then be masked too). */
static int block_counts(const struct stats_kernels *kk, const void *x, size_t n, int is64,
                        int full, struct part *p)
{
    size_t n16 = n & ~(size_t)15;
    int masked = is64 ? kk->counts_f64(x, n16, full, p) : kk->counts_f32(x, n16, full, p);
    if (masked) {
        if (is64)
            kk->masked_f64(x, n16, 0, 0.0, p, NULL);
        else
            kk->masked_f32(x, n16, 0, 0.0, p, NULL);
    }
    for (size_t i = n16; i < n; i++)
        classify(load_el(x, i, is64), p);
    return masked;
}

/* Merges one block into the totals (Chan et al.'s pairwise update in the
 * frame shifted by A->k). s: the block's sums about A->k + s[3]. */
void block_merge(struct acc *A, const struct part *p, const double s[4], int full)
{
    struct part *c = &A->c;
    uint64_t na = c->nfin, nb = p->nfin;
    c->nfin += nb;
    c->nan += p->nan;
    c->pinf += p->pinf;
    c->ninf += p->ninf;
    c->zero += p->zero;
    c->tiny += p->tiny;
    c->over16 += p->over16;
    c->overbf += p->overbf;
    c->min = p->min < c->min ? p->min : c->min;
    c->max = p->max > c->max ? p->max : c->max;
    if (!full || nb == 0)
        return;
    double mb = s[3] + s[0] / (double)nb;
    double m2b = s[1] - s[0] * (s[0] / (double)nb);
    m2b = m2b > 0 ? m2b : 0.0;
    double nt = (double)(na + nb), delta = mb - A->mean, xb = A->k + mb;
    A->mean += delta * ((double)nb / nt);
    A->m2 += m2b + delta * delta * ((double)na * (double)nb / nt);
    A->sumsq += m2b + (double)nb * xb * xb;
    A->l1 += s[2];
}

/* The frame shift: the mean of the first block with finite values, from
 * sums about its first finite element. */
static void frame_init(const struct stats_kernels *kk, const void *x, size_t n, int is64,
                       int masked, uint64_t nfin, struct acc *A)
{
    double s[3];
    double x0 = first_finite(x, n, is64);
    block_sums(kk, x, n, is64, masked, x0, s);
    A->k = x0 + s[0] / (double)nfin;
    A->have_k = 1;
}

/* Statistics of one block of n floats (is64 = 0) or doubles (is64 = 1),
 * element-aligned, merged into A. */
static void block_stats(const struct stats_kernels *kk, const void *x, size_t n, int is64,
                        int full, struct acc *A)
{
    struct part p;
    part_init(&p);
    int masked = block_counts(kk, x, n, is64, full, &p);
    double s[4] = { 0, 0, 0, 0 };
    if (full && p.nfin > 0) {
        if (!A->have_k)
            frame_init(kk, x, n, is64, masked, p.nfin, A);
        double k = A->k;
        block_sums(kk, x, n, is64, masked, k, s);
        double m2 = s[1] - s[0] * (s[0] / (double)p.nfin);
        if (s[1] > ILL_CONDITIONED * m2) {
            k += s[0] / (double)p.nfin;
            block_sums(kk, x, n, is64, masked, k, s);
        }
        s[3] = k - A->k;
    }
    block_merge(A, &p, s, full);
}

/* Element i of raw fp16 (h16 TFT_F16) or bf16 (TFT_BF16) data. */
static float h16_value(const void *raw, int h16, size_t i)
{
    uint16_t h;
    memcpy(&h, (const unsigned char *)raw + 2 * i, 2);
    return h16 == TFT_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

/* Element i of raw data of dtype src as the fused sweep sees it: f32 (src
 * 0: x holds floats), fp16/bf16 decoded, i32/i64 rounded to float. */
static float src_value(const void *x, int src, size_t i)
{
    const unsigned char *b = x;
    int32_t v32;
    int64_t v64;
    switch (src) {
    case TFT_F16:
    case TFT_BF16:
        return h16_value(x, src, i);
    case TFT_I32:
        memcpy(&v32, b + 4 * i, 4);
        return (float)v32;
    case TFT_I64:
        memcpy(&v64, b + 8 * i, 8);
        return (float)v64;
    default:
        return ((const float *)x)[i];
    }
}

/* The fast FULL path for float data (f32 when src is 0, i32/i64 converted;
 * raw f16/bf16 or i32/i64 when src names the dtype and the kernel set
 * reads them in place): one fused
 * sweep with float accumulators (stats_internal.h), about a float shift.
 * Results s[0..2] as block_merge wants them, p's counts, min and max. Returns
 * 0, or -1 when this block must take the double path instead: a NaN or an
 * Inf (the sums are then not finite), |x| above 65504 (over_fp16 must be
 * counted, and squares could overflow), or squares that may have lost
 * precision to float underflow (sum of squares below 2^-96). */
#define FAST_TINY_S2 0x1p-96
#define STATS_FAST_MIN 64 /* elements; see tensor_pass */
static int fast_sums(const struct stats_kernels *kk, const void *x, int src, size_t n, float k,
                     struct part *p, double s[3])
{
    struct fast_out o;
    size_t n32 = n & ~(size_t)31;
    if (src == TFT_F16 || src == TFT_BF16)
        kk->fast_h16(x, n32, src == TFT_BF16, k, &o);
    else if (src == TFT_I32 || src == TFT_I64) {
        if (kk->fast_int(x, n32, src == TFT_I64, k, &o))
            return -1; /* beyond +-2^31: not for the fast path */
    } else
        kk->fast_f32(x, n32, k, &o);
    double t[3] = { 0, 0, 0 };
    uint64_t zero = o.zero, tiny = o.tiny;
    double mn = o.min, mx = o.max;
    for (size_t i = n32; i < n; i++) {
        float f = src_value(x, src, i);
        double v = f, d = (double)(f - k);
        zero += v == 0.0;
        tiny += fabs(v) < F16_TINY;
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
        t[0] += d;
        t[1] += d * d;
        t[2] += fabs(v);
    }
    for (int q = 0; q < 3; q++) {
        const double *l = o.lane[q];
        s[q] = (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))) + t[q];
    }
    if (!(isfinite(s[0]) && isfinite(s[1]) && isfinite(s[2])) || !(mn >= -F16_MAX && mx <= F16_MAX))
        return -1;
    if (s[1] < FAST_TINY_S2 && zero < n)
        return -1;
    part_init(p);
    p->nfin = n;
    p->zero = zero;
    p->tiny = tiny;
    p->min = mn;
    p->max = mx;
    return 0;
}

/* A block of n floats through the fast path, merged into A; returns -1
 * (A untouched) when it must take the double path. The shift is the
 * frame's, as a float (0 until a frame is set, so centred data need no
 * subtraction); a block whose sum of squares about it exceeds FAST_COND
 * times its sum of squared deviations is summed again about its own mean
 * (rounded to float), and goes to the double path if that does not help. */
#define FAST_COND 2.0
static int block_stats_fast(const struct stats_kernels *kk, const void *x, int src, size_t n,
                            struct acc *A)
{
    struct part p;
    double s[4];
    float k = A->have_k ? (float)A->k + 0.0f : 0.0f;
    if (fast_sums(kk, x, src, n, k, &p, s) < 0)
        return -1;
    double m2 = s[1] - s[0] * (s[0] / (double)n);
    if (s[1] > FAST_COND * m2) {
        k = (float)((double)k + s[0] / (double)n) + 0.0f;
        if (fast_sums(kk, x, src, n, k, &p, s) < 0)
            return -1;
        m2 = s[1] - s[0] * (s[0] / (double)n);
        if (s[1] > FAST_COND * m2)
            return -1;
    }
    if (!A->have_k) {
        A->k = k;
        A->have_k = 1;
    }
    s[3] = (double)k - A->k;
    block_merge(A, &p, s, 1);
    return 0;
}

static void fp_update(XXH3_state_t *st, const void *p, size_t n)
{
#ifdef TFT_XXH_DISPATCH
    XXH3_64bits_update_dispatch(st, p, n);
#else
    XXH3_64bits_update(st, p, n);
#endif
}

/* Converts n integer elements of dtype at raw (any alignment) to double. */
void block_dec_int(int dtype, const unsigned char *raw, size_t n, double *out)
{
#define DEC(T)                                      \
    for (size_t i = 0; i < n; i++) {                \
        T v_;                                       \
        memcpy(&v_, raw + i * sizeof(T), sizeof(T)); \
        out[i] = (double)v_;                        \
    }                                               \
    break
    switch (dtype) {
    case TFT_I32: DEC(int32_t);
    case TFT_I64: DEC(int64_t);
    case TFT_U8: DEC(uint8_t);
    case TFT_BOOL: DEC(uint8_t);
    case TFT_I8: DEC(int8_t);
    case TFT_I16: DEC(int16_t);
    case TFT_U16: DEC(uint16_t);
    case TFT_U32: DEC(uint32_t);
    case TFT_U64: DEC(uint64_t);
    default: break;
    }
#undef DEC
}

/* i32 or i64 elements (any alignment) to float, rounding those beyond
 * 2^24; the fast path takes a block only if all are within 65504, where
 * the conversion is exact. */
static void int_to_float(int dtype, const unsigned char *raw, size_t n, float *out)
{
    if (dtype == TFT_I32) {
        size_t i = 0;
#ifdef __SSE2__
        for (; i + 4 <= n; i += 4) /* cvtdq2ps: exact below 2^24, like the scalar cast */
            _mm_storeu_ps(out + i, _mm_cvtepi32_ps(_mm_loadu_si128((const __m128i *)(raw + 4 * i))));
#endif
        for (; i < n; i++) {
            int32_t v;
            memcpy(&v, raw + 4 * i, 4);
            out[i] = (float)v;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, raw + 8 * i, 8);
            out[i] = (float)v;
        }
    }
}

/* Returns a pointer to block b's n elements as floats (F32, F16, BF16, F8*) or
 * doubles (everything else): b itself when it can be read in place,
 * otherwise buf after decoding or copying. */
static const void *block_elements(const struct stats_kernels *kk, int dtype,
                                  const unsigned char *b, size_t n, double scale,
                                  union stage *buf)
{
    size_t esz = tft_dtype_size(dtype);
    int aligned = ((uintptr_t)b % esz) == 0;
    switch (dtype) {
    case TFT_F64:
        if (scale != 1.0) {
            for (size_t i = 0; i < n; i++) {
                double v;
                memcpy(&v, b + 8 * i, 8);
                buf->d[i] = v * scale;
            }
            return buf->d;
        }
        /* fall through */
    case TFT_F32:
        if (aligned)
            return b;
        memcpy(buf->d, b, n * esz);
        return buf->d;
    case TFT_F16:
        kk->dec_f16(b, n, buf->f);
        return buf->f;
    case TFT_BF16:
        kk->dec_bf16(b, n, buf->f);
        return buf->f;
    case TFT_F8E4M3:
        f8e4m3_to_f32_n(b, buf->f, n);
        return buf->f;
    case TFT_F8E5M2:
        f8e5m2_to_f32_n(b, buf->f, n);
        return buf->f;
    default:
        block_dec_int(dtype, b, n, buf->d);
        return buf->d;
    }
}

/* HEALTH of a block read in place by the kernel set's 16-bit or int32
 * kernels (counts and min/max are exact, so any kernel gives the same),
 * merged into A. Returns -1 when there is none, or the block holds a NaN
 * or Inf: it then takes the general path. */
static int health_native(const struct stats_kernels *kk, int dtype, const unsigned char *b,
                         size_t n, struct acc *A)
{
    struct part p;
    part_init(&p);
    size_t n16 = n & ~(size_t)15;
    if ((dtype == TFT_F16 || dtype == TFT_BF16) && kk->health_h16) {
        if (kk->health_h16(b, n16, dtype == TFT_BF16, &p))
            return -1;
        for (size_t i = n16; i < n; i++)
            if (!classify(h16_value(b, dtype, i), &p))
                return -1;
    } else if ((dtype == TFT_I32 && kk->health_i32) || (dtype == TFT_I64 && kk->health_i64)) {
        (dtype == TFT_I32 ? kk->health_i32 : kk->health_i64)(b, n16, &p);
        double tail[16];
        block_dec_int(dtype, b + n16 * tft_dtype_size(dtype), n - n16, tail);
        for (size_t i = 0; i < n - n16; i++)
            classify(tail[i], &p);
    } else {
        return -1;
    }
    block_merge(A, &p, NULL, 0);
    return 0;
}

void block_pass_init(struct pass *P, const struct stats_kernels *kk, int dtype, size_t numel, int full,
                     double scale)
{
    P->kk = kk;
    P->dtype = dtype;
    P->esz = tft_dtype_size(dtype);
    P->is64 = !(dtype == TFT_F32 || dtype == TFT_F16 || dtype == TFT_BF16 || dtype == TFT_F8E4M3 ||
                dtype == TFT_F8E5M2);
    P->per_block = P->is64 ? STATS_BLOCK_F64 : STATS_BLOCK_F32;
    P->full = full;
    /* Below STATS_FAST_MIN elements the float sweep's set-up (and the
     * re-centring pass most uncentred data then take) costs more than the
     * double path: small tensors take the exact one. */
    P->fast = full && numel >= STATS_FAST_MIN && (dtype == TFT_F32 || dtype == TFT_F16 || dtype == TFT_BF16);
    P->fast_int = full && numel >= STATS_FAST_MIN && (dtype == TFT_I32 || dtype == TFT_I64);
    P->scale = scale;
}

/* One block b of n elements (P->per_block but for the tensor's last block)
 * through the statistics, merged into A, then (st not NULL) the hash. */
void block_pass(const struct pass *P, const unsigned char *b, size_t n, union stage *buf, struct acc *A,
                XXH3_state_t *st)
{
    const struct stats_kernels *kk = P->kk;
    int dtype = P->dtype;
    size_t esz = P->esz;
    if (P->fast_int) {
        /* |x| <= 65504 (the fast path's condition) is exact in float;
         * converted in registers where the kernel set can */
        if (kk->fast_int) {
            if (block_stats_fast(kk, b, dtype, n, A) == 0)
                goto hash;
        } else {
            int_to_float(dtype, b, n, buf->f);
            if (block_stats_fast(kk, buf->f, 0, n, A) == 0)
                goto hash;
        }
    }
    if (!P->full && health_native(kk, dtype, b, n, A) == 0)
        goto hash;
    if (P->fast && dtype != TFT_F32 && kk->fast_h16 && block_stats_fast(kk, b, dtype, n, A) == 0)
        goto hash; /* fp16/bf16 read in place, decoded in registers */
    const void *x = block_elements(kk, dtype, b, n, P->scale, buf);
    if (!P->fast || block_stats_fast(kk, x, 0, n, A) < 0)
        block_stats(kk, x, n, P->is64, P->full, A);
hash:
    if (st)
        fp_update(st, b, n * esz);
}

/* One block of n <= STATS_BLOCK_BYTES bytes: kernel stats_u8 for the
 * first n & ~31, the generic one for the rest; then (st) the hash. */
void block_u8(const struct stats_kernels *kk, const unsigned char *b, size_t n, int full, struct u8_tot *T,
              XXH3_state_t *st)
{
    size_t n32 = n & ~(size_t)31;
    struct u8_out o;
    if (!full && kk->health_u8) /* HEALTH: no sums */
        kk->health_u8(b, n32, &o);
    else
        kk->stats_u8(b, n32, &o);
    struct u8_out t;
    gen_stats_u8(b + n32, n - n32, &t);
    T->zero += o.zero + t.zero;
    T->s1 += o.s1 + t.s1;
    T->s2 += o.s2 + t.s2;
    T->mn = o.min < T->mn ? o.min : T->mn;
    T->mn = t.min < T->mn ? t.min : T->mn;
    T->mx = o.max > T->mx ? o.max : T->mx;
    T->mx = t.max > T->mx ? t.max : T->mx;
    if (st)
        fp_update(st, b, n);
}
