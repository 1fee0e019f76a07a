/*
 * stats_avx2.c — the AVX2/FMA/F16C statistics kernels (stats_internal.h):
 * the double path's kernels over float and double blocks (counts, lane
 * sums, masked), and the kernel table, which also names the one-sweep
 * kernels of stats_avx2_fast.c.
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
#include "stats_avx2_internal.h"
#include "stats_internal.h"

#if !(defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
#error "stats_avx2.c must be compiled with -mavx2 -mfma -mf16c"
#endif

#include <immintrin.h>
#include <math.h>

/* ------------------------------------------------------------------------ */
/* Horizontal helpers                                                        */
/* ------------------------------------------------------------------------ */

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
int avx2_counts_f32(const float *x, size_t n, int full, struct part *p)
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
void avx2_sums_f32(const float *x, size_t n, double k, lane_sums s)
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
void avx2_masked_f32(const float *x, size_t n, int full, double k, struct part *p, lane_sums s)
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

int avx2_counts_f64(const double *x, size_t n, int full, struct part *p)
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

void avx2_sums_f64(const double *x, size_t n, double k, lane_sums s)
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

void avx2_masked_f64(const double *x, size_t n, int full, double k, struct part *p,
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

const struct stats_kernels stats_kernels_avx2 = {
    .name = "avx2",
    .counts_f32 = avx2_counts_f32,
    .sums_f32 = avx2_sums_f32,
    .masked_f32 = avx2_masked_f32,
    .counts_f64 = avx2_counts_f64,
    .sums_f64 = avx2_sums_f64,
    .masked_f64 = avx2_masked_f64,
    .fast_f32 = avx2_fast_f32,
    .stats_u8 = avx2_stats_u8,
    .health_u8 = avx2_health_u8,
    .fast_h16 = avx2_fast_h16,
    .health_h16 = avx2_health_h16,
    .fast_int = avx2_fast_int,
    .health_i32 = avx2_health_i32,
    .health_i64 = avx2_health_i64,
    .dec_f16 = avx2_dec_f16,
    .dec_bf16 = avx2_dec_bf16,
    .enc_f16 = avx2_enc_f16,
    .enc_bf16 = avx2_enc_bf16,
};
