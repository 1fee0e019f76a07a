/*
 * test_stats.c — tft_stats_compute against a plain reference written here
 * (scalar, long double accumulation, two-pass variance), for every dtype and
 * mode, on random and adversarial data, unaligned pointers and awkward
 * lengths; every case also runs with the generic, AVX2 and AVX-512 kernels
 * (those the CPU has), which must agree bit for bit (test_isa.c puts more
 * adversarial data to that). Also: argument errors, the caller's FP
 * environment, badly conditioned data, the blocked fingerprint; fp8
 * (E4M3FN, E5M2) tensors holding every value of the format.
 *
 * Tolerances: counts, min, max, absmax and fingerprints exact; moments of
 * f32, f16 and bf16 in FULL mode within the bounds tft_stats.h documents
 * (TFT_STATS_F32ACC_*; test_f32acc_bound puts adversarial data to them);
 * other dtypes' mean within 1e-12 of mean|x|, std within 1e-12 relative
 * (+1e-15 of mean|x|), l1 and l2 within 1e-12 relative.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fenv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "stats_internal.h"
#include "tft_stats.h"

#include "tft_test.h"
#include "tft_test_rng.h"

/* ---- deterministic random numbers ---------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void) { return tft_test_rng(&rng_state); }

static double urand(void) /* [0, 1) */
{
    return (double)(rng() >> 11) * 0x1p-53;
}

static double nrand(void) /* standard normal */
{
    double u = urand() + 0x1p-60, v = urand();
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* ---- reference decoding --------------------------------------------------- */

static double ref_f16(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static double ref_bf16(uint16_t h)
{
    int e = (h >> 7) & 255, m = h & 127;
    double v = e == 255 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -133) : ldexp(128 + m, e - 134);
    return (h & 0x8000) ? -v : v;
}

/* fp8 from the bit fields: E4M3FN bias 7, NaN only S.1111.111, no Inf;
 * E5M2 bias 15, exponent 31 Inf (mantissa 0) or NaN. */
static double ref_f8e4m3(uint8_t b)
{
    int e = (b >> 3) & 15, m = b & 7;
    double v = (e == 15 && m == 7) ? NAN : e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
    return (b & 0x80) ? -v : v;
}

static double ref_f8e5m2(uint8_t b)
{
    int e = (b >> 2) & 31, m = b & 3;
    double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -16) : ldexp(4 + m, e - 17);
    return (b & 0x80) ? -v : v;
}

/* The fp8 byte nearest to v (ties to the even mantissa, which is the even
 * byte), by search over the positive values; from half a step beyond the
 * largest finite value on (a tie there: E4M3's 448 is even and keeps it,
 * E5M2's 57344 is odd and gives it up) E5M2 gives Inf and E4M3 NaN, as
 * torch's casts do. The test's data generator, not a converter under test. */
static uint8_t enc_f8(int dtype, double v)
{
    static double mag[2][128];
    static int ready;
    if (!ready) {
        for (int b = 0; b < 128; b++)
            mag[0][b] = ref_f8e4m3((uint8_t)b), mag[1][b] = ref_f8e5m2((uint8_t)b);
        ready = 1;
    }
    int e5 = dtype == TFT_F8E5M2;
    uint8_t sign = signbit(v) ? 0x80 : 0;
    double a = fabs(v), max = e5 ? 57344.0 : 448.0, half = e5 ? 4096.0 : 16.0;
    if (isnan(v))
        return e5 ? 0x7e : 0x7f;
    if (a > max + half || (e5 && a == max + half))
        return (uint8_t)(sign | (e5 ? 0x7c : 0x7f));
    int best = 0;
    for (int b = 1; b < 128; b++) {
        double d = fabs(mag[e5][b] - a), bd = fabs(mag[e5][best] - a);
        if (isfinite(mag[e5][b]) && (d < bd || (d == bd && !(b & 1))))
            best = b;
    }
    return (uint8_t)(sign | best);
}

static double ref_value(int dtype, const unsigned char *p, size_t i)
{
    union {
        float f; double d; uint16_t h; int32_t i32; int64_t i64; uint8_t u8; int8_t i8;
        int16_t i16; uint16_t u16; uint32_t u32; uint64_t u64;
    } u;
    size_t sz = tft_dtype_size(dtype);
    memcpy(&u, p + i * sz, sz);
    switch (dtype) {
    case TFT_F32: return u.f;
    case TFT_F64: return u.d;
    case TFT_F16: return ref_f16(u.h);
    case TFT_BF16: return ref_bf16(u.h);
    case TFT_I32: return u.i32;
    case TFT_I64: return (double)u.i64;
    case TFT_U8: case TFT_BOOL: return u.u8;
    case TFT_I8: return u.i8;
    case TFT_I16: return u.i16;
    case TFT_U16: return u.u16;
    case TFT_U32: return u.u32;
    case TFT_U64: return (double)u.u64;
    case TFT_F8E4M3: return ref_f8e4m3(u.u8);
    case TFT_F8E5M2: return ref_f8e5m2(u.u8);
    }
    abort();
}

