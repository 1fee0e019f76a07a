/*
 * stats_avx2_internal.h — what the two AVX2 kernel files share: the
 * thresholds as |x| bit patterns, the horizontal sums, the double path's
 * kernels of stats_avx2.c and the one-sweep kernels of stats_avx2_fast.c
 * that the kernel tables (stats_avx2.c, stats_avx512.c) name. Only for
 * files built with -mavx2 -mfma -mf16c (or more). Not installed.
 */
#ifndef TFT_STATS_AVX2_INTERNAL_H
#define TFT_STATS_AVX2_INTERNAL_H

#if !(defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
#error "stats_avx2_internal.h is for files compiled with -mavx2 -mfma -mf16c"
#endif

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "stats_internal.h"

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

static inline uint64_t hsum_epi32(__m256i v)
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
static inline void hsum_packed(__m256i v, uint64_t *a, uint64_t *b)
{
    int16_t t[16];
    _mm256_storeu_si256((__m256i *)t, v);
    for (int j = 0; j < 4; j++) {
        *a += (uint16_t)t[j] + (uint16_t)t[j + 8];
        *b += (uint16_t)t[j + 4] + (uint16_t)t[j + 12];
    }
}

static inline uint64_t hsum_epi64(__m256i v)
{
    int64_t t[4];
    _mm256_storeu_si256((__m256i *)t, v);
    return (uint64_t)(t[0] + t[1] + t[2] + t[3]);
}

/* stats_avx2.c: the double path's kernels (stats_internal.h), which the
 * AVX-512 table (stats_avx512.c) names too. */
int avx2_counts_f32(const float *x, size_t n, int full, struct part *p);
void avx2_sums_f32(const float *x, size_t n, double k, lane_sums s);
void avx2_masked_f32(const float *x, size_t n, int full, double k, struct part *p, lane_sums s);
int avx2_counts_f64(const double *x, size_t n, int full, struct part *p);
void avx2_sums_f64(const double *x, size_t n, double k, lane_sums s);
void avx2_masked_f64(const double *x, size_t n, int full, double k, struct part *p, lane_sums s);

/* stats_avx2_fast.c: the kernels of those names in stats_internal.h. */
int avx2_fast_int(const void *raw, size_t n, int i64, float k, struct fast_out *o);
void avx2_fast_f32(const float *x, size_t n, float k, struct fast_out *o);
void avx2_fast_h16(const void *raw, size_t n, int bf16, float k, struct fast_out *o);
int avx2_health_h16(const void *raw, size_t n, int bf16, struct part *p);
void avx2_health_i32(const void *raw, size_t n, struct part *p);
void avx2_health_i64(const void *raw, size_t n, struct part *p);
void avx2_stats_u8(const uint8_t *x, size_t n, struct u8_out *o);
void avx2_health_u8(const uint8_t *x, size_t n, struct u8_out *o);
void avx2_dec_f16(const unsigned char *raw, size_t n, float *out);
void avx2_dec_bf16(const unsigned char *raw, size_t n, float *out);
void avx2_enc_f16(const float *in, size_t n, uint16_t *out);
void avx2_enc_bf16(const float *in, size_t n, uint16_t *out);

#endif /* TFT_STATS_AVX2_INTERNAL_H */
