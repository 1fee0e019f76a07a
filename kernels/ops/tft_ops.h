/*
 * tft_ops.h — the training runtime's compute ops, CPU reference versions
 * (the CUDA backend will match them op by op).
 *
 * Conventions: float32, row-major, contiguous. Shapes in the comments use
 * B batch, T sequence, C channels, NH heads, hs = C/NH head size, V vocab,
 * N = B*T rows. "_bwd" functions ACCUMULATE (+=) into parameter gradients
 * and into input gradients unless stated, so callers zero them once per
 * step (the grad-accum bug is forgetting that). Matmuls use cblas_sgemm.
 * No function allocates, prints or exits.
 */
#ifndef TFT_OPS_H
#define TFT_OPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out (B,T,C) = wte[tokens[b,t]] + wpe[t]; tokens must be < V (checked by the caller). */
void op_embedding_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B, int T, int C);
/* dwte (V,C) += ..., dwpe (T,C) += ... from dout (B,T,C). */
void op_embedding_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B, int T, int C);

/* LayerNorm over the last dim, eps 1e-5. out (N,C); mean, rstd (N) saved for bwd. */
void op_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                      int N, int C);
/* dinp (N,C) +=, dw (C) +=, db (C) += */
void op_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                      const float *mean, const float *rstd, int N, int C);

/* out (N,OC) = inp (N,C) @ w^T + bias, w (OC,C), bias (OC) or NULL. */
void op_matmul_fwd(float *out, const float *inp, const float *w, const float *bias, int N, int C, int OC);
/* dinp (N,C) +=, dw (OC,C) +=, dbias (OC) += (dbias may be NULL). */
void op_matmul_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                   int N, int C, int OC);

/* Attention, in separate steps so the runtime can record and break each.
 * qkv (B,T,3C): q = [..., 0:C], k = [..., C:2C], v = [..., 2C:3C], head h
 * uses columns h*hs .. (h+1)*hs of each.
 * scores (B,NH,T,T) = scale * q k^T (no mask). */
void op_attn_scores_fwd(float *scores, const float *qkv, int B, int T, int C, int NH, float scale);
/* dqkv (q and k parts) += from dscores. */
void op_attn_scores_bwd(float *dqkv, const float *dscores, const float *qkv, int B, int T, int C, int NH,
                        float scale);
/* scores[b,h,i,j] = fill where mask[b,i,j] == 0; mask (B,T,T), 1 = may attend. */
void op_masked_fill(float *scores, const uint8_t *mask, float fill, int B, int NH, int T);
/* dscores[b,h,i,j] = 0 where mask[b,i,j] == 0 (in place). */
void op_masked_fill_bwd(float *dscores, const uint8_t *mask, int B, int NH, int T);
/* Row softmax, numerically stable (max subtracted). A row whose entries are
 * all -inf gives NaN, as in real frameworks. probs, scores (rows, n). */
void op_softmax_fwd(float *probs, const float *scores, int rows, int n);
/* dscores (rows,n) = (written, not accumulated) probs * (dprobs - sum(dprobs*probs)). */
void op_softmax_bwd(float *dscores, const float *dprobs, const float *probs, int rows, int n);
/* out (B,T,C) = probs (B,NH,T,T) @ v, heads concatenated. */
void op_attn_values_fwd(float *out, const float *probs, const float *qkv, int B, int T, int C, int NH);
/* dprobs (B,NH,T,T) written; dqkv (v part) +=. */
void op_attn_values_bwd(float *dprobs, float *dqkv, const float *dout, const float *probs, const float *qkv,
                        int B, int T, int C, int NH);

/* GELU, tanh approximation. out, inp (n). */
void op_gelu_fwd(float *out, const float *inp, size_t n);
/* dinp += dout * gelu'(inp) */
void op_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n);

/* out = a + b (n). Its backward is a copy of dout into both inputs' grads. */
void op_residual_fwd(float *out, const float *a, const float *b, size_t n);

/* Cross-entropy. logits (N,V) -> probs (N,V) (softmax), losses (N) =
 * -log probs[target] * weight[i] (0 where weight is 0; targets there may be
 * anything, e.g. PAD). Returns sum(losses) as double; the caller divides by
 * its own denominator (the number of real tokens, or with the loss-pad bug
 * all positions). */
double op_crossentropy_fwd(float *losses, float *probs, const float *logits, const int32_t *targets,
                           const float *weight, int N, int V);
/* dlogits (N,V) written: (probs - onehot(target)) * weight[i] * scale. */
void op_crossentropy_bwd(float *dlogits, const float *probs, const int32_t *targets, const float *weight,
                         float scale, int N, int V);

/* AdamW, decoupled weight decay, bias-corrected, step t >= 1. */
void op_adamw(float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1, float beta2,
              float eps, float weight_decay, int t);

/* sqrt(sum x^2), accumulated in double, in a fixed order (deterministic). */
double op_sumsq(const float *x, size_t n);
/* Added: sum x^2 without the sqrt, in double, same fixed order — the per-tensor
 * term of a global norm over several tensors (op_sumsq returns the norm, whose
 * square would round). op_sumsq(x, n) == sqrt(op_sum_squares(x, n)). */
double op_sum_squares(const float *x, size_t n);
/* s + sum x^2 in the same order, for a tensor taken in pieces:
 * op_sum_squares_acc(op_sum_squares(x, k), x + k, n - k) == op_sum_squares(x, n). */
double op_sum_squares_acc(double s, const float *x, size_t n);
/* x *= s */
void op_scale(float *x, size_t n, float s);

/* Emulated low-precision storage: rounds each value to the nearest fp16 or
 * bf16 (round to nearest even; overflow to +-Inf) and back. dtype: a
 * tft_dtype (TFT_F16, TFT_BF16; TFT_F32 = no-op). */
void op_round_storage(float *x, size_t n, int dtype);

#ifdef __cplusplus
}
#endif
#endif
