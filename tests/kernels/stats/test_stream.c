/*
 * test_stream.c — the streaming statistics (tft_stats_stream_*, tft_stats.h)
 * against tft_stats_compute: the same tft_stats, compared with memcmp, for
 * every dtype and mode, tensors from 0 elements to several blocks, pieces
 * of many lengths (1 element, primes, a block, not multiples of one, at odd
 * byte offsets), NaN/Inf/huge/tiny values, uncentred data, f64 that needs
 * the scaled second pass, both kernel sets; and the API's errors.
 */
#include "stats_internal.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double urand(void) { return (double)(rng() >> 11) * 0x1p-53; }

/* Element i of dtype at p, written from v (floats rounded, integers cut). */
static void put(int dtype, unsigned char *p, size_t i, double v)
{
    size_t sz = tft_dtype_size(dtype);
    union {
        float f; double d; uint16_t h; int64_t i64; uint64_t u64; uint8_t b[8];
    } u;
    memset(&u, 0, sizeof u);
    switch (dtype) {
    case TFT_F32: u.f = (float)v; break;
    case TFT_F64: u.d = v; break;
    case TFT_F16: u.h = tft_f32_to_f16((float)v); break;
    case TFT_BF16: u.h = tft_f32_to_bf16((float)v); break;
    case TFT_F8E4M3: case TFT_F8E5M2: u.b[0] = (uint8_t)rng(); break; /* any byte is a value */
    case TFT_BOOL: u.b[0] = (uint8_t)(v != 0); break;
    default: /* integers: little-endian two's complement of the rounded value */
        u.i64 = isfinite(v) ? (int64_t)fmod(v, 9.2e18) : 0;
        break;
    }
    memcpy(p + i * sz, &u, sz);
}

static int is_float(int dtype)
{
    return dtype == TFT_F32 || dtype == TFT_F64 || dtype == TFT_F16 || dtype == TFT_BF16;
}

/* kind 0: centred normal-ish; 1: 1e4 + noise (uncentred); 2: with specials
 * (NaN, +-Inf, huge, tiny, signed zeros); 3: f64 beyond 1e154 (rescue). */
static double value(int dtype, int kind)
{
    double x = (urand() - 0.5) * 6.0;
    if (!is_float(dtype))
        return (double)(int64_t)(rng() >> (rng() % 60)) * (rng() & 1 ? 1 : -1);
    if (kind == 1)
        return 1e4 + x;
    if (kind == 2 && rng() % 16 == 0) {
        static const double sp[] = {NAN, INFINITY, -INFINITY, 70000.0, -1e38, 1e-40, -0.0, 0.0, 1e-7, 65504.0};
        return sp[rng() % (sizeof sp / sizeof sp[0])];
    }
    if (kind == 3 && rng() % 8 == 0)
        return 1e300 * x;
    return x;
}

#define MAXN (5 * 2048 + 333)
static unsigned char data[MAXN * 8 + 16];

/* Streams n elements at p in pieces whose lengths cycle through plen
 * (0 = random 0..3000), then compares with tft_stats_compute. */
static void check(const char *what, int dtype, const unsigned char *p, size_t n, int mode, size_t plen)
{
    tft_stats ref, got;
    int er = tft_stats_compute(dtype, p, n, mode, &ref);
    static tft_stats_stream s; /* static: 10 KiB, and under ASan */
    int e = tft_stats_stream_begin(&s, dtype, n, mode);
    size_t esz = tft_dtype_size(dtype);
    for (size_t i = 0; !e && i < n;) {
        size_t k = plen ? plen : (size_t)(rng() % 3001);
        if (k > n - i)
            k = n - i;
        e = tft_stats_stream_update(&s, p + i * esz, k);
        i += k;
    }
    if (!e)
        e = tft_stats_stream_finish(&s, p, &got);
    checks++;
    if (e != er || (e == 0 && memcmp(&ref, &got, sizeof ref) != 0)) {
        failures++;
        if (failures <= 20)
            fprintf(stderr,
                    "FAIL %s: dtype %s n %zu mode %d pieces %zu: rc %d/%d mean %.17g/%.17g std %.17g/%.17g "
                    "l2 %.17g/%.17g fp %016llx/%016llx nan %llu/%llu\n",
                    what, tft_dtype_name(dtype), n, mode, plen, e, er, got.mean, ref.mean, got.std, ref.std,
                    got.l2, ref.l2, (unsigned long long)got.fingerprint, (unsigned long long)ref.fingerprint,
                    (unsigned long long)got.nan, (unsigned long long)ref.nan);
    }
}

static void test_all(void)
{
    static const size_t lens[] = {0, 1, 5, 15, 16, 63, 64, 100, 1023, 1024, 1025, 2047, 2048, 2049,
                                  4096, 4097, 8192, 8193, 3 * 2048 + 5, MAXN};
    static const size_t plens[] = {1, 7, 1000, 1024, 2048, 2049, 4096, 0, MAXN};
    for (int dtype = 0; dtype < TFT_DTYPE_COUNT; dtype++) {
        for (int kind = 0; kind < 4; kind++) {
            if (kind == 3 && dtype != TFT_F64)
                continue;
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                size_t n = lens[li];
                unsigned char *p = data + (li % 3); /* odd offsets: misaligned pieces */
                for (size_t i = 0; i < n; i++)
                    put(dtype, p, i, value(dtype, kind));
                for (int mode = TFT_STATS_SHAPE; mode <= TFT_STATS_FULL; mode++)
                    for (size_t pi = 0; pi < sizeof plens / sizeof plens[0]; pi++)
                        if (n <= 2049 || plens[pi] != 1) /* element by element: only the small ones */
                            check("random", dtype, p, n, mode, plens[pi]);
            }
        }
    }
}

