/*
 * stats_isa.c — which statistics kernel set runs: the AVX-512 set
 * (stats_avx512.c) on CPUs and builds that have it, else the AVX2+FMA+F16C
 * set (stats_avx2.c), else the portable one (stats_generic.c); all three
 * give the same bits. Tests and the benchmark may force one
 * (tft_stats_set_isa).
 */
#include <errno.h>

#include "stats_internal.h"

static int isa_forced; /* enum stats_isa; tests and the benchmark only */

#ifdef STATS_HAVE_AVX2
#include <cpuid.h>
#include <stdatomic.h>
/* CPUID + XGETBV by hand: clang 14's __builtin_cpu_supports lacks "f16c".
 * CPUID traps to the hypervisor in a VM (microseconds): asked once. */
static int cpu_probe_avx2_fma_f16c(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!(fma && osxsave && avx && f16c))
        return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 6) != 6) /* the OS saves XMM and YMM state */
        return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return 0;
    return (b >> 5) & 1; /* AVX2 */
}

static int cpu_has_avx2_fma_f16c(void)
{
    static _Atomic int cached = -1; /* racing first calls compute the same answer */
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        v = cpu_probe_avx2_fma_f16c();
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}
#endif

#ifdef STATS_HAVE_AVX512
/* AVX-512 F, DQ, BW and VL (CPUID 7.0 EBX bits 16, 17, 30, 31), POPCNT,
 * and an OS that saves the opmask and all 512-bit registers (XCR0 bits
 * 5-7 besides XMM and YMM); AVX2, FMA and F16C are checked apart. */
static int cpu_probe_avx512(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 23) & 1) || !((c >> 27) & 1))
        return 0; /* POPCNT, OSXSAVE */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0xe6) != 0xe6)
        return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return 0;
    const unsigned need = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31);
    return (b & need) == need;
}

static int cpu_has_avx512(void)
{
    static _Atomic int cached = -1; /* as cpu_has_avx2_fma_f16c */
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        v = cpu_probe_avx512();
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}
#endif

/* The AVX2 kernel set when this build has it and the CPU (and OS) support
 * AVX2, FMA and F16C; else NULL. Compiled for the baseline ISA. */
static const struct stats_kernels *kernels_avx2(void)
{
#ifdef STATS_HAVE_AVX2
    if (cpu_has_avx2_fma_f16c())
        return &stats_kernels_avx2;
#endif
    return NULL;
}

/* The AVX-512 set where the build, the CPU and the OS have it (and all the
 * AVX2 set needs); else NULL. */
static const struct stats_kernels *kernels_avx512(void)
{
#ifdef STATS_HAVE_AVX512
    if (cpu_has_avx2_fma_f16c() && cpu_has_avx512())
        return &stats_kernels_avx512;
#endif
    return NULL;
}

const struct stats_kernels *stats_isa_kernels(void)
{
    const struct stats_kernels *k = NULL;
    switch (isa_forced) {
    case STATS_ISA_GENERIC:
        break;
    case STATS_ISA_AVX2:
        k = kernels_avx2();
        break;
    default:
        k = kernels_avx512();
        if (!k)
            k = kernels_avx2();
        break;
    }
    return k ? k : &stats_kernels_generic;
}

int tft_stats_set_isa(int isa)
{
    if (isa != STATS_ISA_AUTO && isa != STATS_ISA_GENERIC && isa != STATS_ISA_AVX2 &&
        isa != STATS_ISA_AVX512)
        return -EINVAL;
    if ((isa == STATS_ISA_AVX2 && !kernels_avx2()) || (isa == STATS_ISA_AVX512 && !kernels_avx512()))
        return -ENOTSUP;
    isa_forced = isa;
    return 0;
}

const char *tft_stats_isa_name(void)
{
    return stats_isa_kernels()->name;
}
