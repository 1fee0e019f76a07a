/*
 * stats_avx2.c — the AVX2/FMA/F16C statistics kernels (stats_internal.h).
 *
 * Built with -mavx2 -mfma -mf16c -ffp-contract=off on x86-64 only; stats_isa.c
 * calls them only on CPUs that have all three. They compute exactly what the
 * generic kernels in stats_generic.c compute, bit for bit (tests check it).
 *
 * Speed notes (Zen 4, one core): a block is swept once for counts, min and
 * max in float lanes (~2.4 cycles per 32 bytes) and once more for the double
 * sums (~4 cycles): together they spill no accumulator, which one fused loop
 * did. Zen's FP adders are the bottleneck of the sums, so exact additions are
 * written fma(a, 1.0, b), which rounds like a + b but runs on the FMA pipes.
 * Counts of the float pass are kept as int16 pairs (packs) to save registers.
 */
#include "stats_internal.h"

#if !(defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
#error "stats_avx2.c must be compiled with -mavx2 -mfma -mf16c"
#endif

#include <immintrin.h>
#include <math.h>
#include <string.h>

/* |x| bit patterns of the float thresholds. */
#define F32_ABS 0x7fffffff
#define F32_BELOW_TINY 0x387fffff /* just below 2^-14 */
#define F32_F16MAX 0x477fe000     /* 65504 */
#define F32_BF16MAX 0x7f7f0000    /* 3.3895313892515355e38 */
#define F32_FLTMAX 0x7f7fffff
#define F32_INF 0x7f800000
/* |x| bit patterns of the double thresholds. */
#define F64_ABS 0x7fffffffffffffffLL
#define F64_BELOW_TINY 0x3f0fffffffffffffLL
#define F64_F16MAX 0x40effc0000000000LL
#define F64_BF16MAX 0x47efe00000000000LL
#define F64_DBLMAX 0x7fefffffffffffffLL
#define F64_INF 0x7ff0000000000000LL

/* ------------------------------------------------------------------------ */
/* Horizontal helpers                                                        */
/* ------------------------------------------------------------------------ */

static uint64_t hsum_epi32(__m256i v)
{
    int32_t t[8];
    _mm256_storeu_si256((__m256i *)t, v);
    uint64_t s = 0;
    for (int j = 0; j < 8; j++)
        s += (uint32_t)t[j];
    return s;
}

/* Counts of two packed counters (_mm256_packs_epi32(a, b) accumulations):
 * int16 elements 0-3 and 8-11 belong to a, 4-7 and 12-15 to b. */
static void hsum_packed(__m256i v, uint64_t *a, uint64_t *b)
{
    int16_t t[16];
    _mm256_storeu_si256((__m256i *)t, v);
    for (int j = 0; j < 4; j++) {
        *a += (uint16_t)t[j] + (uint16_t)t[j + 8];
        *b += (uint16_t)t[j + 4] + (uint16_t)t[j + 12];
    }
}

static uint64_t hsum_epi64(__m256i v)
{
    int64_t t[4];
    _mm256_storeu_si256((__m256i *)t, v);
    return (uint64_t)(t[0] + t[1] + t[2] + t[3]);
}

static void minmax_ps(__m256 mn, __m256 mx, struct part *p)
{
    float a[8], b[8];
    _mm256_storeu_ps(a, mn);
    _mm256_storeu_ps(b, mx);
    for (int j = 0; j < 8; j++) {
        p->min = a[j] < p->min ? a[j] : p->min;
        p->max = b[j] > p->max ? b[j] : p->max;
    }
}

static void minmax_pd(__m256d mn, __m256d mx, struct part *p)
{
    double a[4], b[4];
    _mm256_storeu_pd(a, mn);
    _mm256_storeu_pd(b, mx);
    for (int j = 0; j < 4; j++) {
        p->min = a[j] < p->min ? a[j] : p->min;
        p->max = b[j] > p->max ? b[j] : p->max;
    }
}

/* Lane sums live in s between calls; the vectors start from and end in it. */
static void sums_store(lane_sums s, __m256d s1, __m256d s2, __m256d sa)
{
    _mm256_storeu_pd(s[0], s1);
    _mm256_storeu_pd(s[1], s2);
    _mm256_storeu_pd(s[2], sa);
}

/* ------------------------------------------------------------------------ */
/* float32                                                                   */
/* ------------------------------------------------------------------------ */

/* 1 when some |x| (as bits) in x[0..n) exceeds limit: NaN and Inf included. */
static int any_above_f32(const float *x, size_t n, int32_t limit)
{
    const __m256i absm = _mm256_set1_epi32(F32_ABS), lim = _mm256_set1_epi32(limit);
    __m256i r = _mm256_setzero_si256();
    for (size_t i = 0; i < n; i += 8) {
        __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), absm);
        r = _mm256_or_si256(r, _mm256_cmpgt_epi32(a, lim));
    }
    return !_mm256_testz_si256(r, r);
}

/* HEALTH: zero count, min, max; v - v is +0 for finite v and NaN otherwise,
 * so OR-ing its bits detects any non-finite element in two operations. */
