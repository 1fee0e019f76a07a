/*
 * stats.c — tensor statistics on the CPU (tft_stats.h): the driver, the
 * portable C kernels, fp16/bf16/fp8 conversions and the fingerprints.
 *
 * One pass over the data: the tensor is cut into blocks of 8 KiB; each
 * block's statistics are computed (stats_kernels, two cache-hot sweeps at
 * most), merged into the running totals in block order, and then the same
 * bytes go to the XXH3 streaming state while they are still in L1. fp16,
 * bf16, fp8, integer and misaligned blocks are first decoded or copied into
 * an 8 KiB stack buffer (fp8 blocks hold 2048 elements, like fp16's).
 *
 * FULL statistics of f32, f16, bf16 (read in place by the AVX2 kernels)
 * and i32/i64 blocks take the fast path first: one fused sweep (fast_f32,
 * fast_h16) with float accumulators folded into double every 256 elements,
 * about a float shift (0, or the frame's K). A block with NaN, Inf, |x| >
 * 65504, tiny squares or badly conditioned sums goes to the double path
 * below instead (tft_stats.h states the error bounds). HEALTH of fp16,
 * bf16, i32 and i64 reads the raw patterns (health_native); U8 and BOOL take
 * exact integer sums (u8_pass).
 *
 * Moments, double path: all sums are taken in a frame shifted by K, the
 * mean of the first block that has finite values: each block accumulates
 * sum(x-K), sum((x-K)^2) and sum|x| in double. A block whose shifted sums are badly
 * conditioned (sum((x-K)^2) above 1024 times its own sum of squared
 * deviations, i.e. K is far from the block's values) is summed again about
 * its own mean. Blocks are combined in the frame with Chan's pairwise
 * update, so means and their differences stay small numbers and std is
 * accurate to ~1e-15 for data like 1e8 + noise. f64 data beyond ~1e154,
 * whose squares overflow, get a second, scaled pass for the moments.
 *
 * Streaming (tft_stats_stream_*): the same blocks through the same code
 * (pass_block, u8_block) as the caller's pieces arrive, a block that
 * straddles two pieces assembled in the stream's buffer, the XXH3 state
 * carried along; tensors of at most one block are buffered whole and given
 * to tft_stats_compute at finish. So the results are bit-identical.
 *
 * Limits: any numel whose byte size fits size_t; about 9 KiB of stack.
 * Workload: called by the recorder on the thread that produced the tensor.
 */
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>
#ifdef TFT_XXH_DISPATCH
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#endif

#include <errno.h>
#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define HAVE_MXCSR 1
#endif
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "stats_internal.h"

#define F16_MAX 65504.0
#define F16_TINY 0x1p-14              /* smallest normal fp16 */
#define BF16_MAX 0x1.fep127           /* 3.3895313892515355e38 */
#define ILL_CONDITIONED 1024.0        /* see the file comment */

/* Running totals over the blocks merged so far. */
struct acc {
    struct part c;  /* counts, min and max */
    double k;       /* frame shift K: the first finite block's mean (FULL) */
    int have_k;     /* k is set */
    double mean;    /* mean of the finite elements so far, minus k */
    double m2;      /* sum of squared deviations from the mean */
    double sumsq;   /* sum of x^2 */
    double l1;      /* sum of |x| */
};

/* ------------------------------------------------------------------------ */
/* Floating-point environment                                                */
/* ------------------------------------------------------------------------ */

/* Puts the FPU in the state the kernels assume (round to nearest, no
 * denormals-are-zero or flush-to-zero, exceptions masked) and returns the
 * caller's state for fpenv_leave. Training code often sets DAZ/FTZ, and a
 * debugger may unmask FE_INVALID: neither may change or crash a statistic. */
static unsigned fpenv_enter(void)
{
#ifdef HAVE_MXCSR
    unsigned saved = _mm_getcsr();
    if (saved != 0x1f80u) /* LDMXCSR costs more than the test: skip it in the usual state */
        _mm_setcsr(0x1f80u);
    return saved;
#else
    return 0;
#endif
}

/* Restores the state saved by fpenv_enter, exception flags included, so the
 * caller sees no trace of the computation. */
static void fpenv_leave(unsigned saved)
{
#ifdef HAVE_MXCSR
    if (_mm_getcsr() != saved) /* the flags the kernels raised, or the caller's own state */
        _mm_setcsr(saved);
#else
    (void)saved;
#endif
}

/* ------------------------------------------------------------------------ */
/* Scalar conversions                                                         */
/* ------------------------------------------------------------------------ */

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Integer-only except for the subnormal case, which converts an integer
 * below 1024 exactly; so DAZ/FTZ never matter. NaNs come out quiet (as
 * F16C's vcvtph2ps makes them), keeping sign and payload. */
float tft_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    if (em >= 0x7c00u) {
        uint32_t m = (em & 0x3ffu) << 13;
        return f32_from_bits(sign | 0x7f800000u | m | (m ? 0x00400000u : 0));
    }
    if (em >= 0x0400u)
        return f32_from_bits(sign | ((em << 13) + 0x38000000u));
    return f32_from_bits(sign | f32_bits((float)em * 0x1p-24f));
}

/* Round to nearest even on the bit pattern; the same results as F16C's
 * vcvtps2ph with rounding immediate 0. */
uint16_t tft_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)                    /* NaN: quiet, top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u)                   /* >= 65520 rounds to Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) {                 /* normal fp16 */
        uint32_t h = (ax - 0x38000000u) >> 13, r = ax & 0x1fffu;
        h += (r > 0x1000u) || (r == 0x1000u && (h & 1u));
        return (uint16_t)(sign | h);
    }
    if (ax <= 0x33000000u)                   /* <= 2^-25 rounds to 0 */
        return sign;
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    unsigned s = 126u - (ax >> 23);          /* 14..24 */
    uint32_t h = mant >> s, r = mant & ((1u << s) - 1u), half = 1u << (s - 1u);
    h += (r > half) || (r == half && (h & 1u));
    return (uint16_t)(sign | h);
}

