/*
 * stats_isa.c — which statistics kernel set runs: the AVX2+FMA+F16C set
 * (stats_avx2.c) on CPUs and builds that have it, else the portable one
 * (stats_generic.c); tests and the benchmark may force one
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

const struct stats_kernels *stats_isa_kernels(void)
{
    const struct stats_kernels *k = NULL;
    if (isa_forced != STATS_ISA_GENERIC)
        k = kernels_avx2();
    return k ? k : &stats_kernels_generic;
}

int tft_stats_set_isa(int isa)
{
    if (isa == STATS_ISA_AVX2 && !kernels_avx2())
        return -ENOTSUP;
    if (isa != STATS_ISA_AUTO && isa != STATS_ISA_GENERIC && isa != STATS_ISA_AVX2)
        return -EINVAL;
    isa_forced = isa;
    return 0;
}

const char *tft_stats_isa_name(void)
{
    return stats_isa_kernels()->name;
}
