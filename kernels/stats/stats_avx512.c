/*
 * stats_avx512.c — the AVX-512 statistics kernels (stats_internal.h): the
 * fused FULL sweep over raw fp16/bf16, HEALTH of int64 and bytes, and the
 * kernel table, which borrows the other kernels (the f32 and int sweeps,
 * the double path, the conversions) from the AVX2 set.
 *
 * Built with -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma
 * -mf16c -mpopcnt -ffp-contract=off on x86-64 only (and only where the
 * compiler takes those flags: TFT_STATS_AVX512); stats_isa.c calls them
 * only on CPUs that have all of them. Each kernel computes exactly what
 * the generic one computes (stats_generic.c), bit for bit (tests check it).
 *
 * The lane order. The fused sweep's contract (stats_internal.h) is eight
 * float lanes per run of FAST_RUN elements, each adding its groups in
 * order. A 16-lane register therefore takes two runs at once: lanes 0-7
 * carry run r, lanes 8-15 run r + 1, each lane adding the same terms in
 * the same order as the 8-lane kernels; at the end of the pair the low
 * half is added into the double lanes, then the high half, as two
 * consecutive runs would be. A block's odd last run (and a short one)
 * goes through the same code at 256 bits.
 *
 * Counts (zeros, |x| < 2^-14) are compares into mask registers counted by
 * POPCNT on the integer side, which frees vector slots; min and max of
 * 16-bit data are taken on the patterns as the AVX2 kernel does. Speed
 * notes (Zen 4, one core, where a 512-bit operation takes a 256-bit pipe
 * twice): the gain over AVX2 is in instructions, not in vector throughput
 * — fewer count and decode operations, all accumulators in registers, and
 * int64 -> float in one instruction (vcvtqq2ps).
 */
#include "stats_avx2_internal.h"
#include "stats_internal.h"

#if !(defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__) && \
      defined(__POPCNT__))
#error "stats_avx512.c must be compiled with -mavx512f -mavx512bw -mavx512dq -mavx512vl -mpopcnt"
#endif

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

/* Element kinds of the fused sweep (a constant in each instance). */
enum { SRC_F32, SRC_I32, SRC_I64, SRC_BF16, SRC_F16 };

INLINE size_t src_size(int src)
{
    return src == SRC_I64 ? 8 : src >= SRC_BF16 ? 2 : 4;
}

INLINE unsigned popcnt(unsigned m)
{
    return (unsigned)__builtin_popcount(m);
}

/* ------------------------------------------------------------------------ */
/* The fused FULL sweep                                                      */
/* ------------------------------------------------------------------------ */

/* Eight elements at p as floats, converted as the (float) cast and the
 * scalar fp16/bf16 decoders convert them (vcvtqq2ps and vcvtdq2ps round
 * to nearest under the MXCSR tft_stats_compute sets). */
INLINE __m256 load8(int src, const unsigned char *p)
{
    switch (src) {
    case SRC_F32:
        return _mm256_loadu_ps((const float *)p);
    case SRC_I32:
        return _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)p));
    case SRC_I64:
        return _mm512_cvtepi64_ps(_mm512_loadu_si512(p));
    case SRC_BF16:
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    default:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    }
}

/* Sixteen elements as floats: a[0..8) in lanes 0-7, b[0..8) in lanes 8-15
 * (float kinds; the 16-bit kinds decode from their patterns instead). */
INLINE __m512 load8x2(int src, const unsigned char *a, const unsigned char *b)
{
    if (src == SRC_F32)
        return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps((const float *)a)),
                                  _mm256_loadu_ps((const float *)b), 1);
    if (src == SRC_I32)
        return _mm512_cvtepi32_ps(_mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
            _mm256_loadu_si256((const __m256i *)b), 1));
    return _mm512_insertf32x8(_mm512_castps256_ps512(load8(src, a)), load8(src, b), 1);
}

