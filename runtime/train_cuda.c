/*
 * train_cuda.c — tftrain's CUDA backend (train_cuda.h): device selection,
 * the device model, NCCL data parallelism and the recording queue.
 *
 * Device collectives: NCCL when every rank has a GPU of its own (ranks of
 * a node <= its devices; ncclUniqueId broadcast over MPI; two
 * communicators, as dist.c has two MPI ones, so a rank that skips the
 * gradient all-reduce hangs the others instead of crossing collectives).
 * Otherwise (NCCL not built, or ranks sharing a GPU) the gradients go
 * through pinned host memory and MPI_Allreduce: slower, but the same sums.
 * TFTRAIN_NCCL=1 forces NCCL (also for one rank, to exercise it), 0 forbids
 * it.
 *
 * Recording: while tracing is on (or TFTRAIN_STATS_DRYRUN=1) a devrec
 * queue takes every record; device tensors get statistics computed on the
 * device (TFTRAIN_CUDA_RECORD=copy, and by default while TFT_CAPTURE is
 * set: a copy of their bytes, whose statistics, and captures, the recorder
 * makes on the host, as for a CPU run). Device statistics are launched in
 * batches of up to 64 tensors (TFTRAIN_STATS_BATCH=0: one launch each),
 * flushed before anything changes a recorded tensor: before the masked
 * fill of the scores, before unscaling and clipping the gradients, at the
 * end of the step.
 */
#include "train_cuda.h"

#include "devrec.h"
#include "model_cuda.h"
#include "tft.h"
#include "tft_cuda_err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#ifdef TFT_HAVE_NCCL
#include <nccl.h>
#endif

struct cuda_run {
    const train_opts *o;
    dist *d;
    gpt_model *host;        /* layout, names; its blocks receive downloads */
    rec_map *rec;
    int device;
    cudaStream_t stream;
    gpt_cuda *g;
    devrec *dr;             /* NULL when nothing is recorded */
    int use_nccl;
#ifdef TFT_HAVE_NCCL
    ncclComm_t comm[2];     /* world (gradients), meta (losses) */
#endif
    void *stage;            /* pinned host buffer of the MPI fallback */
    size_t stage_bytes;
    float *logits;          /* host copy for eval */
    int ndev_allocs;
    const void *dev_ptr[8];
    char err[320];
};

/* A message into c->err, returning rc; a CUDA error as one (tft_cuda_err.h). */
#define failf(c, rc, ...) tft_errf((c)->err, sizeof((c)->err), (rc), __VA_ARGS__)
#define cuda_check(c, e, what) tft_cuda_err((c)->err, sizeof((c)->err), (e), (what))

/* A model call's result, its message kept. */
static int model(cuda_run *c, int e)
{
    if (e)
        failf(c, e, "%s", gpt_cuda_error(c->g));
    return e;
}

const char *cuda_run_error(const cuda_run *c)
{
    return c && c->err[0] ? c->err : "no error";
}

int cuda_probe(char *why, size_t len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why, len, "%s", tft_cuda_reason(e));
        return 0;
    }
    if (n == 0) {
        snprintf(why, len, "no CUDA-capable device is detected");
        return 0;
    }
    return 1;
}

