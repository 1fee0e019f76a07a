/*
 * devrec.c — the CUDA backend's recording queue (devrec.h).
 *
 * Each queued record is a fixed-size dr_meta (what to emit) plus a payload
 * in the ring's pinned arena: nothing (steps, collective starts), a copy of
 * host data (tokens, lr, token counts, checkpoint paths), a tft_stats from
 * the device, or a device tensor's bytes. The ring calls emit() in queue
 * order; emit() turns the record into the rec.c / tft.h call the CPU
 * backend makes directly.
 *
 * Workload: a few hundred records per step from the training thread; the
 * ring is polled on every device record, so records leave about as soon as
 * the GPU has produced them.
 */
#include "devrec.h"

#include "tft_stats_cuda_ring.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DR_TENSOR, DR_STEP, DR_COLL_ENTER, DR_COLL_EXIT, DR_CKPT, DR_ALLOC };
enum { PAY_HOST, PAY_STATS, PAY_NONE };

#define DR_NAME 48
#define DR_MAX_IN 4
#define DR_MAX_NDIM 4
#define DR_OPEN_COLLS 4

typedef struct dr_meta {
    uint8_t kind, payload, ndim, nin;
    int32_t dtype;
    int32_t arg;         /* DR_STEP: begin; DR_CKPT: action */
    int32_t stats_mode;
    int64_t step;
    int64_t shape[DR_MAX_NDIM];
    const void *ptr;     /* DR_ALLOC */
    uint64_t bytes;      /* DR_ALLOC */
    const char *site;    /* DR_ALLOC: a string literal */
    tft_coll_info ci;    /* collectives; ci.name is a string literal */
    char name[DR_NAME];
    char in[DR_MAX_IN][DR_NAME];
} dr_meta;

struct devrec {
    tft_dring *ring;
    rec_map *map;
    rec_defer hooks;
    int mode, stats_mode, device;
    struct {
        uint64_t comm;
        int64_t token;
    } open[DR_OPEN_COLLS]; /* collectives entered and not yet left, by communicator */
    unsigned errors;
    unsigned long long emitted;
};

static int64_t *open_token(devrec *d, uint64_t comm, int create)
{
    for (int i = 0; i < DR_OPEN_COLLS; i++)
        if (d->open[i].comm == comm)
            return &d->open[i].token;
    for (int i = 0; create && i < DR_OPEN_COLLS; i++)
        if (d->open[i].comm == 0) {
            d->open[i].comm = comm;
            return &d->open[i].token;
        }
    return NULL;
}

static void emit_tensor(devrec *d, const dr_meta *mt, const void *payload)
{
    const char *in[DR_MAX_IN];
    for (int i = 0; i < mt->nin; i++)
        in[i] = mt->in[i];
    if (mt->payload == PAY_STATS)
        rec_emit_tensor(d->map, mt->name, mt->dtype, NULL, payload, mt->stats_mode, d->device, mt->ndim, mt->shape,
                        in, mt->nin);
    else
        rec_emit_tensor(d->map, mt->name, mt->dtype, payload, NULL, 0, -1, mt->ndim, mt->shape, in, mt->nin);
}

static void emit(void *ctx, const void *meta, const void *payload, size_t len, int status)
{
    devrec *d = ctx;
    const dr_meta *mt = meta;
    d->emitted++;
    if (status)
        d->errors++;
    if (d->mode == DEVREC_DRYRUN)
        return;
    int64_t *tok;
    switch (mt->kind) {
    case DR_TENSOR:
        if (!status)
            emit_tensor(d, mt, payload);
        break;
    case DR_STEP:
        if (mt->arg)
            tft_step_begin(mt->step);
        else
            tft_step_end(mt->step);
        break;
    case DR_COLL_ENTER:
        if ((tok = open_token(d, mt->ci.comm, 1)) != NULL)
            *tok = tft_coll_enter(&mt->ci);
        break;
    case DR_COLL_EXIT:
        if ((tok = open_token(d, mt->ci.comm, 0)) != NULL && *tok >= 0)
            rec_emit_coll_exit(*tok, &mt->ci, status || mt->payload != PAY_HOST ? NULL : payload,
                               status || mt->payload != PAY_STATS ? NULL : payload, mt->stats_mode, d->device);
        break;
    case DR_CKPT: { /* payload: path NUL recipe NUL (recipe empty = none) */
        const char *path = payload, *recipe = path ? path + strlen(path) + 1 : NULL;
        if (path && len)
            tft_checkpoint(mt->arg, mt->step, path, recipe && *recipe ? recipe : NULL);
        break;
    }
    case DR_ALLOC:
        tft_alloc(mt->ptr, (size_t)mt->bytes, mt->site);
        break;
    }
}

