/*
 * stats_scalar_internal.h — one element the reference way, shared by the
 * portable kernels (stats_generic.c) and the driver's scalar code (the
 * tails and staging of stats_block.c, the tiny path of stats.c): the
 * fp16/bf16/fp8 conversions (stats_codec.c exports them as tft_f16_to_f32
 * ...), the fp16/bf16 thresholds, the element load, classify (the counts,
 * min and max of one element) and the first finite element. Everything is
 * static inline, so each file's loops inline these helpers as the single
 * stats.c did (the same machine code). Not installed.
 */
#ifndef TFT_STATS_SCALAR_INTERNAL_H
#define TFT_STATS_SCALAR_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "stats_internal.h"

#define F16_MAX 65504.0
#define F16_TINY 0x1p-14              /* smallest normal fp16 */
#define BF16_MAX 0x1.fep127           /* 3.3895313892515355e38 */

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* The scalar fp16/bf16 conversions of tft_stats.h (the same functions;
 * stats_codec.c exports them), inline here for the kernels' loops. */

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Integer-only except for the subnormal case, which converts an integer
 * below 1024 exactly; so DAZ/FTZ never matter. NaNs come out quiet (as
 * F16C's vcvtph2ps makes them), keeping sign and payload. */
static inline float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    if (em >= 0x7c00u) {
        uint32_t m = (em & 0x3ffu) << 13;
        return f32_from_bits(sign | 0x7f800000u | m | (m ? 0x00400000u : 0));
    }
    if (em >= 0x0400u)
        return f32_from_bits(sign | ((em << 13) + 0x38000000u));
    return f32_from_bits(sign | f32_bits((float)em * 0x1p-24f));
}

/* Round to nearest even on the bit pattern; the same results as F16C's
 * vcvtps2ph with rounding immediate 0. */
static inline uint16_t f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)                    /* NaN: quiet, top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u)                   /* >= 65520 rounds to Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) {                 /* normal fp16 */
        uint32_t h = (ax - 0x38000000u) >> 13, r = ax & 0x1fffu;
        h += (r > 0x1000u) || (r == 0x1000u && (h & 1u));
        return (uint16_t)(sign | h);
    }
    if (ax <= 0x33000000u)                   /* <= 2^-25 rounds to 0 */
        return sign;
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    unsigned s = 126u - (ax >> 23);          /* 14..24 */
    uint32_t h = mant >> s, r = mant & ((1u << s) - 1u), half = 1u << (s - 1u);
    h += (r > half) || (r == half && (h & 1u));
    return (uint16_t)(sign | h);
}

static inline float bf16_to_f32(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

/* Adding 0x7fff plus the lowest kept bit rounds to nearest even and carries
 * into the exponent (up to Inf) by itself. */
static inline uint16_t f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x0040u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* The 256 values of each fp8 format (stats_codec.c), and the bulk
 * conversions of tft_stats.h through them, inline for the block layer. */
extern const float stats_f8e4m3_values[256];
extern const float stats_f8e5m2_values[256];

static inline void f8e4m3_to_f32_n(const uint8_t *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = stats_f8e4m3_values[in[i]];
}

static inline void f8e5m2_to_f32_n(const uint8_t *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = stats_f8e5m2_values[in[i]];
}

static ALWAYS_INLINE double load_el(const void *x, size_t i, int is64)
{
    return is64 ? ((const double *)x)[i] : (double)((const float *)x)[i];
}

static inline void part_init(struct part *p)
{
    memset(p, 0, sizeof *p);
    p->min = INFINITY;
    p->max = -INFINITY;
}

/* Counts one element of any class into p (min and max over finite ones).
 * Returns 1 when v is finite. */
static ALWAYS_INLINE int classify(double v, struct part *p)
{
    double a = fabs(v);
    if (isnan(v)) {
        p->nan++;
        return 0;
    }
    if (isinf(v)) {
        if (v > 0)
            p->pinf++;
        else
            p->ninf++;
        return 0;
    }
    p->nfin++;
    p->zero += v == 0.0;
    p->tiny += a < F16_TINY;
    p->over16 += a > F16_MAX;
    p->overbf += a > BF16_MAX;
    p->min = v < p->min ? v : p->min;
    p->max = v > p->max ? v : p->max;
    return 1;
}

static inline double first_finite(const void *x, size_t n, int is64)
{
    for (size_t i = 0; i < n; i++) {
        double v = load_el(x, i, is64);
        if (isfinite(v))
            return v;
    }
    return 0.0;
}

/* The generic kernel stats_u8 (stats_internal.h), here because the block
 * layer takes the tail of every byte block through it too. */
static inline void gen_stats_u8(const uint8_t *x, size_t n, struct u8_out *o)
{
    uint64_t zero = 0, s1 = 0, s2 = 0;
    uint8_t mn = 255, mx = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned v = x[i];
        zero += v == 0;
        s1 += v;
        s2 += v * v;
        mn = v < mn ? (uint8_t)v : mn;
        mx = v > mx ? (uint8_t)v : mx;
    }
    o->zero = zero;
    o->s1 = s1;
    o->s2 = s2;
    o->min = mn;
    o->max = mx;
}

#endif /* TFT_STATS_SCALAR_INTERNAL_H */