/* ---- the reference statistics ---------------------------------------------- */

static void ref_stats(int dtype, const unsigned char *p, size_t n, tft_stats *r)
{
    memset(r, 0, sizeof *r);
    r->numel = n;
    r->fingerprint = XXH3_64bits(p, n * tft_dtype_size(dtype));
    long double sum = 0, sumabs = 0, sumsq = 0;
    uint64_t nfin = 0;
    double mn = INFINITY, mx = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        double v = ref_value(dtype, p, i), a = fabs(v);
        if (isnan(v)) { r->nan++; continue; }
        if (isinf(v)) { if (v > 0) r->pinf++; else r->ninf++; continue; }
        nfin++;
        if (v == 0) r->zero++;
        if (a > 65504.0) r->over_fp16++;
        if (a > 3.3895313892515355e38) r->over_bf16++;
        if (a != 0 && a < 6.103515625e-05) r->under_fp16++;
        if (v < mn) mn = v;
        if (v > mx) mx = v;
        sum += v;
        sumabs += a;
        sumsq += (long double)v * v;
    }
    if (nfin == 0)
        return;
    long double mean = sum / nfin, m2 = 0;
    for (size_t i = 0; i < n; i++) {
        double v = ref_value(dtype, p, i);
        if (isfinite(v))
            m2 += ((long double)v - mean) * ((long double)v - mean);
    }
    r->min = mn;
    r->max = mx;
    r->mean = (double)mean;
    r->std = (double)sqrtl(m2 / nfin);
    r->l1 = (double)sumabs;
    r->l2 = (double)sqrtl(sumsq);
    r->absmax = fabs(mn) > fabs(mx) ? fabs(mn) : fabs(mx);
}

/* Equal (Inf included: a true sum beyond DBL_MAX is Inf), or within tol. */
static int close_to(double got, double want, double tol)
{
    return got == want || fabs(got - want) <= tol;
}

/* Compares one mode's result with the reference (fields the mode does not
 * record must be 0). */
/* Largest error seen so far, as a fraction of its documented bound, for the
 * float-accumulated moments (printed at the end: how much margin there is). */
static double worst_frac;

static int float_accumulated(int dtype)
{
    return dtype == TFT_F32 || dtype == TFT_F16 || dtype == TFT_BF16 || dtype == TFT_I32 ||
           dtype == TFT_I64;
}

/* Checks |got - want| <= tol and records the fraction of tol it used. */
static int within(double got, double want, double tol)
{
    if (got == want)
        return 1;
    double e = fabs(got - want);
    if (tol > 0 && e / tol > worst_frac)
        worst_frac = e / tol;
    return e <= tol;
}

static void compare(const char *what, int dtype, int mode, const tft_stats *g, const tft_stats *r)
{
    CHECKF(g->numel == r->numel, "%s: numel %llu", what, (unsigned long long)g->numel);
    if (mode == TFT_STATS_SHAPE) {
        tft_stats z;
        memset(&z, 0, sizeof z);
        z.numel = r->numel;
        CHECKF(memcmp(g, &z, sizeof z) == 0, "%s: SHAPE fills more than numel", what);
        return;
    }
    CHECKF(g->fingerprint == r->fingerprint, "%s: fingerprint", what);
    CHECKF(g->nan == r->nan && g->pinf == r->pinf && g->ninf == r->ninf && g->zero == r->zero,
          "%s: nan %llu/%llu pinf %llu/%llu ninf %llu/%llu zero %llu/%llu", what,
          (unsigned long long)g->nan, (unsigned long long)r->nan, (unsigned long long)g->pinf,
          (unsigned long long)r->pinf, (unsigned long long)g->ninf, (unsigned long long)r->ninf,
          (unsigned long long)g->zero, (unsigned long long)r->zero);
    CHECKF(g->min == r->min && g->max == r->max, "%s: min %.17g/%.17g max %.17g/%.17g", what,
          g->min, r->min, g->max, r->max);
    if (mode == TFT_STATS_HEALTH) {
        CHECKF(g->over_fp16 == 0 && g->over_bf16 == 0 && g->under_fp16 == 0 && g->mean == 0 &&
                  g->std == 0 && g->l1 == 0 && g->l2 == 0 && g->absmax == 0,
              "%s: HEALTH fills FULL-only fields", what);
        return;
    }
    CHECKF(g->over_fp16 == r->over_fp16 && g->over_bf16 == r->over_bf16 &&
              g->under_fp16 == r->under_fp16,
          "%s: over16 %llu/%llu overbf %llu/%llu under16 %llu/%llu", what,
          (unsigned long long)g->over_fp16, (unsigned long long)r->over_fp16,
          (unsigned long long)g->over_bf16, (unsigned long long)r->over_bf16,
          (unsigned long long)g->under_fp16, (unsigned long long)r->under_fp16);
    uint64_t nfin = r->numel - r->nan - r->pinf - r->ninf;
    double absmean = nfin ? r->l1 / (double)nfin : 0;
    if (float_accumulated(dtype)) {
        CHECKF(within(g->mean, r->mean,
                      TFT_STATS_F32ACC_MEAN * r->std + 0x1p-50 * fabs(r->mean) + 1e-15 * absmean),
               "%s: mean %.17g/%.17g (std %g)", what, g->mean, r->mean, r->std);
        CHECKF(within(g->std, r->std, TFT_STATS_F32ACC_REL * r->std + 1e-15 * absmean),
               "%s: std %.17g/%.17g", what, g->std, r->std);
        CHECKF(within(g->l1, r->l1, TFT_STATS_F32ACC_L1 * r->l1), "%s: l1 %.17g/%.17g", what,
               g->l1, r->l1);
        CHECKF(within(g->l2, r->l2, TFT_STATS_F32ACC_REL * r->l2), "%s: l2 %.17g/%.17g", what,
               g->l2, r->l2);
        CHECKF(g->absmax == r->absmax, "%s: absmax %.17g/%.17g", what, g->absmax, r->absmax);
        return;
    }
    CHECKF(close_to(g->mean, r->mean, 1e-12 * absmean), "%s: mean %.17g/%.17g", what, g->mean,
          r->mean);
    CHECKF(close_to(g->std, r->std, 1e-12 * r->std + 1e-15 * absmean), "%s: std %.17g/%.17g",
          what, g->std, r->std);
    CHECKF(close_to(g->l1, r->l1, 1e-12 * r->l1), "%s: l1 %.17g/%.17g", what, g->l1, r->l1);
    CHECKF(close_to(g->l2, r->l2, 1e-12 * r->l2), "%s: l2 %.17g/%.17g", what, g->l2, r->l2);
    CHECKF(g->absmax == r->absmax, "%s: absmax %.17g/%.17g", what, g->absmax, r->absmax);
}

