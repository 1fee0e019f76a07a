/*
 * test_stats_cuda.c — the host side of the CUDA statistics library, on any
 * machine (no GPU needed): the device XXH3 port against libxxhash, the
 * device algorithm (emulated on the host with the same code) against
 * tft_stats_compute (fp8 included) and its fingerprint against
 * tft_fingerprint_blocked, and the no-device path (available() == 0,
 * launch -> -ENODEV) when no GPU is present. With a GPU, the real launch
 * is compared with the emulation.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "tft_stats.h"
#include "tft_stats_cuda.h"

#include "tft_test.h"
#include "tft_test_rng.h"

static uint64_t rng_state = 0x853c49e6748fea9bull;

static uint64_t rng(void) { return tft_test_rng(&rng_state); }

/* Every length through 2100 (all short paths, the long path's block and
 * stripe boundaries), big ones, and odd alignments. */
static void test_xxh3_port(void)
{
    enum { MAX = 3 * 65536 + 77 };
    unsigned char *buf = malloc(MAX + 8);
    for (size_t i = 0; i < MAX + 8; i++)
        buf[i] = (unsigned char)rng();
    for (size_t len = 0; len <= 2100; len++)
        CHECKF(tft_stats_cuda_xxh3(buf + (len % 8), len) == XXH3_64bits(buf + (len % 8), len),
              "xxh3 port len %zu", len);
    static const size_t big[] = { 4095, 4096, 4097, 65535, 65536, 65537, 100003, MAX };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        CHECKF(tft_stats_cuda_xxh3(buf + 1, big[i]) == XXH3_64bits(buf + 1, big[i]),
              "xxh3 port len %zu", big[i]);
    free(buf);
}

static int close_rel(double a, double b, double tol)
{
    return a == b || fabs(a - b) <= tol * fabs(b);
}

/* The device algorithm agrees with the CPU statistics: counts, min, max
 * exactly, fingerprint = the blocked one; moments within 1e-12 (both in
 * double) or, for the dtypes the CPU accumulates in float (f32, f16, bf16,
 * small i32/i64), within the CPU's documented bounds (tft_stats.h): the
 * device accumulates in double, so the CPU's error is all the difference. */
static void compare_emulation(const char *what, int dtype, const void *data, size_t n)
{
    for (int mode = TFT_STATS_SHAPE; mode <= TFT_STATS_FULL; mode++) {
        tft_stats c, g;
        CHECKF(tft_stats_compute(dtype, data, n, mode, &c) == 0, "%s cpu", what);
        CHECKF(tft_stats_cuda_emulate(dtype, data, n, mode, &g) == 0, "%s emulate", what);
        uint64_t want_fp = 0;
        if (mode != TFT_STATS_SHAPE)
            want_fp = tft_fingerprint_blocked(data, n * tft_dtype_size(dtype));
        CHECKF(g.fingerprint == want_fp, "%s mode %d: fingerprint", what, mode);
        if (n * tft_dtype_size(dtype) <= TFT_FP_BLOCK_BYTES)
            CHECKF(g.fingerprint == c.fingerprint, "%s: small tensors share the plain XXH3", what);
        CHECKF(g.numel == c.numel && g.nan == c.nan && g.pinf == c.pinf && g.ninf == c.ninf &&
                  g.zero == c.zero && g.over_fp16 == c.over_fp16 && g.over_bf16 == c.over_bf16 &&
                  g.under_fp16 == c.under_fp16,
              "%s mode %d: counts", what, mode);
        CHECKF(g.min == c.min && g.max == c.max && g.absmax == c.absmax, "%s mode %d: min/max",
              what, mode);
        double scale = c.numel ? c.l1 / (double)c.numel : 0;
        int f = dtype == TFT_F32 || dtype == TFT_F16 || dtype == TFT_BF16 || dtype == TFT_I32 ||
                dtype == TFT_I64;
        double tm = f ? TFT_STATS_F32ACC_MEAN * c.std : 0, tr = f ? TFT_STATS_F32ACC_REL : 0;
        double tl = f ? TFT_STATS_F32ACC_L1 : 0;
        CHECKF(fabs(g.mean - c.mean) <= 1e-12 * scale + tm, "%s: mean %.17g/%.17g", what, g.mean,
              c.mean);
        CHECKF(close_rel(g.std, c.std, 1e-12 + tr) && close_rel(g.l1, c.l1, 1e-12 + tl) &&
                  close_rel(g.l2, c.l2, 1e-12 + tr),
              "%s mode %d: std %.17g/%.17g l1 %.17g/%.17g l2 %.17g/%.17g", what, mode, g.std,
              c.std, g.l1, c.l1, g.l2, c.l2);
    }
}