float tft_bf16_to_f32(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

/* The 256 values of each 8-bit float format, as constant expressions from
 * the bit fields (so built at compile time, shared by every thread):
 * E4M3FN (8 + m) * 2^(e-10), subnormal m * 2^-9, S.1111.111 NaN; E5M2
 * (4 + m) * 2^(e-17), subnormal m * 2^-16, exponent 31 Inf or NaN. Every
 * value has at most 4 significant bits, so each product is exact. NaNs are
 * the quiet NaN with the byte's sign. */
#define F8_R4(X, b) X(b), X((b) + 1), X((b) + 2), X((b) + 3)
#define F8_R16(X, b) F8_R4(X, b), F8_R4(X, (b) + 4), F8_R4(X, (b) + 8), F8_R4(X, (b) + 12)
#define F8_R64(X, b) F8_R16(X, b), F8_R16(X, (b) + 16), F8_R16(X, (b) + 32), F8_R16(X, (b) + 48)
#define F8_R256(X) F8_R64(X, 0), F8_R64(X, 64), F8_R64(X, 128), F8_R64(X, 192)
#define F8_SIGNED(b, mag) (((b) & 0x80) ? -(mag) : (mag))
#define E4M3_MAG(b)                                                                     \
    (((b) & 0x7f) == 0x7f ? NAN                                                         \
     : ((b) & 0x78)       ? (float)((8 + ((b) & 7)) << (((b) >> 3) & 15)) * 0x1p-10f    \
                          : (float)((b) & 7) * 0x1p-9f)
#define E5M2_MAG(b)                                                                     \
    (((b) & 0x7c) == 0x7c ? (((b) & 3) ? NAN : INFINITY)                                \
     : ((b) & 0x7c)       ? (float)((4ull + ((b) & 3)) << (((b) >> 2) & 31)) * 0x1p-17f \
                          : (float)((b) & 3) * 0x1p-16f)
#define E4M3_VAL(b) F8_SIGNED(b, E4M3_MAG(b))
#define E5M2_VAL(b) F8_SIGNED(b, E5M2_MAG(b))
static const float f8e4m3_values[256] = { F8_R256(E4M3_VAL) };
static const float f8e5m2_values[256] = { F8_R256(E5M2_VAL) };

float tft_f8e4m3_to_f32(uint8_t b) { return f8e4m3_values[b]; }

float tft_f8e5m2_to_f32(uint8_t b) { return f8e5m2_values[b]; }

void tft_f8e4m3_to_f32_n(const uint8_t *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = f8e4m3_values[in[i]];
}

void tft_f8e5m2_to_f32_n(const uint8_t *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = f8e5m2_values[in[i]];
}

/* Adding 0x7fff plus the lowest kept bit rounds to nearest even and carries
 * into the exponent (up to Inf) by itself. */
uint16_t tft_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x0040u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* ------------------------------------------------------------------------ */
/* Portable kernels (the reference lane structure, stats_internal.h)         */
/* ------------------------------------------------------------------------ */

#define ALWAYS_INLINE inline __attribute__((always_inline))

static ALWAYS_INLINE double load_el(const void *x, size_t i, int is64)
{
    return is64 ? ((const double *)x)[i] : (double)((const float *)x)[i];
}

static void part_init(struct part *p)
{
    memset(p, 0, sizeof *p);
    p->min = INFINITY;
    p->max = -INFINITY;
}

/* Counts one element of any class into p (min and max over finite ones).
 * Returns 1 when v is finite. */
static ALWAYS_INLINE int classify(double v, struct part *p)
{
    double a = fabs(v);
    if (isnan(v)) {
        p->nan++;
        return 0;
    }
    if (isinf(v)) {
        if (v > 0)
            p->pinf++;
        else
            p->ninf++;
        return 0;
    }
    p->nfin++;
    p->zero += v == 0.0;
    p->tiny += a < F16_TINY;
    p->over16 += a > F16_MAX;
    p->overbf += a > BF16_MAX;
    p->min = v < p->min ? v : p->min;
    p->max = v > p->max ? v : p->max;
    return 1;
}

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

static void gen_stats_u8(const uint8_t *x, size_t n, struct u8_out *o)
{
    uint64_t zero = 0, s1 = 0, s2 = 0;
    uint8_t mn = 255, mx = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned v = x[i];
        zero += v == 0;
        s1 += v;
        s2 += v * v;
        mn = v < mn ? (uint8_t)v : mn;
        mx = v > mx ? (uint8_t)v : mx;
    }
    o->zero = zero;
    o->s1 = s1;
    o->s2 = s2;
    o->min = mn;
    o->max = mx;
}

static void gen_dec_f16(const unsigned char *raw, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, raw + 2 * i, 2);
        out[i] = tft_f16_to_f32(h);
    }
}

static void gen_dec_bf16(const unsigned char *raw, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, raw + 2 * i, 2);
        out[i] = tft_bf16_to_f32(h);
    }
}

static void gen_enc_f16(const float *in, size_t n, uint16_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = tft_f32_to_f16(in[i]);
}

static void gen_enc_bf16(const float *in, size_t n, uint16_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = tft_f32_to_bf16(in[i]);
}

