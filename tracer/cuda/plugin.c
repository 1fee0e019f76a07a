/*
 * plugin.c — libtftrace-cuda.so: the CUDA injection library of tftrace
 * (docs/INTERPOSE.md, "CUDA, cuBLAS, NCCL, NVTX"). The CUDA driver loads it when the program initialises
 * CUDA, if CUDA_INJECTION64_PATH names it, and calls InitializeInjection
 * (without a driver or a device nothing loads and nothing here runs).
 *
 * It (1) registers the device-statistics service (devstats.c) with
 * libtftrace, whose cuBLAS/NCCL interposers use it; (2) subscribes to CUPTI:
 *   - callbacks on the runtime and driver allocation APIs (cudaMalloc,
 *     cudaMallocManaged, cudaMallocPitch, cudaMallocAsync,
 *     cudaMallocFromPoolAsync, cudaFree, cudaFreeAsync, cudaMallocHost,
 *     cudaHostAlloc, cudaFreeHost; cuMemAlloc_v2, cuMemAllocPitch_v2,
 *     cuMemAllocManaged, cuMemAllocAsync, cuMemAllocFromPoolAsync,
 *     cuMemFree_v2, cuMemFreeAsync, cuMemMap, cuMemUnmap) record ALLOC/FREE
 *     records on the calling thread, with the step of the call — CUPTI sees
 *     calls made through cuGetProcAddress and a statically linked cudart,
 *     which symbol interposition would miss. A driver call made inside a
 *     runtime call we record is not recorded again.
 *   - activity buffers of kernels (CONCURRENT_KERNEL) and memory copies
 *     become KERNEL records: name, grid, block, stream, device, correlation
 *     id, start/end converted to CLOCK_MONOTONIC ns (copies: kind copy,
 *     named "memcpy HtoD" and so on). They arrive on CUPTI's thread, after
 *     the fact, so they carry no step and no op seq: tfdiff reads a rank
 *     file one step at a time, and late records with a step would split
 *     steps. Our own statistics kernels and copies are left out.
 * Only one CUPTI subscriber may exist per process: if another tool holds it
 * (or CUPTI cannot start), we say so once on stderr and carry on without
 * allocations and kernels; the device statistics still work.
 *
 * Everything here is off when libtftrace says CUDA records are not wanted
 * (recording off, TFT_INTERPOSE=0, or a program linked with libtftrace).
 */
#include "plugin_internal.h"
#include "tft_clock.h"
#include "tft.h"

#include <cupti.h> /* with the API parameter structs (generated_*_meta.h) */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

TFT_PLUGIN_API int InitializeInjection(void);

/* Runtime API calls we record that this thread is inside (their driver
 * calls are not recorded again). */
static __thread int rt_depth;

static void say(const char *msg)
{
    ssize_t w = write(2, msg, strlen(msg));
    (void)w;
}

/* ---- our own copies: their runtime correlation ids --------------------------- */

#define IGNORE_SLOTS 4096u
static _Atomic uint32_t ignore_corr[IGNORE_SLOTS];

void cp_ignore_corr(uint32_t corr)
{
    atomic_store_explicit(&ignore_corr[corr % IGNORE_SLOTS], corr, memory_order_relaxed);
}

static int ignored(uint32_t corr)
{
    return corr && atomic_load_explicit(&ignore_corr[corr % IGNORE_SLOTS], memory_order_relaxed) == corr;
}

/* ---- allocations (callbacks) ---------------------------------------------------- */

static int dev_of(CUcontext ctx)
{
    uint32_t d = 0;
    return ctx && cuptiGetDeviceId(ctx, &d) == CUPTI_SUCCESS ? (int)d : -1;
}

#define RT_OK(cb) ((cb)->functionReturnValue && *(const cudaError_t *)(cb)->functionReturnValue == cudaSuccess)
#define DRV_OK(cb) ((cb)->functionReturnValue && *(const CUresult *)(cb)->functionReturnValue == CUDA_SUCCESS)
#define P(type) ((const type *)cb->functionParams)

static void dev_alloc(void *const *pp, size_t bytes, const CUpti_CallbackData *cb, const char *site)
{
    if (pp && *pp)
        tft_alloc_dev(*pp, bytes, dev_of(cb->context), site);
}