/* The running state of one sweep. */
struct sweep {
    __m512d d0, d1, d2;       /* the double lanes: sum(x-k), sum((x-k)^2), sum|x| */
    uint64_t nz, ge;          /* elements != 0, elements with |x| >= 2^-14 */
    __m512 mn, mx;            /* float kinds: min, max per lane */
    __m512i mxs, mxu, mnu;    /* 16-bit kinds: signed max, unsigned max and min of patterns */
};

/* The float part of one group for 8 or 16 lanes: d = x - k (when shifted),
 * s1 += d0 + d1, q0 = fma(d0, d0, q0), q1 = fma(d1, d1, q1), la += |x0| +
 * |x1| — stats_internal.h's order, each lane on its own. */
#define FAST_TERMS(W, v0, v1, a0, a1, kv, shifted, s1, q0, q1, la)              \
    do {                                                                       \
        __m##W d0_ = (v0), d1_ = (v1);                                         \
        if (shifted) {                                                         \
            d0_ = _mm##W##_sub_ps(d0_, (kv));                                  \
            d1_ = _mm##W##_sub_ps(d1_, (kv));                                  \
        }                                                                      \
        (s1) = _mm##W##_add_ps((s1), _mm##W##_add_ps(d0_, d1_));               \
        (q0) = _mm##W##_fmadd_ps(d0_, d0_, (q0));                              \
        (q1) = _mm##W##_fmadd_ps(d1_, d1_, (q1));                              \
        (la) = _mm##W##_add_ps((la), _mm##W##_add_ps((a0), (a1)));             \
    } while (0)

/* Counts of float lanes from |x| as bits: nonzero, and >= 2^-14. An
 * integer converted to float is 0 or at least 1, so for the integer kinds
 * the second count is the first. */
INLINE void counts16(int src, __m512i a0, __m512i a1, struct sweep *w)
{
    const __m512i t14 = _mm512_set1_epi32(F32_BELOW_TINY);
    unsigned z = popcnt(_mm512_test_epi32_mask(a0, a0)) + popcnt(_mm512_test_epi32_mask(a1, a1));
    w->nz += z;
    if (src == SRC_I32 || src == SRC_I64)
        w->ge += z;
    else
        w->ge += popcnt(_mm512_cmpgt_epu32_mask(a0, t14)) + popcnt(_mm512_cmpgt_epu32_mask(a1, t14));
}

INLINE void counts8(int src, __m256i a0, __m256i a1, struct sweep *w)
{
    const __m256i t14 = _mm256_set1_epi32(F32_BELOW_TINY);
    unsigned z = popcnt(_mm256_test_epi32_mask(a0, a0)) + popcnt(_mm256_test_epi32_mask(a1, a1));
    w->nz += z;
    if (src == SRC_I32 || src == SRC_I64)
        w->ge += z;
    else
        w->ge += popcnt(_mm256_cmpgt_epu32_mask(a0, t14)) + popcnt(_mm256_cmpgt_epu32_mask(a1, t14));
}

/* Counts and min/max of 32 fp16/bf16 patterns (|h| > 0, |h| >= 2^-14 as
 * integer compares; min/max as h16_minmax512 wants them). */
INLINE void h16_patterns(int src, __m512i r, struct sweep *w)
{
    const __m512i m15 = _mm512_set1_epi16(0x7fff);
    const __m512i t14 = _mm512_set1_epi16(src == SRC_BF16 ? 0x387f : 0x03ff);
    w->nz += popcnt(_mm512_test_epi16_mask(r, m15));
    w->ge += popcnt(_mm512_cmpgt_epu16_mask(_mm512_and_si512(r, m15), t14));
    w->mxs = _mm512_max_epi16(w->mxs, r);
    w->mxu = _mm512_max_epu16(w->mxu, r);
    w->mnu = _mm512_min_epu16(w->mnu, r);
}