static const struct stats_kernels kernels_generic = {
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

/* ------------------------------------------------------------------------ */
/* Kernel selection                                                           */
/* ------------------------------------------------------------------------ */

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

static const struct stats_kernels *kernels_get(void)
{
    const struct stats_kernels *k = NULL;
    if (isa_forced != STATS_ISA_GENERIC)
        k = kernels_avx2();
    return k ? k : &kernels_generic;
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
    return kernels_get()->name;
}

/* ------------------------------------------------------------------------ */
/* Blocks: statistics and merging                                            */
/* ------------------------------------------------------------------------ */

/* Sums the four lanes left to right, then the tail's scalar sum. */
static double lanes_fold(const double lane[4], double tail)
{
    return lane[0] + lane[1] + lane[2] + lane[3] + tail;
}

static double first_finite(const void *x, size_t n, int is64)
{
    for (size_t i = 0; i < n; i++) {
        double v = load_el(x, i, is64);
        if (isfinite(v))
            return v;
    }
    return 0.0;
}

/* Sums of a whole block about k: the kernel for the first n & ~15 elements,
 * scalar code for the rest (shared by all kernel sets). out: sum(x-k),
 * sum((x-k)^2), sum|x| over the finite elements. */
static void block_sums(const struct stats_kernels *kk, const void *x, size_t n, int is64,
                       int masked, double k, double out[3])
{
    lane_sums s = { { 0 } };
    struct part scratch;
    size_t n16 = n & ~(size_t)15;
    if (is64 && masked)
        kk->masked_f64(x, n16, 1, k, &scratch, s);
    else if (is64)
        kk->sums_f64(x, n16, k, s);
    else if (masked)
        kk->masked_f32(x, n16, 1, k, &scratch, s);
    else
        kk->sums_f32(x, n16, k, s);
    double t[3] = { 0, 0, 0 };
    for (size_t i = n16; i < n; i++) {
        double v = load_el(x, i, is64);
        if (isfinite(v)) {
            double d = v - k;
            t[0] += d;
            t[1] += d * d;
            t[2] += fabs(v);
        }
    }
    for (int q = 0; q < 3; q++)
        out[q] = lanes_fold(s[q], t[q]);
}

/* Counts, min and max of a whole block; returns 1 when the masked kernels
 * had to be used (the sums must then be masked too). */
static int block_counts(const struct stats_kernels *kk, const void *x, size_t n, int is64,
                        int full, struct part *p)
{
    size_t n16 = n & ~(size_t)15;
    int masked = is64 ? kk->counts_f64(x, n16, full, p) : kk->counts_f32(x, n16, full, p);
    if (masked) {
        if (is64)
            kk->masked_f64(x, n16, 0, 0.0, p, NULL);
        else
            kk->masked_f32(x, n16, 0, 0.0, p, NULL);
    }
    for (size_t i = n16; i < n; i++)
        classify(load_el(x, i, is64), p);
    return masked;
}

/* Merges one block into the totals (Chan et al.'s pairwise update in the
 * frame shifted by A->k). s: the block's sums about A->k + s[3]. */
static void acc_merge(struct acc *A, const struct part *p, const double s[4], int full)
{
    struct part *c = &A->c;
    uint64_t na = c->nfin, nb = p->nfin;
    c->nfin += nb;
    c->nan += p->nan;
    c->pinf += p->pinf;
    c->ninf += p->ninf;
    c->zero += p->zero;
    c->tiny += p->tiny;
    c->over16 += p->over16;
    c->overbf += p->overbf;
    c->min = p->min < c->min ? p->min : c->min;
    c->max = p->max > c->max ? p->max : c->max;
    if (!full || nb == 0)
        return;
    double mb = s[3] + s[0] / (double)nb;
    double m2b = s[1] - s[0] * (s[0] / (double)nb);
    m2b = m2b > 0 ? m2b : 0.0;
    double nt = (double)(na + nb), delta = mb - A->mean, xb = A->k + mb;
    A->mean += delta * ((double)nb / nt);
    A->m2 += m2b + delta * delta * ((double)na * (double)nb / nt);
    A->sumsq += m2b + (double)nb * xb * xb;
    A->l1 += s[2];
}

/* The frame shift: the mean of the first block with finite values, from
 * sums about its first finite element. */
static void frame_init(const struct stats_kernels *kk, const void *x, size_t n, int is64,
                       int masked, uint64_t nfin, struct acc *A)
{
    double s[3];
    double x0 = first_finite(x, n, is64);
    block_sums(kk, x, n, is64, masked, x0, s);
    A->k = x0 + s[0] / (double)nfin;
    A->have_k = 1;
}

/* Statistics of one block of n floats (is64 = 0) or doubles (is64 = 1),
 * element-aligned, merged into A. */
static void block_stats(const struct stats_kernels *kk, const void *x, size_t n, int is64,
                        int full, struct acc *A)
{
    struct part p;
    part_init(&p);
    int masked = block_counts(kk, x, n, is64, full, &p);
    double s[4] = { 0, 0, 0, 0 };
    if (full && p.nfin > 0) {
        if (!A->have_k)
            frame_init(kk, x, n, is64, masked, p.nfin, A);
        double k = A->k;
        block_sums(kk, x, n, is64, masked, k, s);
        double m2 = s[1] - s[0] * (s[0] / (double)p.nfin);
        if (s[1] > ILL_CONDITIONED * m2) {
            k += s[0] / (double)p.nfin;
            block_sums(kk, x, n, is64, masked, k, s);
        }
        s[3] = k - A->k;
    }
    acc_merge(A, &p, s, full);
}

/* Element i of raw fp16 (h16 TFT_F16) or bf16 (TFT_BF16) data. */
static float h16_value(const void *raw, int h16, size_t i)
{
    uint16_t h;
    memcpy(&h, (const unsigned char *)raw + 2 * i, 2);
    return h16 == TFT_BF16 ? tft_bf16_to_f32(h) : tft_f16_to_f32(h);
}

/* The fast FULL path for float data (f32, i32/i64 converted, or raw f16/bf16
 * when h16 names the dtype and the kernel set reads them): one fused
 * sweep with float accumulators (stats_internal.h), about a float shift.
 * Results s[0..2] as acc_merge wants them, p's counts, min and max. Returns
 * 0, or -1 when this block must take the double path instead: a NaN or an
 * Inf (the sums are then not finite), |x| above 65504 (over_fp16 must be
 * counted, and squares could overflow), or squares that may have lost
 * precision to float underflow (sum of squares below 2^-96). */
#define FAST_TINY_S2 0x1p-96
#define STATS_FAST_MIN 64 /* elements; see tensor_pass */
static int fast_sums(const struct stats_kernels *kk, const void *x, int h16, size_t n, float k,
                     struct part *p, double s[3])
{
    struct fast_out o;
    size_t n32 = n & ~(size_t)31;
    if (h16)
        kk->fast_h16(x, n32, h16 == TFT_BF16, k, &o);
    else
        kk->fast_f32(x, n32, k, &o);
    double t[3] = { 0, 0, 0 };
    uint64_t zero = o.zero, tiny = o.tiny;
    double mn = o.min, mx = o.max;
    for (size_t i = n32; i < n; i++) {
        float f = h16 ? h16_value(x, h16, i) : ((const float *)x)[i];
        double v = f, d = (double)(f - k);
        zero += v == 0.0;
        tiny += fabs(v) < F16_TINY;
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
        t[0] += d;
        t[1] += d * d;
        t[2] += fabs(v);
    }
    for (int q = 0; q < 3; q++) {
        const double *l = o.lane[q];
        s[q] = (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))) + t[q];
    }
    if (!(isfinite(s[0]) && isfinite(s[1]) && isfinite(s[2])) || !(mn >= -F16_MAX && mx <= F16_MAX))
        return -1;
    if (s[1] < FAST_TINY_S2 && zero < n)
        return -1;
    part_init(p);
    p->nfin = n;
    p->zero = zero;
    p->tiny = tiny;
    p->min = mn;
    p->max = mx;
    return 0;
}