/* Runs every mode with every available kernel set on n elements at p and
 * checks them against the reference and against each other. */
static void check_case(const char *label, int dtype, const unsigned char *p, size_t n)
{
    tft_stats r, g, first;
    ref_stats(dtype, p, n, &r);
    char what[160];
    for (int mode = TFT_STATS_SHAPE; mode <= TFT_STATS_FULL; mode++) {
        int have_first = 0;
        for (int isa = STATS_ISA_GENERIC; isa <= STATS_ISA_AVX512; isa++) {
            if (tft_stats_set_isa(isa) != 0)
                continue;
            snprintf(what, sizeof what, "%s dtype %d n %zu mode %d %s", label, dtype, n, mode,
                     tft_stats_isa_name());
            int rc = tft_stats_compute(dtype, p, n, mode, &g);
            CHECKF(rc == 0, "%s: rc %d", what, rc);
            compare(what, dtype, mode, &g, &r);
            if (have_first)
                CHECKF(memcmp(&g, &first, sizeof g) == 0, "%s: differs from generic", what);
            first = g;
            have_first = 1;
        }
        if (n < 16) { /* the small-tensor path against the block path */
            tft_stats t;
            tft_stats_set_tiny(0);
            int rc = tft_stats_compute(dtype, p, n, mode, &t);
            tft_stats_set_tiny(1);
            CHECKF(rc == 0 && memcmp(&g, &t, sizeof g) == 0, "%s: small-tensor path differs from the block path",
                   what);
        }
    }
    tft_stats_set_isa(STATS_ISA_AUTO);
}

/* ---- data generators -------------------------------------------------------- */

static void put(int dtype, unsigned char *p, size_t i, double v)
{
    size_t sz = tft_dtype_size(dtype);
    union {
        float f; double d; uint16_t h; int32_t i32; int64_t i64; uint8_t u8; int8_t i8;
        int16_t i16; uint32_t u32; uint64_t u64;
    } u;
    switch (dtype) {
    case TFT_F32: u.f = (float)v; break;
    case TFT_F64: u.d = v; break;
    case TFT_F16: u.h = tft_f32_to_f16((float)v); break;
    case TFT_BF16: u.h = tft_f32_to_bf16((float)v); break;
    case TFT_I32: u.i32 = (int32_t)v; break;
    case TFT_I64: u.i64 = (int64_t)v; break;
    case TFT_U8: u.u8 = (uint8_t)v; break;
    case TFT_BOOL: u.u8 = (uint8_t)(v != 0); break;
    case TFT_I8: u.i8 = (int8_t)v; break;
    case TFT_I16: u.i16 = (int16_t)v; break;
    case TFT_U16: u.h = (uint16_t)v; break;
    case TFT_U32: u.u32 = (uint32_t)v; break;
    case TFT_U64: u.u64 = (uint64_t)v; break;
    case TFT_F8E4M3: case TFT_F8E5M2: u.u8 = enc_f8(dtype, v); break;
    }
    memcpy(p + i * sz, &u, sz);
}

