/*
 * stats.c — tensor statistics on the CPU (tft_stats.h): the entry points
 * (tft_stats_compute, the streaming form, the blocked fingerprint), the
 * tiny path, the byte path and the finishing of the totals. One block's
 * work is in stats_block.c, the kernel sets in stats_generic.c,
 * stats_avx2*.c and stats_avx512.c (chosen by stats_isa.c), the
 * conversions in stats_codec.c and stats_codec_bulk.c.
 *
 * One pass over the data: the tensor is cut into blocks of 8 KiB; each
 * block's statistics are computed (stats_kernels, two cache-hot sweeps at
 * most), merged into the running totals in block order, and then the same
 * bytes go to the XXH3 streaming state while they are still in L1. fp16,
 * bf16, fp8, integer and misaligned blocks are first decoded or copied into
 * an 8 KiB stack buffer (fp8 blocks hold 2048 elements, like fp16's).
 *
 * FULL statistics of f32, f16, bf16 and i32/i64 blocks (the last four read
 * in place and converted in registers by the AVX2 and AVX-512 kernels)
 * take the fast path first: one fused sweep (fast_f32,
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
 * (block_pass, block_u8) as the caller's pieces arrive, a block that
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

#include "stats_block_internal.h"
#include "stats_internal.h"
#include "stats_scalar_internal.h"

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
/* Tiny tensors                                                              */
/* ------------------------------------------------------------------------ */

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
        block_dec_int(dtype, raw, n, v);
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
    block_merge(A, &p, s, full);
    return 0;
}

int tft_stats_set_tiny(int on)
{
    int was = tiny_enabled;
    tiny_enabled = on != 0;
    return was;
}

/* ------------------------------------------------------------------------ */
/* Whole tensors: the block pass, the totals, bytes                          */
/* ------------------------------------------------------------------------ */

/* Runs the whole tensor through block_stats and (st not NULL) the hash, a
 * block at a time, hashing each block's bytes right after its statistics.
 * F64 elements are multiplied by scale (a power of two) first. */
static void tensor_pass(const struct stats_kernels *kk, int dtype, const unsigned char *raw,
                        size_t numel, int full, double scale, struct acc *A, XXH3_state_t *st)
{
    struct pass P;
    block_pass_init(&P, kk, dtype, numel, full, scale);
    union stage buf;
    for (size_t i = 0; i < numel; i += P.per_block) {
        size_t n = numel - i < P.per_block ? numel - i : P.per_block;
        block_pass(&P, raw + i * P.esz, n, &buf, A, st);
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

static void u8_tot_init(struct u8_tot *T)
{
    memset(T, 0, sizeof *T);
    T->mn = 255;
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
        block_u8(kk, raw + i, n, full, &T, st);
    }
    u8_finish(&T, numel, full, out);
}

/* ------------------------------------------------------------------------ */
/* One-shot entry point                                                      */
/* ------------------------------------------------------------------------ */

static uint64_t fp_oneshot(const void *p, size_t n)
{
#ifdef TFT_XXH_DISPATCH
    return XXH3_64bits_dispatch(p, n);
#else
    return XXH3_64bits(p, n);
#endif
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
    const struct stats_kernels *kk = stats_isa_kernels();
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
 * block_pass / block_u8 exactly as tensor_pass / u8_pass send them; a block
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
    const struct stats_kernels *kk = stats_isa_kernels();
    block_pass_init(&S->P, kk, dtype, numel, mode == TFT_STATS_FULL, 1.0);
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
        block_u8(S->P.kk, b, bytes, S->P.full, &S->U, &S->st);
    else
        block_pass(&S->P, b, bytes / S->P.esz, buf, &S->A, &S->st);
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
