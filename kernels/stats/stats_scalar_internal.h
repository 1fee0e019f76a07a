/*
 * stats_scalar_internal.h — one element the reference way, shared by the
 * portable kernels (stats_generic.c) and the driver's scalar code (the
 * tails of stats_block.c, the tiny path of stats.c): the fp16/bf16
 * thresholds, the element load, classify (the counts, min and max of one
 * element) and the first finite element. Everything is static inline, so
 * each file's loops inline these helpers as the single stats.c did.
 * Not installed.
 */
#ifndef TFT_STATS_SCALAR_INTERNAL_H
#define TFT_STATS_SCALAR_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "stats_internal.h"

#define F16_MAX 65504.0
#define F16_TINY 0x1p-14              /* smallest normal fp16 */
#define BF16_MAX 0x1.fep127           /* 3.3895313892515355e38 */

#define ALWAYS_INLINE inline __attribute__((always_inline))

static ALWAYS_INLINE double load_el(const void *x, size_t i, int is64)
{
    return is64 ? ((const double *)x)[i] : (double)((const float *)x)[i];
}

static inline void part_init(struct part *p)
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

static inline double first_finite(const void *x, size_t n, int is64)
{
    for (size_t i = 0; i < n; i++) {
        double v = load_el(x, i, is64);
        if (isfinite(v))
            return v;
    }
    return 0.0;
}

/* The generic kernel stats_u8 (stats_internal.h), here because the block
 * layer takes the tail of every byte block through it too. */
static inline void gen_stats_u8(const uint8_t *x, size_t n, struct u8_out *o)
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

#endif /* TFT_STATS_SCALAR_INTERNAL_H */