/* A block of n floats through the fast path, merged into A; returns -1
 * (A untouched) when it must take the double path. The shift is the
 * frame's, as a float (0 until a frame is set, so centred data need no
 * subtraction); a block whose sum of squares about it exceeds FAST_COND
 * times its sum of squared deviations is summed again about its own mean
 * (rounded to float), and goes to the double path if that does not help. */
#define FAST_COND 2.0
static int block_stats_fast(const struct stats_kernels *kk, const void *x, int h16, size_t n,
                            struct acc *A)
{
    struct part p;
    double s[4];
    float k = A->have_k ? (float)A->k + 0.0f : 0.0f;
    if (fast_sums(kk, x, h16, n, k, &p, s) < 0)
        return -1;
    double m2 = s[1] - s[0] * (s[0] / (double)n);
    if (s[1] > FAST_COND * m2) {
        k = (float)((double)k + s[0] / (double)n) + 0.0f;
        if (fast_sums(kk, x, h16, n, k, &p, s) < 0)
            return -1;
        m2 = s[1] - s[0] * (s[0] / (double)n);
        if (s[1] > FAST_COND * m2)
            return -1;
    }
    if (!A->have_k) {
        A->k = k;
        A->have_k = 1;
    }
    s[3] = (double)k - A->k;
    acc_merge(A, &p, s, 1);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The tensor: blocks, staging, hashing                                      */
/* ------------------------------------------------------------------------ */

static void fp_update(XXH3_state_t *st, const void *p, size_t n)
{
#ifdef TFT_XXH_DISPATCH
    XXH3_64bits_update_dispatch(st, p, n);
#else
    XXH3_64bits_update(st, p, n);
#endif
}

static uint64_t fp_oneshot(const void *p, size_t n)
{
#ifdef TFT_XXH_DISPATCH
    return XXH3_64bits_dispatch(p, n);
#else
    return XXH3_64bits(p, n);
#endif
}

/* Converts n integer elements of dtype at raw (any alignment) to double. */
static void dec_int(int dtype, const unsigned char *raw, size_t n, double *out)
{
#define DEC(T)                                      \
    for (size_t i = 0; i < n; i++) {                \
        T v_;                                       \
        memcpy(&v_, raw + i * sizeof(T), sizeof(T)); \
        out[i] = (double)v_;                        \
    }                                               \
    break
    switch (dtype) {
    case TFT_I32: DEC(int32_t);
    case TFT_I64: DEC(int64_t);
    case TFT_U8: DEC(uint8_t);
    case TFT_BOOL: DEC(uint8_t);
    case TFT_I8: DEC(int8_t);
    case TFT_I16: DEC(int16_t);
    case TFT_U16: DEC(uint16_t);
    case TFT_U32: DEC(uint32_t);
    case TFT_U64: DEC(uint64_t);
    default: break;
    }
#undef DEC
}

/* i32 or i64 elements (any alignment) to float, rounding those beyond
 * 2^24; the fast path takes a block only if all are within 65504, where
 * the conversion is exact. */
static void int_to_float(int dtype, const unsigned char *raw, size_t n, float *out)
{
    if (dtype == TFT_I32) {
        size_t i = 0;
#ifdef __SSE2__
        for (; i + 4 <= n; i += 4) /* cvtdq2ps: exact below 2^24, like the scalar cast */
            _mm_storeu_ps(out + i, _mm_cvtepi32_ps(_mm_loadu_si128((const __m128i *)(raw + 4 * i))));
#endif
        for (; i < n; i++) {
            int32_t v;
            memcpy(&v, raw + 4 * i, 4);
            out[i] = (float)v;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, raw + 8 * i, 8);
            out[i] = (float)v;
        }
    }
}

/* Element-staging buffer: one block of floats or doubles. */
union stage {
    float f[STATS_BLOCK_F32];
    double d[STATS_BLOCK_F64];
};

/* Returns a pointer to block b's n elements as floats (F32, F16, BF16, F8*) or
 * doubles (everything else): b itself when it can be read in place,
 * otherwise buf after decoding or copying. */
