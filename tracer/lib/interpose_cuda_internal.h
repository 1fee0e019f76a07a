/*
 * interpose_cuda_internal.h — what the CUDA-side interposers of libtftrace
 * share (devq.c: the plugin and the device-statistics queue; interpose_cuda.c:
 * cuBLAS/cuBLASLt; interpose_nccl.c; interpose_nvtx.c).
 *
 * The device-statistics queue. A recorded call (a GEMM, a collective's
 * result) becomes one item: an op and up to three tensors. When the plugin
 * is there and the step is sampled, each tensor's statistics are launched on
 * the call's stream right after the call and the item waits in a FIFO until
 * the copies land; items are written in FIFO order, with the step, scope and
 * (for results) op seq of the call, by the next thread that polls (every
 * interposed call polls, without blocking) — while an NVTX step range is
 * open, only by the thread that opened it. At the end of an NVTX step
 * range the queue is drained, waiting if need be (at most TFT_CUDA_WAIT_MS,
 * default 10000 ms), so that a step's records are written before its STEP
 * END: tfdiff reads a rank file one step at a time. Without the plugin, or
 * on skipped steps, items carry shapes only and are written at once.
 */
#ifndef TFT_INTERPOSE_CUDA_INTERNAL_H
#define TFT_INTERPOSE_CUDA_INTERNAL_H

#include "tft_cuda_plugin.h"
#include "interpose_internal.h"

#define DEVQ_MAX_T 3

/* One tensor of an item: what it is and where its data lives. */
typedef struct devq_tensor {
    const char *name;    /* static string (owned: a copy the queue frees) */
    char *owned;         /* name when the queue owns it (tft_tensor_dev), else NULL */
    uint64_t id;         /* tensor id taken at the call, 0: one is taken when the record is written */
    int dtype;           /* enum tft_dtype; -1: a type we have no name for (recorded as u8, shape only) */
    int ndim;
    int64_t shape[TFT_MAX_NDIM]; /* row-major view of the data as stored */
    tft_cuda_tensor mem; /* where the data is (mem.ptr NULL: shape only) */
} devq_tensor;

/* A recorded call. kind DEVQ_OP: tensors 0..n-2 are the op's inputs (each
 * its own op, as the cblas interposer records A and B), tensor n-1 its
 * output. kind DEVQ_RESULT: one tensor, an output of the existing op seq. */
enum { DEVQ_OP = 0, DEVQ_RESULT = 1 };
typedef struct devq_call {
    int kind;
    const char *op_name; /* static string */
    int op_kind;         /* enum tft_op_kind */
    int64_t seq;         /* DEVQ_RESULT: the op the tensor belongs to */
    int n_attr;
    int64_t attr[12];
    int nt;
    devq_tensor t[DEVQ_MAX_T];
} devq_call;

/* Records c (see above): statistics launched on stream when possible.
 * device >= 0: the device ordinal its tensors are recorded with (else the
 * plugin's answer). Call with ip_depth > 0 and recording on. Keeps errno. */
void devq_submit(const devq_call *c, void *stream, int device);

/* tft_tensor_dev with the plugin there: queues the TENSOR record (id, op
 * seq, both taken by the caller) of the dense device tensor of numel
 * elements at ptr on `device`, its statistics launched on stream; written
 * when they arrive, in queue order. Call with ip_depth > 0. Returns 0, or
 * -ENODEV when the plugin or memory is missing (the caller then writes the
 * record shape only). */
int devq_submit_tensor(const char *name, int dtype, const void *ptr, int ndim, const int64_t *shape,
                       uint64_t numel, int device, void *stream, int64_t seq, uint64_t id);

/* Writes the finished items at the head of the queue; wait != 0: waits for
 * all of them (bounded, see above). Keeps errno. */
void devq_drain(int wait);

/* 1 when the plugin is registered. */
int devq_have_plugin(void);

/* Says once on stderr that device statistics are unavailable and why. */
void devq_note_no_plugin(void);

/* Called by the NVTX injection when a step range begins (begin 1) or ends
 * (0): drains the queue (waiting), makes the calling thread the one that
 * writes queued items until the step ends, and asks the plugin to deliver
 * its activity buffers. */
void cuda_step_boundary(int begin);

/* var = the real sym, looked up once into the static var##_cache the
 * caller declares (static void *_Atomic var##_cache). */
#define REAL(var, sym) __typeof__(&sym) var = (__typeof__(&sym))ip_real_cached(&var##_cache, #sym)

#endif
