/*
 * stats_internal.h — what the statistics driver (stats.c, stats_block.c)
 * shares with its kernel sets (stats_generic.c, stats_avx2.c,
 * stats_avx512.c) and their
 * selection (stats_isa.c), plus hooks for tests and the benchmark. Not
 * installed; not part of any ABI.
 *
 * A kernel works on one block (at most STATS_BLOCK_F32 floats or
 * STATS_BLOCK_F64 doubles, aligned to the element size) and a length that is
 * a multiple of 16; the driver does the tail, the merging and the hashing.
 *
 * Bit-identity: every kernel set computes the sums with the same lane
 * structure. Elements are taken in groups of 8; lane j (0..3) of a group
 * adds (x[j] - k) + (x[j+4] - k) to s[0][j], (x[j]-k)^2 + (x[j+4]-k)^2 to
 * s[1][j] (each square rounded, then the sum) and |x[j]| + |x[j+4]| to
 * s[2][j], all in double, with non-finite elements contributing +0.0. The
 * driver adds the four lanes left to right. Counts, min and max are exact.
 * So the generic C, AVX2 and AVX-512 kernels give bit-identical results;
 * the files are compiled with -ffp-contract=off to keep it that way.
 */
#ifndef TFT_STATS_INTERNAL_H
#define TFT_STATS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tft_stats.h"

#define STATS_BLOCK_BYTES 8192u                 /* stats + hash interleave unit */
#define STATS_BLOCK_F32 (STATS_BLOCK_BYTES / 4)  /* 2048 floats */
#define STATS_BLOCK_F64 (STATS_BLOCK_BYTES / 8)  /* 1024 doubles */

/* Statistics of one block before merging. Sums are kept per lane (see
 * above) by the kernels and folded by the driver. */
struct part {
    uint64_t nfin;   /* finite elements */
    uint64_t nan;    /* NaN elements */
    uint64_t pinf;   /* +Inf elements */
    uint64_t ninf;   /* -Inf elements */
    uint64_t zero;   /* elements == 0 */
    uint64_t tiny;   /* finite |x| < 2^-14, zeros included */
    uint64_t over16; /* finite |x| > 65504 */
    uint64_t overbf; /* finite |x| > bf16 max */
    double min, max; /* over finite elements; +Inf / -Inf when none */
};

/* Per-lane sums of one block: [0] sum(x-k), [1] sum((x-k)^2), [2] sum|x|. */
typedef double lane_sums[3][4];

/* The fused FULL pass over float data (f32, and f16/bf16 decoded):
 * counts of zeros and of |x| < 2^-14 (zeros included), min, max and the
 * moment sums about a float shift k, in one sweep. Elements are taken in
 * groups of 16 (two vectors v0, v1 of 8; lane j of vector v holds element
 * 16g + 8v + j); d = x - k in float. Per lane j, in float:
 *   s1[j] += d0 + d1
 *   q0[j] = fma(d0, d0, q0[j]);  q1[j] = fma(d1, d1, q1[j])
 *   la[j] += |x0| + |x1|
 * Every FAST_RUN elements (16 groups; the last run may be shorter) the
 * float accumulators are added into double lanes, D0[j] += s1[j], D1[j] +=
 * q0[j] + q1[j] (the float sum), D2[j] += la[j], and restart at 0. The
 * driver folds the 8 double lanes in a fixed tree. An element's term sees
 * at most 19 float roundings before it reaches a double (the subtraction,
 * the square, 16 accumulations, the q0 + q1 sum), which is what the error
 * bound in tft_stats.h rests on. */
#define FAST_RUN 256u
struct fast_out {
    uint64_t zero;    /* elements == 0 (either sign) */
    uint64_t tiny;    /* |x| < 2^-14, zeros included */
    float min, max;   /* over all elements; meaningless when one is NaN */
    double lane[3][8]; /* D0 sum(x-k), D1 sum((x-k)^2), D2 sum|x| per lane */
};

/* Bytes (U8, BOOL): exact integer sums, so any order gives the same. */
struct u8_out {
    uint64_t zero;     /* bytes == 0 */
    uint64_t s1, s2;   /* sum x, sum x^2 */
    uint8_t min, max;
};

/* One kernel set (generic C or AVX2). n is a multiple of 16 and may be 0.
 *
 * counts_*: fills p's counts, min and max for a block, assuming it is all
 *   finite, and returns 0; returns 1 (p then undefined) when the block holds
 *   a non-finite element, or, with full set, an |x| above the bf16 maximum:
 *   the caller then uses masked_*. With full clear only nfin, zero, min and
 *   max are filled.
 * sums_*: adds the block's lane sums about k to s (all elements finite).
 * masked_*: fills every count, min and max, and, when full is set, adds the
 *   lane sums of the finite elements to s; any input.
 * dec_*: decodes n (any n) fp16 / bf16 elements at raw (any alignment) to out.
 */
