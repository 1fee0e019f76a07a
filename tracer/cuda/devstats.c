/*
 * devstats.c — device tensor statistics for the interposers (plugin table
 * entries stats_launch / stats_poll, see tft_cuda_plugin.h), on top of
 * tft_stats_cuda_launch (kernels/stats/tft_stats_cuda.h).
 *
 * Memory. Per device, one scratch arena (TFT_CUDA_SCRATCH_MB, default 64
 * MiB of device memory, allocated at the first request on that device) used
 * as a ring: each request takes the statistics scratch and, for a strided
 * matrix, a dense copy of it (cudaMemcpy2DAsync on the caller's stream);
 * requests are released in the order they were made (the interposers'
 * queue is a FIFO), which frees the ring's tail. Results land in a pinned
 * host array of SLOTS entries. A request that does not fit returns -ENOSPC
 * and the tensor is recorded with its shape only; nothing ever waits here.
 * A stream being captured into a CUDA graph gets nothing added (-EBUSY),
 * and our calls run in the relaxed capture mode so that they never break a
 * capture of another thread.
 *
 * This plugin is linked with a static cudart of its own, so its CUDA errors
 * never reach the program's cudaGetLastError. Its cudart uses the context
 * current on the calling thread — the one the program's cudart made current
 * — so requests go to the device the program is using.
 */
#include "plugin_internal.h"
#include "tft_stats_cuda.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

__thread int cp_self;

#define SLOTS 4096u
#define MAX_DEV 64
#define ALIGN 256u

typedef struct ds_slot {
    int dev;
    uint64_t end;               /* arena position after this request's bytes */
    tft_stats_cuda_pending pend;
} ds_slot;

typedef struct ds_arena {
    char *base;                 /* device memory, NULL until first use */
    uint64_t size, head, tail;  /* ring positions count bytes ever handed out */
    int failed;                 /* cudaMalloc failed: no statistics on this device */
} ds_arena;

static struct {
    pthread_mutex_t mu;
    int ready, failed;
    tft_stats *pinned;          /* SLOTS results, cudaHostAlloc */
    ds_slot slot[SLOTS];
    uint64_t next, oldest;      /* handles: next to give, oldest not released */
    uint64_t arena_bytes;
    ds_arena arena[MAX_DEV];
} ds = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int ds_init_locked(void)
{
    if (ds.ready)
        return ds.failed ? -ENODEV : 0;
    ds.ready = 1;
    ds.failed = 1;
    const char *v = getenv("TFT_CUDA_SCRATCH_MB");
    long mb = v && *v ? strtol(v, NULL, 10) : 64;
    ds.arena_bytes = (uint64_t)(mb > 0 && mb < (1L << 20) ? mb : 64) << 20;
    if (!tft_stats_cuda_available())
        return -ENODEV;
    void *p = NULL;
    if (cudaHostAlloc(&p, SLOTS * sizeof(tft_stats), cudaHostAllocPortable) != cudaSuccess) {
        (void)cudaGetLastError();
        return -ENODEV;
    }
    ds.pinned = p;
    ds.failed = 0;
    return 0;
}

/* Takes bytes (ALIGN-rounded) of dev's arena; offset into base, or -1. */
static int64_t arena_take(ds_arena *a, uint64_t bytes, uint64_t *end)
{
    bytes = (bytes + ALIGN - 1) / ALIGN * ALIGN;
    if (bytes > a->size)
        return -1;
    uint64_t pos = a->head % a->size, skip = pos + bytes > a->size ? a->size - pos : 0;
    if (a->head + skip + bytes - a->tail > a->size)
        return -1;
    uint64_t start = a->head + skip;
    *end = start + bytes;
    return (int64_t)(start % a->size);
}

static ds_arena *arena_of(int dev)
{
    if (dev < 0 || dev >= MAX_DEV)
        return NULL;
    ds_arena *a = &ds.arena[dev];
    if (!a->base && !a->failed) {
        void *p = NULL;
        if (cudaMalloc(&p, ds.arena_bytes) != cudaSuccess) {
            (void)cudaGetLastError();
            a->failed = 1;
            return NULL;
        }
        a->base = p;
        a->size = ds.arena_bytes;
    }
    return a->base ? a : NULL;
}

/* Enqueues a dense copy of t into dst on stream; 0 or -EIO. */
static int pack(const tft_cuda_tensor *t, size_t esz, char *dst, cudaStream_t st)
{
    size_t run = (size_t)t->rows * esz;
    cudaError_t e;
    if (t->batch <= 1 || t->stride == t->ld * t->cols) {
        /* every run is ld apart, across the batch too */
        e = cudaMemcpy2DAsync(dst, run, t->ptr, (size_t)t->ld * esz, run, (size_t)(t->cols * t->batch),
                              cudaMemcpyDeviceToDevice, st);
    } else if (t->ld == t->rows) {
        size_t mat = run * (size_t)t->cols;
        e = cudaMemcpy2DAsync(dst, mat, t->ptr, (size_t)t->stride * esz, mat, (size_t)t->batch,
                              cudaMemcpyDeviceToDevice, st);
    } else {
        e = t->batch <= 256 ? cudaSuccess : cudaErrorInvalidValue;
        for (uint64_t b = 0; b < t->batch && e == cudaSuccess; b++)
            e = cudaMemcpy2DAsync(dst + b * run * t->cols, run, (const char *)t->ptr + b * t->stride * esz,
                                  (size_t)t->ld * esz, run, (size_t)t->cols, cudaMemcpyDeviceToDevice, st);
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return -EIO;
    }
    return 0;
}

