/*
 * stats_codec_bulk.c — the bulk fp16/bf16 conversions to and from float
 * (tft_stats.h: tft_f16_to_f32_n and the three others): each runs the
 * selected kernel set's vector loop (stats_isa.c), element-wise identical
 * to the scalar conversions of stats_codec.c. Apart from them because the
 * kernel sets call those scalar ones: one way, codec_bulk → isa → kernels
 * → codec.
 */
#include "stats_internal.h"

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
