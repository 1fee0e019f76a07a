/*
 * stats_cuda_ring.c — the device side of the record queue
 * (tft_stats_cuda_ring.h) on the host bookkeeping of tft_stats_ring.h.
 *
 * Plain C over the CUDA runtime API (no kernels of its own: statistics are
 * launched through tft_stats_cuda_launch). Per slot: a kind (host bytes,
 * statistics, device copy, oversized copy), the status known at enqueue,
 * the statistics' pending event or the slot's own copy event, and the
 * owner's metadata.
 *
 * Workload: a few hundred records per training step, one thread.
 */
#include "tft_stats_cuda_ring.h"

#include "tft_stats_cuda.h"
#include "tft_stats_ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#define DEFAULT_ARENA (16u << 20)
#define DEFAULT_SLOTS 8192u

enum { K_HOST, K_STATS, K_COPY, K_BIG, K_PENDING, K_GROUP };

typedef struct dslot {
    int kind;
    int status;                  /* an error known at enqueue, else 0 */
    uint32_t owner;              /* K_GROUP: the slot whose event completes the batch (its last) */
    tft_stats_cuda_pending pend; /* K_STATS */
    void *big;                   /* K_BIG: malloc'd payload */
    size_t big_len;
} dslot;

struct tft_dring {
    tft_sring q;
    tft_sring_slot *qs;
    dslot *ds;
    cudaEvent_t *ev;       /* per slot: completion of a K_COPY */
    uint32_t nslots;
    uint8_t *meta;         /* nslots * meta_bytes */
    size_t meta_bytes;
    void *arena;           /* pinned */
    void *scratch;         /* device scratch of the statistics kernel */
    size_t scratch_bytes;
    cudaStream_t last;     /* stream of the last statistics launch */
    int have_last;
    cudaEvent_t order;     /* orders a launch on a new stream after the last one */
    tft_dring_emit_fn emit;
    void *ctx;
    int batch;             /* batched statistics on (the arena is mapped) */
    uint8_t *arena_dev;    /* the arena's address on the device */
    int ngrp, grp_mode;    /* the waiting batch: its requests, mode, stream */
    cudaStream_t grp_stream;
    uint32_t grp_slot[TFT_STATS_CUDA_MANY];
    tft_stats_cuda_item grp_item[TFT_STATS_CUDA_MANY];
};

static int cuda_err(void)
{
    (void)cudaGetLastError();
    return -EIO;
}

/* Emits the head record when it is finished (or, with block, once it is).
 * Returns 1 when one was emitted, 0 when the head is not finished or the
 * queue is empty. */
static int finish_head(tft_dring *r, int block)
{
    int h = tft_sring_head(&r->q);
    if (h < 0)
        return 0;
    dslot *d = &r->ds[h];
    if (d->kind == K_PENDING) { /* its batch has not been launched */
        if (!block)
            return 0;
        tft_dring_flush(r);
    }
    int st = d->status;
    if (d->kind == K_GROUP && !st) {
        cudaError_t e = block ? cudaEventSynchronize(r->ev[d->owner]) : cudaEventQuery(r->ev[d->owner]);
        if (!block && e == cudaErrorNotReady)
            return 0;
        if (e != cudaSuccess)
            st = cuda_err();
    } else if (d->kind == K_STATS && d->pend.event) {
        int q = block ? tft_stats_cuda_wait(&d->pend) : tft_stats_cuda_query(&d->pend);
        if (!block && q == 0)
            return 0;
        if (q < 0 && !st)
            st = q;
    } else if (d->kind == K_COPY && !st) {
        cudaError_t e = block ? cudaEventSynchronize(r->ev[h]) : cudaEventQuery(r->ev[h]);
        if (!block && e == cudaErrorNotReady)
            return 0;
        if (e != cudaSuccess)
            st = cuda_err();
    }
    const void *payload = d->kind == K_BIG ? d->big : tft_sring_payload(&r->q, (uint32_t)h);
    size_t len = d->kind == K_BIG ? d->big_len : r->qs[h].len;
    r->emit(r->ctx, r->meta + (size_t)h * r->meta_bytes, st ? NULL : payload, st ? 0 : len, st);
    free(d->big);
    memset(d, 0, sizeof(*d));
    tft_sring_pop(&r->q);
    return 1;
}

/* A slot for len payload bytes, waiting for the oldest records while the
 * queue or the arena is full. Returns the slot or -E2BIG. */
static int reserve(tft_dring *r, const void *meta, size_t len, void **payload)
{
    int i;
    while ((i = tft_sring_reserve(&r->q, len, payload)) == -EAGAIN)
        if (!finish_head(r, 1))
            return -EAGAIN; /* cannot happen: a full ring has a head */
    if (i < 0)
        return i;
    memset(&r->ds[i], 0, sizeof(r->ds[i]));
    if (r->meta_bytes)
        memcpy(r->meta + (size_t)i * r->meta_bytes, meta, r->meta_bytes);
    return i;
}

