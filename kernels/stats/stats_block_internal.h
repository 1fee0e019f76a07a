/*
 * stats_block_internal.h — what the statistics driver (stats.c) shares
 * with the block layer (stats_block.c): the running totals, the per-tensor
 * pass decisions, the staging buffer and the calls that take one block of
 * a tensor through the statistics and the hash. Not installed.
 */
#ifndef TFT_STATS_BLOCK_INTERNAL_H
#define TFT_STATS_BLOCK_INTERNAL_H

#ifndef XXH_STATIC_LINKING_ONLY
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#endif
#include <xxhash.h>

#include <stddef.h>
#include <stdint.h>

#include "stats_internal.h"

#define ILL_CONDITIONED 1024.0        /* see stats.c's file comment */

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

/* Sums the four lanes left to right, then the tail's scalar sum. */
static inline double lanes_fold(const double lane[4], double tail)
{
    return lane[0] + lane[1] + lane[2] + lane[3] + tail;
}

/* Element-staging buffer: one block of floats or doubles. */
union stage {
    float f[STATS_BLOCK_F32];
    double d[STATS_BLOCK_F64];
};

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

/* Running exact sums of a U8 or BOOL tensor. */
struct u8_tot {
    uint64_t zero, s1, s2;
    unsigned mn, mx;
};

/* The decisions of a pass over numel elements of dtype with kernel set kk
 * (full: FULL statistics; F64 elements multiplied by scale first). */
void block_pass_init(struct pass *P, const struct stats_kernels *kk, int dtype, size_t numel, int full,
                     double scale);
/* One block b of n elements (P->per_block but for the tensor's last
 * block) through the statistics into A, then (st not NULL) the hash;
 * buf is scratch. */
void block_pass(const struct pass *P, const unsigned char *b, size_t n, union stage *buf, struct acc *A,
                XXH3_state_t *st);
/* One block of n <= STATS_BLOCK_BYTES bytes (U8, BOOL) into T, then (st
 * not NULL) the hash. */
void block_u8(const struct stats_kernels *kk, const unsigned char *b, size_t n, int full, struct u8_tot *T,
              XXH3_state_t *st);
/* Merges one block's counts p and (full) sums s into A; s as stats_block.c
 * says. */
void block_merge(struct acc *A, const struct part *p, const double s[4], int full);
/* n integer elements of dtype at raw (any alignment) to double. */
void block_dec_int(int dtype, const unsigned char *raw, size_t n, double *out);

#endif /* TFT_STATS_BLOCK_INTERNAL_H */