static int is_float(int dtype)
{
    return dtype == TFT_F32 || dtype == TFT_F64 || dtype == TFT_F16 || dtype == TFT_BF16 ||
           dtype == TFT_F8E4M3 || dtype == TFT_F8E5M2;
}

/* A value typical of the dtype: normal data for floats (with some zeros),
 * the whole range for small integers, a wide spread for large ones. */
static double typical(int dtype)
{
    switch (dtype) {
    case TFT_U8: return (double)(rng() & 0xff);
    case TFT_BOOL: return (double)(rng() & 1);
    case TFT_I8: return (double)(int8_t)rng();
    case TFT_I16: return (double)(int16_t)rng();
    case TFT_U16: return (double)(uint16_t)rng();
    case TFT_I32: return (double)(int32_t)rng();
    case TFT_U32: return (double)(uint32_t)rng();
    case TFT_I64: return (double)((int64_t)rng() >> (1 + rng() % 63));
    case TFT_U64: return (double)(rng() >> (1 + rng() % 63));
    }
    if (rng() % 8 == 0)
        return 0.0;
    if (dtype == TFT_F8E5M2 && rng() % 4 == 0) /* the whole range, subnormals included */
        return ldexp(nrand(), (int)(rng() % 32) - 17);
    return nrand() * (dtype == TFT_F16 ? 100.0 : 3.0) + 0.5;
}

/* Specials for floats: NaN, +-Inf, huge, tiny, subnormal, signed zero. */
static double special(int dtype)
{
    static const double v[] = {
        NAN, INFINITY, -INFINITY, 1e38, -3.4e38, 3.3895313892515355e38, 65504.0, 65505.0,
        -65536.0, 6.103515625e-05, 6.1e-05, 1e-40, -1.4e-45, 5.960464477539063e-08, -0.0, 0.0,
        1e300, -1e-310, 2.5e-300,
    };
    double x = v[rng() % (sizeof v / sizeof v[0])];
    (void)dtype;
    return x;
}

static void fill(int dtype, unsigned char *p, size_t n, double p_special)
{
    for (size_t i = 0; i < n; i++)
        put(dtype, p, i, is_float(dtype) && urand() < p_special ? special(dtype) : typical(dtype));
}

/* ---- the cases -------------------------------------------------------------- */

#define MAXN (3 * 4096 + 77)
static unsigned char bufmem[MAXN * 8 + 64];

/* Random data, every dtype, lengths 0..67, around the kernels' block and
 * vector sizes, at offsets 0..3 bytes from an aligned address. */
static void test_random(void)
{
    static const size_t lens[] = { 0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 67,
                                   1023, 1024, 1025, 2047, 2048, 2049, 4096 + 17, MAXN };
    for (int dtype = 0; dtype < TFT_DTYPE_COUNT; dtype++) {
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            for (size_t off = 0; off < 4; off++) {
                unsigned char *p = bufmem + off;
                fill(dtype, p, lens[li], off == 1 ? 0.05 : 0.0);
                check_case("random", dtype, p, lens[li]);
            }
        }
        for (size_t i = 0; i < 3000 * 8; i++)
            bufmem[i] = (unsigned char)rng();
        check_case("raw-bits", dtype, bufmem + 3, 3000);
        for (size_t n = 1; n <= 67; n++) {
            fill(dtype, bufmem + 8, n, 0.1);
            check_case("short", dtype, bufmem + 8, n);
        }
    }
    /* bytes: all zero (the byte-lane zero counters must fold before 255),
     * and all 0xff but one zero per 8 KiB block */
    for (int k = 0; k < 2; k++) {
        size_t n = 3 * 8192 + 100;
        memset(bufmem, k ? 0xff : 0, n);
        for (size_t i = 4000; k && i < n; i += 8192)
            bufmem[i] = 0;
        check_case(k ? "bytes-ff" : "bytes-zero", TFT_U8, bufmem, n);
        check_case(k ? "bytes-ff" : "bytes-zero", TFT_U8, bufmem + 1, n - 1);
    }
}

/* NaN-only, Inf-only, mixtures, and blocks where a lone special value sits
 * in an otherwise ordinary block (the fast path must notice it). */
