/*
 * tft_cuda_plugin.h — the interface between libtftrace.so and its CUDA
 * plugin, libtftrace-cuda.so (docs/INTERPOSE.md "CUDA, cuBLAS,
 * NCCL, NVTX").
 *
 * libtftrace must load into any process, so it links no CUDA library: its
 * cuBLAS/cuBLASLt/NCCL interposers (interpose_cuda.c, interpose_nccl.c) see
 * the calls and know shapes, dtypes and streams, but cannot touch device
 * memory. The plugin (tracer/cuda/) is linked with a private static
 * cudart, CUPTI and the device statistics kernels (kernels/stats/stats_cuda.cu).
 * The CUDA driver loads it through CUDA_INJECTION64_PATH when CUDA
 * initialises — so without a driver and a device it is never loaded — and
 * its InitializeInjection registers a tft_cuda_plugin table here. Until then
 * (or for good, without a device) the interposers record shapes only.
 *
 * In the other direction the plugin records through tft.h and through
 * tft_x_record, the recorder's one internal entry for records built outside
 * an op bracket (recorder_x.c).
 *
 * Not API: the tft_x_* functions are exported from libtftrace.so for the
 * plugin alone, at version LIBTFTRACE_PRIVATE (tracer/lib/libtftrace.map.in),
 * apart from the public LIBTFTRACE_1; their contract changes with the
 * plugin built from the same tree. Not installed.
 */
#ifndef TFT_CUDA_PLUGIN_H
#define TFT_CUDA_PLUGIN_H

#include "tft_format.h"

/* An entry of this interface: tft_x_* in libtftrace.so (LIBTFTRACE_PRIVATE),
 * InitializeInjection in the plugin (the CUDA driver's, plugin.map). */
#if defined(__GNUC__)
#define TFT_PLUGIN_API __attribute__((visibility("default")))
#else
#define TFT_PLUGIN_API
#endif

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- recorder entry (libtftrace, recorder_x.c) ---------------------------- */

enum tft_x_verb {
    /* rec is a tft_rec_op: fills h.step (the current step), h.seq (the op
     * this thread is inside, TFT_SEQ_NONE if none) and scope (this thread's
     * scope path id, 0 none); returns the statistics mode a tensor recorded
     * now would get (TFT_STATS_SHAPE on steps TFT_EVERY skips). Returns 0
     * (TFT_STATS_SHAPE) and fills nothing when recording is off. */
    TFT_X_STATE = 0,
    /* Appends rec — kind OP, TENSOR or KERNEL, h.len and every field set by
     * the caller, h.step and h.seq included (those of the call it belongs
     * to) — to this thread's ring, without touching the thread's op bracket.
     * The recorder stamps h.ts, interns name into the record's name field
     * (name NULL: the field is kept), and for an OP whose h.seq is
     * TFT_X_SEQ_NEW takes the next op sequence number, for a TENSOR whose id
     * is 0 the next tensor id; both are written back into *rec. Returns 0,
     * -EINVAL (another kind), -ENOSPC (ring full: dropped and counted). */
    TFT_X_EMIT = 1
};
#define TFT_X_SEQ_NEW (INT64_MIN + 1)

TFT_PLUGIN_API int64_t tft_x_record(int verb, tft_rec *rec, const char *name);

/* ---- plugin table (registered by the plugin, called by libtftrace) -------- */

/* A device tensor as the interposers describe it: batch matrices, each
 * `cols` runs of `rows` contiguous elements, `ld` elements between run
 * starts (column-major: rows = the matrix's row count), `stride` elements
 * between matrix starts. rows == ld and stride == rows * cols (or batch 1)
 * is a dense block of rows * cols * batch elements. */
typedef struct tft_cuda_tensor {
    const void *ptr;  /* device address of the first element */
    int dtype;        /* enum tft_dtype */
    uint64_t rows, cols, ld;
    uint64_t batch, stride;
} tft_cuda_tensor;

typedef struct tft_cuda_plugin {
    size_t sz; /* sizeof(tft_cuda_plugin) */
    /* Enqueues the statistics (mode > TFT_STATS_SHAPE) of t on stream (a
     * cudaStream_t; NULL = the legacy default stream), after the work
     * already queued there; copies the result back into pinned memory
     * without synchronising. Writes the device ordinal into *device.
     * Returns a handle >= 0 for stats_poll, or -ENODEV (no usable device),
     * -ENOSPC (scratch exhausted), -EINVAL, -EIO (a CUDA call failed).
     * Callers release handles in the order they got them (a FIFO). */
    int64_t (*stats_launch)(const tft_cuda_tensor *t, int mode, void *stream, int *device);
    /* Never blocks: 1 when done (*out filled, handle released), 0 not yet,
     * < 0 failed (handle released). */
    int (*stats_poll)(int64_t handle, tft_stats *out);
    /* Delivers the CUPTI activity buffered so far (at step ends, exit). */
    void (*activity_flush)(void);
} tft_cuda_plugin;

/* libtftrace: installs the plugin's table (NULL uninstalls). The table must
 * stay valid while installed. */
TFT_PLUGIN_API void tft_x_cuda_register(const tft_cuda_plugin *p);

/* libtftrace: 1 when CUDA-side records are wanted in this process (recording
 * on; interposers not turned off by TFT_INTERPOSE=0 or by the main program
 * being linked with libtftrace), else 0. The plugin asks this once. */
TFT_PLUGIN_API int tft_x_cuda_wanted(void);

/* libtftrace: quiet != 0 makes the calling thread's interposers pass calls
 * through (the host-allocation interposer included) until a matching call
 * with 0: the plugin's own allocations (CUPTI buffers, cudart's pinned
 * memory) are not the program's. Calls nest. */
TFT_PLUGIN_API void tft_x_cuda_quiet(int quiet);

#ifdef __cplusplus
}
#endif
#endif /* TFT_CUDA_PLUGIN_H */
