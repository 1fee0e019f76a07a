/*
 * stats_codec.c — fp16, bf16 and fp8 (E4M3FN, E5M2) conversions to and
 * from float (tft_stats.h): the scalar ones, bit-exact and independent of
 * the FPU's DAZ/FTZ state, and the bulk ones, which run the selected
 * kernel set's vector loops (stats_isa.c) with the same results.
 */
#include <math.h>
#include <string.h>

#include "stats_internal.h"

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
float tft_f16_to_f32(uint16_t h)
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
uint16_t tft_f32_to_f16(float f)
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

float tft_bf16_to_f32(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

/* The 256 values of each 8-bit float format, as constant expressions from
 * the bit fields (so built at compile time, shared by every thread):
 * E4M3FN (8 + m) * 2^(e-10), subnormal m * 2^-9, S.1111.111 NaN; E5M2
 * (4 + m) * 2^(e-17), subnormal m * 2^-16, exponent 31 Inf or NaN. Every
 * value has at most 4 significant bits, so each product is exact. NaNs are
 * the quiet NaN with the byte's sign. */
#define F8_R4(X, b) X(b), X((b) + 1), X((b) + 2), X((b) + 3)
#define F8_R16(X, b) F8_R4(X, b), F8_R4(X, (b) + 4), F8_R4(X, (b) + 8), F8_R4(X, (b) + 12)
#define F8_R64(X, b) F8_R16(X, b), F8_R16(X, (b) + 16), F8_R16(X, (b) + 32), F8_R16(X, (b) + 48)
#define F8_R256(X) F8_R64(X, 0), F8_R64(X, 64), F8_R64(X, 128), F8_R64(X, 192)
#define F8_SIGNED(b, mag) (((b) & 0x80) ? -(mag) : (mag))
#define E4M3_MAG(b)                                                                     \
    (((b) & 0x7f) == 0x7f ? NAN                                                         \
     : ((b) & 0x78)       ? (float)((8 + ((b) & 7)) << (((b) >> 3) & 15)) * 0x1p-10f    \
                          : (float)((b) & 7) * 0x1p-9f)
#define E5M2_MAG(b)                                                                     \
    (((b) & 0x7c) == 0x7c ? (((b) & 3) ? NAN : INFINITY)                                \
     : ((b) & 0x7c)       ? (float)((4ull + ((b) & 3)) << (((b) >> 2) & 31)) * 0x1p-17f \
                          : (float)((b) & 3) * 0x1p-16f)
#define E4M3_VAL(b) F8_SIGNED(b, E4M3_MAG(b))
#define E5M2_VAL(b) F8_SIGNED(b, E5M2_MAG(b))
static const float f8e4m3_values[256] = { F8_R256(E4M3_VAL) };
static const float f8e5m2_values[256] = { F8_R256(E5M2_VAL) };

float tft_f8e4m3_to_f32(uint8_t b) { return f8e4m3_values[b]; }

float tft_f8e5m2_to_f32(uint8_t b) { return f8e5m2_values[b]; }

void tft_f8e4m3_to_f32_n(const uint8_t *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = f8e4m3_values[in[i]];
}

void tft_f8e5m2_to_f32_n(const uint8_t *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = f8e5m2_values[in[i]];
}

/* Adding 0x7fff plus the lowest kept bit rounds to nearest even and carries
 * into the exponent (up to Inf) by itself. */
uint16_t tft_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x0040u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

void tft_f16_to_f32_n(const uint16_t *in, float *out, size_t n)
{
    stats_isa_kernels()->dec_f16((const unsigned char *)in, n, out);
}

void tft_bf16_to_f32_n(const uint16_t *in, float *out, size_t n)
{
    stats_isa_kernels()->dec_bf16((const unsigned char *)in, n, out);
}

void tft_f32_to_f16_n(const float *in, uint16_t *out, size_t n)
{
    stats_isa_kernels()->enc_f16(in, n, out);
}

void tft_f32_to_bf16_n(const float *in, uint16_t *out, size_t n)
{
    stats_isa_kernels()->enc_bf16(in, n, out);
}
