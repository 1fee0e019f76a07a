/*
 * stats_generic.c — the portable C statistics kernels (stats_internal.h):
 * the reference lane structure every kernel set computes bit for bit, and
 * the kernel set on CPUs without AVX2 (or when a test forces it).
 *
 * Compiled with -ffp-contract=off, like the AVX2 kernels, so that no
 * mul+add becomes an FMA and the two sets round identically.
 */
#include <math.h>
#include <string.h>

#include "stats_internal.h"
#include "stats_scalar_internal.h"

/* Lane sums of n elements (a multiple of 8) about k; non-finite elements
 * add +0.0, exactly as the AVX2 kernels' masks do. */
static ALWAYS_INLINE void gen_sums(const void *x, size_t n, int is64, double k, lane_sums s)
{
    for (size_t i = 0; i < n; i += 8) {
        for (int j = 0; j < 4; j++) {
            double lo = load_el(x, i + (size_t)j, is64);
            double hi = load_el(x, i + (size_t)j + 4, is64);
            int flo = isfinite(lo), fhi = isfinite(hi);
            double dl = flo ? lo - k : 0.0, dh = fhi ? hi - k : 0.0;
            double al = flo ? fabs(lo) : 0.0, ah = fhi ? fabs(hi) : 0.0;
            s[0][j] += dl + dh;
            s[1][j] += dl * dl + dh * dh;
            s[2][j] += al + ah;
        }
    }
}

static ALWAYS_INLINE void gen_masked(const void *x, size_t n, int is64, int full, double k,
                                     struct part *p, lane_sums s)
{
    part_init(p);
    for (size_t i = 0; i < n; i++)
        classify(load_el(x, i, is64), p);
    if (full)
        gen_sums(x, n, is64, k, s);
}

/* The generic counts pass classifies everything, so it never asks for the
 * masked pass. */
static int gen_counts_f32(const float *x, size_t n, int full, struct part *p)
{
    gen_masked(x, n, 0, 0, 0.0, p, NULL);
    (void)full;
    return 0;
}

static void gen_sums_f32(const float *x, size_t n, double k, lane_sums s)
{
    gen_sums(x, n, 0, k, s);
}

static void gen_masked_f32(const float *x, size_t n, int full, double k, struct part *p,
                           lane_sums s)
{
    gen_masked(x, n, 0, full, k, p, s);
}

static int gen_counts_f64(const double *x, size_t n, int full, struct part *p)
{
    gen_masked(x, n, 1, 0, 0.0, p, NULL);
    (void)full;
    return 0;
}

static void gen_sums_f64(const double *x, size_t n, double k, lane_sums s)
{
    gen_sums(x, n, 1, k, s);
}

static void gen_masked_f64(const double *x, size_t n, int full, double k, struct part *p,
                           lane_sums s)
{
    gen_masked(x, n, 1, full, k, p, s);
}

/* The fused FULL pass, exactly as stats_internal.h defines it (and the AVX2
 * kernel computes it): float arithmetic throughout, fmaf for the squares. */
static void gen_fast_f32(const float *x, size_t n, float k, struct fast_out *o)
{
    float mn = INFINITY, mx = -INFINITY;
    uint64_t zero = 0, tiny = 0;
    double D[3][8] = { { 0 } };
    for (size_t i = 0; i < n;) {
        size_t end = n - i < FAST_RUN ? n : i + FAST_RUN;
        float s1[8] = { 0 }, q0[8] = { 0 }, q1[8] = { 0 }, la[8] = { 0 };
        for (; i < end; i += 16) {
            for (size_t j = 0; j < 8; j++) {
                float v0 = x[i + j], v1 = x[i + 8 + j];
                float d0 = v0 - k, d1 = v1 - k, a0 = fabsf(v0), a1 = fabsf(v1);
                zero += (a0 == 0.0f) + (a1 == 0.0f);
                tiny += (a0 < 0x1p-14f) + (a1 < 0x1p-14f);
                mn = v0 < mn ? v0 : mn;
                mn = v1 < mn ? v1 : mn;
                mx = v0 > mx ? v0 : mx;
                mx = v1 > mx ? v1 : mx;
                s1[j] += d0 + d1;
                q0[j] = fmaf(d0, d0, q0[j]);
                q1[j] = fmaf(d1, d1, q1[j]);
                la[j] += a0 + a1;
            }
        }
        for (int j = 0; j < 8; j++) {
            D[0][j] += (double)s1[j];
            D[1][j] += (double)(q0[j] + q1[j]);
            D[2][j] += (double)la[j];
        }
    }
    o->zero = zero;
    o->tiny = tiny;
    o->min = mn;
    o->max = mx;
    memcpy(o->lane, D, sizeof D);
}

static void gen_dec_f16(const unsigned char *raw, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, raw + 2 * i, 2);
        out[i] = f16_to_f32(h);
    }
}

static void gen_dec_bf16(const unsigned char *raw, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, raw + 2 * i, 2);
        out[i] = bf16_to_f32(h);
    }
}

static void gen_enc_f16(const float *in, size_t n, uint16_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = f32_to_f16(in[i]);
}

static void gen_enc_bf16(const float *in, size_t n, uint16_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = f32_to_bf16(in[i]);
}

const struct stats_kernels stats_kernels_generic = {
    .name = "generic",
    .counts_f32 = gen_counts_f32,
    .sums_f32 = gen_sums_f32,
    .masked_f32 = gen_masked_f32,
    .counts_f64 = gen_counts_f64,
    .sums_f64 = gen_sums_f64,
    .masked_f64 = gen_masked_f64,
    .fast_f32 = gen_fast_f32,
    .stats_u8 = gen_stats_u8,
    .dec_f16 = gen_dec_f16,
    .dec_bf16 = gen_dec_bf16,
    .enc_f16 = gen_enc_f16,
    .enc_bf16 = gen_enc_bf16,
};
