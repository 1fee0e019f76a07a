/*
 * test_isa.c — every kernel set this build and CPU have (AVX2, AVX-512)
 * against the generic one, bit for bit: tft_stats_compute's whole tft_stats
 * (memcmp) for every dtype in HEALTH and FULL mode on adversarial data —
 * lengths around the vector widths, the 256-element runs, the pairs of runs
 * the AVX-512 sweep takes and the 8 KiB blocks; unaligned pointers; NaN,
 * Inf, |x| > 65504 and tiny values in one block of many; data far from 0
 * (shifted sums, re-centred blocks); int32/int64 at +-65504, beyond 2^31
 * and beyond 2^53 — and the fused sweeps (fast_f32, fast_h16, fast_int)
 * directly against decoding plus the generic fast_f32, lane for lane.
 *
 * A kernel set the build or CPU lacks is skipped with a message (so the
 * test passes, and says so, on a CPU without AVX-512). Set TFT_TEST_ISA_SEED
 * to vary the data.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats_internal.h"
#include "tft_stats.h"

#include "tft_test.h"
#include "tft_test_rng.h"

static uint64_t rng_state = 0x6a09e667f3bcc908ull;

static uint64_t rng(void) { return tft_test_rng(&rng_state); }

static double urand(void) { return (double)(rng() >> 11) * 0x1p-53; }

static const int isa_ids[] = { STATS_ISA_AVX2, STATS_ISA_AVX512 };
static const char *const isa_names[] = { "avx2", "avx512" };
enum { NISA = 2 };
static int have_isa[NISA];

/* ---- data ------------------------------------------------------------------ */

#define MAXN (3 * 4096 + 613)
static unsigned char bufmem[MAXN * 8 + 64];

/* Writes v as element i of dtype (ints saturate, as a cast of a clamped v). */
static void put(int dtype, unsigned char *p, size_t i, double v)
{
    size_t e = tft_dtype_size(dtype);
    unsigned char *q = p + i * e;
#define PUTI(T, lo, hi)                                     \
    do {                                                    \
        double c_ = isnan(v) ? 0 : v < (lo) ? (lo) : v > (hi) ? (hi) : v; \
        T t_ = (T)c_;                                       \
        memcpy(q, &t_, sizeof t_);                          \
    } while (0)
    switch (dtype) {
    case TFT_F32: { float f = (float)v; memcpy(q, &f, 4); break; }
    case TFT_F64: memcpy(q, &v, 8); break;
    case TFT_F16: { uint16_t h = tft_f32_to_f16((float)v); memcpy(q, &h, 2); break; }
    case TFT_BF16: { uint16_t h = tft_f32_to_bf16((float)v); memcpy(q, &h, 2); break; }
    case TFT_I32: PUTI(int32_t, -2147483648.0, 2147483647.0); break;
    case TFT_I64: PUTI(int64_t, -9223372036854775808.0, 9223372036854774784.0); break;
    case TFT_U8: case TFT_BOOL: case TFT_F8E4M3: case TFT_F8E5M2: PUTI(uint8_t, 0, 255); break;
    case TFT_I8: PUTI(int8_t, -128, 127); break;
    case TFT_I16: PUTI(int16_t, -32768, 32767); break;
    case TFT_U16: PUTI(uint16_t, 0, 65535); break;
    case TFT_U32: PUTI(uint32_t, 0, 4294967295.0); break;
    case TFT_U64: PUTI(uint64_t, 0, 18446744073709549568.0); break;
    default: break;
    }
#undef PUTI
}

/* The data kinds. Each fills n elements; some plant one odd element or
 * value class in one block so that the blocks around it stay fast. */
enum { D_CENTRED, D_OFFSET, D_DRIFT, D_SPECIAL, D_OVER, D_TINY, D_ZEROS, D_INTEDGE, D_BIGINT, D_RAWBITS, NDATA };
static const char *const data_names[] = { "centred", "offset", "drift", "special", "over65504", "tiny",
                                          "zeros", "int-edge", "bigint", "raw-bits" };