static void test_adversarial(void)
{
    static const int fl[] = { TFT_F32, TFT_F64, TFT_F16, TFT_BF16, TFT_F8E4M3, TFT_F8E5M2 };
    for (size_t t = 0; t < sizeof fl / sizeof fl[0]; t++) {
        int dt = fl[t];
        size_t n = 5000;
        for (size_t i = 0; i < n; i++)
            put(dt, bufmem, i, NAN);
        check_case("all-nan", dt, bufmem, n);
        for (size_t i = 0; i < n; i++)
            put(dt, bufmem, i, (i % 3) ? INFINITY : -INFINITY);
        check_case("all-inf", dt, bufmem, n);
        for (size_t i = 0; i < n; i++)
            put(dt, bufmem, i, (i % 2) ? -INFINITY : nrand());
        check_case("half-minus-inf", dt, bufmem, n);
        fill(dt, bufmem, n, 0.5);
        check_case("half-special", dt, bufmem, n);
        static const double lone[] = { NAN, INFINITY, -INFINITY, 3.4e38, 1e38, 65505.0, 1e-40,
                                       0.0, 6e-5 };
        for (size_t k = 0; k < sizeof lone / sizeof lone[0]; k++) {
            for (size_t pos = 0; pos < n; pos += 997) {
                fill(dt, bufmem, n, 0.0);
                put(dt, bufmem, pos, lone[k]);
                check_case("lone-special", dt, bufmem, n);
            }
        }
        for (size_t m = 1; m < 16; m++) /* small tensors: the small-tensor path (check_case compares) */
            for (size_t k = 0; k < sizeof lone / sizeof lone[0]; k++) {
                fill(dt, bufmem, m, 0.0);
                put(dt, bufmem, (k * 7) % m, lone[k]);
                check_case("small-special", dt, bufmem, m);
                for (size_t i = 0; i < m; i++)
                    put(dt, bufmem, i, (i % 2 ? -1.0 : 1.0) * (dt == TFT_F64 ? 1e300 : 3e38) + (double)i);
                check_case("small-huge", dt, bufmem, m);
                for (size_t i = 0; i < m; i++)
                    put(dt, bufmem, i, 1e6 + (double)(i % 3) * 1e-3);
                check_case("small-offset", dt, bufmem, m);
            }
        for (size_t i = 0; i < n; i++)
            put(dt, bufmem, i, 0.0);
        check_case("all-zero", dt, bufmem, n);
        for (size_t i = 0; i < n; i++)
            put(dt, bufmem, i, 65505.0);
        check_case("all-over-fp16", dt, bufmem, n);
    }
    /* fp32 and fp16 subnormals, exact threshold neighbours */
    for (size_t i = 0; i < 3000; i++) {
        uint32_t b = (uint32_t)(rng() % 0x800000u) | (uint32_t)(rng() & 1) << 31;
        memcpy(bufmem + 4 * i, &b, 4);
    }
    check_case("f32-subnormal", TFT_F32, bufmem, 3000);
    for (size_t i = 0; i < 3000; i++) {
        uint16_t h = (uint16_t)((rng() % 0x400u) | (rng() & 1) << 15);
        memcpy(bufmem + 2 * i, &h, 2);
    }
    check_case("f16-subnormal", TFT_F16, bufmem, 3000);
    static const float edges[] = { 65504.0f, 65504.004f, 6.103515625e-05f, 6.1035152e-05f,
                                   3.3895313892515355e38f, 3.3895315e38f, -3.3895315e38f,
                                   1.17549435e-38f, 1.4e-45f, -0.0f, 3.4028235e38f };
    memcpy(bufmem, edges, sizeof edges);
    check_case("f32-edges", TFT_F32, bufmem, sizeof edges / sizeof edges[0]);
    /* all 65536 fp16 and bf16 bit patterns as one tensor */
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t v = (uint16_t)h;
        memcpy(bufmem + 2 * (h % MAXN), &v, 2);
        if (h % MAXN == MAXN - 1 || h == 65535) {
            check_case("f16-patterns", TFT_F16, bufmem, h % MAXN + 1);
            check_case("bf16-patterns", TFT_BF16, bufmem, h % MAXN + 1);
        }
    }
    /* BOOL keeps the byte's value, so a corrupt bool shows */
    unsigned char b[5] = { 0, 1, 1, 2, 0 };
    tft_stats s;
    CHECKF(tft_stats_compute(TFT_BOOL, b, 5, TFT_STATS_FULL, &s) == 0 && s.max == 2 &&
              s.zero == 2 && s.l1 == 4,
          "bool: max %g zero %llu", s.max, (unsigned long long)s.zero);
}

/* Every fp8 value in one tensor (each byte 0..255, then the same again
 * reversed and at an odd offset, 2 x 256 + 1 elements long enough for the
 * kernels' vector path) against the long-double reference, and against
 * counts worked out by hand: E4M3FN has 2 NaNs, no Inf, 2 zeros, max 448,
 * no value below 2^-14 (its smallest is 2^-9); E5M2 has 6 NaNs, +-Inf, 2
 * zeros, max 57344 and 6 values below 2^-14 (its subnormals 2^-16, 2^-15,
 * 3 x 2^-16 of each sign). Symmetric data: mean 0, min = -max. The
 * fingerprint is that of the raw bytes, and equals the blocked one. */
