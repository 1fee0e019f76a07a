/*
 * tft_ops_cuda.h — the training runtime's compute ops on a CUDA device.
 *
 * Each opd_X has the semantics of op_X in tft_ops.h (shapes, mask
 * convention, which outputs are written and which accumulated, the loss
 * weights that make the ignore-index, AdamW with bias correction and
 * decoupled weight decay), with device pointers, run on the context's
 * stream. A few ops take extra arguments the device needs (the vocabulary
 * size for the embedding backward, device-side scalars where the CPU
 * returns a number) and a few exist only here (mask building, storage
 * rounding, the global-norm combine, loss scaling); each says so.
 *
 * Determinism: no atomics. Every reduction runs in a fixed order — per-lane
 * sums in index order combined by a fixed butterfly or tree, partial sums
 * combined in index order — so the same inputs on the same GPU model give
 * bit-identical outputs, run after run. Reductions that feed one number
 * accumulate in double, as on the CPU; their association order differs
 * from the CPU's sequential loops, so results agree with the CPU within a
 * few float ulps, not bit for bit (docs/CUDA_BACKEND.md gives the checked
 * tolerances). Elementwise ops compute the CPU's expression in the CPU's
 * order (the file is compiled with --fmad=false, so no FMA contraction);
 * they differ from the CPU only where CUDA's expf/tanhf/coshf/exp/log differ
 * from glibc's (a few ulps).
 *
 * Matmuls go through cuBLAS (cublasGemmEx / cublasGemmStridedBatchedEx)
 * with fp32 accumulation (CUBLAS_COMPUTE_32F, default math mode: TF32 is
 * never used, so fp32 results are comparable with the CPU). With a bf16 or
 * fp16 GEMM dtype both operands are first converted to it (round to
 * nearest even) in the context's workspace; the output stays fp32.
 *
 * Errors: functions return 0, -EINVAL (bad sizes, NULL pointers, a context
 * without a device), -ENOSPC (the GEMM workspace is too small for the
 * operands), -EIO (a CUDA or cuBLAS call failed: tft_cuda_ops_error says
 * which). Launches are asynchronous; an error inside a kernel shows at a
 * later call or synchronisation. Nothing here synchronises the device or
 * prints. Sizes as in tft_ops.h (int dimensions, size_t element counts).
 */
#ifndef TFT_OPS_CUDA_H
#define TFT_OPS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "loss_scale.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tft_cuda_ops tft_cuda_ops;

/* Options of a context; zero-initialise, set sz = sizeof. */
typedef struct tft_cuda_ops_opts {
    size_t sz;
    void *stream;         /* cudaStream_t every op runs on; NULL = legacy default stream */
    int gemm_dtype;       /* TFT_F32 (0, default), TFT_BF16 or TFT_F16: matmul operand type */
    size_t gemm_ws_elems; /* bf16/fp16 only: elements of each of the two operand buffers;
                           * at least the largest gemm operand span (tft_ops_cuda_gemm_span) */
} tft_cuda_ops_opts;

/* Creates a context on the current device: a cuBLAS handle bound to the
 * stream and, for bf16/fp16, the operand workspace (2 * gemm_ws_elems * 2
 * bytes of device memory). Returns 0, -ENODEV (no usable device or
 * driver), -EINVAL, -ENOMEM, -EIO. err (may be NULL) gets the reason. */
int tft_cuda_ops_new(tft_cuda_ops **out, const tft_cuda_ops_opts *o, char *err, size_t errlen);
/* NULL-safe. Does not synchronise: the caller has finished using it. */
void tft_cuda_ops_free(tft_cuda_ops *x);
/* The text of the last failure (CUDA or cuBLAS call and its error). */
const char *tft_cuda_ops_error(const tft_cuda_ops *x);
/* The operand workspace bytes the context holds (0 for fp32). */
size_t tft_cuda_ops_ws_bytes(const tft_cuda_ops *x);

/* ---- embedding ------------------------------------------------------------ */
int opd_embedding_fwd(tft_cuda_ops *x, float *out, const int32_t *tokens, const float *wte, const float *wpe,
                      int B, int T, int C);
/* Device only: V, the rows of dwte. Tokens outside [0, V) contribute
 * nothing. dwte rows receive their positions' gradients in (b,t) order and
 * dwpe rows in b order, each a sequential float sum: bit-identical to the
 * CPU reference. */
int opd_embedding_bwd(tft_cuda_ops *x, float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B,
                      int T, int C, int V);

/* ---- layernorm ------------------------------------------------------------ */
int opd_layernorm_fwd(tft_cuda_ops *x, float *out, float *mean, float *rstd, const float *inp, const float *w,
                      const float *b, int N, int C);
int opd_layernorm_bwd(tft_cuda_ops *x, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                      const float *w, const float *mean, const float *rstd, int N, int C);

/* ---- matmul (cuBLAS) ------------------------------------------------------ */
int opd_matmul_fwd(tft_cuda_ops *x, float *out, const float *inp, const float *w, const float *bias, int N, int C,
                   int OC);
int opd_matmul_bwd(tft_cuda_ops *x, float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                   const float *w, int N, int C, int OC);

/* ---- attention ------------------------------------------------------------ */
int opd_attn_scores_fwd(tft_cuda_ops *x, float *scores, const float *qkv, int B, int T, int C, int NH, float scale);
int opd_attn_scores_bwd(tft_cuda_ops *x, float *dqkv, const float *dscores, const float *qkv, int B, int T, int C,
                        int NH, float scale);