static int health_f32(const float *x, size_t n, struct part *p)
{
    const __m256 z = _mm256_setzero_ps();
    __m256i c0 = _mm256_setzero_si256(), c1 = c0, r0 = c0, r1 = c0;
    __m256 mn0 = _mm256_set1_ps(INFINITY), mx0 = _mm256_set1_ps(-INFINITY);
    __m256 mn1 = mn0, mx1 = mx0;
    for (size_t i = 0; i < n; i += 16) {
        __m256 v = _mm256_loadu_ps(x + i), w = _mm256_loadu_ps(x + i + 8);
        r0 = _mm256_or_si256(r0, _mm256_castps_si256(_mm256_sub_ps(v, v)));
        r1 = _mm256_or_si256(r1, _mm256_castps_si256(_mm256_sub_ps(w, w)));
        c0 = _mm256_sub_epi32(c0, _mm256_castps_si256(_mm256_cmp_ps(v, z, _CMP_EQ_OQ)));
        c1 = _mm256_sub_epi32(c1, _mm256_castps_si256(_mm256_cmp_ps(w, z, _CMP_EQ_OQ)));
        mn0 = _mm256_min_ps(v, mn0);
        mx0 = _mm256_max_ps(v, mx0);
        mn1 = _mm256_min_ps(w, mn1);
        mx1 = _mm256_max_ps(w, mx1);
    }
    r0 = _mm256_or_si256(r0, r1);
    if (!_mm256_testz_si256(r0, r0))
        return 1;
    p->nfin = n;
    p->zero = hsum_epi32(_mm256_add_epi32(c0, c1));
    minmax_ps(_mm256_min_ps(mn0, mn1), _mm256_max_ps(mx0, mx1), p);
    return 0;
}

/* FULL, first sweep: counts by |x| thresholds, min, max. Elements above
 * 65504 are counted; only when there are some is the block searched for
 * values beyond bf16 (or non-finite ones), which need the masked kernel. */
static int counts_f32(const float *x, size_t n, int full, struct part *p)
{
    if (!full)
        return health_f32(x, n, p);
    const __m256i absm = _mm256_set1_epi32(F32_ABS), zero = _mm256_setzero_si256();
    const __m256i t14 = _mm256_set1_epi32(F32_BELOW_TINY), t16 = _mm256_set1_epi32(F32_F16MAX);
    __m256i c_nz_ge = zero, c_o16 = zero;
    __m256 mn = _mm256_set1_ps(INFINITY), mx = _mm256_set1_ps(-INFINITY);
    for (size_t i = 0; i < n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256i a = _mm256_and_si256(_mm256_castps_si256(v), absm);
        __m256i nz = _mm256_cmpgt_epi32(a, zero), ge = _mm256_cmpgt_epi32(a, t14);
        c_nz_ge = _mm256_sub_epi16(c_nz_ge, _mm256_packs_epi32(nz, ge));
        c_o16 = _mm256_sub_epi32(c_o16, _mm256_cmpgt_epi32(a, t16));
        mn = _mm256_min_ps(v, mn);
        mx = _mm256_max_ps(v, mx);
    }
    uint64_t over16 = hsum_epi32(c_o16);
    if (over16 > 0 && any_above_f32(x, n, F32_BF16MAX))
        return 1;
    uint64_t nz = 0, ge = 0;
    hsum_packed(c_nz_ge, &nz, &ge);
    p->nfin = n;
    p->zero = n - nz;
    p->tiny = n - ge;
    p->over16 = over16;
    minmax_ps(mn, mx, p);
    return 0;
}

/* FULL, second sweep: the lane sums (stats_internal.h) of finite data. */
static void sums_f32(const float *x, size_t n, double k, lane_sums s)
{
    const __m256d one = _mm256_set1_pd(1.0), nk = _mm256_set1_pd(-k);
    const __m256d absd = _mm256_castsi256_pd(_mm256_set1_epi64x(F64_ABS));
    __m256d s1 = _mm256_loadu_pd(s[0]), s2 = _mm256_loadu_pd(s[1]), sa = _mm256_loadu_pd(s[2]);
    for (size_t i = 0; i < n; i += 8) {
        __m256d xl = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
        __m256d xh = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
        __m256d dl = _mm256_fmadd_pd(xl, one, nk), dh = _mm256_add_pd(xh, nk);
        s1 = _mm256_fmadd_pd(_mm256_add_pd(dl, dh), one, s1);
        s2 = _mm256_add_pd(s2, _mm256_fmadd_pd(_mm256_mul_pd(dl, dl), one, _mm256_mul_pd(dh, dh)));
        sa = _mm256_fmadd_pd(_mm256_add_pd(_mm256_and_pd(xl, absd), _mm256_and_pd(xh, absd)),
                             one, sa);
    }
    sums_store(s, s1, s2, sa);
}

/* Cumulative |x| threshold counts of any data. The int16 pairs hold at
 * most STATS_BLOCK_F32 / 8 = 256 per element. */
static void masked_counts_f32(const float *x, size_t n, struct part *p)
{
    const __m256i absm = _mm256_set1_epi32(F32_ABS), zero = _mm256_setzero_si256();
    const __m256i t14 = _mm256_set1_epi32(F32_BELOW_TINY), t16 = _mm256_set1_epi32(F32_F16MAX);
    const __m256i tbf = _mm256_set1_epi32(F32_BF16MAX), tmax = _mm256_set1_epi32(F32_FLTMAX);
    const __m256i tinf = _mm256_set1_epi32(F32_INF), ninf = _mm256_set1_epi32((int32_t)0xff800000u);
    __m256i c_a = zero, c_b = zero, c_c = zero, c_ninf = zero;
    for (size_t i = 0; i < n; i += 8) {
        __m256i bits = _mm256_loadu_si256((const __m256i *)(x + i));
        __m256i a = _mm256_and_si256(bits, absm);
        c_a = _mm256_sub_epi16(c_a, _mm256_packs_epi32(_mm256_cmpgt_epi32(a, zero),
                                                       _mm256_cmpgt_epi32(a, t14)));
        c_b = _mm256_sub_epi16(c_b, _mm256_packs_epi32(_mm256_cmpgt_epi32(a, t16),
                                                       _mm256_cmpgt_epi32(a, tbf)));
        c_c = _mm256_sub_epi16(c_c, _mm256_packs_epi32(_mm256_cmpgt_epi32(a, tmax),
                                                       _mm256_cmpgt_epi32(a, tinf)));
        c_ninf = _mm256_sub_epi32(c_ninf, _mm256_cmpeq_epi32(bits, ninf));
    }
    uint64_t nz = 0, ge = 0, o16 = 0, obf = 0, nonfin = 0, nan = 0;
    hsum_packed(c_a, &nz, &ge);
    hsum_packed(c_b, &o16, &obf);
    hsum_packed(c_c, &nonfin, &nan);
    p->ninf = hsum_epi32(c_ninf);
    p->nan = nan;
    p->pinf = nonfin - nan - p->ninf;
    p->nfin = n - nonfin;
    p->zero = n - nz;
    p->tiny = n - ge;
    p->over16 = o16 - nonfin;
    p->overbf = obf - nonfin;
}