static int dense(const tft_cuda_tensor *t)
{
    return (t->cols <= 1 || t->ld == t->rows) && (t->batch <= 1 || t->stride == t->rows * t->cols);
}

static int64_t launch_locked(const tft_cuda_tensor *t, int mode, void *stream, int *device)
{
    if (ds_init_locked() < 0)
        return -ENODEV;
    size_t esz = tft_dtype_size(t->dtype);
    if (!esz || !t->ptr || t->batch < 1 || t->ld < t->rows)
        return -EINVAL;
    if (ds.next - ds.oldest >= SLOTS)
        return -ENOSPC;
    int dev = -1;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return -EIO;
    }
    *device = dev;
    cudaStream_t st = (cudaStream_t)stream;
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(st, &cap) != cudaSuccess) {
        (void)cudaGetLastError();
        return -EIO;
    }
    if (cap != cudaStreamCaptureStatusNone)
        return -EBUSY; /* work on a stream being captured into a graph: not ours to add to */
    ds_arena *a = arena_of(dev);
    if (!a)
        return -ENOSPC;
    uint64_t numel = t->rows * t->cols * t->batch;
    int is_dense = dense(t);
    uint64_t data_bytes = is_dense ? 0 : (numel * esz + ALIGN - 1) / ALIGN * ALIGN;
    uint64_t scratch = tft_stats_cuda_scratch_bytes(t->dtype, (size_t)numel);
    uint64_t end;
    int64_t off = arena_take(a, data_bytes + scratch, &end);
    if (off < 0)
        return -ENOSPC;
    /* taken even if what follows fails, for work already enqueued may still
     * use it: a later request's release frees it */
    a->head = end;
    const void *data = t->ptr;
    if (!is_dense) {
        if (pack(t, esz, a->base + off, st) < 0)
            return -EIO;
        data = a->base + off;
    }
    uint64_t h = ds.next;
    ds_slot *s = &ds.slot[h % SLOTS];
    memset(s, 0, sizeof(*s));
    int rc = tft_stats_cuda_launch(t->dtype, data, (size_t)numel, mode, stream, a->base + off + data_bytes,
                                   (size_t)scratch, &ds.pinned[h % SLOTS], &s->pend);
    if (rc < 0)
        return rc;
    s->dev = dev;
    s->end = end;
    ds.next++;
    return (int64_t)h;
}

int64_t ds_launch(const tft_cuda_tensor *t, int mode, void *stream, int *device)
{
    if (!t || mode <= TFT_STATS_SHAPE || !device)
        return -EINVAL;
    pthread_mutex_lock(&ds.mu);
    cp_self++;
    /* relaxed: our calls must not break a CUDA graph capture another
     * thread of the program may be running */
    enum cudaStreamCaptureMode mode_was = cudaStreamCaptureModeRelaxed;
    int exchanged = cudaThreadExchangeStreamCaptureMode(&mode_was) == cudaSuccess;
    int64_t h = launch_locked(t, mode, stream, device);
    if (exchanged)
        cudaThreadExchangeStreamCaptureMode(&mode_was);
    else
        (void)cudaGetLastError();
    cp_self--;
    pthread_mutex_unlock(&ds.mu);
    return h;
}

/* Releases handle h (the oldest, as the FIFO guarantees). */
static void release_locked(uint64_t h)
{
    ds_slot *s = &ds.slot[h % SLOTS];
    if (s->dev >= 0 && s->dev < MAX_DEV && s->end > ds.arena[s->dev].tail)
        ds.arena[s->dev].tail = s->end;
    if (h + 1 > ds.oldest)
        ds.oldest = h + 1;
}

int ds_poll(int64_t handle, tft_stats *out)
{
    if (handle < 0 || !out)
        return -EINVAL;
    uint64_t h = (uint64_t)handle;
    pthread_mutex_lock(&ds.mu);
    int rc = -EINVAL;
    if (h < ds.next && h >= ds.oldest) {
        cp_self++;
        enum cudaStreamCaptureMode mode_was = cudaStreamCaptureModeRelaxed;
        int exchanged = cudaThreadExchangeStreamCaptureMode(&mode_was) == cudaSuccess;
        rc = tft_stats_cuda_query(&ds.slot[h % SLOTS].pend);
        if (exchanged)
            cudaThreadExchangeStreamCaptureMode(&mode_was);
        cp_self--;
        if (rc == 1)
            *out = ds.pinned[h % SLOTS];
        if (rc != 0)
            release_locked(h);
    }
    pthread_mutex_unlock(&ds.mu);
    return rc;
}
