/*
 * rec.c — tftrain's recording glue: each recorded tensor is an op whose
 * inputs are the ids of the tensors it was computed from, found by name
 * (the last tensor recorded under that name), so tfdiff can tell the op
 * where a difference starts from the ops it merely flows through.
 *
 * While the CUDA backend runs, records go through its queue (rec_defer,
 * train.h) and come back here to be emitted in order (rec_emit_*).
 */
#include "train.h"

#include "tft.h"
#include "tft_format.h" /* tft_string_id, tft_coll_type_name */
#include "tft_u64map.h"

#include <stdlib.h>
#include <string.h>

#define REC_NAMES 4096 /* names per run: params, activations, grads, moments */

struct rec_map {
    tft_u64map last; /* string id of a name -> the last tensor id recorded under it (u64) */
};

rec_map *rec_map_new(void)
{
    rec_map *m = malloc(sizeof(*m));
    if (m)
        tft_u64map_init(&m->last, &(tft_u64map_opts){.vsize = sizeof(uint64_t), .max_n = REC_NAMES});
    return m;
}

void rec_map_free(rec_map *m)
{
    if (m)
        tft_u64map_free(&m->last);
    free(m);
}

/* The last tensor id of name; added (0) when insert and new. NULL when
 * absent, or beyond REC_NAMES names (or out of memory): not tracked. */
static uint64_t *slot(rec_map *m, const char *name, int insert)
{
    uint64_t k = tft_string_id(name, strlen(name));
    if (!insert)
        return tft_u64map_find(&m->last, k, NULL, NULL);
    void *v;
    return tft_u64map_insert(&m->last, k, NULL, NULL, &v) < 0 ? NULL : v;
}

/* The CUDA backend's queue (devrec.c) while it runs, else NULL. */
static const rec_defer *g_defer;

void rec_set_defer(const rec_defer *d) { g_defer = d; }
const rec_defer *rec_deferred(void) { return g_defer; }

/* A tensor record of the current op with statistics computed on CUDA
 * device `device` (-1: on the host, by tftrain's fused sweeps) in stats_mode (tft_tensor_stats reduces them to the
 * recorder's mode for this step). Returns its id, 0 when not recorded. */
static uint64_t emit_stats_tensor(const char *name, int dtype, int ndim, const int64_t *shape, const tft_stats *stats,
                                  int stats_mode, int device)
{
    if (tft_tensor_stats(name, (tft_dtype)dtype, ndim, shape, stats, stats_mode, device) != 0)
        return 0;
    return tft_last_tensor_id();
}

void rec_emit_tensor(rec_map *m, const char *name, int dtype, const void *data, const tft_stats *stats,
                     int stats_mode, int device, int ndim, const int64_t *shape, const char *const *inputs,
                     int n_inputs)
{
    uint64_t ids[16];
    int n = 0;
    for (int i = 0; i < n_inputs && n < 16; i++) {
        uint64_t *p = slot(m, inputs[i], 0);
        ids[n++] = p ? *p : 0;
    }
    tft_op_begin(name, TFT_OP_RUNTIME, n, ids);
    uint64_t id;
    if (stats) {
        id = emit_stats_tensor(name, dtype, ndim, shape, stats, stats_mode, device);
    } else {
        tft_tensor(name, (tft_dtype)dtype, data, ndim, shape);
        id = tft_last_tensor_id();
    }
    tft_op_end();
    uint64_t *p = slot(m, name, 1);
    if (p)
        *p = id;
}

int rec_emit_coll_exit(int64_t token, const tft_coll_info *ci, const void *data, const tft_stats *stats,
                       int stats_mode, int device)
{
    if (!stats)
        return tft_coll_exit(token, ci, data);
    /* the result as an output of the collective's op, as tft_coll_exit
     * records a host result (the record's result link stays 0) */
    int64_t shape[1] = {(int64_t)ci->count};
    emit_stats_tensor(ci->name ? ci->name : tft_coll_type_name(ci->type), ci->dtype, 1, shape, stats, stats_mode,
                      device);
    return tft_coll_exit(token, ci, NULL);
}

