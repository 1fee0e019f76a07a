/*
 * bench_stats.c — how fast the CPU tensor statistics run compared with the
 * machine's read bandwidth.
 *
 * For f32, bf16, f16, i32, i64, u8 and bool tensors of 64 KiB (cache-hot,
 * repeated) and 256 MiB (DRAM): GB/s of a plain float summing loop over the
 * same bytes (the baseline: what just reading costs), of tft_stats_compute
 * in HEALTH and FULL mode, and their ratio to the baseline. Baseline and
 * kernel alternate within one run and each reports its best of N samples,
 * so frequency and neighbour noise hit both alike. Then XXH3 alone.
 *
 * Besides the table, one BENCH-RESULT line per DRAM figure (bench/run.sh
 * collects them): ids stats.{health,full}.<dtype>.dram, goals HEALTH >= 0.9
 * and FULL >= 0.8 of the plain read.
 *
 * Usage: bench_stats [--quick] [--generic | --isa generic|avx2|avx512]
 *   --quick    fewer samples and a 64 MiB DRAM size (smoke run)
 *   --generic  force the portable kernels (= --isa generic)
 *   --isa      force a kernel set (default: the widest the CPU has)
 */
#define _GNU_SOURCE
#define XXH_STATIC_LINKING_ONLY
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "stats_internal.h"
#include "tft_stats.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The baseline: sum n floats with 16 independent accumulators, which the
 * compiler vectorises; on x86-64 also built for AVX2 so the baseline is as
 * fast as this CPU can read. */
#define SUM_BODY                                            \
    float acc[16] = { 0 };                                  \
    size_t i = 0, n16 = n - n % 16;                         \
    for (; i < n16; i += 16)                                \
        for (int j = 0; j < 16; j++)                        \
            acc[j] += x[i + (size_t)j];                     \
    float s = 0;                                            \
    for (int j = 0; j < 16; j++)                            \
        s += acc[j];                                        \
    for (; i < n; i++)                                      \
        s += x[i];                                          \
    return s

static float sum_plain(const float *x, size_t n)
{
    SUM_BODY;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static float sum_avx2(const float *x, size_t n)
{
    SUM_BODY;
}
#endif

static float baseline(const void *buf, size_t bytes)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx2"))
        return sum_avx2(buf, bytes / 4);
#endif
    return sum_plain(buf, bytes / 4);
}

static volatile double sink;

/* One timed sample of what (0 baseline, 1 HEALTH, 2 FULL, 3 XXH3, 4 blocked
 * fingerprint) over reps repetitions; returns seconds per repetition. */
static double sample(int what, int dtype, const void *buf, size_t bytes, int reps)
{
    size_t numel = bytes / tft_dtype_size(dtype);
    tft_stats st;
    double t = now();
    for (int r = 0; r < reps; r++) {
        switch (what) {
        case 0: sink += baseline(buf, bytes); break;
        case 1: tft_stats_compute(dtype, buf, numel, TFT_STATS_HEALTH, &st); sink += st.max; break;
        case 2: tft_stats_compute(dtype, buf, numel, TFT_STATS_FULL, &st); sink += st.std; break;
        case 3: sink += (double)XXH3_64bits(buf, bytes); break;
        case 4: sink += (double)tft_fingerprint_blocked(buf, bytes); break;
        }
    }
    return (now() - t) / reps;
}

static void fill(int dtype, void *buf, size_t bytes)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    size_t n = bytes / tft_dtype_size(dtype);
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        float v = (float)((double)(s >> 11) * 0x1p-53 * 4.0 - 2.0);
        if ((s & 7) == 0)
            v = 0.0f; /* ReLU-like zeros */
        switch (dtype) {
        case TFT_F32: ((float *)buf)[i] = v; break;
        case TFT_BF16: ((uint16_t *)buf)[i] = tft_f32_to_bf16(v); break;
        case TFT_F16: ((uint16_t *)buf)[i] = tft_f32_to_f16(v); break;
        case TFT_I32: ((int32_t *)buf)[i] = (int32_t)(v * 1000.0f); break; /* labels, indices */
        case TFT_I64: ((int64_t *)buf)[i] = (int64_t)(v * 1000.0f); break;
        case TFT_U8: ((uint8_t *)buf)[i] = (uint8_t)(s >> 56); break;
        default: ((uint8_t *)buf)[i] = (uint8_t)(v > 0); break; /* BOOL */
        }
    }
}

/* One BENCH-RESULT line (the contract with bench/run.sh). */
static void bench_result(const char *mode, const char *dtype, size_t bytes, double gb,
                         double base, double goal)
{
    printf("BENCH-RESULT {\"id\":\"stats.%s.%s.dram\",\"what\":\"%s statistics, %s, %zu MiB\","
           "\"unit\":\"GB/s\",\"figure\":%.2f,\"baseline\":%.2f,"
           "\"baseline_what\":\"plain summing read\",\"metric\":\"ratio\",\"value\":%.3f,"
           "\"goal_op\":\">=\",\"goal\":%.1f}\n",
           mode, dtype, strcmp(mode, "full") == 0 ? "FULL" : "HEALTH", dtype, bytes >> 20, gb, base,
           gb / base, goal);
}

