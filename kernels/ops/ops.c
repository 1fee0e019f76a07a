/*
 * ops.c — CPU reference versions of the training runtime's compute ops
 * (contract: tft_ops.h).
 *
 * Purpose: the numbers the CUDA backend is checked against, and the CPU
 * backend of the small GPT-2-style runtime. Clarity first, then speed: the
 * matmuls (including the per-head attention products) go through
 * cblas_sgemm; everything else is plain loops.
 *
 * Determinism: every op is a fixed sequence of float operations with a fixed
 * loop order, so the same inputs give bit-identical outputs. OpenBLAS is
 * deterministic for a fixed thread count; the runtime pins it to one thread
 * (openblas_set_num_threads(1)). Reductions that feed a single number (mean,
 * variance, softmax sums, losses, norms) accumulate in double.
 *
 * Limits: shapes are ints as in the header, element offsets are computed in
 * size_t. Sizes <= 0 make an op do nothing (cblas would otherwise print a
 * parameter error). Nothing here allocates, prints or exits; the only
 * buffer is a 4 KiB stack array in op_round_storage.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cblas.h>

#include "tft_types.h"
#include "tft_ops.h"
#include "tft_stats.h"

#define GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_CUBE 0.044715f
#define LN_EPS 1e-5 /* double: added to the double variance */

/* ---- embedding ------------------------------------------------------------ */

/* out (B,T,C) = wte[tokens[b,t]] + wpe[t]. tokens (B,T) index rows of wte
 * (V,C); the caller guarantees 0 <= token < V. wpe is (>= T, C). */
void op_embedding_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B, int T, int C)
{
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            size_t bt = (size_t)b * T + t;
            float *o = out + bt * C;
            const float *e = wte + (size_t)tokens[bt] * C;
            const float *p = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++)
                o[c] = e[c] + p[c];
        }
    }
}

/* dwte (V,C) += dout rows scattered by token (a token seen twice gets both
 * rows, in (b,t) order); dwpe (T,C) += dout summed over b, in b order. */
void op_embedding_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B, int T, int C)
{
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            size_t bt = (size_t)b * T + t;
            const float *d = dout + bt * C;
            float *de = dwte + (size_t)tokens[bt] * C;
            float *dp = dwpe + (size_t)t * C;
            for (int c = 0; c < C; c++) {
                de[c] += d[c];
                dp[c] += d[c];
            }
        }
    }
}

/* ---- layernorm ------------------------------------------------------------ */

/* out (N,C) = (inp - mean) * rstd * w + b per row, rstd = 1/sqrt(var + 1e-5)
 * with the population variance. mean, rstd (N) are written for the
 * backward. Mean and variance are accumulated in double. */
void op_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                      int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        double sum = 0.0;
        for (int c = 0; c < C; c++)
            sum += x[c];
        float m = (float)(sum / C);
        double var = 0.0;
        for (int c = 0; c < C; c++) {
            double d = (double)x[c] - m;
            var += d * d;
        }
        float s = (float)(1.0 / sqrt(var / C + LN_EPS));
        for (int c = 0; c < C; c++)
            o[c] = (x[c] - m) * s * w[c] + b[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

/* Backward of op_layernorm_fwd, from its saved mean and rstd. With
 * xhat = (x - mean) * rstd and g = w * dout:
 *   dinp += rstd * (g - mean(g) - xhat * mean(g * xhat))
 *   dw   += sum over rows of dout * xhat,  db += sum over rows of dout. */
void op_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                      const float *mean, const float *rstd, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *d = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float m = mean[n], s = rstd[n];
        double g_sum = 0.0, gx_sum = 0.0;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * s;
            float g = w[c] * d[c];
            g_sum += g;
            gx_sum += (double)g * xhat;
        }
        float g_mean = (float)(g_sum / C), gx_mean = (float)(gx_sum / C);
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * s;
            float g = w[c] * d[c];
            db[c] += d[c];
            dw[c] += xhat * d[c];
            dx[c] += s * (g - g_mean - xhat * gx_mean);
        }
    }
}

/* ---- matmul --------------------------------------------------------------- */

/* out (N,OC) = inp (N,C) @ w^T + bias, w (OC,C), bias (OC) or NULL. out is
 * first filled with the bias (or zeros) so whatever it held before never
 * matters; with C == 0 the result is just that fill. */