static void runtime_exit(CUpti_CallbackId id, const CUpti_CallbackData *cb)
{
    if (!RT_OK(cb))
        return;
    switch (id) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020:
        dev_alloc(P(cudaMalloc_v3020_params)->devPtr, P(cudaMalloc_v3020_params)->size, cb, "cudaMalloc");
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000:
        dev_alloc(P(cudaMallocManaged_v6000_params)->devPtr, P(cudaMallocManaged_v6000_params)->size, cb,
                  "cudaMallocManaged");
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020: {
        const cudaMallocPitch_v3020_params *p = P(cudaMallocPitch_v3020_params);
        dev_alloc(p->devPtr, (p->pitch ? *p->pitch : p->width) * p->height, cb, "cudaMallocPitch");
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020:
        dev_alloc(P(cudaMallocAsync_v11020_params)->devPtr, P(cudaMallocAsync_v11020_params)->size, cb,
                  "cudaMallocAsync");
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020:
        dev_alloc(P(cudaMallocFromPoolAsync_v11020_params)->ptr, P(cudaMallocFromPoolAsync_v11020_params)->size,
                  cb, "cudaMallocFromPoolAsync");
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020:
        if (P(cudaFree_v3020_params)->devPtr)
            tft_free_dev(P(cudaFree_v3020_params)->devPtr, dev_of(cb->context));
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020:
        if (P(cudaFreeAsync_v11020_params)->devPtr)
            tft_free_dev(P(cudaFreeAsync_v11020_params)->devPtr, dev_of(cb->context));
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020:
        if (P(cudaMallocHost_v3020_params)->ptr && *P(cudaMallocHost_v3020_params)->ptr)
            tft_alloc(*P(cudaMallocHost_v3020_params)->ptr, P(cudaMallocHost_v3020_params)->size,
                      "cudaMallocHost");
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020:
        if (P(cudaHostAlloc_v3020_params)->pHost && *P(cudaHostAlloc_v3020_params)->pHost)
            tft_alloc(*P(cudaHostAlloc_v3020_params)->pHost, P(cudaHostAlloc_v3020_params)->size,
                      "cudaHostAlloc");
        break;
    case CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020:
        if (P(cudaFreeHost_v3020_params)->ptr)
            tft_free(P(cudaFreeHost_v3020_params)->ptr);
        break;
    default: break;
    }
}

static void drv_alloc(const CUdeviceptr *pp, size_t bytes, const CUpti_CallbackData *cb, const char *site)
{
    if (pp && *pp)
        tft_alloc_dev((const void *)(uintptr_t)*pp, bytes, dev_of(cb->context), site);
}

static void drv_free(CUdeviceptr p, const CUpti_CallbackData *cb)
{
    if (p)
        tft_free_dev((const void *)(uintptr_t)p, dev_of(cb->context));
}

static void driver_exit(CUpti_CallbackId id, const CUpti_CallbackData *cb)
{
    if (!DRV_OK(cb))
        return;
    switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2:
        drv_alloc(P(cuMemAlloc_v2_params)->dptr, P(cuMemAlloc_v2_params)->bytesize, cb, "cuMemAlloc");
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
        const cuMemAllocPitch_v2_params *p = P(cuMemAllocPitch_v2_params);
        drv_alloc(p->dptr, (p->pPitch ? *p->pPitch : p->WidthInBytes) * p->Height, cb, "cuMemAllocPitch");
        break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged:
        drv_alloc(P(cuMemAllocManaged_params)->dptr, P(cuMemAllocManaged_params)->bytesize, cb,
                  "cuMemAllocManaged");
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
        drv_alloc(P(cuMemAllocAsync_params)->dptr, P(cuMemAllocAsync_params)->bytesize, cb, "cuMemAllocAsync");
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz:
        drv_alloc(P(cuMemAllocFromPoolAsync_params)->dptr, P(cuMemAllocFromPoolAsync_params)->bytesize, cb,
                  "cuMemAllocFromPoolAsync");
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2: drv_free(P(cuMemFree_v2_params)->dptr, cb); break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: drv_free(P(cuMemFreeAsync_params)->dptr, cb); break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap:
        tft_alloc_dev((const void *)(uintptr_t)P(cuMemMap_params)->ptr, P(cuMemMap_params)->size,
                      dev_of(cb->context), "cuMemMap");
        break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: drv_free(P(cuMemUnmap_params)->ptr, cb); break;
    default: break;
    }
}

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId id, const void *data)
{
    const CUpti_CallbackData *cb = data;
    if (dom != CUPTI_CB_DOMAIN_RUNTIME_API && dom != CUPTI_CB_DOMAIN_DRIVER_API)
        return;
    int enter = cb->callbackSite == CUPTI_API_ENTER;
    if (cp_self) {
        if (enter && dom == CUPTI_CB_DOMAIN_RUNTIME_API)
            cp_ignore_corr(cb->correlationId);
        return;
    }
    if (dom == CUPTI_CB_DOMAIN_RUNTIME_API) {
        if (enter) {
            rt_depth++;
            return;
        }
        if (rt_depth > 0)
            rt_depth--;
        runtime_exit(id, cb);
    } else if (!enter && rt_depth == 0) {
        driver_exit(id, cb);
    }
}