static void test_fp8_all_values(void)
{
    for (int e5 = 0; e5 < 2; e5++) {
        int dt = e5 ? TFT_F8E5M2 : TFT_F8E4M3;
        unsigned char *p = bufmem + 1;
        for (int i = 0; i < 256; i++)
            p[i] = p[511 - i] = (unsigned char)i;
        p[512] = 0x38; /* an unpaired value: 1.0 in E4M3, 0.5 in E5M2 */
        check_case("fp8-all-values", dt, p, 512);
        check_case("fp8-all-values+1", dt, p, 513);
        tft_stats s;
        CHECK(tft_stats_compute(dt, p, 512, TFT_STATS_FULL, &s) == 0);
        double max = e5 ? 57344.0 : 448.0, l1 = 0, sumsq = 0;
        uint64_t nfin = 0;
        for (int b = 0; b < 256; b++) {
            double v = e5 ? ref_f8e5m2((uint8_t)b) : ref_f8e4m3((uint8_t)b);
            if (isfinite(v)) {
                nfin += 2;
                l1 += 2 * fabs(v); /* exact: every value is a multiple of 2^-16 below 2^16 */
                sumsq += 2 * v * v;
            }
        }
        CHECKF(s.numel == 512 && s.nan == (e5 ? 12u : 4u) && s.pinf == (e5 ? 2u : 0u) &&
                  s.ninf == s.pinf && s.zero == 4 && s.over_fp16 == 0 && s.over_bf16 == 0 &&
                  s.under_fp16 == (e5 ? 12u : 0u),
              "%s counts: nan %llu inf %llu/%llu zero %llu under16 %llu", tft_dtype_name(dt),
              (unsigned long long)s.nan, (unsigned long long)s.pinf, (unsigned long long)s.ninf,
              (unsigned long long)s.zero, (unsigned long long)s.under_fp16);
        CHECKF(s.max == max && s.min == -max && s.absmax == max && s.l1 == l1,
              "%s: min %g max %g absmax %g l1 %.17g/%.17g", tft_dtype_name(dt), s.min, s.max, s.absmax,
              s.l1, l1);
        CHECKF(fabs(s.mean) <= 1e-15 * max && fabs(s.l2 - sqrt(sumsq)) <= 1e-15 * s.l2 &&
                  fabs(s.std - sqrt(sumsq / (double)nfin)) <= 1e-14 * s.std,
              "%s: mean %g l2 %.17g/%.17g std %.17g", tft_dtype_name(dt), s.mean, s.l2, sqrt(sumsq),
              s.std);
        CHECK(s.fingerprint == XXH3_64bits(p, 512) && s.fingerprint == tft_fingerprint_blocked(p, 512));
        /* bigger than a fingerprint block: the plain XXH3 of the bytes, not the blocked one */
        size_t big = 3 * 4096 + 77;
        for (size_t i = 0; i < big; i++)
            bufmem[i] = (unsigned char)rng();
        CHECK(tft_stats_compute(dt, bufmem, big, TFT_STATS_HEALTH, &s) == 0 &&
              s.fingerprint == XXH3_64bits(bufmem, big));
        CHECKF(tft_dtype_size(dt) == 1, "%s is one byte", tft_dtype_name(dt));
    }
}

static void test_empty_and_errors(void)
{
    tft_stats s;
    for (int mode = TFT_STATS_SHAPE; mode <= TFT_STATS_FULL; mode++) {
        CHECKF(tft_stats_compute(TFT_F32, NULL, 0, mode, &s) == 0, "empty mode %d", mode);
        CHECKF(s.numel == 0 && s.nan == 0 && s.min == 0 && s.max == 0 && s.std == 0,
              "empty fields");
        CHECKF(s.fingerprint == (mode == TFT_STATS_SHAPE ? 0 : XXH3_64bits(NULL, 0)),
              "empty fingerprint mode %d", mode);
    }
    float one = -2.5f;
    CHECKF(tft_stats_compute(TFT_F32, &one, 1, TFT_STATS_FULL, &s) == 0 && s.min == -2.5 &&
              s.max == -2.5 && s.mean == -2.5 && s.std == 0 && s.l1 == 2.5 && s.l2 == 2.5 &&
              s.absmax == 2.5,
          "one element");
    memset(&s, 0x55, sizeof s);
    CHECKF(tft_stats_compute(TFT_DTYPE_COUNT, &one, 1, TFT_STATS_FULL, &s) == -EINVAL,
          "bad dtype");
    CHECKF(s.numel == 0 && s.fingerprint == 0, "out zeroed on error");
    CHECKF(tft_stats_compute(-1, &one, 1, TFT_STATS_FULL, &s) == -EINVAL, "negative dtype");
    CHECKF(tft_stats_compute(TFT_F32, &one, 1, 3, &s) == -EINVAL, "bad mode");
    CHECKF(tft_stats_compute(TFT_F32, &one, 1, -1, &s) == -EINVAL, "negative mode");
    CHECKF(tft_stats_compute(TFT_F32, NULL, 1, TFT_STATS_FULL, &s) == -EINVAL, "NULL data");
    CHECKF(tft_stats_compute(TFT_F32, &one, 1, TFT_STATS_FULL, NULL) == -EINVAL, "NULL out");
    CHECKF(tft_stats_compute(TFT_F64, &one, SIZE_MAX / 4, TFT_STATS_FULL, &s) == -EOVERFLOW,
          "byte size overflow");
    CHECKF(tft_dtype_size(TFT_BF16) == 2 && tft_dtype_size(TFT_U64) == 8 &&
              tft_dtype_size(TFT_BOOL) == 1 && tft_dtype_size(99) == 0,
          "dtype sizes");
}

