/*
 * model_cuda.h — the GPT of model.h on a CUDA device: the same parameter
 * layout (taken from a host gpt_model, whose initial values are uploaded),
 * the same forward and backward op by op (kernels/ops/tft_ops_cuda.h, matmuls
 * through cuBLAS), the same recorded tensors under the same names and
 * inputs, in the same order.
 *
 * Storage: fp32 parameters, gradients and AdamW moments (one device
 * allocation) and fp32 activations (another). With store_dtype bf16 or
 * fp16 every recorded activation is rounded to that type after its op (as
 * the CPU backend's emulation does) and every matmul runs on bf16/fp16
 * operands with fp32 accumulation; fp16 adds dynamic loss scaling
 * (kernels/ops/loss_scale.h), whose state stays on the device.
 *
 * Everything runs on one stream and is asynchronous; the functions that
 * wait for the device say so (uploads, downloads, reads for logging).
 * Functions return 0 or a negative errno; gpt_cuda_error() has the text.
 */
#ifndef TFT_MODEL_CUDA_H
#define TFT_MODEL_CUDA_H

#include "model.h"

#include <stddef.h>
#include <stdint.h>

typedef struct gpt_cuda gpt_cuda;

/* Like gpt_record_fn, but data is a device pointer (float32, numel from
 * shape), valid in stream order at the time of the call. A call with name
 * NULL (nothing else set) says that the device may now change tensors
 * reported before it (the scores, before their masked fill): a recorder
 * that reads them later must do so before returning. */
typedef void (*gpt_cuda_record_fn)(void *ctx, const char *name, const float *dev_data, int ndim,
                                   const int64_t *shape, const char *const *inputs, int n_inputs);

typedef struct gpt_cuda_opts {
    int B, T;          /* batch rows and sequence length */
    int store_dtype;   /* TFT_F32, TFT_BF16, TFT_F16 */
    int loss_scaling;  /* fp16: dynamic loss scaling */
    void *stream;      /* cudaStream_t for everything */
} gpt_cuda_opts;

/* Builds the device model for host's config and layout, uploads host's
 * parameters and moments (waits). Returns 0, -ENODEV, -ENOMEM, -EIO, with
 * a message in err. */
int gpt_cuda_init(gpt_cuda **out, const gpt_model *host, const gpt_cuda_opts *o, char *err, size_t errlen);
/* Waits for the stream, then frees. NULL-safe. */
void gpt_cuda_free(gpt_cuda *g);
const char *gpt_cuda_error(const gpt_cuda *g);

/* The device allocations, for tft_alloc_dev: up to max entries; returns
 * how many. */
int gpt_cuda_allocs(const gpt_cuda *g, const void **ptr, size_t *bytes, const char **site, int max);

/* Copies parameters and moments host -> device / device -> host (waits).
 * Any pointer may be NULL (that part is skipped). */
int gpt_cuda_upload(gpt_cuda *g, const float *params, const float *m, const float *v);
int gpt_cuda_download(gpt_cuda *g, float *params, float *m, float *v);

/* Device blocks of num_params floats, in the host layout. */
float *gpt_cuda_params(gpt_cuda *g);
float *gpt_cuda_grads(gpt_cuda *g);
float *gpt_cuda_m(gpt_cuda *g);
float *gpt_cuda_v(gpt_cuda *g);

/* Stages the batch (B,T) through pinned memory and copies it to the
 * device asynchronously (waits only when 4 earlier batches are still in
 * flight). targets, weight may be NULL (no loss); pad NULL: no padding
 * mask (the CPU's eval forward). */
int gpt_cuda_set_batch(gpt_cuda *g, const int32_t *tokens, const int32_t *targets, const float *weight,
                       const uint8_t *pad);

/* Forward over the staged batch, recording through rec (may be NULL); with
 * targets, the loss (sum of weighted losses / denom) is computed into a
 * device float and recorded as "loss". */
int gpt_cuda_forward(gpt_cuda *g, const gpt_variant *var, float denom, gpt_cuda_record_fn rec, void *ctx);
/* Backward of the last forward: grads += d(loss)/d(params), the loss
 * gradient multiplied by the loss scale when loss scaling is on. */
int gpt_cuda_backward(gpt_cuda *g, const gpt_variant *var, float denom);
int gpt_cuda_zero_grad(gpt_cuda *g);

/* fp16 with loss scaling: gradients /= the loss scale (exact: a power of
 * two). No-op otherwise. */
int gpt_cuda_unscale_grads(gpt_cuda *g);
/* The runtime's global gradient norm (train.c's order, or the reverse for
 * the nondet bug) into the device float gpt_cuda_norm_dev(), the clip
 * factor for clip (> 0, else none) and whether any gradient is not finite. */
int gpt_cuda_grad_norm(gpt_cuda *g, int reverse, float clip);
/* grads *= the clip factor of the last gpt_cuda_grad_norm (untouched when 1). */
int gpt_cuda_clip(gpt_cuda *g);
/* Optimizer steps; with loss scaling a step whose gradients are not finite
 * is skipped on the device, and the loss scale is updated. */
int gpt_cuda_adamw(gpt_cuda *g, float lr, float beta1, float beta2, float eps, float weight_decay, int t);
int gpt_cuda_sgd(gpt_cuda *g, float lr);

/* x (device, n floats) *= s on the model's stream (the all-reduce mean). */
int gpt_cuda_scale(gpt_cuda *g, float *x, size_t n, float s);

/* Device scalars: the last loss (float), the last grad norm (float), the
 * loss as a double for the all-reduce (gpt_cuda_loss_to_f64 fills it). */
const float *gpt_cuda_loss_dev(const gpt_cuda *g);
const float *gpt_cuda_norm_dev(const gpt_cuda *g);
double *gpt_cuda_loss_f64_dev(gpt_cuda *g);
int gpt_cuda_loss_to_f64(gpt_cuda *g);

/* Reads (waits) the double loss, the grad norm and the loss scale (1 when
 * off), for progress lines. */
int gpt_cuda_read(gpt_cuda *g, double *loss_f64, float *norm, float *loss_scale);
/* Copies the logits (B,T,V) of the last forward to host memory (waits). */
int gpt_cuda_logits(gpt_cuda *g, float *out);

#endif