static const CUpti_CallbackId runtime_ids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocPitch_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020,
    /* our own copies (devstats.c, tft_stats_cuda_launch), to leave them out */
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000,
};

static const CUpti_CallbackId driver_ids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
};

/* ---- kernels and copies (activity buffers) --------------------------------------- */

#if defined(CUPTI_API_VERSION) && CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 act_kernel;
typedef CUpti_ActivityMemcpy6 act_memcpy;
#else
typedef CUpti_ActivityKernel9 act_kernel;
typedef CUpti_ActivityMemcpy5 act_memcpy;
#endif

#define BUF_BYTES (1u << 20)

static int64_t clock_offset; /* CLOCK_MONOTONIC ns - CUPTI timestamp */

static uint64_t to_mono(uint64_t t) { return t ? (uint64_t)((int64_t)t + clock_offset) : 0; }

static void CUPTIAPI buf_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    tft_x_cuda_quiet(1);
    *buf = aligned_alloc(8, BUF_BYTES);
    tft_x_cuda_quiet(0);
    *size = *buf ? BUF_BYTES : 0;
    *max_records = 0;
}

/* Our statistics kernels (kernels/stats/stats_cuda.cu), by mangled name. */
static int own_kernel(const char *name)
{
    return name && (strstr(name, "11stats_tiles") || strstr(name, "11stats_final"));
}

static const char *copy_name(uint8_t kind)
{
    static const char *const names[] = {"memcpy", "memcpy HtoD", "memcpy DtoH", "memcpy HtoA", "memcpy AtoH",
                                        "memcpy AtoA", "memcpy AtoD", "memcpy DtoA", "memcpy DtoD",
                                        "memcpy HtoH", "memcpy PtoP"};
    return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "memcpy";
}

static void emit_kernel(const char *name, uint64_t start, uint64_t end, uint32_t stream, uint32_t corr,
                        const uint32_t grid[3], const uint32_t block[3], uint32_t device, uint32_t kind)
{
    tft_rec_kernel k;
    memset(&k, 0, sizeof(k));
    k.h.kind = TFT_REC_KERNEL;
    k.h.len = sizeof(k);
    k.h.step = TFT_STEP_NONE;
    k.h.seq = TFT_SEQ_NONE;
    k.start = to_mono(start);
    k.end = to_mono(end);
    k.stream = stream;
    k.corr = corr;
    memcpy(k.grid, grid, sizeof(k.grid));
    memcpy(k.block, block, sizeof(k.block));
    k.device = (int32_t)device;
    k.kind = kind;
    tft_x_record(TFT_X_EMIT, &k.h, name ? name : "?");
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
    CUpti_Activity *rec = NULL;
    while (buf && cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const act_kernel *k = (const act_kernel *)rec;
            if (own_kernel(k->name))
                continue;
            uint32_t g[3] = {(uint32_t)k->gridX, (uint32_t)k->gridY, (uint32_t)k->gridZ};
            uint32_t b[3] = {(uint32_t)k->blockX, (uint32_t)k->blockY, (uint32_t)k->blockZ};
            emit_kernel(k->name, k->start, k->end, k->streamId, k->correlationId, g, b, k->deviceId,
                        TFT_OP_KERNEL);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const act_memcpy *m = (const act_memcpy *)rec;
            if (ignored(m->runtimeCorrelationId))
                continue;
            uint32_t z[3] = {0, 0, 0};
            emit_kernel(copy_name(m->copyKind), m->start, m->end, m->streamId, m->correlationId, z, z,
                        m->deviceId, TFT_OP_COPY);
        }
    }
    tft_x_cuda_quiet(1);
    free(buf);
    tft_x_cuda_quiet(0);
}

