/*
 * ops_cuda_train.cu — the device ops of a training step's end (contract:
 * tft_ops_cuda.h; CPU references: ops.c and tftrain's train.c):
 * cross-entropy and the loss sum, AdamW and SGD, sums of squares and the
 * global norm, scaling, storage rounding, the loss scaler. Kernel shapes
 * and determinism as in ops_cuda.cu's file comment.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "ops_cuda_internal.h"
#include "tft_types.h"

/* ------------------------------------------------------------------------ */
/* cross-entropy                                                             */
/* ------------------------------------------------------------------------ */

/* Warp per row: probs = softmax (exp in double, as the CPU), the row's
 * weighted loss -log p[target] (target read only where weight != 0). */
__global__ void k_crossentropy_fwd(float *losses, float *probs, const float *logits, const int32_t *targets,
                                   const float *weight, int N, int V)
{
    int row = (int)(blockIdx.x * WARPS + threadIdx.x / 32), lane = (int)(threadIdx.x & 31);
    if (row >= N)
        return;
    const float *l = logits + (size_t)row * V;
    float *p = probs + (size_t)row * V;
    float maxv = row_max(l, V, lane);
    double sum = 0.0;
    for (int j = lane; j < V; j += 32)
        sum += exp((double)l[j] - maxv);
    sum = warp_sum(sum);
    for (int j = lane; j < V; j += 32)
        p[j] = (float)(exp((double)l[j] - maxv) / sum);
    if (lane == 0) {
        float wgt = weight[row], loss = 0.0f;
        if (wgt != 0.0f) {
            double nll = log(sum) - ((double)l[targets[row]] - maxv);
            loss = (float)(nll * wgt);
        }
        losses[row] = loss;
    }
}

/* One block: thread t sums rows [t*chunk, (t+1)*chunk) in order, thread 0
 * adds the 256 partials in order. */
__global__ void k_sum_losses(const float *losses, int N, double *dsum, float denom, float *dloss)
{
    __shared__ double part[TPB];
    int t = (int)threadIdx.x, chunk = (N + TPB - 1) / TPB;
    double s = 0.0;
    for (int i = t * chunk; i < (t + 1) * chunk && i < N; i++)
        s += losses[i];
    part[t] = s;
    __syncthreads();
    if (t == 0) {
        double tot = 0.0;
        for (int k = 0; k < TPB; k++)
            tot += part[k];
        *dsum = tot;
        if (dloss)
            *dloss = (float)(tot / (double)denom);
    }
}

__global__ void k_crossentropy_bwd(float *dlogits, const float *probs, const int32_t *targets,
                                   const float *weight, float scale, const float *dmul, int V, size_t n)
{
    float sc = dmul ? scale * *dmul : scale;
    GRID_STRIDE(i, n) {
        size_t row = i / (size_t)V;
        int j = (int)(i % (size_t)V);
        float wgt = weight[row], ws = wgt * sc;
        dlogits[i] = (wgt != 0.0f && j == targets[row]) ? (probs[i] - 1.0f) * ws : probs[i] * ws;
    }
}

extern "C" int opd_crossentropy_fwd(tft_cuda_ops *x, float *losses, float *probs, const float *logits,
                                    const int32_t *targets, const float *weight, int N, int V, double *dsum,
                                    float denom, float *dloss)
{
    if (N <= 0 || V <= 0 || !dsum)
        return N <= 0 ? 0 : -EINVAL;
    k_crossentropy_fwd<<<rows_grid(N), TPB, 0, x->stream>>>(losses, probs, logits, targets, weight, N, V);
    int e = launched(x, "crossentropy_fwd");
    if (e)
        return e;
    k_sum_losses<<<1, TPB, 0, x->stream>>>(losses, N, dsum, denom, dloss);
    return launched(x, "crossentropy_fwd(sum)");
}