/* The caller's DAZ/FTZ must not turn subnormals into zeros, an unmasked
 * FE_INVALID must not trap on NaN data, and the caller's MXCSR (flags
 * included) must come back unchanged. */
static void test_fp_environment(void)
{
#if defined(__x86_64__)
    size_t n = 4100;
    float *x = (float *)bufmem;
    uint64_t nsub = 0;
    for (size_t i = 0; i < n; i++) {
        x[i] = (i % 5 == 0) ? 1e-40f : (i % 7 == 0) ? NAN : (float)nrand();
        nsub += i % 5 == 0;
    }
    tft_stats want, got;
    ref_stats(TFT_F32, bufmem, n, &want);
    unsigned saved = _mm_getcsr();
    unsigned hostile = (saved | 0x8040u) & ~(unsigned)_MM_MASK_INVALID; /* FTZ, DAZ, trap */
    hostile |= _MM_EXCEPT_INEXACT;
    for (int isa = STATS_ISA_GENERIC; isa <= STATS_ISA_AVX512; isa++) {
        if (tft_stats_set_isa(isa) != 0)
            continue;
        _mm_setcsr(hostile);
        int rc = tft_stats_compute(TFT_F32, bufmem, n, TFT_STATS_FULL, &got);
        unsigned after = _mm_getcsr();
        _mm_setcsr(saved);
        CHECKF(rc == 0, "rc %d", rc);
        CHECKF(after == hostile, "MXCSR %#x, want %#x", after, hostile);
        compare("hostile fpenv", TFT_F32, TFT_STATS_FULL, &got, &want);
        CHECKF(got.under_fp16 == nsub, "subnormals seen: %llu",
              (unsigned long long)got.under_fp16);
    }
    tft_stats_set_isa(STATS_ISA_AUTO);
#endif
}

/* Large offsets: 1e8 + N(0,1) in f64 and 1e8 + N(0,100) in f32 (whose ulp
 * there is 8); a naive sum-of-squares std would be wrong in every digit. */
static void test_conditioning(void)
{
    static double d[40000];
    static float f[40000];
    tft_stats g, r;
    for (size_t i = 0; i < 40000; i++) {
        d[i] = 1e8 + nrand();
        f[i] = (float)(1e8 + 100.0 * nrand());
    }
    ref_stats(TFT_F64, (const unsigned char *)d, 40000, &r);
    tft_stats_compute(TFT_F64, d, 40000, TFT_STATS_FULL, &g);
    CHECKF(fabs(g.std - r.std) <= 1e-12 * r.std, "f64 1e8+noise std %.17g/%.17g", g.std, r.std);
    CHECKF(fabs(g.mean - r.mean) <= 1e-15 * r.mean, "f64 1e8+noise mean %.17g/%.17g", g.mean,
          r.mean);
    ref_stats(TFT_F32, (const unsigned char *)f, 40000, &r);
    tft_stats_compute(TFT_F32, f, 40000, TFT_STATS_FULL, &g);
    CHECKF(fabs(g.std - r.std) <= TFT_STATS_F32ACC_REL * r.std, "f32 1e8+noise std %.17g/%.17g",
           g.std, r.std);
    /* the first element (the frame shift) is an outlier; blocks re-centre */
    d[0] = -5e9;
    ref_stats(TFT_F64, (const unsigned char *)d, 40000, &r);
    tft_stats_compute(TFT_F64, d, 40000, TFT_STATS_FULL, &g);
    CHECKF(fabs(g.std - r.std) <= 1e-12 * r.std, "outlier std %.17g/%.17g", g.std, r.std);
    /* a shift between blocks: first half near 0, second near 1e8 */
    for (size_t i = 0; i < 40000; i++)
        d[i] = (i < 20000 ? 0.0 : 1e8) + nrand();
    ref_stats(TFT_F64, (const unsigned char *)d, 40000, &r);
    tft_stats_compute(TFT_F64, d, 40000, TFT_STATS_FULL, &g);
    CHECKF(fabs(g.std - r.std) <= 1e-12 * r.std, "step std %.17g/%.17g", g.std, r.std);
    /* constant data has std exactly 0 */
    for (size_t i = 0; i < 40000; i++)
        d[i] = 0.1;
    tft_stats_compute(TFT_F64, d, 40000, TFT_STATS_FULL, &g);
    CHECKF(g.std == 0.0 && g.mean == 0.1, "constant std %.17g mean %.17g", g.std, g.mean);
}

/* The float-accumulated moments (f32, f16, bf16) against the long-double
 * reference within the bounds tft_stats.h documents, on data made to hurt
 * float sums: large offsets, cancellation between huge values of opposite
 * sign, magnitudes spread over many decades, steps between blocks,
 * near-constant data, values whose squares underflow float, and a long
 * tensor (half a million elements: 2,048 float runs folded in double). */