static const void *block_elements(const struct stats_kernels *kk, int dtype,
                                  const unsigned char *b, size_t n, double scale,
                                  union stage *buf)
{
    size_t esz = tft_dtype_size(dtype);
    int aligned = ((uintptr_t)b % esz) == 0;
    switch (dtype) {
    case TFT_F64:
        if (scale != 1.0) {
            for (size_t i = 0; i < n; i++) {
                double v;
                memcpy(&v, b + 8 * i, 8);
                buf->d[i] = v * scale;
            }
            return buf->d;
        }
        /* fall through */
    case TFT_F32:
        if (aligned)
            return b;
        memcpy(buf->d, b, n * esz);
        return buf->d;
    case TFT_F16:
        kk->dec_f16(b, n, buf->f);
        return buf->f;
    case TFT_BF16:
        kk->dec_bf16(b, n, buf->f);
        return buf->f;
    case TFT_F8E4M3:
        tft_f8e4m3_to_f32_n(b, buf->f, n);
        return buf->f;
    case TFT_F8E5M2:
        tft_f8e5m2_to_f32_n(b, buf->f, n);
        return buf->f;
    default:
        dec_int(dtype, b, n, buf->d);
        return buf->d;
    }
}

/* HEALTH of a block read in place by the kernel set's 16-bit or int32
 * kernels (counts and min/max are exact, so any kernel gives the same),
 * merged into A. Returns -1 when there is none, or the block holds a NaN
 * or Inf: it then takes the general path. */
static int health_native(const struct stats_kernels *kk, int dtype, const unsigned char *b,
                         size_t n, struct acc *A)
{
    struct part p;
    part_init(&p);
    size_t n16 = n & ~(size_t)15;
    if ((dtype == TFT_F16 || dtype == TFT_BF16) && kk->health_h16) {
        if (kk->health_h16(b, n16, dtype == TFT_BF16, &p))
            return -1;
        for (size_t i = n16; i < n; i++)
            if (!classify(h16_value(b, dtype, i), &p))
                return -1;
    } else if ((dtype == TFT_I32 && kk->health_i32) || (dtype == TFT_I64 && kk->health_i64)) {
        (dtype == TFT_I32 ? kk->health_i32 : kk->health_i64)(b, n16, &p);
        double tail[16];
        dec_int(dtype, b + n16 * tft_dtype_size(dtype), n - n16, tail);
        for (size_t i = 0; i < n - n16; i++)
            classify(tail[i], &p);
    } else {
        return -1;
    }
    acc_merge(A, &p, NULL, 0);
    return 0;
}

/* Tensors of fewer than TINY_MAX f32, f64, i32 or i64 elements (an MPI
 * call's result, a loss, a learning rate): what block_stats computes for
 * a block of which the vector kernels see nothing (they take 16 elements
 * at a time and leave the rest to the scalar tail), without the block
 * machinery and its kernel calls: the same statistics, bit for bit
 * (test_stats compares the two), at a fifth of the cost. Returns -1 for
 * any other tensor, which then takes tensor_pass. */
#define TINY_MAX 16
static int tiny_enabled = 1; /* tests: tft_stats_set_tiny */

/* block_sums of n <= TINY_MAX doubles about k: the scalar tail's sums,
 * folded onto empty lanes as block_sums folds them. */
static void tiny_sums(const double *v, size_t n, double k, double out[3])
{
    static const double no_lanes[4];
    double t[3] = { 0, 0, 0 };
    for (size_t i = 0; i < n; i++) {
        if (isfinite(v[i])) {
            double d = v[i] - k;
            t[0] += d;
            t[1] += d * d;
            t[2] += fabs(v[i]);
        }
    }
    for (int q = 0; q < 3; q++)
        out[q] = lanes_fold(no_lanes, t[q]);
}

static int tiny_pass(int dtype, const unsigned char *raw, size_t n, int full, struct acc *A)
{
    double v[TINY_MAX];
    if (n >= TINY_MAX || !tiny_enabled)
        return -1;
    switch (dtype) {
    case TFT_F32:
        for (size_t i = 0; i < n; i++) {
            float f;
            memcpy(&f, raw + 4 * i, 4);
            v[i] = f;
        }
        break;
    case TFT_F64:
        memcpy(v, raw, 8 * n);
        break;
    case TFT_I32:
    case TFT_I64:
        dec_int(dtype, raw, n, v);
        break;
    default:
        return -1;
    }
    struct part p;
    part_init(&p);
    for (size_t i = 0; i < n; i++)
        classify(v[i], &p);
    double s[4] = { 0, 0, 0, 0 };
    if (full && p.nfin > 0) { /* frame_init, then block_stats' sums */
        double x0 = first_finite(v, n, 1);
        tiny_sums(v, n, x0, s);
        A->k = x0 + s[0] / (double)p.nfin;
        A->have_k = 1;
        double k = A->k;
        tiny_sums(v, n, k, s);
        double m2 = s[1] - s[0] * (s[0] / (double)p.nfin);
        if (s[1] > ILL_CONDITIONED * m2) {
            k += s[0] / (double)p.nfin;
            tiny_sums(v, n, k, s);
        }
        s[3] = k - A->k;
    }
    acc_merge(A, &p, s, full);
    return 0;
}

int tft_stats_set_tiny(int on)
{
    int was = tiny_enabled;
    tiny_enabled = on != 0;
    return was;
}

/* What a pass over a tensor needs to know for each block: the kernel set,
 * the dtype and the paths its size and mode allow (tensor_pass and the
 * streaming form, tft_stats_stream_*, take the same decisions from them). */
struct pass {
    const struct stats_kernels *kk;
    int dtype;
    size_t esz;
    int is64;         /* blocks are staged as doubles */
    size_t per_block; /* elements per block */
    int full;
    int fast, fast_int;
    double scale;     /* F64 elements are multiplied by it first */
};