/* Any data: every count, min and max over the finite elements and, when
 * full is set, the lane sums with non-finite elements masked to +0.0. */
static void masked_f32(const float *x, size_t n, int full, double k, struct part *p, lane_sums s)
{
    p->min = INFINITY;
    p->max = -INFINITY;
    masked_counts_f32(x, n, p);
    const __m256i absm = _mm256_set1_epi32(F32_ABS), tinf = _mm256_set1_epi32(F32_INF);
    const __m256 pinf = _mm256_set1_ps(INFINITY), minf = _mm256_set1_ps(-INFINITY);
    const __m256d one = _mm256_set1_pd(1.0), nk = _mm256_set1_pd(-k);
    const __m256d absd = _mm256_castsi256_pd(_mm256_set1_epi64x(F64_ABS));
    __m256 mn = pinf, mx = minf;
    __m256d s1 = _mm256_setzero_pd(), s2 = s1, sa = s1;
    if (full) {
        s1 = _mm256_loadu_pd(s[0]);
        s2 = _mm256_loadu_pd(s[1]);
        sa = _mm256_loadu_pd(s[2]);
    }
    for (size_t i = 0; i < n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256i fin = _mm256_cmpgt_epi32(tinf, _mm256_and_si256(_mm256_castps_si256(v), absm));
        mn = _mm256_min_ps(_mm256_blendv_ps(pinf, v, _mm256_castsi256_ps(fin)), mn);
        mx = _mm256_max_ps(_mm256_blendv_ps(minf, v, _mm256_castsi256_ps(fin)), mx);
        if (!full)
            continue;
        __m256d ml = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(fin)));
        __m256d mh = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(fin, 1)));
        __m256d xl = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
        __m256d xh = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        __m256d dl = _mm256_and_pd(_mm256_fmadd_pd(xl, one, nk), ml);
        __m256d dh = _mm256_and_pd(_mm256_add_pd(xh, nk), mh);
        s1 = _mm256_fmadd_pd(_mm256_add_pd(dl, dh), one, s1);
        s2 = _mm256_add_pd(s2, _mm256_fmadd_pd(_mm256_mul_pd(dl, dl), one, _mm256_mul_pd(dh, dh)));
        __m256d al = _mm256_and_pd(_mm256_and_pd(xl, absd), ml);
        __m256d ah = _mm256_and_pd(_mm256_and_pd(xh, absd), mh);
        sa = _mm256_fmadd_pd(_mm256_add_pd(al, ah), one, sa);
    }
    minmax_ps(mn, mx, p);
    if (full)
        sums_store(s, s1, s2, sa);
}

/* The fused FULL pass (stats_internal.h): one sweep, float accumulators
 * flushed into double lanes every FAST_RUN elements. The double lanes live
 * in memory (fast_flush) so that the sweep's accumulators stay in
 * registers. */
static __attribute__((noinline)) void fast_flush(double *lane, __m256 s1, __m256 q, __m256 la)
{
    __m256 v[3] = { s1, q, la };
    for (int k = 0; k < 3; k++) {
        double *l = lane + 8 * k;
        _mm256_storeu_pd(l, _mm256_add_pd(_mm256_loadu_pd(l),
                                          _mm256_cvtps_pd(_mm256_castps256_ps128(v[k]))));
        _mm256_storeu_pd(l + 4, _mm256_add_pd(_mm256_loadu_pd(l + 4),
                                              _mm256_cvtps_pd(_mm256_extractf128_ps(v[k], 1))));
    }
}

static inline __attribute__((always_inline)) void
fast_f32_body(const float *x, size_t n, float k, int shifted, struct fast_out *o)
{
    const __m256i absm = _mm256_set1_epi32(F32_ABS), zi = _mm256_setzero_si256();
    const __m256i t14 = _mm256_set1_epi32(F32_BELOW_TINY);
    const __m256 kv = _mm256_set1_ps(k);
    __m256 mn = _mm256_set1_ps(INFINITY), mx = _mm256_set1_ps(-INFINITY);
    __m256i cnt = zi; /* int16 pairs: nonzero, not tiny (hsum_packed) */
    uint64_t nz = 0, ge = 0;
    memset(o->lane, 0, sizeof o->lane);
    for (size_t i = 0; i < n;) {
        size_t end = n - i < FAST_RUN ? n : i + FAST_RUN;
        __m256 s1 = _mm256_setzero_ps(), q0 = s1, q1 = s1, la = s1;
        for (; i < end; i += 16) {
            __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
            __m256i a0 = _mm256_and_si256(_mm256_castps_si256(v0), absm);
            __m256i a1 = _mm256_and_si256(_mm256_castps_si256(v1), absm);
            __m256i c0 = _mm256_packs_epi32(_mm256_cmpgt_epi32(a0, zi), _mm256_cmpgt_epi32(a0, t14));
            __m256i c1 = _mm256_packs_epi32(_mm256_cmpgt_epi32(a1, zi), _mm256_cmpgt_epi32(a1, t14));
            cnt = _mm256_sub_epi16(cnt, _mm256_add_epi16(c0, c1));
            mn = _mm256_min_ps(_mm256_min_ps(v0, v1), mn);
            mx = _mm256_max_ps(_mm256_max_ps(v0, v1), mx);
            __m256 d0 = v0, d1 = v1;
            if (shifted) {
                d0 = _mm256_sub_ps(v0, kv);
                d1 = _mm256_sub_ps(v1, kv);
            }
            s1 = _mm256_add_ps(s1, _mm256_add_ps(d0, d1));
            q0 = _mm256_fmadd_ps(d0, d0, q0);
            q1 = _mm256_fmadd_ps(d1, d1, q1);
            __m256 f0 = _mm256_castsi256_ps(a0), f1 = _mm256_castsi256_ps(a1);
            la = _mm256_add_ps(la, _mm256_add_ps(f0, f1));
        }
        fast_flush(&o->lane[0][0], s1, _mm256_add_ps(q0, q1), la);
        if ((i & 2047) == 0 || i >= n) { /* int16 pairs hold 2 * 2048 / 16 per lane at most */
            hsum_packed(cnt, &nz, &ge);
            cnt = zi;
        }
    }
    o->zero = n - nz;
    o->tiny = n - ge;
    float a[8], b[8];
    _mm256_storeu_ps(a, mn);
    _mm256_storeu_ps(b, mx);
    o->min = INFINITY;
    o->max = -INFINITY;
    for (int j = 0; j < 8; j++) {
        o->min = a[j] < o->min ? a[j] : o->min;
        o->max = b[j] > o->max ? b[j] : o->max;
    }
}