extern "C" int opd_crossentropy_bwd(tft_cuda_ops *x, float *dlogits, const float *probs, const int32_t *targets,
                                    const float *weight, float scale, const float *dmul, int N, int V)
{
    size_t n = (size_t)N * V;
    if (N <= 0 || V <= 0)
        return 0;
    k_crossentropy_bwd<<<grid_for(n), TPB, 0, x->stream>>>(dlogits, probs, targets, weight, scale, dmul, V, n);
    return launched(x, "crossentropy_bwd");
}

/* ------------------------------------------------------------------------ */
/* optimizer and norms                                                       */
/* ------------------------------------------------------------------------ */

__global__ void k_adamw(float *param, const float *grad, float *m, float *v, size_t n, float lr, float beta1,
                        float beta2, float eps, float wd, float c1, float c2, const int *skip)
{
    if (skip && *skip)
        return;
    GRID_STRIDE(i, n) {
        float g = grad[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        float mhat = mi / c1, vhat = vi / c2;
        m[i] = mi;
        v[i] = vi;
        param[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * param[i]);
    }
}

__global__ void k_sgd(float *param, const float *grad, float *m, size_t n, float lr, const int *skip)
{
    if (skip && *skip)
        return;
    GRID_STRIDE(i, n) {
        m[i] = 0.9f * m[i] + grad[i];
        param[i] -= lr * m[i];
    }
}

extern "C" int opd_adamw(tft_cuda_ops *x, float *param, const float *grad, float *m, float *v, size_t n,
                         float lr, float beta1, float beta2, float eps, float weight_decay, int t, const int *skip)
{
    if (!n)
        return 0;
    /* the bias corrections as ops.c computes them (host powf) */
    float c1 = 1.0f - powf(beta1, (float)t);
    float c2 = 1.0f - powf(beta2, (float)t);
    k_adamw<<<grid_for(n), TPB, 0, x->stream>>>(param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, c1, c2,
                                                skip);
    return launched(x, "adamw");
}

extern "C" int opd_sgd_momentum(tft_cuda_ops *x, float *param, const float *grad, float *m, size_t n, float lr,
                                const int *skip)
{
    if (!n)
        return 0;
    k_sgd<<<grid_for(n), TPB, 0, x->stream>>>(param, grad, m, n, lr, skip);
    return launched(x, "sgd_momentum");
}

/* The sum of squares of x[0, n), by every thread of the block (it
 * syncs): strided per thread in index order, then a fixed shared-memory
 * tree in sh; the sum is sh[0] when it returns. */
__device__ static __forceinline__ void block_sumsq(const float *x, size_t n, double *sh)
{
    int t = (int)threadIdx.x;
    double s = 0.0;
    for (size_t i = (size_t)t; i < n; i += TPB)
        s += (double)x[i] * x[i];
    sh[t] = s;
    __syncthreads();
    for (int half = TPB / 2; half > 0; half /= 2) {
        if (t < half)
            sh[t] += sh[t + half];
        __syncthreads();
    }
}

/* Block s: the sum of squares of its segment. */
__global__ void k_sumsq_segments(const float *base, const uint64_t *off, const uint64_t *cnt, double *out)
{
    __shared__ double sh[TPB];
    block_sumsq(base + off[blockIdx.x], cnt[blockIdx.x], sh);
    if (threadIdx.x == 0)
        out[blockIdx.x] = sh[0];
}

/* The same for one tensor (a single segment without tables). */
__global__ void k_sumsq(const float *x, size_t n, double *out)
{
    __shared__ double sh[TPB];
    block_sumsq(x, n, sh);
    if (threadIdx.x == 0)
        *out = sh[0];
}

extern "C" int opd_sum_squares(tft_cuda_ops *x, const float *data, size_t n, double *dout)
{
    k_sumsq<<<1, TPB, 0, x->stream>>>(data, n, dout);
    return launched(x, "sum_squares");
}

extern "C" int opd_sum_squares_segments(tft_cuda_ops *x, const float *base, const uint64_t *off,
                                        const uint64_t *cnt, int nseg, double *out)
{
    if (nseg <= 0)
        return 0;
    k_sumsq_segments<<<(unsigned)nseg, TPB, 0, x->stream>>>(base, off, cnt, out);
    return launched(x, "sum_squares_segments");
}

/* train.c's grad_norm: float s += each double, then sqrtf; and its clip. */
__global__ void k_global_norm(const double *sumsq, int nseg, int reverse, float clip, float *dnorm, float *dclip,
                              int *dfound)
{
    float s = 0.0f;
    int found = 0;
    for (int k = 0; k < nseg; k++) {
        double d = sumsq[reverse ? nseg - 1 - k : k];
        found |= !isfinite(d);
        s += d;
    }
    float norm = sqrtf(s);
    *dnorm = norm;
    *dclip = clip > 0.0f && (double)norm > (double)clip ? (float)((double)clip / (double)norm) : 1.0f;
    if (dfound)
        *dfound = found;
}

extern "C" int opd_global_norm(tft_cuda_ops *x, const double *sumsq, int nseg, int reverse, float clip,
                               float *dnorm, float *dclip, int *dfound)
{
    k_global_norm<<<1, 1, 0, x->stream>>>(sumsq, nseg, reverse, clip, dnorm, dclip, dfound);
    return launched(x, "global_norm");
}

__global__ void k_scale(float *x, size_t n, float s)
{
    GRID_STRIDE(i, n) x[i] *= s;
}

__global__ void k_scale_dev(float *x, size_t n, const float *ds, int invert)
{
    float s = invert ? 1.0f / *ds : *ds;
    if (s == 1.0f)
        return;
    GRID_STRIDE(i, n) x[i] *= s;
}

extern "C" int opd_scale(tft_cuda_ops *x, float *data, size_t n, float s)
{
    if (!n)
        return 0;
    k_scale<<<grid_for(n), TPB, 0, x->stream>>>(data, n, s);
    return launched(x, "scale");
}

extern "C" int opd_scale_dev(tft_cuda_ops *x, float *data, size_t n, const float *ds, int invert)
{
    if (!n)
        return 0;
    k_scale_dev<<<grid_for(n), TPB, 0, x->stream>>>(data, n, ds, invert);
    return launched(x, "scale_dev");
}

__global__ void k_round_f16(float *x, size_t n)
{
    GRID_STRIDE(i, n) x[i] = __half2float(__float2half_rn(x[i]));
}

__global__ void k_round_bf16(float *x, size_t n)
{
    GRID_STRIDE(i, n) x[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
}

extern "C" int opd_round_storage(tft_cuda_ops *x, float *data, size_t n, int dtype)
{
    if (!n || (dtype != TFT_F16 && dtype != TFT_BF16))
        return 0;
    if (dtype == TFT_F16)
        k_round_f16<<<grid_for(n), TPB, 0, x->stream>>>(data, n);
    else
        k_round_bf16<<<grid_for(n), TPB, 0, x->stream>>>(data, n);
    return launched(x, "round_storage");
}

__global__ void k_f32_to_f64(const float *in, double *out, size_t n)
{
    GRID_STRIDE(i, n) out[i] = in[i];
}

extern "C" int opd_f32_to_f64(tft_cuda_ops *x, const float *in, double *out, size_t n)
{
    if (!n)
        return 0;
    k_f32_to_f64<<<grid_for(n), TPB, 0, x->stream>>>(in, out, n);
    return launched(x, "f32_to_f64");
}

__global__ void k_loss_scale_update(tft_loss_scale *s, const int *found)
{
    tft_loss_scale_update(s, *found);
}

extern "C" int opd_loss_scale_update(tft_cuda_ops *x, tft_loss_scale *dstate, const int *found)
{
    k_loss_scale_update<<<1, 1, 0, x->stream>>>(dstate, found);
    return launched(x, "loss_scale_update");
}
