/*
 * train.h — tftrain's training loop, its options, the bug zoo, the data
 * parallelism (MPI) and the recording glue (tft.h). Internal to tftrain.
 */
#ifndef TFT_TRAIN_H
#define TFT_TRAIN_H

#include "ckpt.h"
#include "data.h"
#include "model.h"

#include <stdbool.h>
#include <stdint.h>

/* The bug zoo (../shared/BUGZOO.md): one per run, with a step where it applies. */
enum bug_kind {
    BUG_NONE = 0, BUG_LABEL_SHIFT, BUG_POS_ZERO, BUG_CAUSAL_OFFBYONE, BUG_PAD_MASK, BUG_LOSS_PAD,
    BUG_NO_SCALE, BUG_FP16_MASK, BUG_NO_WARMUP, BUG_GRAD_ACCUM, BUG_NO_CLIP, BUG_TOKEN_OOB,
    BUG_SHORT_BATCH, BUG_CKPT_OPTIM, BUG_CKPT_DATA, BUG_DP_MEAN, BUG_DP_SHARD, BUG_DP_SKIP,
    BUG_DP_NOSYNC, BUG_LEAK, BUG_NONDET, BUG_COUNT
};

typedef struct bug {
    int kind;       /* enum bug_kind */
    int64_t step;   /* from NAME@STEP; 0 when not given */
} bug;

/* Parses NAME[@STEP]. Returns 0 or -EINVAL with a message. */
int bug_parse(const char *s, bug *out, char *err, size_t errlen);
const char *bug_name(int kind);
/* The list of bug names, for --help. */
void bug_list(char *out, size_t cap);

typedef struct train_opts {
    int steps, layers, d_model, heads, seq, batch;
    uint64_t seed;
    float lr, clip, weight_decay;
    int sgd;                  /* --optim sgd: plain SGD with momentum 0.9 (moments in adam.m) */
    int warmup;
    int store_dtype;          /* TFT_F32, TFT_F16, TFT_BF16 */
    const char *data;         /* --data FILE, NULL = synthetic */
    const char *ckpt_dir;
    int ckpt_every;
    const char *resume;       /* checkpoint file, or a directory: its newest checkpoint */
    int eval_every;
    int log_every;
    bug bug;
    bool quiet;
} train_opts;

/* Data parallelism: MPI when built with it and launched with >1 rank. */
typedef struct dist {
    int rank, world;
    void *comm_world;         /* MPI_Comm: gradients, parameter broadcast */
    void *comm_meta;          /* MPI_Comm (dup): token counts and losses */
    uint64_t id_world, id_meta; /* communicator ids in the trace */
} dist;

int dist_init(dist *d, int *argc, char ***argv);
void dist_finalize(dist *d);
/* Sum (or, with mean, average) of x over ranks in place; recorded as a collective. */
int dist_allreduce(dist *d, int meta, float *x, size_t n, bool mean);
int dist_allreduce_f64(dist *d, double *x, size_t n);
/* Broadcast from rank 0; recorded. */
int dist_bcast(dist *d, float *x, size_t n);
void dist_abort(dist *d, int code);

/* Recording glue: a model record callback and tensor ids by name. */
typedef struct rec_map rec_map;
rec_map *rec_map_new(void);
void rec_map_free(rec_map *m);
void rec_cb(void *ctx, const char *name, const float *data, int ndim, const int64_t *shape,
            const char *const *inputs, int n_inputs);
/* Records a tensor as its own op with named inputs; remembers its id. */
void rec_tensor(rec_map *m, const char *name, int dtype, const void *data, int ndim, const int64_t *shape,
                const char *const *inputs, int n_inputs);

/* Runs the whole training; returns the process exit code. */
int train_run(const train_opts *o, dist *d);

#endif