/* The same for 16 patterns (the 256-bit runs). */
INLINE void h16_patterns16(int src, __m256i r, struct sweep *w)
{
    const __m256i m15 = _mm256_set1_epi16(0x7fff);
    const __m256i t14 = _mm256_set1_epi16(src == SRC_BF16 ? 0x387f : 0x03ff);
    w->nz += popcnt(_mm256_test_epi16_mask(r, m15));
    w->ge += popcnt(_mm256_cmpgt_epu16_mask(_mm256_and_si256(r, m15), t14));
    __m512i d = _mm512_inserti64x4(_mm512_castsi256_si512(r), r, 1);
    w->mxs = _mm512_max_epi16(w->mxs, d);
    w->mxu = _mm512_max_epu16(w->mxu, d);
    w->mnu = _mm512_min_epu16(w->mnu, d);
}

/* Runs ahead of the pair being summed that run_pair prefetches. */
#ifndef PREFETCH_RUNS
#define PREFETCH_RUNS 4
#endif

/* Two runs at a and b (FAST_RUN elements each) into the double lanes. */
INLINE void run_pair(int src, const unsigned char *a, const unsigned char *b, __m512 kv, int shifted,
                     struct sweep *w)
{
    const size_t e = src_size(src);
    const __m512i absm = _mm512_set1_epi32(F32_ABS);
    /* bf16 words to the high halves of dwords: lanes 0-7 from a, 8-15 from b */
    const __m512i idx0 = _mm512_set_epi16(23, 0, 22, 0, 21, 0, 20, 0, 19, 0, 18, 0, 17, 0, 16, 0,
                                          7, 0, 6, 0, 5, 0, 4, 0, 3, 0, 2, 0, 1, 0, 0, 0);
    const __m512i idx1 = _mm512_add_epi16(idx0, _mm512_set1_epi32(8 << 16));
    __m512 s1 = _mm512_setzero_ps(), q0 = s1, q1 = s1, la = s1;
    for (size_t g = 0; g < FAST_RUN * e; g += 16 * e) {
        /* Two streams a run apart: fetch the data two pairs ahead, into
         * the next block (a prefetch never faults); see the note above
         * the table on what this did not cure for 4- and 8-byte kinds. */
        _mm_prefetch((const char *)(a + g + PREFETCH_RUNS * FAST_RUN * e), _MM_HINT_T0);
        _mm_prefetch((const char *)(b + g + PREFETCH_RUNS * FAST_RUN * e), _MM_HINT_T0);
        if (e == 8) {
            _mm_prefetch((const char *)(a + g + 64 + PREFETCH_RUNS * FAST_RUN * e), _MM_HINT_T0);
            _mm_prefetch((const char *)(b + g + 64 + PREFETCH_RUNS * FAST_RUN * e), _MM_HINT_T0);
        }
        __m512 v0, v1;
        if (src == SRC_BF16) {
            __m512i r = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a + g))),
                                           _mm256_loadu_si256((const __m256i *)(b + g)), 1);
            h16_patterns(src, r, w);
            v0 = _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xaaaaaaaau, idx0, r));
            v1 = _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xaaaaaaaau, idx1, r));
        } else if (src == SRC_F16) {
            __m256i y0 = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(a + g))),
                                                 _mm_loadu_si128((const __m128i *)(b + g)), 1);
            __m256i y1 = _mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(a + g + 16))),
                _mm_loadu_si128((const __m128i *)(b + g + 16)), 1);
            h16_patterns(src, _mm512_inserti64x4(_mm512_castsi256_si512(y0), y1, 1), w);
            v0 = _mm512_cvtph_ps(y0);
            v1 = _mm512_cvtph_ps(y1);
        } else {
            v0 = load8x2(src, a + g, b + g);
            v1 = load8x2(src, a + g + 8 * e, b + g + 8 * e);
        }
        __m512i a0 = _mm512_and_si512(_mm512_castps_si512(v0), absm);
        __m512i a1 = _mm512_and_si512(_mm512_castps_si512(v1), absm);
        if (src != SRC_BF16 && src != SRC_F16) {
            counts16(src, a0, a1, w);
            w->mn = _mm512_min_ps(w->mn, _mm512_min_ps(v0, v1));
            w->mx = _mm512_max_ps(w->mx, _mm512_max_ps(v0, v1));
        }
        FAST_TERMS(512, v0, v1, _mm512_castsi512_ps(a0), _mm512_castsi512_ps(a1), kv, shifted, s1, q0, q1, la);
    }
    __m512 q = _mm512_add_ps(q0, q1);
    w->d0 = _mm512_add_pd(w->d0, _mm512_cvtps_pd(_mm512_castps512_ps256(s1)));
    w->d1 = _mm512_add_pd(w->d1, _mm512_cvtps_pd(_mm512_castps512_ps256(q)));
    w->d2 = _mm512_add_pd(w->d2, _mm512_cvtps_pd(_mm512_castps512_ps256(la)));
    w->d0 = _mm512_add_pd(w->d0, _mm512_cvtps_pd(_mm512_extractf32x8_ps(s1, 1)));
    w->d1 = _mm512_add_pd(w->d1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(q, 1)));
    w->d2 = _mm512_add_pd(w->d2, _mm512_cvtps_pd(_mm512_extractf32x8_ps(la, 1)));
}