static void name_copy(char *dst, const char *src)
{
    snprintf(dst, DR_NAME, "%s", src ? src : "");
}

/* Fills a tensor record's metadata; -EINVAL when its shape is not one the
 * queue carries. */
static int tensor_meta(dr_meta *mt, const char *name, int dtype, int ndim, const int64_t *shape,
                       const char *const *inputs, int n_inputs, size_t *numel)
{
    memset(mt, 0, sizeof(*mt));
    if (ndim < 0 || ndim > DR_MAX_NDIM || tft_dtype_size(dtype) == 0)
        return -EINVAL;
    mt->kind = DR_TENSOR;
    mt->ndim = (uint8_t)ndim;
    mt->dtype = dtype;
    *numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return -EINVAL;
        mt->shape[i] = shape[i];
        *numel *= (size_t)shape[i];
    }
    name_copy(mt->name, name);
    mt->nin = (uint8_t)(n_inputs < DR_MAX_IN ? (n_inputs > 0 ? n_inputs : 0) : DR_MAX_IN);
    for (int i = 0; i < mt->nin; i++)
        name_copy(mt->in[i], inputs[i]);
    return 0;
}

/* ---- hooks (rec_defer): host records ---------------------------------- */

static void hook_tensor(void *ctx, const char *name, int dtype, const void *data, int ndim, const int64_t *shape,
                        const char *const *inputs, int n_inputs)
{
    devrec *d = ctx;
    dr_meta mt;
    size_t numel;
    if (d->mode == DEVREC_DRYRUN || tensor_meta(&mt, name, dtype, ndim, shape, inputs, n_inputs, &numel))
        return;
    mt.payload = PAY_HOST;
    tft_dring_host(d->ring, &mt, data, numel * tft_dtype_size(dtype));
}

static int hook_step(void *ctx, int begin, int64_t step)
{
    devrec *d = ctx;
    if (d->mode == DEVREC_DRYRUN)
        return begin ? tft_step_begin(step) : tft_step_end(step);
    dr_meta mt;
    memset(&mt, 0, sizeof(mt));
    mt.kind = DR_STEP;
    mt.arg = begin;
    mt.step = step;
    int e = tft_dring_host(d->ring, &mt, NULL, 0);
    tft_dring_poll(d->ring);
    return e;
}

static int hook_checkpoint(void *ctx, int action, int64_t step, const char *path, const char *recipe)
{
    devrec *d = ctx;
    if (d->mode == DEVREC_DRYRUN)
        return tft_checkpoint(action, step, path, recipe);
    size_t lp = strlen(path ? path : ""), lr = strlen(recipe ? recipe : "");
    char *buf = malloc(lp + lr + 2);
    if (!buf)
        return -ENOMEM;
    memcpy(buf, path ? path : "", lp + 1);
    memcpy(buf + lp + 1, recipe ? recipe : "", lr + 1);
    dr_meta mt;
    memset(&mt, 0, sizeof(mt));
    mt.kind = DR_CKPT;
    mt.arg = action;
    mt.step = step;
    int e = tft_dring_host(d->ring, &mt, buf, lp + lr + 2);
    free(buf);
    return e;
}

static int hook_alloc(void *ctx, const void *ptr, size_t bytes, const char *site)
{
    devrec *d = ctx;
    if (d->mode == DEVREC_DRYRUN)
        return tft_alloc(ptr, bytes, site);
    dr_meta mt;
    memset(&mt, 0, sizeof(mt));
    mt.kind = DR_ALLOC;
    mt.ptr = ptr;
    mt.bytes = bytes;
    mt.site = site;
    return tft_dring_host(d->ring, &mt, NULL, 0);
}

static void hook_coll_enter(void *ctx, const tft_coll_info *ci)
{
    devrec *d = ctx;
    if (d->mode == DEVREC_DRYRUN)
        return;
    dr_meta mt;
    memset(&mt, 0, sizeof(mt));
    mt.kind = DR_COLL_ENTER;
    mt.ci = *ci;
    tft_dring_host(d->ring, &mt, NULL, 0);
    tft_dring_poll(d->ring); /* a collective that hangs shows as entered */
}

