/*
 * stats_codec.c — fp16, bf16 and fp8 (E4M3FN, E5M2) conversions to and
 * from float (tft_stats.h): the scalar ones, bit-exact and independent of
 * the FPU's DAZ/FTZ state, and fp8's bulk ones (table lookups). The vector
 * kernels call the scalar ones for their tails; the fp16/bf16 bulk ones,
 * which run the selected kernel set's loops, are in stats_codec_bulk.c.
 */
#include <math.h>

#include "stats_internal.h"
#include "stats_scalar_internal.h"

float tft_f16_to_f32(uint16_t h) { return f16_to_f32(h); }

uint16_t tft_f32_to_f16(float f) { return f32_to_f16(f); }

float tft_bf16_to_f32(uint16_t h) { return bf16_to_f32(h); }

uint16_t tft_f32_to_bf16(float f) { return f32_to_bf16(f); }

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
const float stats_f8e4m3_values[256] = { F8_R256(E4M3_VAL) };
const float stats_f8e5m2_values[256] = { F8_R256(E5M2_VAL) };

float tft_f8e4m3_to_f32(uint8_t b) { return stats_f8e4m3_values[b]; }

float tft_f8e5m2_to_f32(uint8_t b) { return stats_f8e5m2_values[b]; }

void tft_f8e4m3_to_f32_n(const uint8_t *in, float *out, size_t n) { f8e4m3_to_f32_n(in, out, n); }

void tft_f8e5m2_to_f32_n(const uint8_t *in, float *out, size_t n) { f8e5m2_to_f32_n(in, out, n); }