void op_matmul_fwd(float *out, const float *inp, const float *w, const float *bias, int N, int C, int OC)
{
    if (N <= 0 || OC <= 0)
        return;
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * OC;
        if (bias)
            memcpy(o, bias, (size_t)OC * sizeof(float));
        else
            memset(o, 0, (size_t)OC * sizeof(float));
    }
    if (C <= 0)
        return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, w, C, 1.0f, out, OC);
}

/* dinp (N,C) += dout (N,OC) @ w (OC,C); dw (OC,C) += dout^T @ inp (N,C);
 * dbias (OC) += column sums of dout (double, row order), skipped when dbias
 * is NULL. */
void op_matmul_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w,
                   int N, int C, int OC)
{
    if (N <= 0 || OC <= 0)
        return;
    if (C > 0) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, w, C, 1.0f, dinp, C);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dw, C);
    }
    if (dbias) {
        for (int o = 0; o < OC; o++) {
            double sum = 0.0;
            for (int n = 0; n < N; n++)
                sum += dout[(size_t)n * OC + o];
            dbias[o] += (float)sum;
        }
    }
}

/* ---- attention ------------------------------------------------------------
 * Per (b,h) the head's q, k, v are (T,hs) matrices inside qkv (B,T,3C) with
 * row stride 3C; out (B,T,C) has row stride C; scores/probs (B,NH,T,T) are
 * contiguous (T,T) blocks. Each product is one cblas_sgemm per (b,h). */

/* Offset of head h's q columns for batch b in qkv; k is at +C, v at +2C. */
static size_t attn_q_offset(int b, int h, int T, int C, int NH)
{
    return (size_t)b * T * 3 * C + (size_t)h * (C / NH);
}

/* Offset of the (T,T) block of batch b, head h in a (B,NH,T,T) tensor. */
static size_t attn_tt_offset(int b, int h, int T, int NH)
{
    return ((size_t)b * NH + h) * T * T;
}

/* scores (B,NH,T,T) written = scale * q k^T, unmasked. C % NH == 0. */
void op_attn_scores_fwd(float *scores, const float *qkv, int B, int T, int C, int NH, float scale)
{
    if (T <= 0 || C <= 0 || NH <= 0)
        return;
    int hs = C / NH, ld = 3 * C;
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + attn_q_offset(b, h, T, C, NH);
            float *s = scores + attn_tt_offset(b, h, T, NH);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, ld, q + C, ld, 0.0f, s, T);
        }
    }
}

/* dq += scale * dscores @ k; dk += scale * dscores^T @ q, into the q and k
 * parts of dqkv (B,T,3C); the v part is untouched. */
void op_attn_scores_bwd(float *dqkv, const float *dscores, const float *qkv, int B, int T, int C, int NH,
                        float scale)
{
    if (T <= 0 || C <= 0 || NH <= 0)
        return;
    int hs = C / NH, ld = 3 * C;
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            size_t off = attn_q_offset(b, h, T, C, NH);
            const float *q = qkv + off, *k = qkv + off + C;
            float *dq = dqkv + off, *dk = dqkv + off + C;
            const float *ds = dscores + attn_tt_offset(b, h, T, NH);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, ds, T, k, ld, 1.0f, dq, ld);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, ds, T, q, ld, 1.0f, dk, ld);
        }
    }
}

/* scores (B,NH,T,T)[b,h,i,j] = fill where mask (B,T,T)[b,i,j] == 0; the
 * same mask applies to every head. */
void op_masked_fill(float *scores, const uint8_t *mask, float fill, int B, int NH, int T)
{
    for (int b = 0; b < B; b++) {
        const uint8_t *mb = mask + (size_t)b * T * T;
        for (int h = 0; h < NH; h++) {
            float *s = scores + attn_tt_offset(b, h, T, NH);
            for (size_t ij = 0; ij < (size_t)T * T; ij++)
                if (!mb[ij])
                    s[ij] = fill;
        }
    }
}

/* In place: dscores[b,h,i,j] = 0 where mask[b,i,j] == 0 (the fill is a
 * constant, so no gradient reaches the scores it replaced). */
void op_masked_fill_bwd(float *dscores, const uint8_t *mask, int B, int NH, int T)
{
    op_masked_fill(dscores, mask, 0.0f, B, NH, T);
}