static void pass_init(struct pass *P, const struct stats_kernels *kk, int dtype, size_t numel, int full,
                      double scale)
{
    P->kk = kk;
    P->dtype = dtype;
    P->esz = tft_dtype_size(dtype);
    P->is64 = !(dtype == TFT_F32 || dtype == TFT_F16 || dtype == TFT_BF16 || dtype == TFT_F8E4M3 ||
                dtype == TFT_F8E5M2);
    P->per_block = P->is64 ? STATS_BLOCK_F64 : STATS_BLOCK_F32;
    P->full = full;
    /* Below STATS_FAST_MIN elements the float sweep's set-up (and the
     * re-centring pass most uncentred data then take) costs more than the
     * double path: small tensors take the exact one. */
    P->fast = full && numel >= STATS_FAST_MIN && (dtype == TFT_F32 || dtype == TFT_F16 || dtype == TFT_BF16);
    P->fast_int = full && numel >= STATS_FAST_MIN && (dtype == TFT_I32 || dtype == TFT_I64);
    P->scale = scale;
}

/* One block b of n elements (P->per_block but for the tensor's last block)
 * through the statistics, merged into A, then (st not NULL) the hash. */
static void pass_block(const struct pass *P, const unsigned char *b, size_t n, union stage *buf, struct acc *A,
                       XXH3_state_t *st)
{
    const struct stats_kernels *kk = P->kk;
    int dtype = P->dtype;
    size_t esz = P->esz;
    if (P->fast_int) {
        /* |x| <= 65504 (the fast path's condition) is exact in float */
        int_to_float(dtype, b, n, buf->f);
        if (block_stats_fast(kk, buf->f, 0, n, A) == 0)
            goto hash;
    }
    if (!P->full && health_native(kk, dtype, b, n, A) == 0)
        goto hash;
    if (P->fast && dtype != TFT_F32 && kk->fast_h16 && block_stats_fast(kk, b, dtype, n, A) == 0)
        goto hash; /* fp16/bf16 read in place, decoded in registers */
    const void *x = block_elements(kk, dtype, b, n, P->scale, buf);
    if (!P->fast || block_stats_fast(kk, x, 0, n, A) < 0)
        block_stats(kk, x, n, P->is64, P->full, A);
hash:
    if (st)
        fp_update(st, b, n * esz);
}

/* Runs the whole tensor through block_stats and (st not NULL) the hash, a
 * block at a time, hashing each block's bytes right after its statistics.
 * F64 elements are multiplied by scale (a power of two) first. */
static void tensor_pass(const struct stats_kernels *kk, int dtype, const unsigned char *raw,
                        size_t numel, int full, double scale, struct acc *A, XXH3_state_t *st)
{
    struct pass P;
    pass_init(&P, kk, dtype, numel, full, scale);
    union stage buf;
    for (size_t i = 0; i < numel; i += P.per_block) {
        size_t n = numel - i < P.per_block ? numel - i : P.per_block;
        pass_block(&P, raw + i * P.esz, n, &buf, A, st);
    }
}

static void acc_init(struct acc *A)
{
    memset(A, 0, sizeof *A);
    part_init(&A->c);
}

/* Writes the totals into out (numel and fingerprint already set), zeroing
 * what mode does not record. Moments come from M, which saw the data
 * multiplied by scale (M == A and scale 1 but for the f64 rescue). */
static void acc_finish(const struct acc *A, const struct acc *M, double scale, int mode,
                       tft_stats *out)
{
    const struct part *c = &A->c;
    out->nan = c->nan;
    out->pinf = c->pinf;
    out->ninf = c->ninf;
    out->zero = c->zero;
    if (c->nfin > 0) {
        out->min = c->min + 0.0; /* -0.0 -> +0.0: one answer for any order */
        out->max = c->max + 0.0;
    }
    if (mode != TFT_STATS_FULL)
        return;
    out->over_fp16 = c->over16;
    out->over_bf16 = c->overbf;
    out->under_fp16 = c->tiny - c->zero;
    if (c->nfin == 0)
        return;
    out->mean = (M->k + M->mean) / scale;
    out->std = sqrt(M->m2 / (double)c->nfin) / scale;
    out->l1 = M->l1 / scale;
    out->l2 = sqrt(M->sumsq) / scale;
    out->absmax = fabs(out->min) > fabs(out->max) ? fabs(out->min) : fabs(out->max);
}

/* f64 FULL data whose moments overflowed take f64_rescue's second pass. */
static int needs_rescue(int dtype, int full, const struct acc *A)
{
    return full && dtype == TFT_F64 && A->c.nfin > 0 && !(isfinite(A->m2) && isfinite(A->sumsq) && isfinite(A->l1));
}

/* FULL statistics of f64 data whose squares (or sums) overflowed: the
 * moments again from the data scaled by a power of two that brings the
 * largest |x| into [1, 2) (exact but for values that become subnormal, far
 * below the sums' precision). */
static void f64_rescue(const struct stats_kernels *kk, const unsigned char *raw, size_t numel,
                       const struct acc *A, tft_stats *out)
{
    double absmax = fabs(A->c.min) > fabs(A->c.max) ? fabs(A->c.min) : fabs(A->c.max);
    double scale = ldexp(1.0, -ilogb(absmax));
    struct acc M;
    acc_init(&M);
    tensor_pass(kk, TFT_F64, raw, numel, 1, scale, &M, NULL);
    acc_finish(A, &M, scale, TFT_STATS_FULL, out);
}

/* Running exact sums of a U8 or BOOL tensor. */
struct u8_tot {
    uint64_t zero, s1, s2;
    unsigned mn, mx;
};

static void u8_tot_init(struct u8_tot *T)
{
    memset(T, 0, sizeof *T);
    T->mn = 255;
}

/* One block of n <= STATS_BLOCK_BYTES bytes: kernel stats_u8 for the
 * first n & ~31, the generic one for the rest; then (st) the hash. */