static void test_f32acc_bound(void)
{
    static const int dts[] = { TFT_F32, TFT_BF16, TFT_F16 };
    static unsigned char big[(1u << 19) * 4];
    size_t n = 20000;
    for (size_t t = 0; t < 3; t++) {
        int dt = dts[t];
        int f16 = dt == TFT_F16;
        double off = dt == TFT_F32 ? 1e4 : f16 ? 1000.0 : 256.0;
        for (size_t i = 0; i < n; i++)
            put(dt, big, i, off + nrand());
        check_case("offset", dt, big, n);
        for (size_t i = 0; i < n; i++)
            put(dt, big, i, (i % 2 ? 1.0 : -1.0) * (f16 ? 3e4 : 1e6) + nrand());
        check_case("cancel", dt, big, n);
        for (size_t i = 0; i < n; i++) {
            double e = f16 ? urand() * 11.5 - 7.0 : dt == TFT_F32 ? urand() * 60.0 - 30.0
                                                                  : urand() * 10.0 - 6.0;
            put(dt, big, i, (rng() & 1 ? -1.0 : 1.0) * pow(10.0, e));
        }
        check_case("decades", dt, big, n);
        for (size_t i = 0; i < n; i++)
            put(dt, big, i, ((i / 3000) % 2 ? off * 10.0 : 0.0) + nrand());
        check_case("steps", dt, big, n);
        for (size_t i = 0; i < n; i++)
            put(dt, big, i, 1.0 + 0.01 * nrand());
        check_case("near-constant", dt, big, n);
        for (size_t i = 0; i < n; i++)
            put(dt, big, i, urand());
        check_case("uniform01", dt, big, n);
        for (size_t i = 0; i < n; i++) {
            double v = nrand();
            put(dt, big, i, v > 0 ? v : 0.0);
        }
        check_case("relu", dt, big, n);
        /* min/max from 16-bit patterns: all negative, and -0 next to positives */
        for (size_t i = 0; i < n; i++)
            put(dt, big, i, -(urand() + 0.1));
        check_case("negative", dt, big, n);
        for (size_t i = 0; i < n; i++)
            put(dt, big, i, i % 2 ? -0.0 : urand());
        check_case("minus-zero", dt, big, n);
        for (size_t i = 0; i < n; i++)
            put(dt, big, i, i % 2 ? -0.0 : -urand());
        check_case("minus-zero-negative", dt, big, n);
        if (!f16) {
            for (size_t i = 0; i < n; i++)
                put(dt, big, i, 1e-22 * nrand() + (i % 1000 == 0 ? 1e-15 : 0.0));
            check_case("tiny", dt, big, n);
        }
    }
    /* integers small enough for the float path: labels, token ids, counts */
    static const int its[] = { TFT_I32, TFT_I64 };
    for (size_t t = 0; t < 2; t++) {
        for (size_t i = 0; i < n; i++)
            put(its[t], big, i, (double)(rng() % 50257));
        check_case("token-ids", its[t], big, n);
        for (size_t i = 0; i < n; i++)
            put(its[t], big, i, (double)(rng() % 10) - (i % 7 == 0 ? 65504.0 : 0.0));
        check_case("labels", its[t], big, n);
    }
    size_t nb = sizeof big / 4;
    for (size_t i = 0; i < nb; i++)
        put(TFT_F32, big, i, 0.5 + nrand());
    check_case("long", TFT_F32, big, nb);
    printf("float-accumulated moments: worst error %.3f of the documented bound\n", worst_frac);
}

/* Blocked fingerprint: plain XXH3 up to one block, else XXH3 of the LE
 * array of block hashes. */
static void test_blocked_fingerprint(void)
{
    static unsigned char big[3 * 65536 + 1000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)rng();
    static const size_t lens[] = { 0, 1, 100, 65535, 65536, 65537, 2 * 65536, sizeof big };
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        size_t len = lens[li];
        uint64_t want;
        if (len <= 65536) {
            want = XXH3_64bits(big, len);
        } else {
            unsigned char arr[8 * 8];
            size_t nb = 0;
            for (size_t off = 0; off < len; off += 65536, nb++) {
                uint64_t h = XXH3_64bits(big + off, len - off < 65536 ? len - off : 65536);
                for (int b = 0; b < 8; b++)
                    arr[8 * nb + (size_t)b] = (unsigned char)(h >> (8 * b));
            }
            want = XXH3_64bits(arr, 8 * nb);
        }
        CHECKF(tft_fingerprint_blocked(big, len) == want, "blocked fingerprint len %zu", len);
    }
    CHECKF(tft_fingerprint_blocked(big, 70000) != tft_fingerprint_blocked(big + 1, 70000),
          "blocked fingerprint depends on the bytes");
}

int main(void)
{
    printf("kernels: %s\n", tft_stats_isa_name());
    test_empty_and_errors();
    test_random();
    test_adversarial();
    test_fp8_all_values();
    test_fp_environment();
    test_conditioning();
    test_f32acc_bound();
    test_blocked_fingerprint();
    return TEST_DONE();
}
