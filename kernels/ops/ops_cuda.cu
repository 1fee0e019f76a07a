/*
 * ops_cuda.cu — the training runtime's compute ops on a CUDA device
 * (contract: tft_ops_cuda.h; CPU references: ops.c): the context, the
 * embedding, LayerNorm and the elementwise ops. The GEMMs, matmul and
 * attention are in ops_cuda_gemm.cu; cross-entropy, the optimizers, norms
 * and scaling in ops_cuda_train.cu; what they share in
 * ops_cuda_internal.h.
 *
 * Kernel shapes: elementwise ops are grid-stride loops; row ops (LayerNorm,
 * softmax, cross-entropy rows) give each row one warp, whose lanes take
 * every 32nd element in index order and combine by an xor butterfly (every
 * lane ends with the same value; lane 0's is broadcast anyway); column sums
 * (LayerNorm dw/db, dbias) give 32 columns to a block of 8 warps, warp w
 * summing rows w, w+8, ..., then the 8 partials are added in warp order.
 * No atomics anywhere: results are reproducible bit for bit.
 *
 * Compiled with --fmad=false so a*b+c rounds twice, as on the CPU (ops.c is
 * built with -ffp-contract=off).
 *
 * Workload: the small GPT of tftrain (N = B*T up to a few thousand rows,
 * C up to a few thousand channels); one launch per op per layer, so
 * kernels are simple rather than fused.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "ops_cuda_internal.h"
#include "tft_cuda_err.h"
#include "tft_ops_cuda.h"
#include "tft_types.h"

#define GELU_SCALE 0.7978845608028654f
#define GELU_CUBE 0.044715f
#define LN_EPS 1e-5

/* ------------------------------------------------------------------------ */
/* context                                                                   */
/* ------------------------------------------------------------------------ */