/* A NaN or Inf alone in each of several positions of a block, and
 * all-NaN / all-Inf tensors, in f32 (the fast path must leave the block). */
static void test_specials(void)
{
    float *f = (float *)(void *)data;
    size_t n = 3 * 2048 + 11;
    size_t pos[] = {0, 31, 2047, 2048, 4100, n - 1};
    for (size_t k = 0; k < sizeof pos / sizeof pos[0]; k++) {
        for (size_t i = 0; i < n; i++)
            f[i] = (float)value(TFT_F32, 0);
        f[pos[k]] = k % 2 ? INFINITY : NAN;
        check("lone special", TFT_F32, data, n, TFT_STATS_FULL, 1000);
        check("lone special", TFT_F32, data, n, TFT_STATS_HEALTH, 2048);
    }
    for (size_t i = 0; i < n; i++)
        f[i] = NAN;
    check("all NaN", TFT_F32, data, n, TFT_STATS_FULL, 777);
    for (size_t i = 0; i < n; i++)
        f[i] = -INFINITY;
    check("all -Inf", TFT_F32, data, n, TFT_STATS_FULL, 2048);
    memset(data, 0, n * 4);
    check("all zero", TFT_F32, data, n, TFT_STATS_FULL, 333);
}

static void expect(const char *what, int got, int want)
{
    checks++;
    if (got != want) {
        failures++;
        fprintf(stderr, "FAIL %s: %d, want %d\n", what, got, want);
    }
}

static void test_errors(void)
{
    static tft_stats_stream s;
    tft_stats out;
    expect("bad dtype", tft_stats_stream_begin(&s, TFT_DTYPE_COUNT, 4, TFT_STATS_FULL), -EINVAL);
    expect("failed stream update", tft_stats_stream_update(&s, data, 1), -EINVAL);
    expect("bad mode", tft_stats_stream_begin(&s, TFT_F32, 4, 7), -EINVAL);
    expect("overflow", tft_stats_stream_begin(&s, TFT_F64, SIZE_MAX / 4, TFT_STATS_FULL), -EOVERFLOW);
    expect("NULL stream", tft_stats_stream_begin(NULL, TFT_F32, 4, TFT_STATS_FULL), -EINVAL);
    expect("begin", tft_stats_stream_begin(&s, TFT_F32, 10000, TFT_STATS_FULL), 0);
    expect("update", tft_stats_stream_update(&s, data, 6000), 0);
    expect("too many", tft_stats_stream_update(&s, data, 4001), -EINVAL);
    expect("after too many", tft_stats_stream_finish(&s, NULL, &out), -EINVAL);
    expect("begin", tft_stats_stream_begin(&s, TFT_F32, 10000, TFT_STATS_FULL), 0);
    expect("NULL piece", tft_stats_stream_update(&s, NULL, 1), -EINVAL);
    expect("begin", tft_stats_stream_begin(&s, TFT_F32, 10000, TFT_STATS_FULL), 0);
    expect("update", tft_stats_stream_update(&s, data, 9999), 0);
    expect("too few", tft_stats_stream_finish(&s, NULL, &out), -EINVAL);
    expect("out zeroed", out.numel == 0 && out.fingerprint == 0, 1);
    expect("begin", tft_stats_stream_begin(&s, TFT_F32, 10000, TFT_STATS_FULL), 0);
    expect("update", tft_stats_stream_update(&s, data, 10000), 0);
    expect("finish", tft_stats_stream_finish(&s, NULL, &out), 0);
    expect("finished twice", tft_stats_stream_finish(&s, NULL, &out), -EINVAL);
    /* f64 whose squares overflow: the rescue needs the whole tensor */
    double *d = (double *)(void *)data;
    for (size_t i = 0; i < 5000; i++)
        d[i] = 1e300 * (double)(i % 7);
    expect("begin", tft_stats_stream_begin(&s, TFT_F64, 5000, TFT_STATS_FULL), 0);
    expect("update", tft_stats_stream_update(&s, d, 5000), 0);
    expect("rescue without the tensor", tft_stats_stream_finish(&s, NULL, &out), -ERANGE);
}

int main(void)
{
    const char *isas[] = {"auto", "generic", "avx2", "avx512"};
    for (int isa = STATS_ISA_AUTO; isa <= STATS_ISA_AVX512; isa++) {
        if (tft_stats_set_isa(isa) < 0) {
            printf("kernel set %s not available: skipped\n", isas[isa]);
            continue;
        }
        test_all();
        test_specials();
    }
    tft_stats_set_isa(STATS_ISA_AUTO);
    test_errors();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