static void u8_block(const struct stats_kernels *kk, const unsigned char *b, size_t n, int full,
                     struct u8_tot *T, XXH3_state_t *st)
{
    size_t n32 = n & ~(size_t)31;
    struct u8_out o;
    if (!full && kk->health_u8) /* HEALTH: no sums */
        kk->health_u8(b, n32, &o);
    else
        kk->stats_u8(b, n32, &o);
    struct u8_out t;
    gen_stats_u8(b + n32, n - n32, &t);
    T->zero += o.zero + t.zero;
    T->s1 += o.s1 + t.s1;
    T->s2 += o.s2 + t.s2;
    T->mn = o.min < T->mn ? o.min : T->mn;
    T->mn = t.min < T->mn ? t.min : T->mn;
    T->mx = o.max > T->mx ? o.max : T->mx;
    T->mx = t.max > T->mx ? t.max : T->mx;
    if (st)
        fp_update(st, b, n);
}

/* The statistics from the sums: mean and std from long double, exactly
 * rounded for any tensor below 2^40 elements. */
static void u8_finish(const struct u8_tot *T, size_t numel, int full, tft_stats *out)
{
    out->zero = T->zero;
    out->min = T->mn;
    out->max = T->mx;
    if (!full)
        return;
    long double n = (long double)numel, m2 = (long double)T->s2 - (long double)T->s1 * T->s1 / n;
    out->mean = (double)((long double)T->s1 / n);
    out->std = m2 > 0 ? (double)sqrtl(m2 / n) : 0.0;
    out->l1 = (double)T->s1;
    out->l2 = sqrt((double)T->s2);
    out->absmax = T->mx;
}

/* U8 and BOOL tensors, any mode but SHAPE: exact integer sums (kernel
 * stats_u8, 8 KiB at a time, each block hashed while in cache), then the
 * moments from them (u8_finish). */
static void u8_pass(const struct stats_kernels *kk, const unsigned char *raw, size_t numel,
                    int full, XXH3_state_t *st, tft_stats *out)
{
    struct u8_tot T;
    u8_tot_init(&T);
    for (size_t i = 0; i < numel; i += STATS_BLOCK_BYTES) {
        size_t n = numel - i < STATS_BLOCK_BYTES ? numel - i : STATS_BLOCK_BYTES;
        u8_block(kk, raw + i, n, full, &T, st);
    }
    u8_finish(&T, numel, full, out);
}