/* One row of n: probs = exp(s - max) / sum. A row of only -inf has max -inf,
 * so s - max is NaN and the row becomes NaN (deliberately, as in the
 * frameworks whose bugs the runtime reproduces). probs may alias scores. */
static void softmax_row(float *p, const float *s, int n)
{
    float maxv = -INFINITY;
    for (int j = 0; j < n; j++)
        if (s[j] > maxv)
            maxv = s[j];
    double sum = 0.0;
    for (int j = 0; j < n; j++) {
        p[j] = expf(s[j] - maxv);
        sum += p[j];
    }
    float inv = (float)(1.0 / sum);
    for (int j = 0; j < n; j++)
        p[j] *= inv;
}

/* probs (rows,n) = row softmax of scores (rows,n); in place allowed. */
void op_softmax_fwd(float *probs, const float *scores, int rows, int n)
{
    for (int r = 0; r < rows; r++)
        softmax_row(probs + (size_t)r * n, scores + (size_t)r * n, n);
}

/* dscores (rows,n) written = probs * (dprobs - sum(dprobs * probs)), the
 * dot product per row in double. dscores may alias dprobs. */
void op_softmax_bwd(float *dscores, const float *dprobs, const float *probs, int rows, int n)
{
    for (int r = 0; r < rows; r++) {
        const float *p = probs + (size_t)r * n, *dp = dprobs + (size_t)r * n;
        float *ds = dscores + (size_t)r * n;
        double dot = 0.0;
        for (int j = 0; j < n; j++)
            dot += (double)dp[j] * p[j];
        float fdot = (float)dot;
        for (int j = 0; j < n; j++)
            ds[j] = p[j] * (dp[j] - fdot);
    }
}

/* out (B,T,C) written: head h's columns = probs[b,h] (T,T) @ v_h (T,hs). */
void op_attn_values_fwd(float *out, const float *probs, const float *qkv, int B, int T, int C, int NH)
{
    if (T <= 0 || C <= 0 || NH <= 0)
        return;
    int hs = C / NH, ld = 3 * C;
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *v = qkv + attn_q_offset(b, h, T, C, NH) + 2 * (size_t)C;
            const float *p = probs + attn_tt_offset(b, h, T, NH);
            float *o = out + (size_t)b * T * C + (size_t)h * hs;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, p, T, v, ld, 0.0f, o, C);
        }
    }
}

/* dprobs (B,NH,T,T) written = dout_h @ v_h^T; dv (the v part of dqkv)
 * += probs^T @ dout_h. */
void op_attn_values_bwd(float *dprobs, float *dqkv, const float *dout, const float *probs, const float *qkv,
                        int B, int T, int C, int NH)
{
    if (T <= 0 || C <= 0 || NH <= 0)
        return;
    int hs = C / NH, ld = 3 * C;
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            size_t voff = attn_q_offset(b, h, T, C, NH) + 2 * (size_t)C;
            size_t tt = attn_tt_offset(b, h, T, NH);
            const float *d = dout + (size_t)b * T * C + (size_t)h * hs;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, d, C, qkv + voff, ld, 0.0f,
                        dprobs + tt, T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, probs + tt, T, d, C, 1.0f,
                        dqkv + voff, ld);
        }
    }
}

/* ---- elementwise ---------------------------------------------------------- */

/* out (n) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); in place allowed. */
void op_gelu_fwd(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + GELU_CUBE * x * x * x);
        out[i] = 0.5f * x * (1.0f + tanhf(u));
    }
}

/* dinp (n) += dout * gelu'(inp), with sech^2 u = 1/cosh^2 u (0 once cosh
 * overflows, which is the limit). */
void op_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_SCALE * (x + GELU_CUBE * x * x * x);
        float th = tanhf(u);
        float ch = coshf(u);
        float sech2 = 1.0f / (ch * ch);
        float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * GELU_CUBE * x * x);
        dinp[i] += dout[i] * grad;
    }
}