/* Alternates the baseline and each mode, samples times, keeps the best;
 * prints the row, and for DRAM sizes (result set) returns the GB/s. */
static void bench_row(const char *name, int dtype, void *buf, size_t bytes, int samples,
                      double result[3])
{
    int reps = bytes <= (1u << 20) ? (int)((256u << 20) / bytes) : 1;
    double best[3] = { 1e30, 1e30, 1e30 };
    fill(dtype, buf, bytes);
    for (int k = 0; k < samples; k++) {
        for (int what = 0; what < 3; what++) {
            double t = sample(what, dtype, buf, bytes, reps);
            best[what] = t < best[what] ? t : best[what];
        }
    }
    double gb[3];
    for (int q = 0; q < 3; q++)
        gb[q] = (double)bytes / best[q] / 1e9;
    printf("%-5s %9zu KiB  %8.2f  %8.2f %6.2fx  %8.2f %6.2fx\n", name, bytes >> 10, gb[0], gb[1],
           gb[1] / gb[0], gb[2], gb[2] / gb[0]);
    fflush(stdout);
    if (result)
        memcpy(result, gb, sizeof gb);
}

int main(int argc, char **argv)
{
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--generic") == 0)
            tft_stats_set_isa(STATS_ISA_GENERIC);
        else if (strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
            static const char *const names[] = { "generic", "avx2", "avx512" };
            static const int ids[] = { STATS_ISA_GENERIC, STATS_ISA_AVX2, STATS_ISA_AVX512 };
            const char *want = argv[++i];
            int rc = -EINVAL;
            for (int k = 0; k < 3; k++)
                if (strcmp(want, names[k]) == 0)
                    rc = tft_stats_set_isa(ids[k]);
            if (rc != 0) {
                fprintf(stderr, "bench_stats: kernel set '%s' %s\n", want,
                        rc == -ENOTSUP ? "is not available on this build or CPU" : "is unknown (generic, avx2, avx512)");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: %s [--quick] [--generic | --isa generic|avx2|avx512]\n", argv[0]);
            return 2;
        }
    }
    size_t big = quick ? (64u << 20) : (256u << 20);
    int samples = quick ? 3 : 7;
    void *buf = aligned_alloc(64, big);
    if (!buf) {
        fprintf(stderr, "bench_stats: cannot allocate %zu MiB\n", big >> 20);
        return 1;
    }
    printf("tft_stats_compute, kernels: %s; GB/s, best of %d; ratio = kernel / baseline\n",
           tft_stats_isa_name(), samples);
    printf("%-5s %13s  %8s  %15s  %15s\n", "dtype", "size", "baseline", "HEALTH", "FULL");
    static const struct { const char *name; int dtype; } dts[] = {
        { "f32", TFT_F32 }, { "bf16", TFT_BF16 }, { "f16", TFT_F16 }, { "i32", TFT_I32 },
        { "i64", TFT_I64 }, { "u8", TFT_U8 }, { "bool", TFT_BOOL },
    };
    enum { NDT = sizeof dts / sizeof dts[0] };
    double res[NDT][3];
    for (size_t d = 0; d < NDT; d++) {
        bench_row(dts[d].name, dts[d].dtype, buf, 64u << 10, samples, NULL);
        bench_row(dts[d].name, dts[d].dtype, buf, big, samples, res[d]);
    }
    for (size_t d = 0; d < NDT; d++) {
        bench_result("full", dts[d].name, big, res[d][2], res[d][0], 0.8);
        bench_result("health", dts[d].name, big, res[d][1], res[d][0], 0.9);
    }
    printf("\nXXH3 alone, GB/s (best of %d):\n", samples);
    size_t sizes[2] = { 64u << 10, big };
    for (int s = 0; s < 2; s++) {
        int reps = s == 0 ? 4096 : 1;
        double b3 = 1e30, b4 = 1e30;
        for (int k = 0; k < samples; k++) {
            double t3 = sample(3, TFT_U8, buf, sizes[s], reps);
            double t4 = sample(4, TFT_U8, buf, sizes[s], reps);
            b3 = t3 < b3 ? t3 : b3;
            b4 = t4 < b4 ? t4 : b4;
        }
        printf("  %9zu KiB  XXH3_64bits %8.2f   blocked fingerprint %8.2f\n", sizes[s] >> 10,
               (double)sizes[s] / b3 / 1e9, (double)sizes[s] / b4 / 1e9);
    }
    free(buf);
    return 0;
}