static void test_emulation(void)
{
    enum { N = 200000 };
    float *f = malloc(N * sizeof *f);
    for (size_t i = 0; i < N; i++)
        f[i] = (float)((double)(rng() >> 11) * 0x1p-53 * 8.0 - 3.0);
    for (size_t i = 0; i < N; i += 97)
        f[i] = 0.0f;
    f[5] = NAN;
    f[70001] = INFINITY;
    f[123456] = -1e38f;
    f[100] = 1e-41f;
    compare_emulation("f32 200000", TFT_F32, f, N);
    compare_emulation("f32 16384 (one tile)", TFT_F32, f, 16384);
    compare_emulation("f32 16385", TFT_F32, f, 16385);
    compare_emulation("f32 33", TFT_F32, f, 33);
    compare_emulation("empty", TFT_F32, f, 0);
    compare_emulation("u8 as bytes", TFT_U8, f, 70001);
    compare_emulation("bf16", TFT_BF16, f, 2 * 40000 + 1);
    compare_emulation("f16", TFT_F16, f, 2 * 40000 + 3);
    compare_emulation("i32", TFT_I32, f, 50000);
    /* fp8: the bytes of the floats (every pattern, NaNs and Infs included),
     * many tiles, an odd tail; and each format's 256 values in one tile */
    compare_emulation("f8e4m3", TFT_F8E4M3, f, 4 * 50000 + 5);
    compare_emulation("f8e5m2", TFT_F8E5M2, f, 4 * 50000 + 5);
    unsigned char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    compare_emulation("f8e4m3 all values", TFT_F8E4M3, all, 256);
    compare_emulation("f8e5m2 all values", TFT_F8E5M2, all, 256);
    CHECKF(tft_stats_cuda_scratch_bytes(TFT_F8E4M3, 1 << 20) == tft_stats_cuda_scratch_bytes(TFT_U8, 1 << 20) &&
              tft_stats_cuda_scratch_bytes(TFT_F8E5M2, 1 << 20) == tft_stats_cuda_scratch_bytes(TFT_U8, 1 << 20),
          "fp8 elements are one byte on the device");
    double *d = malloc(30001 * sizeof *d);
    for (size_t i = 0; i < 30001; i++)
        d[i] = 1e8 + (double)f[i]; /* NaN and Inf carried over */
    compare_emulation("f64 1e8+x", TFT_F64, d, 30001);
    free(d);
    tft_stats s;
    CHECKF(tft_stats_cuda_emulate(99, f, 1, TFT_STATS_FULL, &s) == -EINVAL, "bad dtype");
    free(f);
    CHECKF(tft_stats_cuda_emulate(TFT_F32, NULL, 1, TFT_STATS_FULL, &s) == -EINVAL, "NULL data");
    CHECKF(tft_stats_cuda_scratch_bytes(TFT_F32, 1 << 20) >= 64 * (112 + 8) &&
              tft_stats_cuda_scratch_bytes(99, 10) == 0,
          "scratch size");
}

/* Without a GPU: no crash, no output, 0 and -ENODEV. */
static void test_no_device(void)
{
    int avail = tft_stats_cuda_available();
    printf("cuda device available: %d\n", avail);
    CHECKF(avail == 0 || avail == 1, "available() = %d", avail);
    CHECKF(tft_stats_cuda_available() == avail, "available() is stable");
    tft_stats out;
    tft_stats_cuda_pending pend = { 0 };
    float x = 1.0f;
    CHECKF(tft_stats_cuda_launch(99, &x, 1, TFT_STATS_FULL, NULL, NULL, 0, &out, &pend) == -EINVAL,
          "bad dtype");
    CHECKF(tft_stats_cuda_query(&pend) == -EINVAL && tft_stats_cuda_wait(&pend) == -EINVAL,
          "idle pending");
    if (!avail)
        CHECKF(tft_stats_cuda_launch(TFT_F32, &x, 1, TFT_STATS_FULL, NULL, NULL, 0, &out, &pend) ==
                  -ENODEV && pend.event == NULL,
              "launch without a device");
}

int main(void)
{
    test_xxh3_port();
    test_emulation();
    test_no_device();
    return TEST_DONE();
}