int tft_stats_compute(int dtype, const void *data, size_t numel, int mode,
                      tft_stats *out)
{
    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    size_t esz = tft_dtype_size(dtype);
    if (esz == 0 || mode < TFT_STATS_SHAPE || mode > TFT_STATS_FULL || (!data && numel > 0))
        return -EINVAL;
    if (numel > SIZE_MAX / esz)
        return -EOVERFLOW;
    out->numel = numel;
    if (mode == TFT_STATS_SHAPE)
        return 0;
    if (numel == 0) {
        out->fingerprint = XXH3_64bits(NULL, 0);
        return 0;
    }
    unsigned fpenv = fpenv_enter();
    const struct stats_kernels *kk = kernels_get();
    int full = mode == TFT_STATS_FULL;
    struct acc A;
    acc_init(&A);
    /* A tensor of at most one block is hashed in one call after its
     * statistics (it is still in cache): the streaming state's reset and
     * digest cost more than the statistics of a few elements, and XXH3's
     * one-shot and streaming forms give the same hash. */
    size_t bytes = numel * esz;
    int oneshot = bytes <= STATS_BLOCK_BYTES;
    XXH3_state_t st;
    if (!oneshot)
        XXH3_64bits_reset(&st);
    if (dtype == TFT_U8 || dtype == TFT_BOOL) {
        u8_pass(kk, data, numel, full, oneshot ? NULL : &st, out);
        out->fingerprint = oneshot ? fp_oneshot(data, bytes) : XXH3_64bits_digest(&st);
        fpenv_leave(fpenv);
        return 0;
    }
    if (tiny_pass(dtype, data, numel, full, &A) < 0)
        tensor_pass(kk, dtype, data, numel, full, 1.0, &A, oneshot ? NULL : &st);
    out->fingerprint = oneshot ? fp_oneshot(data, bytes) : XXH3_64bits_digest(&st);
    if (needs_rescue(dtype, full, &A))
        f64_rescue(kk, data, numel, &A, out);
    else
        acc_finish(&A, &A, 1.0, mode, out);
    fpenv_leave(fpenv);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Streaming form (tft_stats_stream_*)                                       */
/* ------------------------------------------------------------------------ */

/* The stream's state in the caller's tft_stats_stream. Blocks go through
 * pass_block / u8_block exactly as tensor_pass / u8_pass send them; a block
 * that straddles pieces is assembled in buf first. */
struct stream {
    XXH3_state_t st;          /* first: 64-byte aligned */
    _Alignas(64) unsigned char buf[STATS_BLOCK_BYTES]; /* a partial block, or a small tensor */
    struct pass P;
    struct acc A;
    struct u8_tot U;
    int dtype;
    size_t esz;               /* element size */
    size_t numel, given;      /* elements: the tensor's, and given so far */
    size_t block_bytes;       /* bytes per block */
    size_t fill;              /* bytes in buf */
    int mode;
    int small;                /* at most STATS_BLOCK_BYTES: buffered, computed at finish */
    int failed;
};
_Static_assert(sizeof(struct stream) <= sizeof(tft_stats_stream), "tft_stats_stream too small");
_Static_assert(_Alignof(struct stream) <= _Alignof(tft_stats_stream), "tft_stats_stream misaligned");

static struct stream *stream_of(tft_stats_stream *s) { return (struct stream *)(void *)s->opaque; }

int tft_stats_stream_begin(tft_stats_stream *s, int dtype, size_t numel, int mode)
{
    if (!s)
        return -EINVAL;
    struct stream *S = stream_of(s);
    S->failed = 1;
    size_t esz = tft_dtype_size(dtype);
    if (esz == 0 || mode < TFT_STATS_SHAPE || mode > TFT_STATS_FULL)
        return -EINVAL;
    if (numel > SIZE_MAX / esz)
        return -EOVERFLOW;
    S->failed = 0;
    S->dtype = dtype;
    S->esz = esz;
    S->numel = numel;
    S->given = 0;
    S->fill = 0;
    S->mode = mode;
    S->small = numel * esz <= STATS_BLOCK_BYTES || mode == TFT_STATS_SHAPE;
    if (S->small) /* tft_stats_compute at finish: nothing else to set */
        return 0;
    const struct stats_kernels *kk = kernels_get();
    pass_init(&S->P, kk, dtype, numel, mode == TFT_STATS_FULL, 1.0);
    S->block_bytes = dtype == TFT_U8 || dtype == TFT_BOOL ? STATS_BLOCK_BYTES : S->P.per_block * esz;
    acc_init(&S->A);
    u8_tot_init(&S->U);
    XXH3_64bits_reset(&S->st);
    return 0;
}

/* One whole block (or the tensor's last, shorter one) of bytes at b. */
static void stream_block(struct stream *S, const unsigned char *b, size_t bytes, union stage *buf)
{
    if (S->dtype == TFT_U8 || S->dtype == TFT_BOOL)
        u8_block(S->P.kk, b, bytes, S->P.full, &S->U, &S->st);
    else
        pass_block(&S->P, b, bytes / S->P.esz, buf, &S->A, &S->st);
}

int tft_stats_stream_update(tft_stats_stream *s, const void *piece, size_t n)
{
    if (!s)
        return -EINVAL;
    struct stream *S = stream_of(s);
    if (S->failed || n > S->numel - S->given || (!piece && n > 0)) {
        S->failed = 1;
        return -EINVAL;
    }
    S->given += n;
    if (n == 0 || S->mode == TFT_STATS_SHAPE)
        return 0;
    const unsigned char *p = piece;
    size_t bytes = n * S->esz, bb = S->block_bytes;
    if (S->small) { /* the whole tensor fits buf */
        memcpy(S->buf + S->fill, p, bytes);
        S->fill += bytes;
        return 0;
    }
    unsigned fpenv = fpenv_enter();
    union stage buf;
    if (S->fill > 0) { /* complete the block the last piece began */
        size_t take = bb - S->fill < bytes ? bb - S->fill : bytes;
        memcpy(S->buf + S->fill, p, take);
        S->fill += take;
        p += take;
        bytes -= take;
        if (S->fill == bb) {
            stream_block(S, S->buf, bb, &buf);
            S->fill = 0;
        }
    }
    for (; bytes >= bb; p += bb, bytes -= bb)
        stream_block(S, p, bb, &buf);
    if (bytes > 0) {
        memcpy(S->buf, p, bytes);
        S->fill = bytes;
    }
    fpenv_leave(fpenv);
    return 0;
}

int tft_stats_stream_finish(tft_stats_stream *s, const void *whole, tft_stats *out)
{
    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    if (!s)
        return -EINVAL;
    struct stream *S = stream_of(s);
    if (S->failed || S->given != S->numel) {
        S->failed = 1;
        return -EINVAL;
    }
    if (S->small)
        return tft_stats_compute(S->dtype, S->numel ? S->buf : NULL, S->numel, S->mode, out);
    unsigned fpenv = fpenv_enter();
    union stage buf;
    if (S->fill > 0)
        stream_block(S, S->buf, S->fill, &buf);
    S->fill = 0;
    out->numel = S->numel;
    out->fingerprint = XXH3_64bits_digest(&S->st);
    int full = S->mode == TFT_STATS_FULL, e = 0;
    if (S->dtype == TFT_U8 || S->dtype == TFT_BOOL) {
        u8_finish(&S->U, S->numel, full, out);
    } else if (!needs_rescue(S->dtype, full, &S->A)) {
        acc_finish(&S->A, &S->A, 1.0, S->mode, out);
    } else if (whole) {
        f64_rescue(S->P.kk, whole, S->numel, &S->A, out);
    } else {
        memset(out, 0, sizeof *out);
        e = -ERANGE;
    }
    S->failed = 1; /* finished: a stream is used once */
    fpenv_leave(fpenv);
    return e;
}

uint64_t tft_fingerprint_blocked(const void *data, size_t bytes)
{
    if (bytes <= TFT_FP_BLOCK_BYTES)
        return fp_oneshot(data, bytes);
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    const unsigned char *p = data;
    for (size_t off = 0; off < bytes; off += TFT_FP_BLOCK_BYTES) {
        size_t n = bytes - off < TFT_FP_BLOCK_BYTES ? bytes - off : TFT_FP_BLOCK_BYTES;
        uint64_t h = fp_oneshot(p + off, n);
        unsigned char le[8];
        for (int i = 0; i < 8; i++)
            le[i] = (unsigned char)(h >> (8 * i));
        XXH3_64bits_update(&st, le, sizeof le);
    }
    return XXH3_64bits_digest(&st);
}

/* ------------------------------------------------------------------------ */
/* Bulk conversions                                                          */
/* ------------------------------------------------------------------------ */

void tft_f16_to_f32_n(const uint16_t *in, float *out, size_t n)
{
    kernels_get()->dec_f16((const unsigned char *)in, n, out);
}

void tft_bf16_to_f32_n(const uint16_t *in, float *out, size_t n)
{
    kernels_get()->dec_bf16((const unsigned char *)in, n, out);
}

void tft_f32_to_f16_n(const float *in, uint16_t *out, size_t n)
{
    kernels_get()->enc_f16(in, n, out);
}

void tft_f32_to_bf16_n(const float *in, uint16_t *out, size_t n)
{
    kernels_get()->enc_bf16(in, n, out);
}
