/*
 * tft_stats.h — tensor statistics on the CPU: the numbers a tensor record
 * carries (tft_stats, see tft_types.h), fingerprints, and fp16/bf16/fp8
 * conversions.
 *
 * Semantics (normative; formats/FORMAT.md repeats them):
 *
 *   numel                 elements in the tensor.
 *   nan, pinf, ninf       NaN, +Inf and -Inf elements.
 *   zero                  elements equal to 0 (either sign).
 *   over_fp16             finite |x| > 65504 (would overflow fp16).
 *   over_bf16             finite |x| > 3.3895313892515355e38 (bf16 max).
 *   under_fp16            nonzero finite |x| < 2^-14 (below fp16's smallest
 *                         normal: loses precision or flushes in fp16).
 *   min, max, mean, std,  over the finite elements only; std is the
 *   l1, l2, absmax        population standard deviation, l1 = sum |x|,
 *                         l2 = sqrt(sum x^2). All are 0 when the tensor has
 *                         no finite element. min, max, absmax are exact;
 *                         the moments' accuracy is given below.
 *   fingerprint           XXH3_64bits (xxHash 0.8, seed 0, default secret)
 *                         of the raw bytes, numel * element size of them;
 *                         for an empty tensor, XXH3_64bits of zero bytes.
 *                         Equal fingerprints = bit-identical tensors.
 *
 * Integer dtypes have no NaN or Inf; every statistic is computed on the
 * element's value converted to double (I64/U64 beyond 2^53 round). BOOL is
 * one byte per element, counted by the byte's value (0 or 1 for a valid
 * bool; other byte values are kept as they are, so corruption shows).
 * fp16, bf16 and fp8 (E4M3FN, E5M2) elements are decoded exactly,
 * subnormals included; every fp8 value is exact in float, so fp8 statistics
 * are those of the decoded values.
 *
 * Accuracy of the moments (mean, std, l1, l2) against their exact values:
 *   - f32, f16, bf16, and i32/i64 blocks whose |x| <= 65504 (exact in
 *     float) (FULL): accumulated in float over runs of 256
 *     elements, each run's sums then added in double (stats_internal.h
 *     gives the order), about a shift near the data's mean. Bounds:
 *       l1        relative error <= TFT_STATS_F32ACC_L1  (2^-19, 1.9e-6)
 *       l2, std   relative error <= TFT_STATS_F32ACC_REL (2^-17, 7.6e-6)
 *       mean      |error| <= TFT_STATS_F32ACC_MEAN * std + 2^-50 * |mean|
 *                 (2^-18 * std: the mean is as good as the spread allows)
 *     A block of 2048 elements that holds a NaN, an Inf or an |x| above
 *     65504, whose sum of squares is below 2^-96 (float squares could
 *     underflow), or whose values lie so far from every shift tried that
 *     float sums would cancel, is accumulated in double instead; so is
 *     a tensor of fewer than 64 elements (the double path is the cheaper
 *     one there).
 *   - u8 and bool: exact integer sums; mean and std rounded once from them.
 *   - f64, other integers, fp8, and the blocks above: accumulated in double about
 *     a shift (the first block's mean; a block far from it is summed about
 *     its own mean), combined by Chan's pairwise update: ~1e-15 relative
 *     for l1 and l2, std ~1e-15 relative even for 1e8 + noise.
 * These bounds are what a tolerance comparing a recorded statistic with an
 * exact one (or with the CUDA kernel's, which accumulates in double) needs.
 *
 * Validity by mode (fields not valid are 0):
 *   TFT_STATS_SHAPE   numel only (fingerprint 0).
 *   TFT_STATS_HEALTH  numel, nan, pinf, ninf, zero, min, max, fingerprint.
 *   TFT_STATS_FULL    every field.
 *
 * Two fingerprints exist, and a tensor record says which one it carries:
 *   - tft_stats_compute() (CPU tensors) stores the plain XXH3_64bits of the
 *     bytes in stats.fingerprint.
 *   - Device tensors use the blocked fingerprint, tft_fingerprint_blocked():
 *     XXH3 is sequential, so the device hashes fixed 64 KiB blocks in
 *     parallel and then hashes the block hashes. The two agree for tensors of
 *     at most 64 KiB and differ above; tft_fingerprint_blocked() computes the
 *     device definition on the CPU so a host copy can be compared with a
 *     device tensor.
 *
 * Workload: called by the recorder right after the op that produced a
 * tensor, on one thread, for tensors from a few bytes to several GiB. One
 * pass over the data; the hash reads each 8 KiB block again while it is
 * still in cache. Which blocks take the double path depends only on the
 * data, so the choice is the same on every CPU. The floating-point environment of the caller (DAZ/FTZ,
 * rounding mode, unmasked FP exceptions on x86) does not change the results
 * and is restored on return. Results are bit-identical across runs and
 * across x86-64 CPUs with and without AVX2 or AVX-512 (the kernel sets
 * follow one accumulation order, stats_internal.h).
 *
 * Not a public header: programs link these kernels statically (tftstats);
 * libtftrace.so holds them but does not export them.
 */