int cuda_devices(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

/* ---- collectives ------------------------------------------------------- */

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

/* Decides NCCL or the host path on every rank alike, then sets NCCL up. */
static int comms_init(cuda_run *c, int local_size, int ndev)
{
    dist *d = c->d;
    int force = env_int("TFTRAIN_NCCL", -1);
#ifdef TFT_HAVE_NCCL
    double not_ok = (local_size > ndev || force == 0) ? 1.0 : 0.0;
#else
    double not_ok = 1.0;
    (void)local_size;
    (void)ndev;
#endif
    if (d->world > 1 && dist_allreduce_raw(d, 1, &not_ok, 1, TFT_F64) < 0)
        return failf(c, -EIO, "MPI_Allreduce failed while choosing NCCL");
    c->use_nccl = not_ok == 0.0 && (d->world > 1 || force == 1);
    if (force == 1 && !c->use_nccl)
        return failf(c, -ENOTSUP, "TFTRAIN_NCCL=1 but NCCL cannot be used here (%s)",
#ifdef TFT_HAVE_NCCL
                     "more ranks on a node than GPUs"
#else
                     "this tftrain was built without NCCL"
#endif
        );
#ifdef TFT_HAVE_NCCL
    for (int k = 0; k < 2 && c->use_nccl; k++) {
        ncclUniqueId id;
        memset(&id, 0, sizeof(id));
        ncclResult_t r = d->rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
        if (r != ncclSuccess)
            return failf(c, -EIO, "ncclGetUniqueId: %s", ncclGetErrorString(r));
        if (dist_bcast_bytes(d, &id, sizeof(id)) < 0)
            return failf(c, -EIO, "MPI_Bcast of the NCCL id failed");
        if ((r = ncclCommInitRank(&c->comm[k], d->world, id, d->rank)) != ncclSuccess)
            return failf(c, -EIO, "ncclCommInitRank (rank %d of %d, device %d): %s", d->rank, d->world, c->device,
                         ncclGetErrorString(r));
    }
#endif
    if (d->world > 1 && !c->use_nccl) {
        c->stage_bytes = c->host->num_params * sizeof(float);
        if (cuda_check(c, cudaHostAlloc(&c->stage, c->stage_bytes, cudaHostAllocDefault), "cudaHostAlloc"))
            return -ENOMEM;
    }
    return 0;
}

/* Sum (mean: then / world, as dist.c) of n elements of dtype at dev over
 * the ranks, recorded as a collective on the world (meta = 0) or meta
 * communicator like dist.c's. */
static int dev_allreduce(cuda_run *c, int meta, void *dev, size_t n, int dtype, bool mean)
{
    dist *d = c->d;
    tft_coll_info ci = TFT_COLL_INFO(.name = c->use_nccl ? "ncclAllReduce" : "MPI_Allreduce",
                                     .comm = meta ? d->id_meta : d->id_world, .type = TFT_COLL_ALLREDUCE,
                                     .dtype = dtype, .count = n, .redop = TFT_REDOP_SUM, .root = -1,
                                     .rank = d->rank, .nranks = d->world);
    const rec_defer *df = rec_deferred();
    if (df)
        df->coll_enter(df->ctx, &ci);
    size_t bytes = n * tft_dtype_size(dtype);
    int e = 0;
#ifdef TFT_HAVE_NCCL
    if (c->use_nccl) {
        ncclResult_t r = ncclAllReduce(dev, dev, n, dtype == TFT_F64 ? ncclFloat64 : ncclFloat32, ncclSum,
                                       c->comm[meta ? 1 : 0], c->stream);
        if (r != ncclSuccess)
            e = failf(c, -EIO, "ncclAllReduce: %s", ncclGetErrorString(r));
    }
#endif
    if (!c->use_nccl && d->world > 1) { /* through host memory */
        if (bytes > c->stage_bytes)
            return failf(c, -EINVAL, "all-reduce of %zu bytes > staging %zu", bytes, c->stage_bytes);
        e = cuda_check(c, cudaMemcpyAsync(c->stage, dev, bytes, cudaMemcpyDeviceToHost, c->stream), "all-reduce");
        if (!e)
            e = cuda_check(c, cudaStreamSynchronize(c->stream), "cudaStreamSynchronize");
        if (!e && dist_allreduce_raw(d, meta, c->stage, n, dtype) < 0)
            e = failf(c, -EIO, "MPI_Allreduce failed");
        if (!e)
            e = cuda_check(c, cudaMemcpyAsync(dev, c->stage, bytes, cudaMemcpyHostToDevice, c->stream), "all-reduce");
    }
    if (!e && mean && d->world > 1 && dtype == TFT_F32)
        e = model(c, gpt_cuda_scale(c->g, dev, n, 1.0f / (float)d->world));
    if (!e && c->dr)
        devrec_dev_coll_exit(c->dr, &ci, dev, c->stream);
    return e;
}

/* ---- recording ----------------------------------------------------------- */

static void rec_dev(void *ctx, const char *name, const float *dev, int ndim, const int64_t *shape,
                    const char *const *inputs, int n_inputs)
{
    cuda_run *c = ctx;
    if (!name) /* the model is about to change tensors it reported */
        devrec_flush(c->dr);
    else
        devrec_dev_tensor(c->dr, name, TFT_F32, dev, ndim, shape, inputs, n_inputs, c->stream);
}

static int stats_mode_env(void)
{
    const char *m = getenv("TFT_STATS"); /* as the recorder reads it */
    return m && !strcmp(m, "shape") ? TFT_STATS_SHAPE : m && !strcmp(m, "health") ? TFT_STATS_HEALTH
                                                                                   : TFT_STATS_FULL;
}

/* The largest tensor recorded from the device, in bytes. */
static size_t max_tensor_bytes(const cuda_run *c)
{
    const gpt_config *g = &c->host->cfg;
    size_t B = (size_t)c->o->batch, T = (size_t)c->o->seq, C = (size_t)g->channels;
    size_t cand[] = {B * (size_t)g->heads * T * T, B * T * 4 * C, B * T * (size_t)g->vocab, c->host->num_params};
    size_t m = 0;
    for (size_t i = 0; i < 4; i++)
        m = cand[i] > m ? cand[i] : m;
    return m * sizeof(float);
}

static int recording_init(cuda_run *c)
{
    int dry = env_int("TFTRAIN_STATS_DRYRUN", 0) == 1;
    if (!tft_enabled() && !dry)
        return 0;
    devrec_opts ro = {.stats_mode = stats_mode_env(), .device = c->device, .max_tensor_bytes = max_tensor_bytes(c),
                      .batch = env_int("TFTRAIN_STATS_BATCH", 1) != 0};
    const char *force = getenv("TFTRAIN_CUDA_RECORD");
    const char *capture = getenv("TFT_CAPTURE");
    if (!tft_enabled())
        ro.mode = DEVREC_DRYRUN;
    else if ((!force || !*force) && capture && *capture)
        ro.mode = DEVREC_COPY; /* a capture needs the tensors' bytes on the host */
    else if (!force || !*force || !strcmp(force, "stats"))
        ro.mode = DEVREC_STATS;
    else if (!strcmp(force, "copy"))
        ro.mode = DEVREC_COPY;
    else
        return failf(c, -EINVAL, "TFTRAIN_CUDA_RECORD=%s: want stats (the default) or copy", force);
    return devrec_new(&c->dr, c->rec, &ro, c->err, sizeof(c->err));
}

/* Records grad.P / adam.m.P, adam.v.P / param.P from a device block, with
 * train.c's names and inputs. */
static void record_block(cuda_run *c, const char *prefix, const float *base)
{
    for (int i = 0; i < c->host->nparams; i++) {
        const gpt_param *p = &c->host->params_info[i];
        gpt_param_names pn;
        gpt_param_names_init(&pn, prefix, p->name);
        devrec_dev_tensor(c->dr, pn.name, TFT_F32, base + p->offset, p->ndim, p->shape, pn.inputs, pn.n_inputs,
                          c->stream);
    }
}

/* train.c's record_moments: adam.m and adam.v per parameter, then param.* */
static void record_moments(cuda_run *c)
{
    for (int i = 0; i < c->host->nparams; i++) {
        const gpt_param *p = &c->host->params_info[i];
        gpt_param_names m, v;
        gpt_param_names_init(&m, GPT_P_ADAM_M, p->name);
        gpt_param_names_init(&v, GPT_P_ADAM_V, p->name);
        devrec_dev_tensor(c->dr, m.name, TFT_F32, gpt_cuda_m(c->g) + p->offset, p->ndim, p->shape, m.inputs,
                          m.n_inputs, c->stream);
        devrec_dev_tensor(c->dr, v.name, TFT_F32, gpt_cuda_v(c->g) + p->offset, p->ndim, p->shape, v.inputs,
                          v.n_inputs, c->stream);
    }
    record_block(c, GPT_P_PARAM, gpt_cuda_params(c->g));
}

/* ---- the step ------------------------------------------------------------ */

int cuda_run_step(cuda_run *c, const cuda_step_in *in)
{
    gpt_cuda *g = c->g;
    const train_opts *o = c->o;
    int64_t one = 1;
    int e = model(c, gpt_cuda_set_batch(g, in->tokens, in->targets, in->loss_mask, in->pad));
    if (!e && in->zero_grad)
        e = model(c, gpt_cuda_zero_grad(g));
    if (!e)
        e = model(c, gpt_cuda_forward(g, in->var, in->denom, c->dr ? rec_dev : NULL, c));
    if (!e)
        e = model(c, gpt_cuda_backward(g, in->var, in->denom));
    if (!e && in->reduce)
        e = dev_allreduce(c, 0, gpt_cuda_grads(g), c->host->num_params, TFT_F32, in->mean);
    devrec_flush(c->dr); /* recorded so far: the all-reduce's result, which unscaling changes */
    if (!e)
        e = model(c, gpt_cuda_unscale_grads(g));
    if (e)
        return e;
    if (c->dr)
        record_block(c, GPT_P_GRAD, gpt_cuda_grads(g));
    e = model(c, gpt_cuda_grad_norm(g, in->reverse_norm, in->clip ? o->clip : 0.0f));
    if (e)
        return e;
    if (c->dr)
        devrec_dev_tensor(c->dr, GPT_N_GRAD_NORM, TFT_F32, gpt_cuda_norm_dev(g), 1, &one,
                          (const char *[]){GPT_N_LOSS}, 1, c->stream);
    devrec_flush(c->dr); /* the gradients, which clipping changes */
    if (in->clip && (e = model(c, gpt_cuda_clip(g))) != 0)
        return e;
    float lr = in->lr;
    rec_tensor(c->rec, GPT_N_LR, TFT_F32, &lr, 1, &one, NULL, 0);
    e = o->sgd ? model(c, gpt_cuda_sgd(g, lr))
               : model(c, gpt_cuda_adamw(g, lr, 0.9f, 0.95f, 1e-8f, o->weight_decay, (int)(in->step + 1)));
    if (e)
        return e;
    if (c->dr)
        record_moments(c);
    if ((e = model(c, gpt_cuda_loss_to_f64(g))) != 0)
        return e;
    e = dev_allreduce(c, 1, gpt_cuda_loss_f64_dev(g), 1, TFT_F64, false);
    devrec_flush(c->dr); /* the step's last records: nothing waits across steps */
    return e;
}

/* ---- setup and the rest ---------------------------------------------------- */

int cuda_run_new(cuda_run **out, const train_opts *o, dist *d, gpt_model *host, rec_map *rec, char *err,
                 size_t errlen)
{
    *out = NULL;
    cuda_run *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->o = o;
    c->d = d;
    c->host = host;
    c->rec = rec;
    int local_rank, local_size, ndev = cuda_devices();
    dist_local(d, &local_rank, &local_size);
    int e = ndev > 0 ? 0 : failf(c, -ENODEV, "no CUDA device");
    if (!e) {
        c->device = local_rank % ndev;
        e = cuda_check(c, cudaSetDevice(c->device), "cudaSetDevice");
    }
    if (!e)
        e = cuda_check(c, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    if (!e) {
        gpt_cuda_opts mo = {.B = o->batch, .T = o->seq, .store_dtype = o->store_dtype,
                            .loss_scaling = o->store_dtype == TFT_F16, .stream = c->stream};
        e = gpt_cuda_init(&c->g, host, &mo, c->err, sizeof(c->err));
    }
    if (!e)
        e = comms_init(c, local_size, ndev);
    if (!e) { /* the device memory tftrain allocates, for leak reports */
        size_t bytes[8];
        const char *site[8];
        c->ndev_allocs = gpt_cuda_allocs(c->g, c->dev_ptr, bytes, site, 8);
        for (int i = 0; i < c->ndev_allocs; i++)
            tft_alloc_dev(c->dev_ptr[i], bytes[i], c->device, site[i]);
        e = recording_init(c);
    }
    if (e) {
        snprintf(err, errlen, "rank %d: CUDA backend: %s", d->rank, c->err);
        cuda_run_free(c);
        return e;
    }
    *out = c;
    return 0;
}

void cuda_run_free(cuda_run *c)
{
    if (!c)
        return;
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    int lost = devrec_free(c->dr);
    if (lost)
        fprintf(stderr, "tftrain: rank %d: %d device record(s) could not be produced (CUDA errors)\n", c->d->rank,
                lost);
    for (int i = 0; i < c->ndev_allocs; i++)
        tft_free_dev(c->dev_ptr[i], c->device);
#ifdef TFT_HAVE_NCCL
    for (int k = 0; k < 2; k++)
        if (c->comm[k])
            ncclCommDestroy(c->comm[k]);
#endif
    gpt_cuda_free(c->g);
    if (c->stage)
        cudaFreeHost(c->stage);
    if (c->stream)
        cudaStreamDestroy(c->stream);
    (void)cudaGetLastError();
    free(c->logits);
    free(c);
}

int cuda_run_read(cuda_run *c, float *loss, double *norm)
{
    double l;
    float n;
    int e = model(c, gpt_cuda_read(c->g, &l, &n, NULL));
    if (e)
        return e;
    devrec_poll(c->dr); /* everything up to here has finished */
    *loss = (float)(l / c->d->world);
    *norm = n;
    return 0;
}

int cuda_run_download(cuda_run *c, gpt_model *host)
{
    return model(c, gpt_cuda_download(c->g, host->params, host->m, host->v));
}

int cuda_run_logits(cuda_run *c, const gpt_variant *var, const int32_t *tokens, const float **logits)
{
    size_t n = (size_t)c->o->batch * c->o->seq * c->host->cfg.vocab;
    if (!c->logits && !(c->logits = malloc(n * sizeof(float))))
        return failf(c, -ENOMEM, "out of memory");
    int e = model(c, gpt_cuda_set_batch(c->g, tokens, NULL, NULL, NULL));
    if (!e)
        e = model(c, gpt_cuda_forward(c->g, var, 1.0f, NULL, NULL));
    if (!e)
        e = model(c, gpt_cuda_logits(c->g, c->logits));
    *logits = c->logits;
    return e;
}