struct stats_kernels {
    const char *name;
    int (*counts_f32)(const float *x, size_t n, int full, struct part *p);
    void (*sums_f32)(const float *x, size_t n, double k, lane_sums s);
    void (*masked_f32)(const float *x, size_t n, int full, double k, struct part *p,
                       lane_sums s);
    int (*counts_f64)(const double *x, size_t n, int full, struct part *p);
    void (*sums_f64)(const double *x, size_t n, double k, lane_sums s);
    void (*masked_f64)(const double *x, size_t n, int full, double k, struct part *p,
                       lane_sums s);
    void (*fast_f32)(const float *x, size_t n, float k, struct fast_out *o); /* n % 32 == 0 */
    void (*stats_u8)(const uint8_t *x, size_t n, struct u8_out *o); /* n % 32 == 0, <= 8192 */
    /* HEALTH of n (% 32 == 0, <= 8192) bytes: zero, min and max of o as
     * stats_u8 fills them (s1, s2 left 0). NULL: stats_u8. */
    void (*health_u8)(const uint8_t *x, size_t n, struct u8_out *o);
    /* fast_f32 of n (% 32 == 0) bf16 (bf16 set) or fp16 elements at raw
     * (any alignment), decoded in registers: the same fast_out, bit for
     * bit, as decoding them and calling fast_f32. NULL: decode instead. */
    void (*fast_h16)(const void *raw, size_t n, int bf16, float k, struct fast_out *o);
    /* HEALTH of n (% 16 == 0, <= 4096) fp16/bf16 elements at raw, any
     * alignment: nfin, zero, min, max into p as counts_f32 fills them;
     * returns 1 (p undefined) when one is NaN or Inf. NULL: decode. */
    int (*health_h16)(const void *raw, size_t n, int bf16, struct part *p);
    /* fast_f32 of n (% 32 == 0) int32 (i64 clear) or int64 (i64 set)
     * elements at raw (any alignment), converted to float in registers
     * (round to nearest, as the (float) cast): the same fast_out, bit for
     * bit, as converting them and calling fast_f32; returns 0. May
     * instead return 1 (o undefined) when some element lies beyond
     * +-2^31, where |x| > 65504 already refuses the fast path. NULL:
     * convert into the staging buffer instead. */
    int (*fast_int)(const void *raw, size_t n, int i64, float k, struct fast_out *o);
    /* HEALTH of n (% 8 == 0) int32 elements at raw: nfin, zero, min, max
     * (exact). NULL: decode to double. */
    void (*health_i32)(const void *raw, size_t n, struct part *p);
    /* The same for n (% 8 == 0) int64 elements: min and max compared as
     * int64 and converted once (rounding to double is monotonic, so this
     * is the double conversion's min and max). NULL: decode to double. */
    void (*health_i64)(const void *raw, size_t n, struct part *p);
    void (*dec_f16)(const unsigned char *raw, size_t n, float *out);
    void (*dec_bf16)(const unsigned char *raw, size_t n, float *out);
    void (*enc_f16)(const float *in, size_t n, uint16_t *out);
    void (*enc_bf16)(const float *in, size_t n, uint16_t *out);
};

/* The portable C kernels (stats_generic.c), in every build. */
extern const struct stats_kernels stats_kernels_generic;

/* The AVX2+FMA+F16C kernels (stats_avx2.c, built on x86-64 only). Only
 * for CPUs that have all three: stats_isa.c checks before using them. */
#if defined(__x86_64__) && defined(__GNUC__)
#define STATS_HAVE_AVX2 1
extern const struct stats_kernels stats_kernels_avx2;
#endif

/* The AVX-512 kernels (stats_avx512.c: F, BW, DQ and VL besides AVX2,
 * FMA and F16C), where the compiler can build them; their table borrows
 * the double path's kernels from the AVX2 set. Only for CPUs (and OSes)
 * that have all of these: stats_isa.c checks. The fused sweeps take two
 * runs of FAST_RUN elements at once, run r in the low eight float lanes
 * and run r + 1 in the high eight, so every lane still adds its groups in
 * the order above and the runs reach the double lanes in order. */
#if defined(STATS_HAVE_AVX2) && defined(TFT_STATS_AVX512)
#define STATS_HAVE_AVX512 1
extern const struct stats_kernels stats_kernels_avx512;
#endif

/* The kernel set to use now (stats_isa.c): the widest of AVX-512 and
 * AVX2 that the build and the CPU have, unless a test or the benchmark
 * forced one; else the generic one. */
const struct stats_kernels *stats_isa_kernels(void);

/* Kernel selection, for tests and the benchmark (not thread-safe: call
 * before computing statistics). */
enum stats_isa { STATS_ISA_AUTO = 0, STATS_ISA_GENERIC = 1, STATS_ISA_AVX2 = 2, STATS_ISA_AVX512 = 3 };
/* Forces a kernel set. Returns 0, or -ENOTSUP when this build or CPU lacks
 * the requested one (the selection is then unchanged). */
int tft_stats_set_isa(int isa);
/* Turns the small-tensor path (fewer than 16 f32/f64/i32/i64 elements:
 * the block path's arithmetic without its kernel calls) off (0) or on
 * (1, the default), so tests can compare it with the block path; returns
 * the previous setting. Not thread-safe, as tft_stats_set_isa. */
int tft_stats_set_tiny(int on);
/* Name of the kernel set tft_stats_compute would use now ("generic",
 * "avx2", "avx512"). */
const char *tft_stats_isa_name(void);

#endif /* TFT_STATS_INTERNAL_H */