int opd_masked_fill(tft_cuda_ops *x, float *scores, const uint8_t *mask, float fill, int B, int NH, int T);
int opd_masked_fill_bwd(tft_cuda_ops *x, float *dscores, const uint8_t *mask, int B, int NH, int T);
int opd_softmax_fwd(tft_cuda_ops *x, float *probs, const float *scores, int rows, int n);
int opd_softmax_bwd(tft_cuda_ops *x, float *dscores, const float *dprobs, const float *probs, int rows, int n);
int opd_attn_values_fwd(tft_cuda_ops *x, float *out, const float *probs, const float *qkv, int B, int T, int C,
                        int NH);
int opd_attn_values_bwd(tft_cuda_ops *x, float *dprobs, float *dqkv, const float *dout, const float *probs,
                        const float *qkv, int B, int T, int C, int NH);
/* Device only (the CPU model builds it in model.c): mask (B,T,T)[b,i,j] = 1
 * when query i may attend key j: j <= i + causal_offset and, when combine
 * and pad (B,T) is not NULL, pad[b,i] && pad[b,j]. maskf (may be NULL)
 * gets the same as floats, for recording. */
int opd_build_mask(tft_cuda_ops *x, uint8_t *mask, float *maskf, const uint8_t *pad, int B, int T,
                   int causal_offset, int combine);

/* ---- elementwise ---------------------------------------------------------- */
int opd_gelu_fwd(tft_cuda_ops *x, float *out, const float *inp, size_t n);
int opd_gelu_bwd(tft_cuda_ops *x, float *dinp, const float *inp, const float *dout, size_t n);
int opd_residual_fwd(tft_cuda_ops *x, float *out, const float *a, const float *b, size_t n);

/* ---- cross-entropy -------------------------------------------------------- */
/* As op_crossentropy_fwd; the sum of losses (row order within 256 fixed
 * chunks, in double) goes to *dsum (device double) and, when dloss is not
 * NULL, (float)(sum / denom) to *dloss (device float), the model's loss. */
int opd_crossentropy_fwd(tft_cuda_ops *x, float *losses, float *probs, const float *logits,
                         const int32_t *targets, const float *weight, int N, int V, double *dsum, float denom,
                         float *dloss);
/* As op_crossentropy_bwd; when dmul (device float, e.g. the loss scale) is
 * not NULL the scale used is scale * *dmul. */
int opd_crossentropy_bwd(tft_cuda_ops *x, float *dlogits, const float *probs, const int32_t *targets,
                         const float *weight, float scale, const float *dmul, int N, int V);

/* ---- optimizer and norms -------------------------------------------------- */
/* As op_adamw (bias corrections computed on the host exactly as there);
 * when skip (device int) is not NULL and *skip != 0 nothing changes (a
 * step the loss scaler skips). */
int opd_adamw(tft_cuda_ops *x, float *param, const float *grad, float *m, float *v, size_t n, float lr,
              float beta1, float beta2, float eps, float weight_decay, int t, const int *skip);
/* SGD with momentum 0.9, velocity in m (the runtime's --optim sgd):
 * m = 0.9 m + g; p -= lr m. skip as for opd_adamw. */
int opd_sgd_momentum(tft_cuda_ops *x, float *param, const float *grad, float *m, size_t n, float lr,
                     const int *skip);
/* As op_sum_squares, into *dout (device double). */
int opd_sum_squares(tft_cuda_ops *x, const float *data, size_t n, double *dout);
/* Device only: out[s] = sum of squares of base[off[s] .. off[s]+cnt[s])
 * for nseg segments (off, cnt: device arrays), one block per segment. */
int opd_sum_squares_segments(tft_cuda_ops *x, const float *base, const uint64_t *off, const uint64_t *cnt,
                             int nseg, double *out);
/* Device only, one thread: the runtime's global norm from per-parameter
 * sums of squares, exactly as train.c computes it on the host (a float
 * running sum of the doubles, in parameter order or, reverse != 0, the
 * reverse; then sqrtf) into *dnorm; *dclip = clip / norm when clip > 0 and
 * norm > clip, else 1 (the factor to multiply the gradients by); *dfound
 * (may be NULL) = 1 when any sum is not finite. */
int opd_global_norm(tft_cuda_ops *x, const double *sumsq, int nseg, int reverse, float clip, float *dnorm,
                    float *dclip, int *dfound);
/* As op_scale, x *= s. */
int opd_scale(tft_cuda_ops *x, float *data, size_t n, float s);
/* Device only: x *= *ds (or x *= 1 / *ds with invert), skipped when the
 * factor is exactly 1 (so untouched data keeps its bits, NaN payloads too). */
int opd_scale_dev(tft_cuda_ops *x, float *data, size_t n, const float *ds, int invert);
/* As op_round_storage (TFT_F16 / TFT_BF16, else nothing). NaN stays NaN,
 * as the device's canonical NaN. */
int opd_round_storage(tft_cuda_ops *x, float *data, size_t n, int dtype);
/* Device only: out[i] = (double)in[i]. */
int opd_f32_to_f64(tft_cuda_ops *x, const float *in, double *out, size_t n);
/* Device only: the loss scaler (loss_scale.h) after a step, one thread;
 * found: device int, 1 when the step's gradients were not finite. */
int opd_loss_scale_update(tft_cuda_ops *x, tft_loss_scale *dstate, const int *found);
/* cudaMemsetAsync(p, 0, bytes) on the context's stream. */
int opd_zero(tft_cuda_ops *x, void *p, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