static int is_int(int dtype)
{
    return dtype == TFT_I32 || dtype == TFT_I64 || dtype == TFT_I8 || dtype == TFT_I16 || dtype == TFT_U16 ||
           dtype == TFT_U32 || dtype == TFT_U64 || dtype == TFT_U8 || dtype == TFT_BOOL;
}

static void fill(int dtype, int kind, unsigned char *p, size_t n)
{
    double scale = is_int(dtype) ? 1000.0 : 1.0;
    for (size_t i = 0; i < n; i++) {
        double v = (urand() * 4 - 2) * scale;
        switch (kind) {
        case D_OFFSET: v = 1e4 + (is_int(dtype) ? floor(v) : v * 0.01); break;
        case D_DRIFT: v = (double)i * (is_int(dtype) ? 3.0 : 0.37) + v; break; /* blocks far from the frame */
        case D_ZEROS: v = (rng() & 1) ? 0.0 : -0.0; break;
        case D_TINY: v = ldexp(urand() * 2 - 1, -(int)(rng() % 40)); break;
        case D_INTEDGE: v = (rng() & 1 ? 65504.0 : -65504.0) + (double)(int)(rng() % 3) - 1; break;
        case D_BIGINT:
            v = (rng() % 3 == 0) ? ldexp(urand() + 1, 53 + (int)(rng() % 8)) * (rng() & 1 ? 1 : -1)
                                 : (rng() % 3 == 0 ? ldexp(urand() + 1, 31) : v);
            break;
        default: break;
        }
        if (dtype == TFT_BOOL)
            v = (rng() & 3) == 0;
        put(dtype, p, i, v);
    }
    size_t at = n ? (size_t)(rng() % n) : 0;
    if (n && kind == D_SPECIAL) {
        static const double sp[] = { NAN, INFINITY, -INFINITY, -NAN };
        put(dtype, p, at, sp[rng() % 4]);
        if (n > 5000) /* and a second block with another */
            put(dtype, p, (at + 4500) % n, sp[rng() % 4]);
    }
    if (n && kind == D_OVER)
        put(dtype, p, at, (rng() & 1 ? 1 : -1) * (65504.0 + 1 + (double)(rng() % 100000)));
    if (kind == D_RAWBITS) /* every bit pattern: NaN payloads, subnormals, extremes */
        for (size_t i = 0; i < n * tft_dtype_size(dtype); i++)
            p[i] = (unsigned char)rng();
}

/* ---- tft_stats_compute, every set against the generic one ------------------ */

static void check_compute(int dtype, int kind, const unsigned char *p, size_t n)
{
    for (int mode = TFT_STATS_HEALTH; mode <= TFT_STATS_FULL; mode++) {
        tft_stats ref, got;
        tft_stats_set_isa(STATS_ISA_GENERIC);
        int rc = tft_stats_compute(dtype, p, n, mode, &ref);
        CHECKF(rc == 0, "generic rc %d", rc);
        for (int s = 0; s < NISA; s++) {
            if (!have_isa[s])
                continue;
            tft_stats_set_isa(isa_ids[s]);
            rc = tft_stats_compute(dtype, p, n, mode, &got);
            CHECKF(rc == 0 && memcmp(&ref, &got, sizeof ref) == 0,
                   "%s differs from generic: dtype %d %s n %zu mode %d misalign %u "
                   "(mean %.17g/%.17g std %.17g/%.17g l1 %.17g/%.17g min %.17g/%.17g zero %llu/%llu)",
                   isa_names[s], dtype, data_names[kind], n, mode, (unsigned)((uintptr_t)p % 8), got.mean,
                   ref.mean, got.std, ref.std, got.l1, ref.l1, got.min, ref.min,
                   (unsigned long long)got.zero, (unsigned long long)ref.zero);
        }
    }
    tft_stats_set_isa(STATS_ISA_AUTO);
}