extern "C" int tft_cuda_ops_new(tft_cuda_ops **out, const tft_cuda_ops_opts *o, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || !errlen) {
        err = dummy;
        errlen = sizeof dummy;
    }
    *out = NULL;
    if (!o || o->sz < sizeof(tft_cuda_ops_opts) ||
        (o->gemm_dtype != TFT_F32 && o->gemm_dtype != TFT_BF16 && o->gemm_dtype != TFT_F16)) {
        snprintf(err, errlen, "bad options");
        return -EINVAL;
    }
    int ndev = 0;
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev == 0) {
        snprintf(err, errlen, "no CUDA device (%s)", ce != cudaSuccess ? cudaGetErrorString(ce) : "none found");
        (void)cudaGetLastError();
        return -ENODEV;
    }
    tft_cuda_ops *x = (tft_cuda_ops *)calloc(1, sizeof *x);
    if (!x)
        return -ENOMEM;
    x->stream = (cudaStream_t)o->stream;
    x->gemm_dtype = o->gemm_dtype;
    cublasStatus_t bs = cublasCreate(&x->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cublasCreate: status %d", (int)bs);
        free(x);
        return -EIO;
    }
    /* Default math: with CUBLAS_COMPUTE_32F, fp32 operands never use TF32. */
    if ((bs = cublasSetMathMode(x->blas, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS ||
        (bs = cublasSetStream(x->blas, x->stream)) != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cuBLAS setup: status %d", (int)bs);
        tft_cuda_ops_free(x);
        return -EIO;
    }
    if (x->gemm_dtype != TFT_F32 && o->gemm_ws_elems > 0) {
        x->ws_elems = o->gemm_ws_elems;
        for (int i = 0; i < 2; i++) {
            if ((ce = cudaMalloc(&x->ws[i], x->ws_elems * 2)) != cudaSuccess) {
                snprintf(err, errlen, "cudaMalloc of %zu bytes: %s", x->ws_elems * 2, tft_cuda_reason(ce));
                tft_cuda_ops_free(x);
                return -ENOMEM;
            }
        }
    }
    *out = x;
    return 0;
}

extern "C" void tft_cuda_ops_free(tft_cuda_ops *x)
{
    if (!x)
        return;
    if (x->blas)
        cublasDestroy(x->blas);
    for (int i = 0; i < 2; i++)
        if (x->ws[i])
            cudaFree(x->ws[i]);
    free(x);
}

extern "C" const char *tft_cuda_ops_error(const tft_cuda_ops *x)
{
    return x && x->err[0] ? x->err : "no error";
}

extern "C" size_t tft_cuda_ops_ws_bytes(const tft_cuda_ops *x)
{
    return x ? 2 * x->ws_elems * 2 : 0;
}

extern "C" int opd_zero(tft_cuda_ops *x, void *p, size_t bytes)
{
    if (!bytes)
        return 0;
    cudaError_t e = cudaMemsetAsync(p, 0, bytes, x->stream);
    return e == cudaSuccess ? 0 : fail_cuda(x, e, "cudaMemsetAsync");
}

/* ------------------------------------------------------------------------ */
/* embedding                                                                 */
/* ------------------------------------------------------------------------ */

__global__ void k_embedding_fwd(float *out, const int32_t *tok, const float *wte, const float *wpe, int T, int C,
                                size_t n)
{
    GRID_STRIDE(i, n) {
        size_t bt = i / (size_t)C;
        size_t c = i % (size_t)C, t = bt % (size_t)T;
        out[i] = wte[(size_t)tok[bt] * C + c] + wpe[t * C + c];
    }
}

/* Block (v, column chunk): scans the tokens in (b,t) order through shared
 * memory and adds the rows of dout whose token is v, sequentially. */
__global__ void k_embedding_bwd_wte(float *dwte, const float *dout, const int32_t *tok, int BT, int C)
{
    __shared__ int32_t st[TPB];
    int v = (int)blockIdx.x, c = (int)(blockIdx.y * TPB + threadIdx.x);
    float acc = c < C ? dwte[(size_t)v * C + c] : 0.0f;
    int touched = 0;
    for (int base = 0; base < BT; base += TPB) {
        int j = base + (int)threadIdx.x;
        st[threadIdx.x] = j < BT ? tok[j] : -1;
        __syncthreads();
        int m = BT - base < TPB ? BT - base : TPB;
        for (int k = 0; k < m; k++) {
            if (st[k] == v) {
                touched = 1;
                if (c < C)
                    acc += dout[(size_t)(base + k) * C + c];
            }
        }
        __syncthreads();
    }
    if (c < C && touched)
        dwte[(size_t)v * C + c] = acc;
}

/* dwpe[t,c] += dout[b,t,c] for b in order. */
__global__ void k_embedding_bwd_wpe(float *dwpe, const float *dout, int B, int T, int C)
{
    size_t n = (size_t)T * C;
    GRID_STRIDE(i, n) {
        float acc = dwpe[i];
        for (int b = 0; b < B; b++)
            acc += dout[(size_t)b * n + i];
        dwpe[i] = acc;
    }
}

extern "C" int opd_embedding_fwd(tft_cuda_ops *x, float *out, const int32_t *tokens, const float *wte,
                                 const float *wpe, int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    if (B <= 0 || T <= 0 || C <= 0)
        return 0;
    k_embedding_fwd<<<grid_for(n), TPB, 0, x->stream>>>(out, tokens, wte, wpe, T, C, n);
    return launched(x, "embedding_fwd");
}

extern "C" int opd_embedding_bwd(tft_cuda_ops *x, float *dwte, float *dwpe, const float *dout,
                                 const int32_t *tokens, int B, int T, int C, int V)
{
    if (B <= 0 || T <= 0 || C <= 0 || V <= 0)
        return 0;
    dim3 g((unsigned)V, (unsigned)((C + TPB - 1) / TPB));
    k_embedding_bwd_wte<<<g, TPB, 0, x->stream>>>(dwte, dout, tokens, B * T, C);
    int e = launched(x, "embedding_bwd(wte)");
    if (e)
        return e;
    k_embedding_bwd_wpe<<<grid_for((size_t)T * C), TPB, 0, x->stream>>>(dwpe, dout, B, T, C);
    return launched(x, "embedding_bwd(wpe)");
}

/* ------------------------------------------------------------------------ */
/* layernorm                                                                 */
/* ------------------------------------------------------------------------ */

__global__ void k_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w,
                                const float *b, int N, int C)
{
    int row = (int)(blockIdx.x * WARPS + threadIdx.x / 32), lane = (int)(threadIdx.x & 31);
    if (row >= N)
        return; /* the whole warp */
    const float *xr = inp + (size_t)row * C;
    double sum = 0.0;
    for (int c = lane; c < C; c += 32)
        sum += xr[c];
    sum = warp_sum(sum);
    float m = (float)(sum / C);
    double var = 0.0;
    for (int c = lane; c < C; c += 32) {
        double d = (double)xr[c] - m;
        var += d * d;
    }
    var = warp_sum(var);
    float s = (float)(1.0 / sqrt(var / C + LN_EPS));
    float *o = out + (size_t)row * C;
    for (int c = lane; c < C; c += 32)
        o[c] = (xr[c] - m) * s * w[c] + b[c];
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

__global__ void k_layernorm_bwd_x(float *dinp, const float *dout, const float *inp, const float *w,
                                  const float *mean, const float *rstd, int N, int C)
{
    int row = (int)(blockIdx.x * WARPS + threadIdx.x / 32), lane = (int)(threadIdx.x & 31);
    if (row >= N)
        return;
    const float *xr = inp + (size_t)row * C, *d = dout + (size_t)row * C;
    float *dx = dinp + (size_t)row * C;
    float m = mean[row], s = rstd[row];
    double g_sum = 0.0, gx_sum = 0.0;
    for (int c = lane; c < C; c += 32) {
        float xhat = (xr[c] - m) * s;
        float g = w[c] * d[c];
        g_sum += g;
        gx_sum += (double)g * xhat;
    }
    g_sum = warp_sum(g_sum);
    gx_sum = warp_sum(gx_sum);
    float g_mean = (float)(g_sum / C), gx_mean = (float)(gx_sum / C);
    for (int c = lane; c < C; c += 32) {
        float xhat = (xr[c] - m) * s;
        float g = w[c] * d[c];
        dx[c] += s * (g - g_mean - xhat * gx_mean);
    }
}

/* Column sums over N rows, 32 columns per block (x), 8 row groups (y):
 * dw[c] += sum of xhat*dout (when inp) and db[c] += sum of dout, each a
 * double sum added to the float once. With inp == NULL only db (the
 * matmul's dbias). */
__global__ void k_colsum(float *dw, float *db, const float *dout, const float *inp, const float *mean,
                         const float *rstd, int N, int C)
{
    __shared__ double sw[WARPS][32], sb[WARPS][32];
    int tx = (int)threadIdx.x, ty = (int)threadIdx.y, c = (int)blockIdx.x * 32 + tx;
    double aw = 0.0, ab = 0.0;
    if (c < C) {
        for (int n = ty; n < N; n += WARPS) {
            float d = dout[(size_t)n * C + c];
            ab += d;
            if (inp) {
                float xhat = (inp[(size_t)n * C + c] - mean[n]) * rstd[n];
                aw += (double)(xhat * d);
            }
        }
    }
    sw[ty][tx] = aw;
    sb[ty][tx] = ab;
    __syncthreads();
    if (ty == 0 && c < C) {
        double tw = 0.0, tb = 0.0;
        for (int k = 0; k < WARPS; k++) {
            tw += sw[k][tx];
            tb += sb[k][tx];
        }
        if (inp)
            dw[c] += (float)tw;
        db[c] += (float)tb;
    }
}

int ops_cuda_colsum(tft_cuda_ops *x, float *dw, float *db, const float *dout, const float *inp, const float *mean,
                    const float *rstd, int N, int C, const char *what)
{
    k_colsum<<<(unsigned)((C + 31) / 32), dim3(32, WARPS), 0, x->stream>>>(dw, db, dout, inp, mean, rstd, N, C);
    return launched(x, what);
}

extern "C" int opd_layernorm_fwd(tft_cuda_ops *x, float *out, float *mean, float *rstd, const float *inp,
                                 const float *w, const float *b, int N, int C)
{
    if (N <= 0 || C <= 0)
        return 0;
    k_layernorm_fwd<<<rows_grid(N), TPB, 0, x->stream>>>(out, mean, rstd, inp, w, b, N, C);
    return launched(x, "layernorm_fwd");
}

extern "C" int opd_layernorm_bwd(tft_cuda_ops *x, float *dinp, float *dw, float *db, const float *dout,
                                 const float *inp, const float *w, const float *mean, const float *rstd, int N,
                                 int C)
{
    if (N <= 0 || C <= 0)
        return 0;
    k_layernorm_bwd_x<<<rows_grid(N), TPB, 0, x->stream>>>(dinp, dout, inp, w, mean, rstd, N, C);
    int e = launched(x, "layernorm_bwd(dinp)");
    if (e)
        return e;
    return ops_cuda_colsum(x, dw, db, dout, inp, mean, rstd, N, C, "layernorm_bwd(dw,db)");
}

/* ------------------------------------------------------------------------ */
/* elementwise                                                               */
/* ------------------------------------------------------------------------ */

__global__ void k_gelu_fwd(float *out, const float *inp, size_t n)
{
    GRID_STRIDE(i, n) {
        float x = inp[i];
        float u = GELU_SCALE * (x + GELU_CUBE * x * x * x);
        out[i] = 0.5f * x * (1.0f + tanhf(u));
    }
}

__global__ void k_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n)
{
    GRID_STRIDE(i, n) {
        float x = inp[i];
        float u = GELU_SCALE * (x + GELU_CUBE * x * x * x);
        float th = tanhf(u);
        float ch = coshf(u);
        float sech2 = 1.0f / (ch * ch);
        float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * GELU_CUBE * x * x);
        dinp[i] += dout[i] * grad;
    }
}

__global__ void k_residual(float *out, const float *a, const float *b, size_t n)
{
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

extern "C" int opd_gelu_fwd(tft_cuda_ops *x, float *out, const float *inp, size_t n)
{
    if (!n)
        return 0;
    k_gelu_fwd<<<grid_for(n), TPB, 0, x->stream>>>(out, inp, n);
    return launched(x, "gelu_fwd");
}

extern "C" int opd_gelu_bwd(tft_cuda_ops *x, float *dinp, const float *inp, const float *dout, size_t n)
{
    if (!n)
        return 0;
    k_gelu_bwd<<<grid_for(n), TPB, 0, x->stream>>>(dinp, inp, dout, n);
    return launched(x, "gelu_bwd");
}

extern "C" int opd_residual_fwd(tft_cuda_ops *x, float *out, const float *a, const float *b, size_t n)
{
    if (!n)
        return 0;
    k_residual<<<grid_for(n), TPB, 0, x->stream>>>(out, a, b, n);
    return launched(x, "residual_fwd");
}
