/*
 * test_half.c — fp16/bf16 conversions: decoding of all 65536 patterns of
 * each format against a reference decoder written with ldexp, encoding
 * against a reference that searches for the nearest value (ties to even,
 * overflow to Inf, NaN kept), and the bulk forms (generic and AVX2) against
 * the scalar ones, also under a hostile MXCSR (DAZ, FTZ, round-up). fp8
 * (E4M3FN, E5M2) decoding: all 256 patterns of each against a reference
 * decoder written with ldexp.
 */
#define _GNU_SOURCE
#include <fenv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "stats_internal.h"
#include "tft_stats.h"

#include "tft_test.h"
#include "tft_test_rng.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng(void) { return tft_test_rng(&rng_state); }

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* With hostile set, a hostile MXCSR (DAZ, FTZ, round up), which the bulk
 * conversions must ignore; returns the caller's state for mxcsr_restore. */
static unsigned mxcsr_hostile(int hostile)
{
#if defined(__x86_64__)
    unsigned saved = _mm_getcsr();
    if (hostile)
        _mm_setcsr(saved | 0x8040u | _MM_ROUND_UP);
    return saved;
#else
    (void)hostile;
    return 0;
#endif
}

static void mxcsr_restore(unsigned saved)
{
#if defined(__x86_64__)
    _mm_setcsr(saved);
#else
    (void)saved;
#endif
}

/* A binary format with e exponent bits and m mantissa bits (fp16: 5, 10;
 * bf16: 8, 7). */
struct fmt {
    const char *name;
    int ebits, mbits;
    float (*dec)(uint16_t);
    uint16_t (*enc)(float);
    void (*dec_n)(const uint16_t *, float *, size_t);
    void (*enc_n)(const float *, uint16_t *, size_t);
};

static double ref_decode(const struct fmt *f, uint16_t h)
{
    int emax = (1 << f->ebits) - 1, bias = emax / 2;
    int e = (h >> f->mbits) & emax, m = h & ((1 << f->mbits) - 1);
    double v = e == emax ? (m ? NAN : INFINITY)
             : e == 0   ? ldexp(m, 1 - bias - f->mbits)
                        : ldexp((1 << f->mbits) + m, e - bias - f->mbits);
    return (h & 0x8000) ? -v : v;
}

/* Nearest representable value, ties to the even pattern; rounding past the
 * largest finite value to the next (unbounded-exponent) step gives Inf. */