#ifndef TFT_STATS_H
#define TFT_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "tft_types.h" /* tft_stats, tft_dtype, tft_dtype_size, enum tft_stats_mode */
#ifdef __cplusplus
extern "C" {
#endif

/* The accuracy bounds above (f32, f16, bf16, small i32/i64, FULL mode). */
#define TFT_STATS_F32ACC_L1 0x1p-19
#define TFT_STATS_F32ACC_REL 0x1p-17
#define TFT_STATS_F32ACC_MEAN 0x1p-18

/* Block size of the blocked (device) fingerprint, in bytes. */
#define TFT_FP_BLOCK_BYTES 65536u

/* Computes the statistics of numel elements of dtype (enum tft_dtype) at
 * data, in mode (enum tft_stats_mode), into *out (fully overwritten).
 * data needs no particular alignment and may be NULL when numel is 0.
 * Returns 0; -EINVAL for an unknown dtype or mode, a NULL out, or NULL data
 * with numel > 0; -EOVERFLOW when numel * element size overflows size_t.
 * On error *out (if not NULL) is zeroed. Thread-safe; no allocation. */
int tft_stats_compute(int dtype, const void *data, size_t numel, int mode,
                      tft_stats *out);

/* Streaming statistics: the same statistics as tft_stats_compute, bit for
 * bit (fingerprint included), from a tensor given in pieces, in order —
 * for a kernel that writes a tensor piece by piece and hands each piece
 * over while it is still in cache (tftrain's AdamW and gradient-norm
 * sweeps, runtime/README.md).
 *
 *   tft_stats_stream s;
 *   tft_stats_stream_begin(&s, TFT_F32, numel, TFT_STATS_FULL);
 *   for each piece, in order:  tft_stats_stream_update(&s, piece, n);
 *   tft_stats_stream_finish(&s, whole, &stats);
 *
 * Pieces may have any length (in elements, 0 included); the stream cuts
 * them into the same 8 KiB blocks tft_stats_compute uses (its block order
 * and merging are what make the results identical) and copies only what
 * straddles a block boundary: pieces of a multiple of 2048 elements (f32,
 * f16, bf16, fp8) or 1024 (other dtypes; 8192 for u8 and bool) are read in
 * place. A tensor of at most 8 KiB is buffered and computed at finish.
 * The XXH3 state streams, so the fingerprint is XXH3_64bits of the whole.
 *
 * begin: numel is the tensor's element count, known up front (the paths
 *   taken depend on it). Returns 0, or -EINVAL / -EOVERFLOW as
 *   tft_stats_compute for dtype, mode and numel; a failed stream makes its
 *   update and finish fail too.
 * update: n elements at piece (NULL only when n is 0). Returns 0, or
 *   -EINVAL when the pieces would exceed numel (the stream then fails).
 * finish: writes the statistics into *out (fully overwritten; zeroed on
 *   error). whole is the whole tensor or NULL: f64 data whose moments
 *   overflow (|x| beyond ~1e154) need a second, scaled pass over it, the
 *   only case in which it is read; with whole NULL that case returns
 *   -ERANGE (call tft_stats_compute instead). -EINVAL when fewer than numel
 *   elements were given or the stream failed. The stream needs no release.
 *
 * A stream is about 10 KiB (put it in the caller's frame or state), used
 * by one thread at a time; the floating-point environment is handled as
 * by tft_stats_compute on every call. */
#define TFT_STATS_STREAM_BYTES 10240u
typedef struct tft_stats_stream {
#ifdef __cplusplus
    alignas(64) unsigned char opaque[TFT_STATS_STREAM_BYTES];
#else
    _Alignas(64) unsigned char opaque[TFT_STATS_STREAM_BYTES];
#endif
} tft_stats_stream;

int tft_stats_stream_begin(tft_stats_stream *s, int dtype, size_t numel, int mode);
int tft_stats_stream_update(tft_stats_stream *s, const void *piece, size_t n);
int tft_stats_stream_finish(tft_stats_stream *s, const void *whole, tft_stats *out);

/* The blocked fingerprint of bytes bytes at data (the device definition):
 *   bytes <= TFT_FP_BLOCK_BYTES: XXH3_64bits(data, bytes) — the plain one;
 *   otherwise: split data into blocks of TFT_FP_BLOCK_BYTES (the last may
 *   be shorter), h[i] = XXH3_64bits(block i), and return XXH3_64bits of the
 *   array h[0..nblocks) stored as little-endian uint64 (8 * nblocks bytes).
 * data may be NULL when bytes is 0. */
uint64_t tft_fingerprint_blocked(const void *data, size_t bytes);

/* IEEE binary16 -> binary32, exact (subnormals, +-Inf, NaN payload kept). */
float tft_f16_to_f32(uint16_t h);
/* binary32 -> binary16, round to nearest even; values that round beyond
 * 65504 become +-Inf; NaN stays NaN (quiet, sign and top payload bits kept). */
uint16_t tft_f32_to_f16(float f);
/* bfloat16 -> binary32, exact. */
float tft_bf16_to_f32(uint16_t h);
/* binary32 -> bfloat16, round to nearest even (overflow gives +-Inf); NaN
 * stays NaN (quiet, sign and top payload bits kept). */
uint16_t tft_f32_to_bf16(float f);

/* 8-bit floats -> binary32, exact: OCP E4M3FN (TFT_F8E4M3: no Inf, NaN
 * S.1111.111) and E5M2 (TFT_F8E5M2: +-Inf, NaNs), subnormals and -0
 * included; a NaN comes out as the quiet NaN with the byte's sign. Table
 * lookups (tft_types.h has the formats). */
float tft_f8e4m3_to_f32(uint8_t b);
float tft_f8e5m2_to_f32(uint8_t b);
/* The same for n bytes at in; in and out must not overlap. */
void tft_f8e4m3_to_f32_n(const uint8_t *in, float *out, size_t n);
void tft_f8e5m2_to_f32_n(const uint8_t *in, float *out, size_t n);

/* Bulk forms of the four fp16/bf16 conversions above, n elements, element-wise
 * identical to them. in and out must not overlap. Vectorised. */
void tft_f16_to_f32_n(const uint16_t *in, float *out, size_t n);
void tft_f32_to_f16_n(const float *in, uint16_t *out, size_t n);
void tft_bf16_to_f32_n(const uint16_t *in, float *out, size_t n);
void tft_f32_to_bf16_n(const float *in, uint16_t *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* TFT_STATS_H */