int tft_dring_new(tft_dring **out, const tft_dring_opts *o)
{
    *out = NULL;
    if (!o || o->sz < sizeof(tft_dring_opts) || !o->emit)
        return -EINVAL;
    if (!tft_stats_cuda_available())
        return -ENODEV;
    tft_dring *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    size_t arena = o->arena_bytes ? o->arena_bytes : DEFAULT_ARENA;
    uint32_t n = o->nslots ? o->nslots : DEFAULT_SLOTS;
    r->emit = o->emit;
    r->ctx = o->ctx;
    r->nslots = n;
    r->meta_bytes = o->meta_bytes;
    r->qs = calloc(n, sizeof(*r->qs));
    r->ds = calloc(n, sizeof(*r->ds));
    r->ev = calloc(n, sizeof(*r->ev));
    r->meta = calloc(n, r->meta_bytes ? r->meta_bytes : 1);
    int e = r->qs && r->ds && r->ev && r->meta ? 0 : -ENOMEM;
    r->batch = o->batch_stats != 0;
    if (!e && cudaHostAlloc(&r->arena, arena, r->batch ? cudaHostAllocMapped : cudaHostAllocDefault) != cudaSuccess)
        e = (cuda_err(), -ENOMEM);
    void *dp = NULL;
    if (!e && r->batch && cudaHostGetDevicePointer(&dp, r->arena, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        r->batch = 0; /* no mapping: one launch per tensor */
    }
    r->arena_dev = dp;
    for (uint32_t i = 0; !e && i < n; i++)
        if (cudaEventCreateWithFlags(&r->ev[i], cudaEventDisableTiming) != cudaSuccess)
            e = cuda_err();
    if (!e && cudaEventCreateWithFlags(&r->order, cudaEventDisableTiming) != cudaSuccess)
        e = cuda_err();
    if (!e) {
        r->scratch_bytes = tft_stats_cuda_scratch_bytes(TFT_U8, o->max_stats_bytes ? o->max_stats_bytes : 1);
        if (cudaMalloc(&r->scratch, r->scratch_bytes) != cudaSuccess)
            e = (cuda_err(), -ENOMEM);
    }
    if (!e)
        e = tft_sring_init(&r->q, r->arena, arena, r->qs, n);
    if (e) {
        tft_dring_free(r);
        return e;
    }
    *out = r;
    return 0;
}

void tft_dring_free(tft_dring *r)
{
    if (!r)
        return;
    if (r->qs && r->ds)
        tft_dring_drain(r);
    if (r->ev)
        for (uint32_t i = 0; i < r->nslots; i++)
            if (r->ev[i])
                cudaEventDestroy(r->ev[i]);
    if (r->order)
        cudaEventDestroy(r->order);
    if (r->arena)
        cudaFreeHost(r->arena);
    if (r->scratch)
        cudaFree(r->scratch);
    free(r->qs);
    free(r->ds);
    free(r->ev);
    free(r->meta);
    free(r);
}

/* Makes stream s wait for the last statistics launch when it ran on
 * another stream (they share the scratch). */
static int order_after_last(tft_dring *r, cudaStream_t s)
{
    if (r->have_last && s != r->last &&
        (cudaEventRecord(r->order, r->last) != cudaSuccess || cudaStreamWaitEvent(s, r->order, 0) != cudaSuccess))
        return cuda_err();
    r->last = s;
    r->have_last = 1;
    return 0;
}

/* Replaces the scratch by one of need bytes. cudaFree waits for the
 * device, so no launch still uses the old one; nothing queued is touched. */
static int replace_scratch(tft_dring *r, size_t need)
{
    cudaFree(r->scratch);
    r->scratch = NULL;
    size_t sz = need > 2 * r->scratch_bytes ? need : 2 * r->scratch_bytes;
    if (cudaMalloc(&r->scratch, sz) != cudaSuccess) {
        r->scratch_bytes = 0;
        return (cuda_err(), -ENOMEM);
    }
    r->scratch_bytes = sz;
    return 0;
}

/* Grows the scratch for need bytes: everything queued is emitted first
 * (their kernels are then done), then replace_scratch. */
static int grow_scratch(tft_dring *r, size_t need)
{
    tft_dring_drain(r);
    return replace_scratch(r, need);
}

int tft_dring_flush(tft_dring *r)
{
    int n = r->ngrp;
    if (n == 0)
        return 0;
    r->ngrp = 0;
    size_t need = tft_stats_cuda_scratch_bytes_many(r->grp_item, n, r->grp_mode);
    int e = need == 0 ? -EINVAL : 0;
    if (!e && need > r->scratch_bytes)
        e = replace_scratch(r, need);
    if (!e)
        e = order_after_last(r, r->grp_stream);
    if (!e)
        e = tft_stats_cuda_launch_many(r->grp_item, n, r->grp_mode, r->grp_stream, r->scratch, r->scratch_bytes);
    uint32_t last = r->grp_slot[n - 1];
    if (!e && cudaEventRecord(r->ev[last], r->grp_stream) != cudaSuccess)
        e = cuda_err();
    for (int k = 0; k < n; k++) {
        dslot *d = &r->ds[r->grp_slot[k]];
        d->kind = K_GROUP;
        d->owner = last;
        d->status = e;
    }
    return e;
}

/* A request joins the waiting batch (launched by tft_dring_flush). */
static int stats_batched(tft_dring *r, const void *meta, int dtype, const void *dev, size_t numel, int mode,
                         cudaStream_t s)
{
    if (r->ngrp && (mode != r->grp_mode || s != r->grp_stream))
        tft_dring_flush(r);
    void *p;
    int i = reserve(r, meta, sizeof(tft_stats), &p); /* a wait in it flushes first */
    if (i < 0)
        return i;
    dslot *d = &r->ds[i];
    if (tft_stats_cuda_scratch_bytes(dtype, numel) == 0 || (!dev && numel)) {
        d->kind = K_HOST;
        d->status = -EINVAL;
        return -EINVAL;
    }
    d->kind = K_PENDING;
    r->grp_mode = mode;
    r->grp_stream = s;
    r->grp_slot[r->ngrp] = (uint32_t)i;
    r->grp_item[r->ngrp] = (tft_stats_cuda_item){.dtype = dtype, .dev_data = dev, .numel = numel,
                                                 .out = (tft_stats *)(r->arena_dev + ((uint8_t *)p - (uint8_t *)r->arena))};
    if (++r->ngrp == TFT_STATS_CUDA_MANY)
        return tft_dring_flush(r);
    return 0;
}

int tft_dring_stats(tft_dring *r, const void *meta, int dtype, const void *dev, size_t numel, int mode,
                    void *stream)
{
    if (r->batch)
        return stats_batched(r, meta, dtype, dev, numel, mode, (cudaStream_t)stream);
    size_t need = tft_stats_cuda_scratch_bytes(dtype, numel);
    int e = need == 0 ? -EINVAL : 0;
    if (!e && need > r->scratch_bytes)
        e = grow_scratch(r, need);
    void *p;
    int i = reserve(r, meta, sizeof(tft_stats), &p);
    if (i < 0)
        return i;
    dslot *d = &r->ds[i];
    d->kind = K_STATS;
    if (!e)
        e = order_after_last(r, (cudaStream_t)stream);
    if (!e)
        e = tft_stats_cuda_launch(dtype, dev, numel, mode, stream, r->scratch, r->scratch_bytes, p, &d->pend);
    d->status = e;
    return e;
}

/* A copy that does not fit the arena: through a temporary buffer, after
 * everything queued, waiting for the stream. */
static int copy_big(tft_dring *r, const void *meta, const void *dev, size_t bytes, cudaStream_t s)
{
    int e = tft_dring_drain(r);
    void *tmp = malloc(bytes), *p;
    if (!tmp)
        e = -ENOMEM;
    else if (cudaMemcpyAsync(tmp, dev, bytes, cudaMemcpyDeviceToHost, s) != cudaSuccess ||
             cudaStreamSynchronize(s) != cudaSuccess)
        e = cuda_err();
    int i = reserve(r, meta, 0, &p);
    if (i < 0) {
        free(tmp);
        return i;
    }
    r->ds[i] = (dslot){.kind = K_BIG, .status = e < 0 ? e : 0, .big = e < 0 ? NULL : tmp, .big_len = bytes};
    if (e < 0)
        free(tmp);
    return e < 0 ? e : 0;
}

int tft_dring_copy(tft_dring *r, const void *meta, const void *dev, size_t bytes, void *stream)
{
    void *p;
    int i = reserve(r, meta, bytes, &p);
    if (i == -E2BIG)
        return copy_big(r, meta, dev, bytes, (cudaStream_t)stream);
    if (i < 0)
        return i;
    dslot *d = &r->ds[i];
    d->kind = bytes ? K_COPY : K_HOST;
    if (bytes && (cudaMemcpyAsync(p, dev, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)stream) != cudaSuccess ||
                  cudaEventRecord(r->ev[i], (cudaStream_t)stream) != cudaSuccess)) {
        d->kind = K_HOST;
        d->status = cuda_err();
    }
    return d->status;
}

int tft_dring_host(tft_dring *r, const void *meta, const void *host, size_t bytes)
{
    void *p;
    int i = reserve(r, meta, bytes, &p);
    if (i == -E2BIG) { /* larger than the whole arena: a heap copy */
        void *tmp = malloc(bytes);
        if (!tmp)
            return -ENOMEM;
        memcpy(tmp, host, bytes);
        if ((i = reserve(r, meta, 0, &p)) < 0) {
            free(tmp);
            return i;
        }
        r->ds[i] = (dslot){.kind = K_BIG, .big = tmp, .big_len = bytes};
        return 0;
    }
    if (i < 0)
        return i;
    r->ds[i].kind = K_HOST;
    if (bytes)
        memcpy(p, host, bytes);
    return 0;
}

int tft_dring_poll(tft_dring *r)
{
    int n = 0;
    while (finish_head(r, 0))
        n++;
    return n;
}

int tft_dring_drain(tft_dring *r)
{
    tft_dring_flush(r);
    while (finish_head(r, 1))
        ;
    return 0;
}

uint32_t tft_dring_pending(const tft_dring *r)
{
    return r->q.count;
}
