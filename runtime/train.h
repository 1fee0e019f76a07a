/*
 * train.h — tftrain's training loop, its options, the bug zoo, the data
 * parallelism (MPI) and the recording glue (tft.h). Internal to tftrain.
 */
#ifndef TFT_TRAIN_H
#define TFT_TRAIN_H

#include "ckpt.h"
#include "data.h"
#include "model.h"
#include "tft.h"

#include <stdbool.h>
#include <stdint.h>

/* The bug zoo (runtime/README.md, "The bug zoo"): one per run, with a step where it applies. */
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
    int backend;              /* TRAIN_BACKEND_CPU or _CUDA (auto resolved by main) */
    bool perturb;             /* TFTRACE_PERTURB (tftrace --perturb): a fresh start flips the last
                               * mantissa bit of every parameter after initialisation */
} train_opts;

enum { TRAIN_BACKEND_CPU = 0, TRAIN_BACKEND_CUDA = 1, TRAIN_BACKEND_AUTO = 2 };

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
/* For the CUDA backend, not recorded: bytes broadcast from rank 0 (the
 * NCCL id); a sum of n elements of dtype (TFT_F32, TFT_F64) over the ranks
 * in place (gradients through host memory when NCCL cannot); this rank's
 * place among the ranks of its node. Identity / 0 of 1 without MPI. */
int dist_bcast_bytes(dist *d, void *buf, size_t bytes);
int dist_allreduce_raw(dist *d, int meta, void *x, size_t n, int dtype);
void dist_local(dist *d, int *local_rank, int *local_size);

/* Recording glue: a model record callback and tensor ids by name. */
typedef struct rec_map rec_map;
rec_map *rec_map_new(void);
void rec_map_free(rec_map *m);
void rec_cb(void *ctx, const char *name, const float *data, int ndim, const int64_t *shape,
            const char *const *inputs, int n_inputs);
/* Records a tensor as its own op with named inputs; remembers its id. */
void rec_tensor(rec_map *m, const char *name, int dtype, const void *data, int ndim, const int64_t *shape,
                const char *const *inputs, int n_inputs);
/* Fused statistics (CPU backend): the tft_stats_mode tftrain computes
 * itself for the tensors of step `step` in the sweeps that touch them
 * (tft_stats_stream, then rec_tensor_stats), or -1 when it must record them
 * with rec_tensor instead (not recording, the CUDA queue, a capture,
 * TFT_STATS=shape, a step TFT_EVERY samples out, TFTRAIN_FUSED_STATS=0). */
int rec_fused_mode(const rec_map *m, int64_t step);
/* rec_tensor with host statistics computed in stats_mode instead of data:
 * the same record as rec_tensor's (tft_tensor_stats, device -1). */
void rec_tensor_stats(rec_map *m, const char *name, int dtype, const tft_stats *stats, int stats_mode, int ndim,
                      const int64_t *shape, const char *const *inputs, int n_inputs);
/* The model's fused-statistics callback (gpt_set_fused_stats), ctx the rec_map. */
void rec_cb_stats(void *ctx, const char *name, const struct tft_stats *st, int mode, int ndim, const int64_t *shape,
                  const char *const *inputs, int n_inputs);
/* tft_step_begin (begin != 0) / tft_step_end, tft_checkpoint, tft_alloc,
 * through the deferral below when one is set. */
int rec_step(int begin, int64_t step);
int rec_checkpoint(int action, int64_t step, const char *path, const char *recipe);
int rec_alloc(const void *ptr, size_t bytes, const char *site);

/* Deferred recording, for the CUDA backend (devrec.c): while set, every
 * record the runtime makes (rec_tensor, rec_step, rec_checkpoint,
 * rec_alloc, the collectives of dist.c) goes to the queue, which emits them
 * later, in the same order, with rec_emit_* and tft.h, once the device
 * tensors queued between them have their statistics. */
typedef struct rec_defer {
    void *ctx;
    void (*tensor)(void *ctx, const char *name, int dtype, const void *host_data, int ndim, const int64_t *shape,
                   const char *const *inputs, int n_inputs);
    int (*step)(void *ctx, int begin, int64_t step);
    int (*checkpoint)(void *ctx, int action, int64_t step, const char *path, const char *recipe);
    int (*alloc)(void *ctx, const void *ptr, size_t bytes, const char *site);
    void (*coll_enter)(void *ctx, const tft_coll_info *ci);
    void (*coll_exit)(void *ctx, const tft_coll_info *ci, const void *host_result);
} rec_defer;
void rec_set_defer(const rec_defer *d); /* NULL: record directly again */
const rec_defer *rec_deferred(void);
/* Records now: the tensor from host data (statistics computed by the
 * recorder) or, when stats is not NULL, with statistics computed on CUDA
 * device `device` in stats_mode (a device record: blocked fingerprint). */
void rec_emit_tensor(rec_map *m, const char *name, int dtype, const void *data, const tft_stats *stats,
                     int stats_mode, int device, int ndim, const int64_t *shape, const char *const *inputs,
                     int n_inputs);
/* tft_coll_exit with the result from host data, or with its device
 * statistics (recorded as an output of the collective's op). */
int rec_emit_coll_exit(int64_t token, const tft_coll_info *ci, const void *data, const tft_stats *stats,
                       int stats_mode, int device);

/* Runs the whole training; returns the process exit code. */
int train_run(const train_opts *o, dist *d);

#endif