/* k == 0 skips the subtraction, which would change nothing (x - 0 == x). */
static void fast_f32(const float *x, size_t n, float k, struct fast_out *o)
{
    if (k == 0.0f)
        fast_f32_body(x, n, 0.0f, 0, o);
    else
        fast_f32_body(x, n, k, 1, o);
}

/* fast_f32 on raw fp16/bf16, decoded in registers into the same lanes
 * (vector 0 = elements 0-7, vector 1 = 8-15 of each group of 16), so the
 * sums are fast_f32's bit for bit. Counts and min/max work on the 16-bit
 * patterns, 16 per instruction: |h| > 0 and |h| >= 2^-14 (bf16 0x3880,
 * fp16 0x0400) are integer compares; min and max come from the signed
 * maximum (the largest non-negative pattern), the unsigned maximum (the
 * most negative value) and the unsigned minimum (the smallest non-negative
 * pattern, or if all are negative the negative nearest 0). */
static void h16_minmax(__m256i mxs, __m256i mxu, __m256i mnu, int bf16, double *mn, double *mx);

static inline __attribute__((always_inline)) void
fast_h16_body(const unsigned char *raw, size_t n, int bf16, float k, int shifted,
              struct fast_out *o)
{
    const __m256i m15 = _mm256_set1_epi16(0x7fff), zi = _mm256_setzero_si256();
    const __m256i t14 = _mm256_set1_epi16(bf16 ? 0x387f : 0x03ff);
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(F32_ABS));
    const __m256 kv = _mm256_set1_ps(k);
    __m256i cnt = zi; /* bytes: nonzero (0-7, 16-23), not tiny (8-15, 24-31) */
    __m256i mxs = _mm256_set1_epi16(INT16_MIN), mxu = zi, mnu = _mm256_set1_epi16(-1);
    uint64_t nz = 0, ge = 0;
    memset(o->lane, 0, sizeof o->lane);
    for (size_t i = 0; i < n;) {
        size_t end = n - i < FAST_RUN ? n : i + FAST_RUN;
        __m256 s1 = _mm256_setzero_ps(), q0 = s1, q1 = s1, la = s1;
        for (; i < end; i += 16) {
            __m256i r = _mm256_loadu_si256((const __m256i *)(raw + 2 * i));
            __m256i a = _mm256_and_si256(r, m15);
            cnt = _mm256_sub_epi8(cnt, _mm256_packs_epi16(_mm256_cmpgt_epi16(a, zi),
                                                          _mm256_cmpgt_epi16(a, t14)));
            mxs = _mm256_max_epi16(mxs, r);
            mxu = _mm256_max_epu16(mxu, r);
            mnu = _mm256_min_epu16(mnu, r);
            __m256 v0, v1;
            if (bf16) {
                __m256i p = _mm256_permute4x64_epi64(r, 0xd8);
                v0 = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zi, p));
                v1 = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zi, p));
            } else {
                v0 = _mm256_cvtph_ps(_mm256_castsi256_si128(r));
                v1 = _mm256_cvtph_ps(_mm256_extracti128_si256(r, 1));
            }
            __m256 d0 = v0, d1 = v1;
            if (shifted) {
                d0 = _mm256_sub_ps(v0, kv);
                d1 = _mm256_sub_ps(v1, kv);
            }
            s1 = _mm256_add_ps(s1, _mm256_add_ps(d0, d1));
            q0 = _mm256_fmadd_ps(d0, d0, q0);
            q1 = _mm256_fmadd_ps(d1, d1, q1);
            la = _mm256_add_ps(la, _mm256_add_ps(_mm256_and_ps(v0, absm), _mm256_and_ps(v1, absm)));
        }
        fast_flush(&o->lane[0][0], s1, _mm256_add_ps(q0, q1), la);
        if ((i & 2047) == 0 || i >= n) { /* byte counters: at most 2048 / 16 per lane */
            uint8_t c[32];
            _mm256_storeu_si256((__m256i *)c, cnt);
            for (int j = 0; j < 8; j++) {
                nz += (uint64_t)c[j] + c[j + 16];
                ge += (uint64_t)c[j + 8] + c[j + 24];
            }
            cnt = zi;
        }
    }
    o->zero = n - nz;
    o->tiny = n - ge;
    o->min = INFINITY;
    o->max = -INFINITY;
    if (n == 0)
        return;
    double mn, mx;
    h16_minmax(mxs, mxu, mnu, bf16, &mn, &mx);
    o->min = (float)mn; /* decoded 16-bit values: exact in float */
    o->max = (float)mx;
}