/* One run (or the short last one) of m elements at a, 256 bits wide. */
INLINE void run_one(int src, const unsigned char *a, size_t m, __m512 kv, int shifted, struct sweep *w)
{
    const size_t e = src_size(src);
    const __m256i absm = _mm256_set1_epi32(F32_ABS);
    const __m256 k8 = _mm512_castps512_ps256(kv);
    __m256 s1 = _mm256_setzero_ps(), q0 = s1, q1 = s1, la = s1;
    __m256 mn = _mm256_set1_ps(INFINITY), mx = _mm256_set1_ps(-INFINITY);
    for (size_t g = 0; g < m * e; g += 16 * e) {
        __m256 v0 = load8(src, a + g), v1 = load8(src, a + g + 8 * e);
        __m256i a0 = _mm256_and_si256(_mm256_castps_si256(v0), absm);
        __m256i a1 = _mm256_and_si256(_mm256_castps_si256(v1), absm);
        if (src == SRC_BF16 || src == SRC_F16) {
            h16_patterns16(src, _mm256_loadu_si256((const __m256i *)(a + g)), w);
        } else {
            counts8(src, a0, a1, w);
            mn = _mm256_min_ps(mn, _mm256_min_ps(v0, v1));
            mx = _mm256_max_ps(mx, _mm256_max_ps(v0, v1));
        }
        FAST_TERMS(256, v0, v1, _mm256_castsi256_ps(a0), _mm256_castsi256_ps(a1), k8, shifted, s1, q0, q1, la);
    }
    w->d0 = _mm512_add_pd(w->d0, _mm512_cvtps_pd(s1));
    w->d1 = _mm512_add_pd(w->d1, _mm512_cvtps_pd(_mm256_add_ps(q0, q1)));
    w->d2 = _mm512_add_pd(w->d2, _mm512_cvtps_pd(la));
    w->mn = _mm512_min_ps(w->mn, _mm512_insertf32x8(_mm512_castps256_ps512(mn), mn, 1));
    w->mx = _mm512_max_ps(w->mx, _mm512_insertf32x8(_mm512_castps256_ps512(mx), mx, 1));
}

