/*
 * rec.c — tftrain's recording glue: each recorded tensor is an op whose
 * inputs are the ids of the tensors it was computed from, found by name
 * (the last tensor recorded under that name), so tfdiff can tell the op
 * where a difference starts from the ops it merely flows through.
 */
#include "train.h"

#include "tft.h"

#include <stdlib.h>
#include <string.h>

#define REC_SLOTS 4096 /* names per run: params, activations, grads, moments */

struct rec_map {
    uint64_t key[REC_SLOTS]; /* string id of the name, 0 = empty */
    uint64_t id[REC_SLOTS];  /* last tensor id recorded under it */
};

rec_map *rec_map_new(void) { return calloc(1, sizeof(rec_map)); }
void rec_map_free(rec_map *m) { free(m); }

static uint64_t *slot(rec_map *m, const char *name, int insert)
{
    uint64_t k = tft_string_id(name, strlen(name));
    for (unsigned i = 0; i < REC_SLOTS; i++) {
        unsigned s = (unsigned)((k + i) % REC_SLOTS);
        if (m->key[s] == k)
            return &m->id[s];
        if (m->key[s] == 0) {
            if (!insert)
                return NULL;
            m->key[s] = k;
            return &m->id[s];
        }
    }
    return NULL;
}

void rec_tensor(rec_map *m, const char *name, int dtype, const void *data, int ndim, const int64_t *shape,
                const char *const *inputs, int n_inputs)
{
    if (!m || !tft_enabled())
        return;
    uint64_t ids[16];
    int n = 0;
    for (int i = 0; i < n_inputs && n < 16; i++) {
        uint64_t *p = slot(m, inputs[i], 0);
        ids[n++] = p ? *p : 0;
    }
    tft_op_begin(name, TFT_OP_RUNTIME, n, ids);
    tft_tensor(name, (tft_dtype)dtype, data, ndim, shape);
    tft_op_end();
    uint64_t *p = slot(m, name, 1);
    if (p)
        *p = tft_last_tensor_id();
}

void rec_cb(void *ctx, const char *name, const float *data, int ndim, const int64_t *shape,
            const char *const *inputs, int n_inputs)
{
    rec_tensor(ctx, name, TFT_F32, data, ndim, shape, inputs, n_inputs);
}