static void fast_h16(const void *raw, size_t n, int bf16, float k, struct fast_out *o)
{
    if (bf16 && k == 0.0f)
        fast_h16_body(raw, n, 1, 0.0f, 0, o);
    else if (bf16)
        fast_h16_body(raw, n, 1, k, 1, o);
    else if (k == 0.0f)
        fast_h16_body(raw, n, 0, 0.0f, 0, o);
    else
        fast_h16_body(raw, n, 0, k, 1, o);
}

/* The 16-bit min/max rule of fast_h16_body, from the three vectors. */
static void h16_minmax(__m256i mxs, __m256i mxu, __m256i mnu, int bf16, double *mn, double *mx)
{
    int16_t ts[16];
    uint16_t tu[16], tm[16];
    _mm256_storeu_si256((__m256i *)ts, mxs);
    _mm256_storeu_si256((__m256i *)tu, mxu);
    _mm256_storeu_si256((__m256i *)tm, mnu);
    int smax = INT16_MIN;
    unsigned umax = 0, umin = 0xffff;
    for (int j = 0; j < 16; j++) {
        smax = ts[j] > smax ? ts[j] : smax;
        umax = tu[j] > umax ? tu[j] : umax;
        umin = tm[j] < umin ? tm[j] : umin;
    }
    uint16_t hmax = (uint16_t)(umin < 0x8000u ? (unsigned)smax : umin);
    uint16_t hmin = (uint16_t)(umax >= 0x8000u ? umax : umin);
    *mx = bf16 ? tft_bf16_to_f32(hmax) : tft_f16_to_f32(hmax);
    *mn = bf16 ? tft_bf16_to_f32(hmin) : tft_f16_to_f32(hmin);
}

/* HEALTH on 16-bit patterns: zeros, min/max (h16_minmax), and the largest
 * |pattern| to spot a NaN or Inf (bf16 above 0x7f7f, fp16 above 0x7bff). */
static int health_h16(const void *raw, size_t n, int bf16, struct part *p)
{
    const unsigned char *b = raw;
    const __m256i m15 = _mm256_set1_epi16(0x7fff), zi = _mm256_setzero_si256();
    __m256i cz = zi, amax = zi;
    __m256i mxs = _mm256_set1_epi16(INT16_MIN), mxu = zi, mnu = _mm256_set1_epi16(-1);
    for (size_t i = 0; i < n; i += 16) {
        __m256i r = _mm256_loadu_si256((const __m256i *)(b + 2 * i));
        __m256i a = _mm256_and_si256(r, m15);
        cz = _mm256_sub_epi16(cz, _mm256_cmpeq_epi16(a, zi));
        amax = _mm256_max_epu16(amax, a);
        mxs = _mm256_max_epi16(mxs, r);
        mxu = _mm256_max_epu16(mxu, r);
        mnu = _mm256_min_epu16(mnu, r);
    }
    uint16_t t[16];
    _mm256_storeu_si256((__m256i *)t, amax);
    unsigned am = 0;
    for (int j = 0; j < 16; j++)
        am = t[j] > am ? t[j] : am;
    if (am > (bf16 ? 0x7f7fu : 0x7bffu))
        return 1;
    _mm256_storeu_si256((__m256i *)t, cz); /* at most 4096 / 16 per lane */
    uint64_t zero = 0;
    for (int j = 0; j < 16; j++)
        zero += t[j];
    p->nfin = n;
    p->zero = zero;
    p->min = INFINITY;
    p->max = -INFINITY;
    if (n)
        h16_minmax(mxs, mxu, mnu, bf16, &p->min, &p->max);
    return 0;
}

static void health_i32(const void *raw, size_t n, struct part *p)
{
    const unsigned char *b = raw;
    const __m256i zi = _mm256_setzero_si256();
    __m256i cz = zi, mn = _mm256_set1_epi32(INT32_MAX), mx = _mm256_set1_epi32(INT32_MIN);
    for (size_t i = 0; i < n; i += 8) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(b + 4 * i));
        cz = _mm256_sub_epi32(cz, _mm256_cmpeq_epi32(v, zi));
        mn = _mm256_min_epi32(mn, v);
        mx = _mm256_max_epi32(mx, v);
    }
    int32_t a[8], c[8];
    _mm256_storeu_si256((__m256i *)a, mn);
    _mm256_storeu_si256((__m256i *)c, mx);
    int32_t lo = INT32_MAX, hi = INT32_MIN;
    for (int j = 0; j < 8; j++) {
        lo = a[j] < lo ? a[j] : lo;
        hi = c[j] > hi ? c[j] : hi;
    }
    p->nfin = n;
    p->zero = hsum_epi32(cz);
    p->min = n ? (double)lo : INFINITY;
    p->max = n ? (double)hi : -INFINITY;
}

/* int64 lanes: AVX2 has a signed 64-bit compare but no 64-bit min/max,
 * so min/max are a compare and a blend; two vectors a round. */
static void health_i64(const void *raw, size_t n, struct part *p)
{
    const unsigned char *b = raw;
    const __m256i zi = _mm256_setzero_si256();
    __m256i cz0 = zi, cz1 = zi;
    __m256i mn0 = _mm256_set1_epi64x(INT64_MAX), mn1 = mn0;
    __m256i mx0 = _mm256_set1_epi64x(INT64_MIN), mx1 = mx0;
    for (size_t i = 0; i < n; i += 8) {
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(b + 8 * i));
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(b + 8 * i + 32));
        cz0 = _mm256_sub_epi64(cz0, _mm256_cmpeq_epi64(v0, zi));
        cz1 = _mm256_sub_epi64(cz1, _mm256_cmpeq_epi64(v1, zi));
        mn0 = _mm256_blendv_epi8(mn0, v0, _mm256_cmpgt_epi64(mn0, v0));
        mn1 = _mm256_blendv_epi8(mn1, v1, _mm256_cmpgt_epi64(mn1, v1));
        mx0 = _mm256_blendv_epi8(mx0, v0, _mm256_cmpgt_epi64(v0, mx0));
        mx1 = _mm256_blendv_epi8(mx1, v1, _mm256_cmpgt_epi64(v1, mx1));
    }
    int64_t a[8], c[8];
    _mm256_storeu_si256((__m256i *)a, mn0);
    _mm256_storeu_si256((__m256i *)(a + 4), mn1);
    _mm256_storeu_si256((__m256i *)c, mx0);
    _mm256_storeu_si256((__m256i *)(c + 4), mx1);
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int j = 0; j < 8; j++) {
        lo = a[j] < lo ? a[j] : lo;
        hi = c[j] > hi ? c[j] : hi;
    }
    p->nfin = n;
    p->zero = (uint64_t)hsum_epi64(_mm256_add_epi64(cz0, cz1));
    p->min = n ? (double)lo : INFINITY;
    p->max = n ? (double)hi : -INFINITY;
}