static void test_compute(void)
{
    static const int dtypes[] = { TFT_F32, TFT_F64, TFT_F16, TFT_BF16, TFT_I32, TFT_I64, TFT_U8, TFT_BOOL,
                                  TFT_I8, TFT_I16, TFT_U16, TFT_U32, TFT_U64, TFT_F8E4M3, TFT_F8E5M2 };
    /* around 16/32/64-element vectors, the 256-element runs, pairs of runs
     * (512), the blocks (1024, 2048, 4096, 8192 elements) and past them */
    static const size_t lens[] = { 1,   15,   16,   17,   31,   32,   33,   63,   64,   65,   100,  255,
                                   256, 257,  511,  512,  513,  767,  768,  800,  1023, 1024, 1025, 1535,
                                   2047, 2048, 2049, 2560, 3072, 4095, 4096, 4097, 4608, 8191, 8192, 8193,
                                   MAXN };
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
            for (int kind = 0; kind < NDATA; kind++) {
                size_t n = lens[l];
                unsigned misalign = (unsigned)(rng() % 4 == 0 ? 1 + rng() % 7 : 0);
                unsigned char *p = bufmem + misalign;
                fill(dtypes[d], kind, p, n);
                check_compute(dtypes[d], kind, p, n);
            }
        }
    }
}

/* ---- the fused sweeps against decoding + the generic fast_f32 -------------- */

static float ref_el(int src, const unsigned char *raw, size_t i)
{
    uint16_t h;
    int32_t v32;
    int64_t v64;
    switch (src) {
    case TFT_F16: memcpy(&h, raw + 2 * i, 2); return tft_f16_to_f32(h);
    case TFT_BF16: memcpy(&h, raw + 2 * i, 2); return tft_bf16_to_f32(h);
    case TFT_I32: memcpy(&v32, raw + 4 * i, 4); return (float)v32;
    case TFT_I64: memcpy(&v64, raw + 8 * i, 8); return (float)v64;
    default: { float f; memcpy(&f, raw + 4 * i, 4); return f; }
    }
}

static float stage[4096 + 32];

static void check_sweep(const struct stats_kernels *kk, const char *name, int src, const unsigned char *raw,
                        size_t n, float k)
{
    struct fast_out ref, got;
    for (size_t i = 0; i < n; i++)
        stage[i] = ref_el(src, raw, i);
    stats_kernels_generic.fast_f32(stage, n, k, &ref);
    memset(&got, 0xa5, sizeof got);
    int rc = 0;
    if (src == TFT_F16 || src == TFT_BF16) {
        if (!kk->fast_h16)
            return;
        kk->fast_h16(raw, n, src == TFT_BF16, k, &got);
    } else if (src == TFT_I32 || src == TFT_I64) {
        if (!kk->fast_int)
            return;
        rc = kk->fast_int(raw, n, src == TFT_I64, k, &got);
        int beyond = 0;
        for (size_t i = 0; i < n && src == TFT_I64; i++) {
            int64_t v;
            memcpy(&v, raw + 8 * i, 8);
            beyond |= v < INT32_MIN || v > INT32_MAX;
        }
        CHECKF(rc == 0 || beyond, "%s fast_int refused n %zu with every element within 2^31", name, n);
        if (rc)
            return; /* allowed: the fast path is refused anyway */
    } else {
        kk->fast_f32((const float *)(const void *)raw, n, k, &got);
    }
    /* min and max may differ in the sign of a zero (the driver adds +0.0) */
    int same = memcmp(ref.lane, got.lane, sizeof ref.lane) == 0 && ref.zero == got.zero &&
               ref.tiny == got.tiny && ref.min == got.min && ref.max == got.max;
    int nan = isnan(ref.min) || isnan(ref.max); /* meaningless then (stats_internal.h) */
    if (nan)
        same = memcmp(ref.lane, got.lane, sizeof ref.lane) == 0 && ref.zero == got.zero &&
               ref.tiny == got.tiny;
    CHECKF(same, "%s sweep of dtype %d n %zu k %g: zero %llu/%llu tiny %llu/%llu min %g/%g max %g/%g lane0 %.17g/%.17g",
           name, src, n, (double)k, (unsigned long long)got.zero, (unsigned long long)ref.zero,
           (unsigned long long)got.tiny, (unsigned long long)ref.tiny, (double)got.min, (double)ref.min,
           (double)got.max, (double)ref.max, got.lane[0][0], ref.lane[0][0]);
}

