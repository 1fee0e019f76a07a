/*
 * train_cuda.h — tftrain's CUDA backend, as train.c drives it: the device
 * model (model_cuda.h), data parallelism over NCCL (or, where NCCL cannot
 * serve, host memory and MPI), and the recording queue (devrec.h). train.c
 * keeps the host side of a step (the batch, the token count, the LR
 * schedule, the bug zoo's decisions) and hands the rest to
 * cuda_run_step, which records the same tensors in the same order as the
 * CPU step.
 *
 * Built without CUDA (no_cuda.c): cuda_probe says so and the rest return
 * -ENOTSUP.
 */
#ifndef TFT_TRAIN_CUDA_H
#define TFT_TRAIN_CUDA_H

#include "train.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cuda_run cuda_run;

/* One training step's host-side inputs and the bug zoo's decisions. */
typedef struct cuda_step_in {
    int64_t step;                    /* AdamW's t is step + 1, as on the CPU */
    const gpt_variant *var;
    const int32_t *tokens, *targets; /* (B,T) */
    const float *loss_mask;          /* (B,T) */
    const uint8_t *pad;              /* (B,T) 1 = real token */
    float denom;                     /* token count the loss is divided by */
    float lr;
    bool zero_grad;                  /* false: grad-accum */
    bool reduce;                     /* false: dp-skip's skipping rank */
    bool mean;                       /* false: dp-mean (sum) */
    bool clip;                       /* false: no-clip or --clip 0 */
    bool reverse_norm;               /* nondet */
} cuda_step_in;

/* 1 when a CUDA device can be used; else 0 with the reason in why (e.g.
 * "no CUDA-capable device is detected", "this tftrain was built without
 * CUDA"). Does not create a context. */
int cuda_probe(char *why, size_t len);
/* Whether ranks sharing a node can each have a device (local_size <=
 * devices), for --backend auto. */
int cuda_devices(void);

/* Sets up the device for this rank (local rank modulo devices), the device
 * model from host (parameters and moments uploaded), the communicators and
 * the recording queue. Collective over the ranks. Returns 0 or a negative
 * errno with a message in err. */
int cuda_run_new(cuda_run **out, const train_opts *o, dist *d, gpt_model *host, rec_map *rec, char *err,
                 size_t errlen);
/* Emits what is still queued, frees everything. NULL-safe. */
void cuda_run_free(cuda_run *c);
const char *cuda_run_error(const cuda_run *c);

/* Uploads the batch and runs forward, backward, the gradient all-reduce,
 * norm, clipping, the optimizer and the loss all-reduce on the device,
 * recording as train.c's CPU step does. Asynchronous. */
int cuda_run_step(cuda_run *c, const cuda_step_in *in);
/* The mean loss over ranks and the grad norm of the last step (waits). */
int cuda_run_read(cuda_run *c, float *loss, double *norm);
/* Parameters and AdamW moments to host's blocks (waits), for checkpoints. */
int cuda_run_download(cuda_run *c, gpt_model *host);
/* Forward of tokens (B,T) without targets or padding mask; *logits
 * (B,T,V) host memory owned by c, valid until the next call (waits). */
int cuda_run_logits(cuda_run *c, const gpt_variant *var, const int32_t *tokens, const float **logits);

#endif