/* Bytes: sum by vpsadbw, squares by vpmaddwd on the zero-extended halves
 * (an int32 lane gains at most 4 * 255^2 per 32 bytes: 66.6 M per 8 KiB),
 * zero counts in byte lanes folded every 128 vectors. */
static void stats_u8(const uint8_t *x, size_t n, struct u8_out *o)
{
    const __m256i zi = _mm256_setzero_si256();
    __m256i s1 = zi, s2 = zi, zc = zi, z64 = zi;
    __m256i mn = _mm256_set1_epi8((char)0xff), mx = zi;
    for (size_t i = 0; i < n; i += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(x + i));
        s1 = _mm256_add_epi64(s1, _mm256_sad_epu8(v, zi));
        __m256i lo = _mm256_unpacklo_epi8(v, zi), hi = _mm256_unpackhi_epi8(v, zi);
        s2 = _mm256_add_epi32(s2, _mm256_add_epi32(_mm256_madd_epi16(lo, lo),
                                                   _mm256_madd_epi16(hi, hi)));
        zc = _mm256_sub_epi8(zc, _mm256_cmpeq_epi8(v, zi));
        mn = _mm256_min_epu8(mn, v);
        mx = _mm256_max_epu8(mx, v);
        if ((i & (127 * 32)) == 127 * 32) {
            z64 = _mm256_add_epi64(z64, _mm256_sad_epu8(zc, zi));
            zc = zi;
        }
    }
    z64 = _mm256_add_epi64(z64, _mm256_sad_epu8(zc, zi));
    o->s1 = hsum_epi64(s1);
    o->s2 = hsum_epi32(s2);
    o->zero = hsum_epi64(z64);
    uint8_t a[32], b[32];
    _mm256_storeu_si256((__m256i *)a, mn);
    _mm256_storeu_si256((__m256i *)b, mx);
    o->min = 255;
    o->max = 0;
    for (int j = 0; j < 32; j++) {
        o->min = a[j] < o->min ? a[j] : o->min;
        o->max = b[j] > o->max ? b[j] : o->max;
    }
}

/* Bytes, HEALTH: stats_u8 without the sums (zero counts, min, max: three
 * operations a vector, not ten), for MPI byte buffers and the like. */
static void health_u8(const uint8_t *x, size_t n, struct u8_out *o)
{
    const __m256i zi = _mm256_setzero_si256();
    /* n <= 8192: a byte lane counts at most 128 zeros, no fold needed */
    __m256i zc0 = zi, zc1 = zi;
    __m256i mn0 = _mm256_set1_epi8((char)0xff), mx0 = zi, mn1 = mn0, mx1 = zi;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(x + i));
        __m256i w = _mm256_loadu_si256((const __m256i *)(x + i + 32));
        zc0 = _mm256_sub_epi8(zc0, _mm256_cmpeq_epi8(v, zi));
        zc1 = _mm256_sub_epi8(zc1, _mm256_cmpeq_epi8(w, zi));
        mn0 = _mm256_min_epu8(mn0, v);
        mx0 = _mm256_max_epu8(mx0, v);
        mn1 = _mm256_min_epu8(mn1, w);
        mx1 = _mm256_max_epu8(mx1, w);
    }
    if (i < n) { /* the last 32 */
        __m256i v = _mm256_loadu_si256((const __m256i *)(x + i));
        zc0 = _mm256_sub_epi8(zc0, _mm256_cmpeq_epi8(v, zi));
        mn0 = _mm256_min_epu8(mn0, v);
        mx0 = _mm256_max_epu8(mx0, v);
    }
    o->s1 = o->s2 = 0;
    o->zero = hsum_epi64(_mm256_add_epi64(_mm256_sad_epu8(zc0, zi), _mm256_sad_epu8(zc1, zi)));
    uint8_t a[32], b[32];
    _mm256_storeu_si256((__m256i *)a, _mm256_min_epu8(mn0, mn1));
    _mm256_storeu_si256((__m256i *)b, _mm256_max_epu8(mx0, mx1));
    o->min = 255;
    o->max = 0;
    for (int j = 0; j < 32; j++) {
        o->min = a[j] < o->min ? a[j] : o->min;
        o->max = b[j] > o->max ? b[j] : o->max;
    }
}

/* ------------------------------------------------------------------------ */
/* float64                                                                   */
/* ------------------------------------------------------------------------ */

static int any_above_f64(const double *x, size_t n, int64_t limit)
{
    const __m256i absm = _mm256_set1_epi64x(F64_ABS), lim = _mm256_set1_epi64x(limit);
    __m256i r = _mm256_setzero_si256();
    for (size_t i = 0; i < n; i += 4) {
        __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), absm);
        r = _mm256_or_si256(r, _mm256_cmpgt_epi64(a, lim));
    }
    return !_mm256_testz_si256(r, r);
}