static void test_sweeps(void)
{
    static const int srcs[] = { TFT_F32, TFT_F16, TFT_BF16, TFT_I32, TFT_I64 };
    static const size_t lens[] = { 0, 32, 64, 224, 256, 288, 480, 512, 544, 768, 992, 1024, 1056, 1536,
                                   2048, 2080, 3072, 3584, 4064, 4096 };
    static const float ks[] = { 0.0f, 0.5f, -3.25f, 1e4f, 1e-30f };
    for (int s = 0; s < NISA; s++) {
        if (!have_isa[s])
            continue;
        tft_stats_set_isa(isa_ids[s]);
        const struct stats_kernels *kk = stats_isa_kernels();
        tft_stats_set_isa(STATS_ISA_AUTO);
        for (size_t q = 0; q < sizeof srcs / sizeof srcs[0]; q++) {
            size_t maxn = srcs[q] == TFT_I64 ? 4096 / 2 : 4096;
            for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
                if (lens[l] > maxn)
                    continue;
                for (int kind = 0; kind < NDATA; kind++) {
                    int is_float_src = srcs[q] == TFT_F32 || srcs[q] == TFT_F16 || srcs[q] == TFT_BF16;
                    if ((kind == D_RAWBITS || kind == D_SPECIAL) && is_float_src)
                        continue; /* sums of NaN/Inf: refused by the driver, payloads unspecified */
                    unsigned char *p = bufmem + (rng() % 3 == 0 ? 1 + rng() % 7 : 0);
                    fill(srcs[q], kind, p, lens[l]);
                    for (size_t kk_ = 0; kk_ < sizeof ks / sizeof ks[0]; kk_++)
                        check_sweep(kk, isa_names[s], srcs[q], p, lens[l], ks[kk_]);
                }
            }
        }
    }
}

/* ---- the selection switch ---------------------------------------------------- */

static void test_select(void)
{
    CHECK(tft_stats_set_isa(99) == -EINVAL);
    CHECK(tft_stats_set_isa(STATS_ISA_GENERIC) == 0 && strcmp(tft_stats_isa_name(), "generic") == 0);
    for (int s = 0; s < NISA; s++) {
        tft_stats_set_isa(STATS_ISA_GENERIC);
        int rc = tft_stats_set_isa(isa_ids[s]);
        CHECK(rc == 0 || rc == -ENOTSUP);
        if (rc == 0)
            CHECK(strcmp(tft_stats_isa_name(), isa_names[s]) == 0);
        else
            CHECK(strcmp(tft_stats_isa_name(), "generic") == 0); /* unchanged by a refusal */
    }
    CHECK(tft_stats_set_isa(STATS_ISA_AUTO) == 0);
    /* auto picks the widest available set */
    const char *want = have_isa[1] ? "avx512" : have_isa[0] ? "avx2" : "generic";
    CHECKF(strcmp(tft_stats_isa_name(), want) == 0, "auto selects %s, want %s", tft_stats_isa_name(), want);
}

int main(void)
{
    const char *seed = getenv("TFT_TEST_ISA_SEED");
    if (seed && strtoull(seed, NULL, 0) != 0)
        rng_state = strtoull(seed, NULL, 0);
    for (int s = 0; s < NISA; s++) {
        have_isa[s] = tft_stats_set_isa(isa_ids[s]) == 0;
        if (!have_isa[s])
            printf("kernel set %s not available on this build or CPU: its checks are skipped\n", isa_names[s]);
    }
    tft_stats_set_isa(STATS_ISA_AUTO);
    printf("kernels: %s\n", tft_stats_isa_name());
    test_select();
    test_sweeps();
    test_compute();
    return TEST_DONE();
}