void rec_tensor(rec_map *m, const char *name, int dtype, const void *data, int ndim, const int64_t *shape,
                const char *const *inputs, int n_inputs)
{
    if (!m || !tft_enabled())
        return;
    if (g_defer) {
        g_defer->tensor(g_defer->ctx, name, dtype, data, ndim, shape, inputs, n_inputs);
        return;
    }
    rec_emit_tensor(m, name, dtype, data, NULL, 0, -1, ndim, shape, inputs, n_inputs);
}

/* Whether tftrain computes statistics itself, fused into the sweeps that
 * write or read the tensors (train.c: the gradient norm, AdamW), decided
 * once from what the recorder reads: TFT_STATS (the mode), TFT_EVERY
 * (steps sampled out record shapes only, so nothing is fused there) and
 * TFT_CAPTURE (a capture needs the bytes: tft_tensor then). TFTRAIN_FUSED_STATS=0
 * turns it off (the bit-identity test compares the two). */
static int fused_mode = -2, fused_every = 1; /* -2: not decided yet; -1: off */

static void fused_decide(void)
{
    const char *m = getenv("TFT_STATS"), *cap = getenv("TFT_CAPTURE"), *off = getenv("TFTRAIN_FUSED_STATS");
    const char *every = getenv("TFT_EVERY");
    fused_mode = m && !strcmp(m, "shape") ? -1 : m && !strcmp(m, "health") ? TFT_STATS_HEALTH : TFT_STATS_FULL;
    if ((cap && *cap) || (off && !strcmp(off, "0")))
        fused_mode = -1;
    long e = every ? strtol(every, NULL, 10) : 1;
    fused_every = e > 1 && e < INT32_MAX ? (int)e : 1;
}

int rec_fused_mode(const rec_map *m, int64_t step)
{
    if (!m || g_defer || !tft_enabled())
        return -1;
    if (fused_mode == -2)
        fused_decide();
    if (fused_mode < 0 || step % fused_every != 0)
        return -1;
    return fused_mode;
}

void rec_tensor_stats(rec_map *m, const char *name, int dtype, const tft_stats *stats, int stats_mode, int ndim,
                      const int64_t *shape, const char *const *inputs, int n_inputs)
{
    if (!m || !tft_enabled() || g_defer)
        return;
    rec_emit_tensor(m, name, dtype, NULL, stats, stats_mode, -1, ndim, shape, inputs, n_inputs);
}

void rec_cb_stats(void *ctx, const char *name, const struct tft_stats *st, int mode, int ndim, const int64_t *shape,
                  const char *const *inputs, int n_inputs)
{
    rec_tensor_stats(ctx, name, TFT_F32, st, mode, ndim, shape, inputs, n_inputs);
}

int rec_step(int begin, int64_t step)
{
    if (g_defer)
        return g_defer->step(g_defer->ctx, begin, step);
    return begin ? tft_step_begin(step) : tft_step_end(step);
}

int rec_checkpoint(int action, int64_t step, const char *path, const char *recipe)
{
    if (g_defer)
        return g_defer->checkpoint(g_defer->ctx, action, step, path, recipe);
    return tft_checkpoint(action, step, path, recipe);
}

int rec_alloc(const void *ptr, size_t bytes, const char *site)
{
    if (g_defer)
        return g_defer->alloc(g_defer->ctx, ptr, bytes, site);
    return tft_alloc(ptr, bytes, site);
}

void rec_cb(void *ctx, const char *name, const float *data, int ndim, const int64_t *shape,
            const char *const *inputs, int n_inputs)
{
    rec_tensor(ctx, name, TFT_F32, data, ndim, shape, inputs, n_inputs);
}