static int health_f64(const double *x, size_t n, struct part *p)
{
    const __m256d z = _mm256_setzero_pd();
    __m256i c0 = _mm256_setzero_si256(), c1 = c0, r0 = c0, r1 = c0;
    __m256d mn0 = _mm256_set1_pd(INFINITY), mx0 = _mm256_set1_pd(-INFINITY);
    __m256d mn1 = mn0, mx1 = mx0;
    for (size_t i = 0; i < n; i += 8) {
        __m256d v = _mm256_loadu_pd(x + i), w = _mm256_loadu_pd(x + i + 4);
        r0 = _mm256_or_si256(r0, _mm256_castpd_si256(_mm256_sub_pd(v, v)));
        r1 = _mm256_or_si256(r1, _mm256_castpd_si256(_mm256_sub_pd(w, w)));
        c0 = _mm256_sub_epi64(c0, _mm256_castpd_si256(_mm256_cmp_pd(v, z, _CMP_EQ_OQ)));
        c1 = _mm256_sub_epi64(c1, _mm256_castpd_si256(_mm256_cmp_pd(w, z, _CMP_EQ_OQ)));
        mn0 = _mm256_min_pd(v, mn0);
        mx0 = _mm256_max_pd(v, mx0);
        mn1 = _mm256_min_pd(w, mn1);
        mx1 = _mm256_max_pd(w, mx1);
    }
    r0 = _mm256_or_si256(r0, r1);
    if (!_mm256_testz_si256(r0, r0))
        return 1;
    p->nfin = n;
    p->zero = hsum_epi64(_mm256_add_epi64(c0, c1));
    minmax_pd(_mm256_min_pd(mn0, mn1), _mm256_max_pd(mx0, mx1), p);
    return 0;
}

static int counts_f64(const double *x, size_t n, int full, struct part *p)
{
    if (!full)
        return health_f64(x, n, p);
    const __m256i absm = _mm256_set1_epi64x(F64_ABS), zero = _mm256_setzero_si256();
    const __m256i t14 = _mm256_set1_epi64x(F64_BELOW_TINY), t16 = _mm256_set1_epi64x(F64_F16MAX);
    __m256i c_nz = zero, c_ge = zero, c_o16 = zero;
    __m256d mn = _mm256_set1_pd(INFINITY), mx = _mm256_set1_pd(-INFINITY);
    for (size_t i = 0; i < n; i += 4) {
        __m256d v = _mm256_loadu_pd(x + i);
        __m256i a = _mm256_and_si256(_mm256_castpd_si256(v), absm);
        c_nz = _mm256_sub_epi64(c_nz, _mm256_cmpgt_epi64(a, zero));
        c_ge = _mm256_sub_epi64(c_ge, _mm256_cmpgt_epi64(a, t14));
        c_o16 = _mm256_sub_epi64(c_o16, _mm256_cmpgt_epi64(a, t16));
        mn = _mm256_min_pd(v, mn);
        mx = _mm256_max_pd(v, mx);
    }
    uint64_t over16 = hsum_epi64(c_o16);
    if (over16 > 0 && any_above_f64(x, n, F64_BF16MAX))
        return 1;
    p->nfin = n;
    p->zero = n - hsum_epi64(c_nz);
    p->tiny = n - hsum_epi64(c_ge);
    p->over16 = over16;
    minmax_pd(mn, mx, p);
    return 0;
}

static void sums_f64(const double *x, size_t n, double k, lane_sums s)
{
    const __m256d one = _mm256_set1_pd(1.0), nk = _mm256_set1_pd(-k);
    const __m256d absd = _mm256_castsi256_pd(_mm256_set1_epi64x(F64_ABS));
    __m256d s1 = _mm256_loadu_pd(s[0]), s2 = _mm256_loadu_pd(s[1]), sa = _mm256_loadu_pd(s[2]);
    for (size_t i = 0; i < n; i += 8) {
        __m256d xl = _mm256_loadu_pd(x + i), xh = _mm256_loadu_pd(x + i + 4);
        __m256d dl = _mm256_fmadd_pd(xl, one, nk), dh = _mm256_add_pd(xh, nk);
        s1 = _mm256_fmadd_pd(_mm256_add_pd(dl, dh), one, s1);
        s2 = _mm256_add_pd(s2, _mm256_fmadd_pd(_mm256_mul_pd(dl, dl), one, _mm256_mul_pd(dh, dh)));
        sa = _mm256_fmadd_pd(_mm256_add_pd(_mm256_and_pd(xl, absd), _mm256_and_pd(xh, absd)),
                             one, sa);
    }
    sums_store(s, s1, s2, sa);
}

static void masked_counts_f64(const double *x, size_t n, struct part *p)
{
    const __m256i absm = _mm256_set1_epi64x(F64_ABS), zero = _mm256_setzero_si256();
    const __m256i t14 = _mm256_set1_epi64x(F64_BELOW_TINY), t16 = _mm256_set1_epi64x(F64_F16MAX);
    const __m256i tbf = _mm256_set1_epi64x(F64_BF16MAX), tmax = _mm256_set1_epi64x(F64_DBLMAX);
    const __m256i tinf = _mm256_set1_epi64x(F64_INF);
    const __m256i ninf = _mm256_set1_epi64x((int64_t)0xfff0000000000000ULL);
    __m256i c[7];
    for (int q = 0; q < 7; q++)
        c[q] = zero;
    for (size_t i = 0; i < n; i += 4) {
        __m256i bits = _mm256_loadu_si256((const __m256i *)(x + i));
        __m256i a = _mm256_and_si256(bits, absm);
        c[0] = _mm256_sub_epi64(c[0], _mm256_cmpgt_epi64(a, zero));
        c[1] = _mm256_sub_epi64(c[1], _mm256_cmpgt_epi64(a, t14));
        c[2] = _mm256_sub_epi64(c[2], _mm256_cmpgt_epi64(a, t16));
        c[3] = _mm256_sub_epi64(c[3], _mm256_cmpgt_epi64(a, tbf));
        c[4] = _mm256_sub_epi64(c[4], _mm256_cmpgt_epi64(a, tmax));
        c[5] = _mm256_sub_epi64(c[5], _mm256_cmpgt_epi64(a, tinf));
        c[6] = _mm256_sub_epi64(c[6], _mm256_cmpeq_epi64(bits, ninf));
    }
    uint64_t nonfin = hsum_epi64(c[4]);
    p->nan = hsum_epi64(c[5]);
    p->ninf = hsum_epi64(c[6]);
    p->pinf = nonfin - p->nan - p->ninf;
    p->nfin = n - nonfin;
    p->zero = n - hsum_epi64(c[0]);
    p->tiny = n - hsum_epi64(c[1]);
    p->over16 = hsum_epi64(c[2]) - nonfin;
    p->overbf = hsum_epi64(c[3]) - nonfin;
}