static uint16_t ref_encode(const struct fmt *f, float x)
{
    uint16_t inf = (uint16_t)(((1 << f->ebits) - 1) << f->mbits);
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    if (isnan(x))
        return 0xffff; /* checked separately */
    double a = fabs((double)x);
    if (isinf(x))
        return sign | inf;
    unsigned lo = 0, hi = inf - 1u; /* largest h with value <= a */
    while (lo < hi) {
        unsigned mid = (lo + hi + 1) / 2;
        if (ref_decode(f, (uint16_t)mid) <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    double v0 = ref_decode(f, (uint16_t)lo);
    double v1 = lo + 1u == inf ? 2 * ref_decode(f, (uint16_t)(inf - (1u << f->mbits)))
                               : ref_decode(f, (uint16_t)(lo + 1));
    double d0 = a - v0, d1 = v1 - a;
    unsigned r = d0 < d1 ? lo : d1 < d0 ? lo + 1 : (lo & 1) ? lo + 1 : lo;
    return (uint16_t)(sign | r);
}

static void test_decode(const struct fmt *f)
{
    static uint16_t all[65536];
    static float out[65536];
    for (uint32_t h = 0; h < 65536; h++) {
        all[h] = (uint16_t)h;
        float got = f->dec((uint16_t)h);
        double want = ref_decode(f, (uint16_t)h);
        if (isnan(want) && f->ebits == 8) {
            CHECKF(bits(got) == h << 16, "bf16 decode %#x: NaN %#x (must be exact)", h, bits(got));
        } else if (isnan(want)) { /* fp16: quiet, as F16C makes it */
            uint32_t payload = (uint32_t)(h & ((1u << f->mbits) - 1)) << (23 - f->mbits);
            CHECKF(isnan(got) && (bits(got) >> 31) == (h >> 15u) &&
                      (bits(got) & 0x3fffffu) == (payload & 0x3fffffu) &&
                      (bits(got) & 0x400000u) != 0,
                  "%s decode %#x: NaN %#x", f->name, h, bits(got));
        } else {
            CHECKF(bits(got) == bits((float)want), "%s decode %#x: %a want %a", f->name, h,
                  (double)got, want);
        }
    }
    for (int isa = STATS_ISA_GENERIC; isa <= STATS_ISA_AVX512; isa++) {
        if (tft_stats_set_isa(isa) != 0)
            continue;
        for (int hostile = 0; hostile < 2; hostile++) {
            unsigned saved = mxcsr_hostile(hostile);
            memset(out, 0, sizeof out);
            f->dec_n(all + 3, out + 3, 65536 - 3); /* unaligned start, odd length */
            f->dec_n(all, out, 3);
            mxcsr_restore(saved);
            for (uint32_t h = 0; h < 65536; h++)
                CHECKF(bits(out[h]) == bits(f->dec((uint16_t)h)), "%s bulk decode %s %#x",
                      f->name, tft_stats_isa_name(), h);
        }
    }
    tft_stats_set_isa(STATS_ISA_AUTO);
}

static void check_encode(const struct fmt *f, float x)
{
    uint16_t got = f->enc(x);
    if (isnan(x)) {
        uint16_t e = (uint16_t)(((1u << f->ebits) - 1) << f->mbits);
        uint16_t keep = (uint16_t)((bits(x) >> (23 - f->mbits)) & ((1u << f->mbits) - 1));
        uint16_t quiet = (uint16_t)(1u << (f->mbits - 1));
        CHECKF((got & e) == e && (got & quiet) && (got >> 15) == (bits(x) >> 31) &&
                  (got & ((1u << f->mbits) - 1) & ~quiet) == (keep & ~quiet),
              "%s encode NaN %#x -> %#x", f->name, bits(x), got);
        return;
    }
    uint16_t want = ref_encode(f, x);
    CHECKF(got == want, "%s encode %a (%#x) -> %#x want %#x", f->name, (double)x, bits(x), got,
          want);
}

/* Every representable value, the midpoints between neighbours (ties) and
 * one float ulp on either side, the overflow boundary, random floats. */
static void test_encode(const struct fmt *f)
{
    uint16_t inf = (uint16_t)(((1 << f->ebits) - 1) << f->mbits);
    for (uint32_t h = 0; h < inf; h++) {
        for (int s = 0; s < 2; s++) {
            double v0 = ref_decode(f, (uint16_t)h);
            double v1 = h + 1 == inf ? 2 * ref_decode(f, (uint16_t)(inf - (1u << f->mbits)))
                                     : ref_decode(f, (uint16_t)(h + 1));
            float mid = (float)((v0 + v1) / 2);
            float pts[5] = { (float)v0, mid, nextafterf(mid, 0), nextafterf(mid, INFINITY),
                             nextafterf((float)v0, INFINITY) };
            for (int k = 0; k < 5; k++)
                check_encode(f, s ? -pts[k] : pts[k]);
        }
    }
    check_encode(f, INFINITY);
    check_encode(f, -INFINITY);
    check_encode(f, 3.4028235e38f);
    check_encode(f, from_bits(0x7fc00000u));
    check_encode(f, from_bits(0xffa01234u)); /* signalling, payload */
    check_encode(f, from_bits(0x7f800001u)); /* payload only in low bits */
    CHECKF(f->enc(from_bits(0x7f800001u)) != (uint16_t)inf, "%s: NaN became Inf", f->name);
    for (int i = 0; i < 2000000; i++)
        check_encode(f, from_bits((uint32_t)rng()));
}

/* The bulk encoders agree with the scalar one on random and special inputs
 * whatever MXCSR says. */
static void test_encode_bulk(const struct fmt *f)
{
    enum { N = 1 << 16 };
    static float in[N];
    static uint16_t out[N];
    for (int i = 0; i < N; i++)
        in[i] = from_bits((uint32_t)rng());
    static const float sp[] = { 65519.998f, 65520.0f, 65504.0f, 2.9802322e-08f, 2.9802326e-08f,
                                1e-40f, -0.0f, 3.3961775e38f, 3.3895314e38f };
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++)
        in[i * 7] = sp[i];
    for (int isa = STATS_ISA_GENERIC; isa <= STATS_ISA_AVX512; isa++) {
        if (tft_stats_set_isa(isa) != 0)
            continue;
        for (int hostile = 0; hostile < 2; hostile++) {
            unsigned saved = mxcsr_hostile(hostile);
            f->enc_n(in + 1, out + 1, N - 1);
            f->enc_n(in, out, 1);
            mxcsr_restore(saved);
            for (int i = 0; i < N; i++)
                CHECKF(out[i] == f->enc(in[i]), "%s bulk encode %s %#x -> %#x want %#x", f->name,
                      tft_stats_isa_name(), bits(in[i]), out[i], f->enc(in[i]));
        }
    }
    tft_stats_set_isa(STATS_ISA_AUTO);
}

/* ---- 8-bit floats ------------------------------------------------------------ */

/* The reference fp8 decoder, from the bit fields with ldexp: E4M3FN (bias
 * 7, NaN only at S.1111.111, no Inf) and E5M2 (bias 15, exponent 31 is Inf
 * with mantissa 0, else NaN). */
static double ref_f8(int e5m2, uint8_t b)
{
    int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7, emax = e5m2 ? 31 : 15;
    int e = (b & 0x7f) >> mbits, m = b & ((1 << mbits) - 1);
    double v;
    if (e5m2 && e == emax)
        v = m ? NAN : INFINITY;
    else if (!e5m2 && e == emax && m == (1 << mbits) - 1)
        v = NAN;
    else if (e == 0)
        v = ldexp(m, 1 - bias - mbits);
    else
        v = ldexp((1 << mbits) + m, e - bias - mbits);
    return (b & 0x80) ? -v : v;
}

/* All 256 patterns of each format, scalar and bulk (at every alignment),
 * against the reference: values bit for bit (so -0 is -0), NaNs as NaNs
 * with the byte's sign. */
static void test_f8(int e5m2)
{
    const char *name = e5m2 ? "f8e5m2" : "f8e4m3";
    float (*dec)(uint8_t) = e5m2 ? tft_f8e5m2_to_f32 : tft_f8e4m3_to_f32;
    void (*dec_n)(const uint8_t *, float *, size_t) = e5m2 ? tft_f8e5m2_to_f32_n : tft_f8e4m3_to_f32_n;
    uint8_t all[256 + 3];
    float bulk[256];
    int nan = 0, inf = 0;
    for (int off = 0; off < 4; off++) {
        for (int i = 0; i < 256; i++)
            all[off + i] = (uint8_t)i;
        dec_n(all + off, bulk, 256);
        for (int i = 0; i < 256; i++) {
            double want = ref_f8(e5m2, (uint8_t)i);
            float got = dec((uint8_t)i);
            CHECKF(bits(bulk[i]) == bits(got), "%s %#04x: bulk %#x scalar %#x", name, i, bits(bulk[i]),
                  bits(got));
            if (isnan(want)) {
                CHECKF(isnan(got) && (bits(got) >> 31) == (unsigned)(i >> 7), "%s %#04x: %g, want NaN", name,
                      i, got);
                nan += off == 0;
            } else {
                CHECKF(bits(got) == bits((float)want), "%s %#04x: %a, want %a", name, i, got, want);
                inf += off == 0 && isinf(want);
            }
        }
    }
    CHECKF(nan == (e5m2 ? 6 : 2) && inf == (e5m2 ? 2 : 0), "%s: %d NaNs, %d infinities", name, nan, inf);
}

int main(void)
{
    static const struct fmt fmts[2] = {
        { "fp16", 5, 10, tft_f16_to_f32, tft_f32_to_f16, tft_f16_to_f32_n, tft_f32_to_f16_n },
        { "bf16", 8, 7, tft_bf16_to_f32, tft_f32_to_bf16, tft_bf16_to_f32_n, tft_f32_to_bf16_n },
    };
    /* spot checks a reader can verify by hand */
    CHECKF(tft_f32_to_f16(1.0f) == 0x3c00 && tft_f32_to_f16(65504.0f) == 0x7bff &&
              tft_f32_to_f16(65520.0f) == 0x7c00 && tft_f32_to_f16(65519.0f) == 0x7bff &&
              tft_f32_to_f16(0x1p-24f) == 0x0001 && tft_f32_to_f16(0x1p-25f) == 0x0000 &&
              tft_f32_to_f16(0x1.8p-24f) == 0x0002 && tft_f32_to_f16(-0.0f) == 0x8000,
          "fp16 spot checks");
    CHECKF(tft_f32_to_bf16(1.0f) == 0x3f80 && tft_f32_to_bf16(from_bits(0x3f808000u)) == 0x3f80 &&
              tft_f32_to_bf16(from_bits(0x3f818000u)) == 0x3f82 &&
              tft_f32_to_bf16(3.4028235e38f) == 0x7f80,
          "bf16 spot checks");
    CHECKF(tft_f16_to_f32(0x0001) == 0x1p-24f && tft_f16_to_f32(0x7bff) == 65504.0f &&
              tft_bf16_to_f32(0x7f7f) == 3.3895313892515355e38f,
          "decode spot checks");
    CHECKF(tft_f8e4m3_to_f32(0x7e) == 448.0f && tft_f8e4m3_to_f32(0x01) == 0x1p-9f &&
              tft_f8e4m3_to_f32(0x08) == 0x1p-6f && tft_f8e4m3_to_f32(0x38) == 1.0f &&
              tft_f8e4m3_to_f32(0xc0) == -2.0f && bits(tft_f8e4m3_to_f32(0x80)) == 0x80000000u &&
              isnan(tft_f8e4m3_to_f32(0x7f)) && tft_f8e4m3_to_f32(0x78) == 256.0f,
          "f8e4m3 spot checks");
    CHECKF(tft_f8e5m2_to_f32(0x7b) == 57344.0f && tft_f8e5m2_to_f32(0x01) == 0x1p-16f &&
              tft_f8e5m2_to_f32(0x3c) == 1.0f && tft_f8e5m2_to_f32(0x7c) == INFINITY &&
              tft_f8e5m2_to_f32(0xfc) == -INFINITY && isnan(tft_f8e5m2_to_f32(0x7d)) &&
              tft_f8e5m2_to_f32(0x04) == 0x1p-14f,
          "f8e5m2 spot checks");
    test_f8(0);
    test_f8(1);
    for (int i = 0; i < 2; i++) {
        test_decode(&fmts[i]);
        test_encode(&fmts[i]);
        test_encode_bulk(&fmts[i]);
    }
    return TEST_DONE();
}
