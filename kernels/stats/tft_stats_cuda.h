/*
 * tft_stats_cuda.h — tensor statistics of device (CUDA) tensors, computed on
 * the device on the tensor's stream and copied back asynchronously; the
 * whole tensor never crosses the bus.
 *
 * Same fields and validity by mode as tft_stats_compute (tft_stats.h), with
 * two differences a reader of a trace must know:
 *   - fingerprint is the blocked fingerprint (tft_fingerprint_blocked): XXH3
 *     of each 64 KiB block, then XXH3 of the little-endian array of block
 *     hashes (plain XXH3 for tensors of at most 64 KiB). XXH3 is computed on
 *     the device by a port of xxHash 0.8's XXH3_64bits (default secret, seed
 *     0) that tests check against libxxhash.
 *   - moments are accumulated in double with per-thread Welford updates
 *     about a frame shift (the first finite element among the first 256),
 *     combined by Chan's formula in a fixed tree: deterministic for a given
 *     tensor on any GPU, but not bit-identical to the CPU result (within
 *     the CPU's bounds, tft_stats.h: ~1e-13 relative where the CPU
 *     accumulates in double, the f32/f16/bf16 bounds where it uses float). l2 and std of f64 data beyond ~1e154
 *     overflow to Inf on the device (the CPU path rescales).
 *
 * Algorithm: stage 1 runs one thread block per 64 KiB tile: 256 threads
 * each fold a strided share of the tile's elements, a fixed shared-memory
 * tree combines them, and 8 threads compute the tile's XXH3 (one
 * accumulator lane each). Stage 2, one thread block, folds the per-tile
 * partials in tile order and a fixed tree, hashes the tile hashes, and
 * writes the tft_stats, which cudaMemcpyAsync copies into the caller's
 * pinned buffer. No atomics, so results are reproducible.
 *
 * Data must be element-aligned (as every framework allocates). Nothing
 * here needs a GPU to link or to run: without a driver or device,
 * tft_stats_cuda_available() returns 0 and launch returns -ENODEV.
 * Functions return 0 or a negative errno; nothing prints.
 */
#ifndef TFT_STATS_CUDA_H
#define TFT_STATS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "tft_stats.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when a CUDA driver and at least one device are usable, else 0 (any
 * error counts as 0; the error is cleared so the application's
 * cudaGetLastError() does not see it). Cached after the first call. */
int tft_stats_cuda_available(void);

/* Bytes of device scratch tft_stats_cuda_launch needs for numel elements of
 * dtype; 0 for an unknown dtype. About 120 bytes per 64 KiB of tensor. */
size_t tft_stats_cuda_scratch_bytes(int dtype, size_t numel);

/* A launched computation not yet known to be finished. Zero it before use;
 * query/wait release it when they report completion or an error. */
typedef struct tft_stats_cuda_pending {
    void *event; /* cudaEvent_t recorded after the copy-back, NULL when idle */
} tft_stats_cuda_pending;

/* Enqueues the statistics of numel elements of dtype at dev_data (device
 * memory, element-aligned) in mode on stream (a cudaStream_t, NULL = the
 * legacy default stream). dev_scratch (device memory, at least
 * tft_stats_cuda_scratch_bytes, 256-byte aligned as cudaMalloc returns) must
 * not be used by anyone else until the computation finishes; host_out should
 * be pinned (cudaHostAlloc) for the copy to be asynchronous and must stay
 * valid until query/wait report completion, when it holds the result.
 * Returns 0 (pend then holds the event), -EINVAL (bad dtype or mode, NULL
 * host_out or pend, NULL dev_data with numel > 0), -ENOSPC (scratch too
 * small or NULL), -ENODEV (no usable device), -EIO (a CUDA call failed). */
int tft_stats_cuda_launch(int dtype, const void *dev_data, size_t numel, int mode,
                          void *stream, void *dev_scratch, size_t scratch_bytes,
                          tft_stats *host_out, tft_stats_cuda_pending *pend);

/* 1 when the computation behind pend has finished (host_out is valid; pend
 * is released), 0 when not yet, -EIO on a CUDA error (pend released),
 * -EINVAL when pend holds nothing. Never blocks. */
int tft_stats_cuda_query(tft_stats_cuda_pending *pend);

/* Blocks until the computation behind pend has finished, then releases it.
 * Returns 0, -EIO on a CUDA error, -EINVAL when pend holds nothing. */
int tft_stats_cuda_wait(tft_stats_cuda_pending *pend);

/* Runs the device algorithm (the same code: XXH3 port, per-thread Welford,
 * fixed trees) on the host over host memory; for tests and for checking a
 * device result against a host copy. Same returns as tft_stats_compute. */
int tft_stats_cuda_emulate(int dtype, const void *data, size_t numel, int mode,
                           tft_stats *out);

/* XXH3_64bits of len bytes computed by the device port (run on the host);
 * equal to libxxhash's XXH3_64bits. For tests. */
uint64_t tft_stats_cuda_xxh3(const void *data, size_t len);

/* ---- many tensors in one launch (added for tftrain's CUDA backend) ------ */

/* Items per tft_stats_cuda_launch_many. */
#define TFT_STATS_CUDA_MANY 64

/* One tensor of a batched launch. out is where the device writes its
 * tft_stats: device memory, or pinned host memory mapped into the device's
 * address space (cudaHostAlloc with cudaHostAllocMapped). */
typedef struct tft_stats_cuda_item {
    int dtype;
    const void *dev_data;
    size_t numel;
    tft_stats *out;
} tft_stats_cuda_item;

/* Device scratch tft_stats_cuda_launch_many needs for these items in mode;
 * 0 for a bad item. */
size_t tft_stats_cuda_scratch_bytes_many(const tft_stats_cuda_item *items, int n, int mode);

/* Enqueues the statistics of n (1..TFT_STATS_CUDA_MANY) tensors on stream
 * in two kernel launches: each item's result, written to its out, equals
 * what tft_stats_cuda_launch gives for it, bit for bit. No copy and no
 * event: the caller records an event after it and reads the results once
 * the event has completed. Scratch as for tft_stats_cuda_launch. Returns
 * 0, -EINVAL, -ENOSPC, -ENODEV, -EIO. */
int tft_stats_cuda_launch_many(const tft_stats_cuda_item *items, int n, int mode, void *stream,
                               void *dev_scratch, size_t scratch_bytes);

#ifdef __cplusplus
}
#endif
#endif /* TFT_STATS_CUDA_H */
