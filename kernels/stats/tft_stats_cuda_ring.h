/*
 * tft_stats_cuda_ring.h — recording device tensors without stalling the
 * GPU: an ordered queue of records whose payloads are produced on a CUDA
 * stream and come back asynchronously.
 *
 * For each recorded device tensor the owner enqueues either
 *   - its statistics (tft_dring_stats): the statistics kernel of
 *     tft_stats_cuda.h is launched on the tensor's stream, right behind the
 *     op that produced it, and writes a tft_stats into a slot of a pinned
 *     host arena (cudaMemcpyAsync); or
 *   - a copy of its bytes (tft_dring_copy): cudaMemcpyAsync into the arena,
 *     for recorders that compute statistics on the host;
 * and host-side records (tft_dring_host: bytes copied now, ready at once).
 * Each record carries the owner's fixed-size metadata. Completion is an
 * event per record, polled by the host (cudaEventQuery): tft_dring_poll
 * hands every finished record at the head of the queue to the owner's emit
 * callback, in enqueue order, and never blocks. tft_dring_drain blocks
 * until all are emitted. Nothing calls cudaDeviceSynchronize; the only
 * waits are for the oldest record when the queue or the arena is full
 * (bounding how far the host runs ahead), drain, and growing the
 * statistics scratch for a tensor larger than any before.
 *
 * Batched statistics (batch_stats): a request reserves its place in the
 * queue at once but its kernel waits in a batch of up to 64 requests (on
 * one stream, in one mode), launched as two kernels whose results the
 * device writes straight into the pinned arena (mapped into the device's
 * address space), completed by one event: per-tensor launch, copy and
 * event costs shrink 64-fold. The owner must call tft_dring_flush before
 * anything on the device may change a tensor whose request is waiting.
 *
 * Device scratch: one buffer, reused by every statistics launch. Launches
 * on one stream are ordered by it; when a launch comes on a different
 * stream than the previous one, the ring makes the new stream wait for the
 * old (an event), so the scratch is never shared by two kernels at once.
 *
 * Not thread-safe (one thread enqueues, polls and emits); the emit
 * callback must not call back into the same ring.
 * Functions return 0 or a negative errno; nothing prints.
 */
#ifndef TFT_STATS_CUDA_RING_H
#define TFT_STATS_CUDA_RING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tft_dring tft_dring;

/* Called once per record, in enqueue order. meta: the owner's metadata as
 * given at enqueue; payload/len: the statistics (a tft_stats) or the bytes
 * (NULL/0 for a record without payload); status: 0, or a negative errno
 * when the payload could not be produced (a failed launch or copy; the
 * payload is then not valid). The payload is valid during the call only. */
typedef void (*tft_dring_emit_fn)(void *ctx, const void *meta, const void *payload, size_t len, int status);

typedef struct tft_dring_opts {
    size_t sz;              /* sizeof(tft_dring_opts) */
    size_t arena_bytes;     /* pinned host arena; 0 = 16 MiB */
    uint32_t nslots;        /* most queued records; 0 = 8192 */
    size_t meta_bytes;      /* metadata bytes per record (copied at enqueue) */
    size_t max_stats_bytes; /* the largest tensor (bytes) whose statistics are expected
                             * (sizes the device scratch; larger ones grow it, with a wait) */
    tft_dring_emit_fn emit;
    void *ctx;
    int batch_stats;        /* 1: statistics requests wait in a batch, launched together
                             * (tft_stats_cuda_launch_many) at tft_dring_flush, when 64
                             * are waiting, or before the ring must wait (see below) */
} tft_dring_opts;

/* Creates a ring on the current device. Returns 0, -EINVAL, -ENODEV (no
 * usable device), -ENOMEM (host, pinned or device memory), -EIO. */
int tft_dring_new(tft_dring **out, const tft_dring_opts *o);
/* Drains (emits everything queued), then frees. NULL-safe. */
void tft_dring_free(tft_dring *r);

/* Enqueues the statistics of numel elements of dtype at dev (device
 * memory) in mode (enum tft_stats_mode), computed on stream (a
 * cudaStream_t). Returns 0; on a failed launch the record is still queued
 * (emitted with that status, in order) and the error is returned too. */
int tft_dring_stats(tft_dring *r, const void *meta, int dtype, const void *dev, size_t numel, int mode,
                    void *stream);
/* Enqueues a copy of bytes bytes at dev, taken in stream order. A copy
 * larger than the arena waits for everything queued and the stream, and
 * goes through a temporary host buffer. */
int tft_dring_copy(tft_dring *r, const void *meta, const void *dev, size_t bytes, void *stream);
/* Enqueues a host record with a copy of bytes bytes at host (may be NULL
 * when bytes is 0); it is ready at once but leaves in order. */
int tft_dring_host(tft_dring *r, const void *meta, const void *host, size_t bytes);

/* Launches the waiting batch of statistics requests (batch_stats); they
 * then see the tensors as they are now in stream order. Returns 0 or the
 * launch's error (the requests are then emitted with it). */
int tft_dring_flush(tft_dring *r);
/* Emits the finished records at the head. Returns how many, or -EIO. */
int tft_dring_poll(tft_dring *r);
/* Emits everything queued, waiting as needed. Returns 0 or the first error. */
int tft_dring_drain(tft_dring *r);
/* Records queued now. */
uint32_t tft_dring_pending(const tft_dring *r);

#ifdef __cplusplus
}
#endif
#endif