/* The 16-bit min/max rule of stats_avx2_fast.c's h16_minmax on 32 lanes. */
static void h16_minmax512(const struct sweep *w, int bf16, float *mn, float *mx)
{
    int16_t ts[32];
    uint16_t tu[32], tm[32];
    _mm512_storeu_si512(ts, w->mxs);
    _mm512_storeu_si512(tu, w->mxu);
    _mm512_storeu_si512(tm, w->mnu);
    int smax = INT16_MIN;
    unsigned umax = 0, umin = 0xffff;
    for (int j = 0; j < 32; j++) {
        smax = ts[j] > smax ? ts[j] : smax;
        umax = tu[j] > umax ? tu[j] : umax;
        umin = tm[j] < umin ? tm[j] : umin;
    }
    uint16_t hmax = (uint16_t)(umin < 0x8000u ? (unsigned)smax : umin);
    uint16_t hmin = (uint16_t)(umax >= 0x8000u ? umax : umin);
    *mx = bf16 ? tft_bf16_to_f32(hmax) : tft_f16_to_f32(hmax);
    *mn = bf16 ? tft_bf16_to_f32(hmin) : tft_f16_to_f32(hmin);
}

/* fast_f32 (stats_internal.h) over n elements of kind src at x. */
INLINE void fast_body(const unsigned char *x, int src, size_t n, float k, int shifted, struct fast_out *o)
{
    const size_t e = src_size(src);
    const __m512 kv = _mm512_set1_ps(k);
    struct sweep w;
    w.d0 = w.d1 = w.d2 = _mm512_setzero_pd();
    w.nz = w.ge = 0;
    w.mn = _mm512_set1_ps(INFINITY);
    w.mx = _mm512_set1_ps(-INFINITY);
    w.mxs = _mm512_set1_epi16(INT16_MIN);
    w.mxu = _mm512_setzero_si512();
    w.mnu = _mm512_set1_epi16(-1);
    size_t i = 0;
    for (; n - i >= 2 * FAST_RUN; i += 2 * FAST_RUN)
        run_pair(src, x + i * e, x + (i + FAST_RUN) * e, kv, shifted, &w);
    for (; i < n; i += FAST_RUN) {
        size_t m = n - i < FAST_RUN ? n - i : FAST_RUN;
        run_one(src, x + i * e, m, kv, shifted, &w);
    }
    _mm512_storeu_pd(o->lane[0], w.d0);
    _mm512_storeu_pd(o->lane[1], w.d1);
    _mm512_storeu_pd(o->lane[2], w.d2);
    o->zero = n - w.nz;
    o->tiny = n - w.ge;
    o->min = INFINITY;
    o->max = -INFINITY;
    if (n == 0)
        return;
    if (src == SRC_BF16 || src == SRC_F16) {
        h16_minmax512(&w, src == SRC_BF16, &o->min, &o->max); /* exact in float */
        return;
    }
    float a[16], b[16];
    _mm512_storeu_ps(a, w.mn);
    _mm512_storeu_ps(b, w.mx);
    for (int j = 0; j < 16; j++) {
        o->min = a[j] < o->min ? a[j] : o->min;
        o->max = b[j] > o->max ? b[j] : o->max;
    }
}

/* The f32 and int kinds of fast_body are not in the table: from DRAM
 * (256 MiB) they ran at half the AVX2 sweep's rate — memory stalls at the
 * loads of the two runs, which lie 1-2 KiB apart (perf annotate), and
 * software prefetch 4-32 runs ahead did not help — while 16-bit data,
 * whose runs lie 512 bytes apart, gained. See bench/stats/README.md. */
static void avx512_fast_h16(const void *raw, size_t n, int bf16, float k, struct fast_out *o)
{
    if (bf16 && k == 0.0f)
        fast_body(raw, SRC_BF16, n, 0.0f, 0, o);
    else if (bf16)
        fast_body(raw, SRC_BF16, n, k, 1, o);
    else if (k == 0.0f)
        fast_body(raw, SRC_F16, n, 0.0f, 0, o);
    else
        fast_body(raw, SRC_F16, n, k, 1, o);
}

/* ------------------------------------------------------------------------ */
/* HEALTH                                                                    */
/* ------------------------------------------------------------------------ */

/* int64: AVX-512 has the 64-bit min and max AVX2 lacks (no compare and
 * blend); min and max converted once, as the AVX2 kernel does. */