static _Atomic uint64_t last_flush_ns;

/* At step boundaries: deliver what CUPTI holds, at most once a second. */
static void activity_flush(void)
{
    uint64_t now = tft_clock_mono_ns(), last = atomic_load(&last_flush_ns);
    if (now - last < 1000000000u || !atomic_compare_exchange_strong(&last_flush_ns, &last, now))
        return;
    cp_self++;
    cuptiActivityFlushAll(0);
    cp_self--;
}

static void flush_at_exit(void)
{
    cp_self++;
    tft_x_cuda_quiet(1);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    tft_x_cuda_quiet(0);
    cp_self--;
}

/* ---- start ------------------------------------------------------------------------ */

static const tft_cuda_plugin table = {
    .sz = sizeof(tft_cuda_plugin),
    .stats_launch = ds_launch,
    .stats_poll = ds_poll,
    .activity_flush = activity_flush,
};

static void cupti_unavailable(CUptiResult r)
{
    const char *why = NULL;
    if (cuptiGetResultString(r, &why) != CUPTI_SUCCESS || !why)
        why = "unknown error";
    char msg[400];
    snprintf(msg, sizeof(msg),
             "tftrace: CUPTI unavailable (%s%s): CUDA allocations and kernels are not recorded; "
             "device statistics still are\n",
             why, r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? ": another tool holds it" : "");
    say(msg);
}

/* Subscribes and enables what we record; CUPTI_SUCCESS, or the error of
 * cuptiSubscribe (then nothing is recorded through CUPTI). */
static CUptiResult cupti_start(void)
{
    CUpti_SubscriberHandle sub;
    CUptiResult r = cuptiSubscribe(&sub, (CUpti_CallbackFunc)on_callback, NULL);
    if (r != CUPTI_SUCCESS)
        return r;
    for (size_t i = 0; i < sizeof(runtime_ids) / sizeof(runtime_ids[0]); i++)
        cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, runtime_ids[i]);
    for (size_t i = 0; i < sizeof(driver_ids) / sizeof(driver_ids[0]); i++)
        cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, driver_ids[i]);
    uint64_t cupti_now = 0;
    if (cuptiGetTimestamp(&cupti_now) == CUPTI_SUCCESS)
        clock_offset = (int64_t)tft_clock_mono_ns() - (int64_t)cupti_now;
    r = cuptiActivityRegisterCallbacks(buf_requested, buf_completed);
    if (r == CUPTI_SUCCESS)
        r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r == CUPTI_SUCCESS)
        r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
    if (r != CUPTI_SUCCESS) {
        say("tftrace: CUPTI activity unavailable: kernels and copies are not recorded\n");
        return CUPTI_SUCCESS; /* the callbacks stay: allocations are still recorded */
    }
    cuptiActivityFlushPeriod(1000);
    atexit(flush_at_exit);
    return CUPTI_SUCCESS;
}

int InitializeInjection(void)
{
    static _Atomic int once;
    if (atomic_exchange(&once, 1))
        return 1;
    if (!tft_x_cuda_wanted())
        return 1;
    tft_x_cuda_register(&table);
    if (getenv("TFT_CUPTI") && !strcmp(getenv("TFT_CUPTI"), "0"))
        return 1;
    tft_x_cuda_quiet(1);
    CUptiResult r = cupti_start();
    tft_x_cuda_quiet(0);
    if (r != CUPTI_SUCCESS)
        cupti_unavailable(r);
    return 1;
}