/* out (n) = a + b; out may alias a or b. */
void op_residual_fwd(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

/* ---- cross-entropy -------------------------------------------------------- */

/* One row: probs (V) = softmax(logits); returns -log prob[target] computed
 * as a stable log-softmax, log(sum) - (logit[target] - max), in double.
 * target is read only when want_loss is set (it may be PAD otherwise). */
static double crossentropy_row(float *probs, const float *logits, int32_t target, int want_loss, int V)
{
    float maxv = -INFINITY;
    for (int j = 0; j < V; j++)
        if (logits[j] > maxv)
            maxv = logits[j];
    double sum = 0.0;
    for (int j = 0; j < V; j++)
        sum += exp((double)logits[j] - maxv);
    for (int j = 0; j < V; j++)
        probs[j] = (float)(exp((double)logits[j] - maxv) / sum);
    if (!want_loss)
        return 0.0;
    return log(sum) - ((double)logits[target] - maxv);
}

/* losses (N) = -log softmax(logits)[target] * weight; 0 (exactly) where
 * weight is 0, whose targets are never read. probs (N,V) written for the
 * backward. Returns the sum of losses in row order, in double. */
double op_crossentropy_fwd(float *losses, float *probs, const float *logits, const int32_t *targets,
                           const float *weight, int N, int V)
{
    double total = 0.0;
    for (int i = 0; i < N; i++) {
        int real = weight[i] != 0.0f;
        double nll = crossentropy_row(probs + (size_t)i * V, logits + (size_t)i * V, targets[i], real, V);
        float loss = real ? (float)(nll * weight[i]) : 0.0f;
        losses[i] = loss;
        total += loss;
    }
    return total;
}

/* dlogits (N,V) written = (probs - onehot(target)) * weight * scale, the
 * gradient of scale * sum(losses). Where weight is 0 the target is not read
 * and the row is probs * 0 (0, or NaN where probs are NaN, as autograd gives). */
void op_crossentropy_bwd(float *dlogits, const float *probs, const int32_t *targets, const float *weight,
                         float scale, int N, int V)
{
    for (int i = 0; i < N; i++) {
        const float *p = probs + (size_t)i * V;
        float *d = dlogits + (size_t)i * V;
        float ws = weight[i] * scale;
        for (int j = 0; j < V; j++)
            d[j] = p[j] * ws;
        if (weight[i] != 0.0f)
            d[targets[i]] = (p[targets[i]] - 1.0f) * ws;
    }
}

/* ---- optimizer and norms -------------------------------------------------- */

/* One AdamW step t >= 1 over n parameters, all float:
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *   p -= lr * (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd * p). */
void op_adamw(float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1, float beta2,
              float eps, float weight_decay, int t)
{
    float c1 = 1.0f - powf(beta1, (float)t);
    float c2 = 1.0f - powf(beta2, (float)t);
    for (size_t i = 0; i < n; i++) {
        float g = grad[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        float mhat = mi / c1, vhat = vi / c2;
        m[i] = mi;
        v[i] = vi;
        param[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * param[i]);
    }
}

/* sum x^2 in double, in index order. NaN/Inf propagate. */
double op_sum_squares(const float *x, size_t n)
{
    return op_sum_squares_acc(0.0, x, n); /* 0.0 + the first square is that square */
}

/* s + sum x^2, continuing op_sum_squares' sum (tftrain's fused gradient sweep). */
double op_sum_squares_acc(double s, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return s;
}

/* The L2 norm sqrt(sum x^2) (despite the name), via op_sum_squares. */
double op_sumsq(const float *x, size_t n)
{
    return sqrt(op_sum_squares(x, n));
}

/* x (n) *= s */
void op_scale(float *x, size_t n, float s)
{
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
}

/* x (n) = x rounded to fp16 (TFT_F16) or bf16 (TFT_BF16) and widened back,
 * round to nearest even, overflow to +-Inf, NaN kept. Any other dtype
 * (TFT_F32 in particular) leaves x unchanged. Works through a stack buffer
 * with the vectorised bulk converters (which need non-overlapping buffers). */
void op_round_storage(float *x, size_t n, int dtype)
{
    enum { CHUNK = 2048 };
    uint16_t buf[CHUNK];
    if (dtype != TFT_F16 && dtype != TFT_BF16)
        return;
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        if (dtype == TFT_F16) {
            tft_f32_to_f16_n(x + i, buf, k);
            tft_f16_to_f32_n(buf, x + i, k);
        } else {
            tft_f32_to_bf16_n(x + i, buf, k);
            tft_bf16_to_f32_n(buf, x + i, k);
        }
    }
}