static void avx512_health_i64(const void *raw, size_t n, struct part *p)
{
    const unsigned char *b = raw;
    __m512i mn0 = _mm512_set1_epi64(INT64_MAX), mn1 = mn0;
    __m512i mx0 = _mm512_set1_epi64(INT64_MIN), mx1 = mx0;
    uint64_t zero = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i v0 = _mm512_loadu_si512(b + 8 * i), v1 = _mm512_loadu_si512(b + 8 * i + 64);
        zero += popcnt((unsigned)_mm512_kunpackb(_mm512_testn_epi64_mask(v1, v1),
                                                 _mm512_testn_epi64_mask(v0, v0)));
        mn0 = _mm512_min_epi64(mn0, v0);
        mx0 = _mm512_max_epi64(mx0, v0);
        mn1 = _mm512_min_epi64(mn1, v1);
        mx1 = _mm512_max_epi64(mx1, v1);
    }
    if (i < n) { /* n % 8 == 0: the last 8 */
        __m512i v0 = _mm512_loadu_si512(b + 8 * i);
        zero += popcnt(_mm512_testn_epi64_mask(v0, v0));
        mn0 = _mm512_min_epi64(mn0, v0);
        mx0 = _mm512_max_epi64(mx0, v0);
    }
    p->nfin = n;
    p->zero = zero;
    p->min = n ? (double)_mm512_reduce_min_epi64(_mm512_min_epi64(mn0, mn1)) : INFINITY;
    p->max = n ? (double)_mm512_reduce_max_epi64(_mm512_max_epi64(mx0, mx1)) : -INFINITY;
}

/* Bytes, HEALTH: zeros by mask and POPCNT, min and max 64 at a time. */
static void avx512_health_u8(const uint8_t *x, size_t n, struct u8_out *o)
{
    __m512i mn = _mm512_set1_epi8((char)0xff), mx = _mm512_setzero_si512();
    uint64_t zero = 0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512i v = _mm512_loadu_si512(x + i);
        zero += (uint64_t)__builtin_popcountll(_mm512_testn_epi8_mask(v, v));
        mn = _mm512_min_epu8(mn, v);
        mx = _mm512_max_epu8(mx, v);
    }
    if (i < n) { /* n % 32 == 0: the last 32 */
        __m256i v = _mm256_loadu_si256((const __m256i *)(x + i));
        zero += popcnt(_mm256_testn_epi8_mask(v, v));
        __m512i d = _mm512_inserti64x4(_mm512_castsi256_si512(v), v, 1);
        mn = _mm512_min_epu8(mn, d);
        mx = _mm512_max_epu8(mx, d);
    }
    o->s1 = o->s2 = 0;
    o->zero = zero;
    uint8_t a[64], b[64];
    _mm512_storeu_si512(a, mn);
    _mm512_storeu_si512(b, mx);
    o->min = 255;
    o->max = 0;
    for (int j = 0; j < 64; j++) {
        o->min = a[j] < o->min ? a[j] : o->min;
        o->max = b[j] > o->max ? b[j] : o->max;
    }
}

const struct stats_kernels stats_kernels_avx512 = {
    .name = "avx512",
    .counts_f32 = avx2_counts_f32,
    .sums_f32 = avx2_sums_f32,
    .masked_f32 = avx2_masked_f32,
    .counts_f64 = avx2_counts_f64,
    .sums_f64 = avx2_sums_f64,
    .masked_f64 = avx2_masked_f64,
    .fast_f32 = avx2_fast_f32,
    .stats_u8 = avx2_stats_u8,
    .health_u8 = avx512_health_u8,
    .fast_h16 = avx512_fast_h16,
    .health_h16 = avx2_health_h16,
    .fast_int = avx2_fast_int,
    .health_i32 = avx2_health_i32,
    .health_i64 = avx512_health_i64,
    .dec_f16 = avx2_dec_f16,
    .dec_bf16 = avx2_dec_bf16,
    .enc_f16 = avx2_enc_f16,
    .enc_bf16 = avx2_enc_bf16,
};
