/*
 * stats_avx2_fast.c — the AVX2/FMA/F16C kernels that take a block in one
 * sweep (stats_internal.h): the fused FULL pass over f32, over raw
 * int32/int64 and over raw fp16/bf16, converted in registers, HEALTH on raw 16-bit, int32 and int64
 * patterns, the exact byte statistics, and the fp16/bf16 conversions.
 * stats_avx2.c holds the double path's kernels and the kernel table.
 *
 * Built with -mavx2 -mfma -mf16c -ffp-contract=off on x86-64 only, like
 * stats_avx2.c; reached only through the table, on CPUs that have all
 * three. Each kernel computes exactly what the generic one computes
 * (stats_generic.c), bit for bit (tests check it).
 */
#include "stats_avx2_internal.h"
#include "stats_internal.h"

#if !(defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
#error "stats_avx2_fast.c must be compiled with -mavx2 -mfma -mf16c"
#endif

#include <immintrin.h>
#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* The fused FULL pass                                                       */
/* ------------------------------------------------------------------------ */

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

/* One group of 16 elements into the fused pass's float sums and squares
 * (stats_internal.h): v0 holds elements 0-7, v1 8-15; d = x - k, where
 * shifted (k == 0 needs no subtraction). Both fused kernels add through
 * here, so they round alike; each adds |x| to la itself. */
static inline __attribute__((always_inline)) void fast_add(__m256 v0, __m256 v1, __m256 kv, int shifted,
                                                           __m256 *s1, __m256 *q0, __m256 *q1)
{
    __m256 d0 = v0, d1 = v1;
    if (shifted) {
        d0 = _mm256_sub_ps(v0, kv);
        d1 = _mm256_sub_ps(v1, kv);
    }
    *s1 = _mm256_add_ps(*s1, _mm256_add_ps(d0, d1));
    *q0 = _mm256_fmadd_ps(d0, d0, *q0);
    *q1 = _mm256_fmadd_ps(d1, d1, *q1);
}

/* Element kinds the fused float sweep reads (a compile-time constant in
 * each instance of fast_f32_body). */
enum { SRC_F32, SRC_I32, SRC_I64 };

/* Eight elements of kind src at p (any alignment) as floats, converted as
 * the (float) cast converts them. int64 has no vector conversion in AVX2:
 * the low halves convert as int32, which is exact for elements within
 * +-2^31; *bad collects the elements whose high half is not the low
 * half's sign extension (beyond that range). */
static inline __attribute__((always_inline)) __m256 load8(int src, const unsigned char *p, __m256i *bad)
{
    if (src == SRC_F32)
        return _mm256_loadu_ps((const float *)p);
    if (src == SRC_I32)
        return _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)p));
    __m256 a = _mm256_loadu_ps((const float *)p), b = _mm256_loadu_ps((const float *)(p + 32));
    __m256i lo = _mm256_castps_si256(_mm256_shuffle_ps(a, b, 0x88)); /* a0 a1 b0 b1 | a2 a3 b2 b3 */
    __m256i hi = _mm256_castps_si256(_mm256_shuffle_ps(a, b, 0xdd));
    *bad = _mm256_or_si256(*bad, _mm256_xor_si256(hi, _mm256_srai_epi32(lo, 31)));
    return _mm256_cvtepi32_ps(_mm256_permute4x64_epi64(lo, 0xd8));
}

/* Returns 1 when an int64 element was out of load8's range (o is then
 * incomplete), else 0. */
static inline __attribute__((always_inline)) int
fast_f32_body(const unsigned char *x, int src, size_t n, float k, int shifted, struct fast_out *o)
{
    const size_t esz = src == SRC_I64 ? 8 : 4;
    __m256i bad = _mm256_setzero_si256();
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
            __m256 v0 = load8(src, x + i * esz, &bad), v1 = load8(src, x + (i + 8) * esz, &bad);
            __m256i a0 = _mm256_and_si256(_mm256_castps_si256(v0), absm);
            __m256i a1 = _mm256_and_si256(_mm256_castps_si256(v1), absm);
            __m256i c0 = _mm256_packs_epi32(_mm256_cmpgt_epi32(a0, zi), _mm256_cmpgt_epi32(a0, t14));
            __m256i c1 = _mm256_packs_epi32(_mm256_cmpgt_epi32(a1, zi), _mm256_cmpgt_epi32(a1, t14));
            cnt = _mm256_sub_epi16(cnt, _mm256_add_epi16(c0, c1));
            mn = _mm256_min_ps(_mm256_min_ps(v0, v1), mn);
            mx = _mm256_max_ps(_mm256_max_ps(v0, v1), mx);
            fast_add(v0, v1, kv, shifted, &s1, &q0, &q1);
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
    return !_mm256_testz_si256(bad, bad);
}

/* k == 0 skips the subtraction, which would change nothing (x - 0 == x). */
void avx2_fast_f32(const float *x, size_t n, float k, struct fast_out *o)
{
    if (k == 0.0f)
        fast_f32_body((const unsigned char *)x, SRC_F32, n, 0.0f, 0, o);
    else
        fast_f32_body((const unsigned char *)x, SRC_F32, n, k, 1, o);
}

/* fast_f32 on int32 / int64 converted in registers (stats_internal.h):
 * no staging buffer, so no store and reload of every element. */
int avx2_fast_int(const void *raw, size_t n, int i64, float k, struct fast_out *o)
{
    const unsigned char *x = raw;
    if (i64)
        return k == 0.0f ? fast_f32_body(x, SRC_I64, n, 0.0f, 0, o) : fast_f32_body(x, SRC_I64, n, k, 1, o);
    return k == 0.0f ? fast_f32_body(x, SRC_I32, n, 0.0f, 0, o) : fast_f32_body(x, SRC_I32, n, k, 1, o);
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
            fast_add(v0, v1, kv, shifted, &s1, &q0, &q1);
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

void avx2_fast_h16(const void *raw, size_t n, int bf16, float k, struct fast_out *o)
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
int avx2_health_h16(const void *raw, size_t n, int bf16, struct part *p)
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

void avx2_health_i32(const void *raw, size_t n, struct part *p)
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
void avx2_health_i64(const void *raw, size_t n, struct part *p)
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
void avx2_stats_u8(const uint8_t *x, size_t n, struct u8_out *o)
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
void avx2_health_u8(const uint8_t *x, size_t n, struct u8_out *o)
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
/* fp16 / bf16 conversions (element-wise identical to the scalar ones)       */
/* ------------------------------------------------------------------------ */

void avx2_dec_f16(const unsigned char *raw, size_t n, float *out)
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

void avx2_dec_bf16(const unsigned char *raw, size_t n, float *out)
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
void avx2_enc_f16(const float *in, size_t n, uint16_t *out)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), 0));
    for (; i < n; i++)
        out[i] = tft_f32_to_f16(in[i]);
}

void avx2_enc_bf16(const float *in, size_t n, uint16_t *out)
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