static void hook_coll_exit(void *ctx, const tft_coll_info *ci, const void *host_result)
{
    devrec *d = ctx;
    if (d->mode == DEVREC_DRYRUN)
        return;
    dr_meta mt;
    memset(&mt, 0, sizeof(mt));
    mt.kind = DR_COLL_EXIT;
    mt.ci = *ci;
    mt.payload = host_result ? PAY_HOST : PAY_NONE;
    tft_dring_host(d->ring, &mt, host_result, host_result ? ci->count * tft_dtype_size(ci->dtype) : 0);
}

/* ---- device records ------------------------------------------------------ */

int devrec_dev_tensor(devrec *d, const char *name, int dtype, const void *dev, int ndim, const int64_t *shape,
                      const char *const *inputs, int n_inputs, void *stream)
{
    dr_meta mt;
    size_t numel;
    int e = tensor_meta(&mt, name, dtype, ndim, shape, inputs, n_inputs, &numel);
    if (e)
        return e;
    if (d->mode == DEVREC_COPY) {
        mt.payload = PAY_HOST;
        e = tft_dring_copy(d->ring, &mt, dev, numel * tft_dtype_size(dtype), stream);
    } else {
        mt.payload = PAY_STATS;
        mt.stats_mode = d->stats_mode;
        e = tft_dring_stats(d->ring, &mt, dtype, dev, numel, d->stats_mode, stream);
    }
    tft_dring_poll(d->ring);
    return e;
}

int devrec_dev_coll_exit(devrec *d, const tft_coll_info *ci, const void *dev, void *stream)
{
    dr_meta mt;
    memset(&mt, 0, sizeof(mt));
    mt.kind = DR_COLL_EXIT;
    mt.ci = *ci;
    mt.stats_mode = d->stats_mode;
    size_t bytes = ci->count * tft_dtype_size(ci->dtype);
    int e;
    if (d->mode == DEVREC_COPY) {
        mt.payload = PAY_HOST;
        e = tft_dring_copy(d->ring, &mt, dev, bytes, stream);
    } else {
        mt.payload = PAY_STATS;
        e = tft_dring_stats(d->ring, &mt, ci->dtype, dev, ci->count, d->stats_mode, stream);
    }
    tft_dring_poll(d->ring);
    return e;
}

void devrec_flush(devrec *d)
{
    if (d)
        tft_dring_flush(d->ring);
}

void devrec_poll(devrec *d)
{
    if (d)
        tft_dring_poll(d->ring);
}

int devrec_new(devrec **out, rec_map *map, const devrec_opts *o, char *err, size_t errlen)
{
    *out = NULL;
    devrec *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->map = map;
    d->mode = o->mode;
    d->stats_mode = o->stats_mode;
    d->device = o->device;
    size_t arena = o->arena_bytes ? o->arena_bytes : o->mode == DEVREC_COPY ? (256u << 20) : (8u << 20);
    tft_dring_opts ro = {.sz = sizeof(ro), .arena_bytes = arena, .nslots = 8192, .meta_bytes = sizeof(dr_meta),
                         .max_stats_bytes = o->max_tensor_bytes, .emit = emit, .ctx = d,
                         .batch_stats = o->batch && o->mode != DEVREC_COPY};
    int e = tft_dring_new(&d->ring, &ro);
    if (e) {
        snprintf(err, errlen, "cannot set up the device recording queue (%zu MiB pinned): %s", arena >> 20,
                 strerror(-e));
        free(d);
        return e;
    }
    d->hooks = (rec_defer){.ctx = d, .tensor = hook_tensor, .step = hook_step, .checkpoint = hook_checkpoint,
                           .alloc = hook_alloc, .coll_enter = hook_coll_enter, .coll_exit = hook_coll_exit};
    rec_set_defer(&d->hooks);
    *out = d;
    return 0;
}

int devrec_free(devrec *d)
{
    if (!d)
        return 0;
    tft_dring_free(d->ring); /* drains: emits everything */
    if (rec_deferred() == &d->hooks)
        rec_set_defer(NULL);
    int errors = (int)d->errors;
    free(d);
    return errors;
}