static void masked_f64(const double *x, size_t n, int full, double k, struct part *p,
                       lane_sums s)
{
    p->min = INFINITY;
    p->max = -INFINITY;
    masked_counts_f64(x, n, p);
    const __m256i absm = _mm256_set1_epi64x(F64_ABS), tinf = _mm256_set1_epi64x(F64_INF);
    const __m256d pinf = _mm256_set1_pd(INFINITY), minf = _mm256_set1_pd(-INFINITY);
    const __m256d one = _mm256_set1_pd(1.0), nk = _mm256_set1_pd(-k);
    const __m256d absd = _mm256_castsi256_pd(absm);
    __m256d mn = pinf, mx = minf, s1 = _mm256_setzero_pd(), s2 = s1, sa = s1;
    if (full) {
        s1 = _mm256_loadu_pd(s[0]);
        s2 = _mm256_loadu_pd(s[1]);
        sa = _mm256_loadu_pd(s[2]);
    }
    for (size_t i = 0; i < n; i += 8) {
        __m256d xl = _mm256_loadu_pd(x + i), xh = _mm256_loadu_pd(x + i + 4);
        __m256d ml = _mm256_castsi256_pd(
            _mm256_cmpgt_epi64(tinf, _mm256_and_si256(_mm256_castpd_si256(xl), absm)));
        __m256d mh = _mm256_castsi256_pd(
            _mm256_cmpgt_epi64(tinf, _mm256_and_si256(_mm256_castpd_si256(xh), absm)));
        mn = _mm256_min_pd(_mm256_blendv_pd(pinf, xl, ml), mn);
        mn = _mm256_min_pd(_mm256_blendv_pd(pinf, xh, mh), mn);
        mx = _mm256_max_pd(_mm256_blendv_pd(minf, xl, ml), mx);
        mx = _mm256_max_pd(_mm256_blendv_pd(minf, xh, mh), mx);
        if (!full)
            continue;
        __m256d dl = _mm256_and_pd(_mm256_fmadd_pd(xl, one, nk), ml);
        __m256d dh = _mm256_and_pd(_mm256_add_pd(xh, nk), mh);
        s1 = _mm256_fmadd_pd(_mm256_add_pd(dl, dh), one, s1);
        s2 = _mm256_add_pd(s2, _mm256_fmadd_pd(_mm256_mul_pd(dl, dl), one, _mm256_mul_pd(dh, dh)));
        __m256d al = _mm256_and_pd(_mm256_and_pd(xl, absd), ml);
        __m256d ah = _mm256_and_pd(_mm256_and_pd(xh, absd), mh);
        sa = _mm256_fmadd_pd(_mm256_add_pd(al, ah), one, sa);
    }
    minmax_pd(mn, mx, p);
    if (full)
        sums_store(s, s1, s2, sa);
}

/* ------------------------------------------------------------------------ */
/* fp16 / bf16 conversions (element-wise identical to the scalar ones)       */
/* ------------------------------------------------------------------------ */

static void dec_f16(const unsigned char *raw, size_t n, float *out)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(raw + 2 * i))));
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, raw + 2 * i, 2);
        out[i] = tft_f16_to_f32(h);
    }
}

static void dec_bf16(const unsigned char *raw, size_t n, float *out)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(raw + 2 * i)));
        _mm256_storeu_si256((__m256i *)(out + i), _mm256_slli_epi32(w, 16));
    }
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, raw + 2 * i, 2);
        out[i] = tft_bf16_to_f32(h);
    }
}

/* Immediate 0: round to nearest even whatever MXCSR says. */
static void enc_f16(const float *in, size_t n, uint16_t *out)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), 0));
    for (; i < n; i++)
        out[i] = tft_f32_to_f16(in[i]);
}

static void enc_bf16(const float *in, size_t n, uint16_t *out)
{
    const __m256i absm = _mm256_set1_epi32(F32_ABS), tinf = _mm256_set1_epi32(F32_INF);
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
    const __m256i quiet = _mm256_set1_epi32(0x0040);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(in + i));
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, absm), tinf);
        __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(bias, lsb)), 16);
        __m256i q = _mm256_or_si256(_mm256_srli_epi32(x, 16), quiet);
        r = _mm256_blendv_epi8(r, q, nan);
        r = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128((__m128i *)(out + i), _mm256_castsi256_si128(r));
    }
    for (; i < n; i++)
        out[i] = tft_f32_to_bf16(in[i]);
}

const struct stats_kernels stats_kernels_avx2 = {
    .name = "avx2",
    .counts_f32 = counts_f32,
    .sums_f32 = sums_f32,
    .masked_f32 = masked_f32,
    .counts_f64 = counts_f64,
    .sums_f64 = sums_f64,
    .masked_f64 = masked_f64,
    .fast_f32 = fast_f32,
    .stats_u8 = stats_u8,
    .health_u8 = health_u8,
    .fast_h16 = fast_h16,
    .health_h16 = health_h16,
    .health_i32 = health_i32,
    .health_i64 = health_i64,
    .dec_f16 = dec_f16,
    .dec_bf16 = dec_bf16,
    .enc_f16 = enc_f16,
    .enc_bf16 = enc_bf16,
};
