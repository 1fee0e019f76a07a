/*
 * ops_cuda.cu — the training runtime's compute ops on a CUDA device
 * (contract: tft_ops_cuda.h; CPU references: ops.c).
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
#include <string.h>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gemm_map.h"
#include "tft_cuda_err.h"
#include "tft_types.h"
#include "tft_ops_cuda.h"

#define TPB 256          /* threads per block */
#define WARPS (TPB / 32) /* rows per block in row kernels */
#define MAX_BLOCKS 4096u /* grid-stride cap */
#define GELU_SCALE 0.7978845608028654f
#define GELU_CUBE 0.044715f
#define LN_EPS 1e-5

struct tft_cuda_ops {
    cudaStream_t stream;
    cublasHandle_t blas;
    int gemm_dtype;        /* TFT_F32, TFT_BF16, TFT_F16 */
    void *ws[2];           /* bf16/fp16 copies of the two GEMM operands */
    size_t ws_elems;
    char err[192];
};

/* ------------------------------------------------------------------------ */
/* helpers                                                                   */
/* ------------------------------------------------------------------------ */

static int fail_cuda(tft_cuda_ops *x, cudaError_t e, const char *what)
{
    return tft_cuda_err(x->err, sizeof x->err, e, what);
}

static int fail_blas(tft_cuda_ops *x, cublasStatus_t s, const char *what)
{
    snprintf(x->err, sizeof x->err, "%s: cuBLAS status %d", what, (int)s);
    return -EIO;
}

/* After a launch: 0, or -EIO naming the op. */
static int launched(tft_cuda_ops *x, const char *what)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : fail_cuda(x, e, what);
}

static unsigned grid_for(size_t n)
{
    size_t b = (n + TPB - 1) / TPB;
    return (unsigned)(b == 0 ? 1 : b > MAX_BLOCKS ? MAX_BLOCKS : b);
}

static unsigned rows_grid(int rows)
{
    return (unsigned)((rows + WARPS - 1) / WARPS);
}

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

__device__ static double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return __shfl_sync(0xffffffffu, v, 0);
}

/* The CPU's running maximum (s > max replaces; NaN never does), per lane,
 * then across lanes; lane 0's result for all. */
__device__ static float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = u > v ? u : v;
    }
    return __shfl_sync(0xffffffffu, v, 0);
}

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
    k_colsum<<<(unsigned)((C + 31) / 32), dim3(32, WARPS), 0, x->stream>>>(dw, db, dout, inp, mean, rstd, N, C);
    return launched(x, "layernorm_bwd(dw,db)");
}

/* ------------------------------------------------------------------------ */
/* GEMM through cuBLAS                                                       */
/* ------------------------------------------------------------------------ */

__global__ void k_to_f16(__half *out, const float *in, size_t n)
{
    GRID_STRIDE(i, n) out[i] = __float2half_rn(in[i]);
}

__global__ void k_to_bf16(__nv_bfloat16 *out, const float *in, size_t n)
{
    GRID_STRIDE(i, n) out[i] = __float2bfloat16_rn(in[i]);
}

/* Operand x (0 = A, 1 = B) of d in the GEMM dtype: buf + d->off[x] itself
 * for fp32, else its span over the (b, h) grid converted into workspace
 * slot x. *base is what the call offsets (relative to d->off[x]) apply to. */
static int gemm_operand(tft_cuda_ops *x, const gemm_desc *d, int which, const float *buf, const void **base)
{
    int t = which == 0 ? d->g.trans_a : d->g.trans_b;
    int rows = which == 0 ? (t ? d->g.k : d->g.m) : (t ? d->g.n : d->g.k);
    int cols = which == 0 ? (t ? d->g.m : d->g.k) : (t ? d->g.k : d->g.n);
    int ld = which == 0 ? d->g.lda : d->g.ldb;
    const float *p = buf + d->off[which];
    if (x->gemm_dtype == TFT_F32) {
        *base = p;
        return 0;
    }
    size_t span = (size_t)gemm_span(rows, cols, ld, d->sb[which], d->nb, d->sh[which], d->nh);
    if (span > x->ws_elems) {
        snprintf(x->err, sizeof x->err, "gemm operand of %zu elements > workspace %zu", span, x->ws_elems);
        return -ENOSPC;
    }
    if (x->gemm_dtype == TFT_BF16)
        k_to_bf16<<<grid_for(span), TPB, 0, x->stream>>>((__nv_bfloat16 *)x->ws[which], p, span);
    else
        k_to_f16<<<grid_for(span), TPB, 0, x->stream>>>((__half *)x->ws[which], p, span);
    *base = x->ws[which];
    return launched(x, "gemm operand conversion");
}

/* One cuBLAS call for a row-major GEMM (batch entries g->stride_* apart). */
static int blas_call(tft_cuda_ops *x, const gemm_rm *g, float alpha, const void *A, const void *B, float beta,
                     float *C, int batch)
{
    gemm_cm c = gemm_rm_to_cm(*g);
    cudaDataType_t dt = x->gemm_dtype == TFT_BF16 ? CUDA_R_16BF : x->gemm_dtype == TFT_F16 ? CUDA_R_16F
                                                                                         : CUDA_R_32F;
    cublasOperation_t o1 = c.trans_1 ? CUBLAS_OP_T : CUBLAS_OP_N, o2 = c.trans_2 ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t s;
    if (batch == 1)
        s = cublasGemmEx(x->blas, o1, o2, c.m, c.n, c.k, &alpha, B, dt, c.ld_1, A, dt, c.ld_2, &beta, C,
                         CUDA_R_32F, c.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    else
        s = cublasGemmStridedBatchedEx(x->blas, o1, o2, c.m, c.n, c.k, &alpha, B, dt, c.ld_1, c.stride_1, A, dt,
                                       c.ld_2, c.stride_2, &beta, C, CUDA_R_32F, c.ldc, c.stride_c, batch,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? 0 : fail_blas(x, s, batch == 1 ? "cublasGemmEx" : "cublasGemmStridedBatchedEx");
}

/* Runs desc d (gemm_map.h) on buffers A, B, C: operands converted once,
 * then gemm_plan_call's calls. */
static int gemm_run(tft_cuda_ops *x, const gemm_desc *d, const float *A, const float *B, float *C)
{
    if (!gemm_rm_valid(&d->g) || d->nb <= 0 || d->nh <= 0) {
        snprintf(x->err, sizeof x->err, "gemm: bad sizes m %d n %d k %d lda %d ldb %d ldc %d", d->g.m, d->g.n,
                 d->g.k, d->g.lda, d->g.ldb, d->g.ldc);
        return -EINVAL;
    }
    const void *pa, *pb;
    int e = gemm_operand(x, d, 0, A, &pa);
    if (!e)
        e = gemm_operand(x, d, 1, B, &pb);
    long long esz = x->gemm_dtype == TFT_F32 ? 4 : 2;
    int n = e ? 0 : gemm_plan_calls(d);
    for (int i = 0; i < n && !e; i++) {
        gemm_call k = gemm_plan_call(d, i);
        gemm_rm g = d->g;
        g.stride_a = k.stride[0];
        g.stride_b = k.stride[1];
        g.stride_c = k.stride[2];
        e = blas_call(x, &g, d->alpha, (const char *)pa + (k.off[0] - d->off[0]) * esz,
                      (const char *)pb + (k.off[1] - d->off[1]) * esz, d->beta, C + k.off[2], k.batch);
    }
    return e;
}

__global__ void k_fill_rows(float *out, const float *bias, int OC, size_t n)
{
    GRID_STRIDE(i, n) out[i] = bias ? bias[i % (size_t)OC] : 0.0f;
}

extern "C" int opd_matmul_fwd(tft_cuda_ops *x, float *out, const float *inp, const float *w, const float *bias,
                              int N, int C, int OC)
{
    if (N <= 0 || OC <= 0)
        return 0;
    size_t n = (size_t)N * OC;
    k_fill_rows<<<grid_for(n), TPB, 0, x->stream>>>(out, bias, OC, n);
    int e = launched(x, "matmul_fwd(fill)");
    if (e || C <= 0)
        return e;
    gemm_desc d = gemm_matmul_fwd(N, C, OC);
    return gemm_run(x, &d, inp, w, out);
}

extern "C" int opd_matmul_bwd(tft_cuda_ops *x, float *dinp, float *dw, float *dbias, const float *dout,
                              const float *inp, const float *w, int N, int C, int OC)
{
    if (N <= 0 || OC <= 0)
        return 0;
    int e = 0;
    if (C > 0) {
        gemm_desc di = gemm_matmul_dinp(N, C, OC), dwd = gemm_matmul_dw(N, C, OC);
        e = gemm_run(x, &di, dout, w, dinp);
        if (!e)
            e = gemm_run(x, &dwd, dout, inp, dw);
    }
    if (e || !dbias)
        return e;
    k_colsum<<<(unsigned)((OC + 31) / 32), dim3(32, WARPS), 0, x->stream>>>(NULL, dbias, dout, NULL, NULL, NULL,
                                                                           N, OC);
    return launched(x, "matmul_bwd(dbias)");
}

/* ------------------------------------------------------------------------ */
/* attention                                                                 */
/* ------------------------------------------------------------------------ */
/* Per (b,h): q, k, v are (T,hs) inside qkv (B,T,3C) with row stride 3C,
 * batch stride T*3C, head stride hs; scores/probs are (T,T) blocks of
 * (B,NH,T,T) (batch stride NH*T*T, head stride T*T); out (B,T,C) has row
 * stride C, batch stride T*C, head stride hs. */

extern "C" int opd_attn_scores_fwd(tft_cuda_ops *x, float *scores, const float *qkv, int B, int T, int C, int NH,
                                   float scale)
{
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0)
        return 0;
    gemm_desc d = gemm_attn_scores(B, T, C, NH, scale);
    return gemm_run(x, &d, qkv, qkv, scores);
}

extern "C" int opd_attn_scores_bwd(tft_cuda_ops *x, float *dqkv, const float *dscores, const float *qkv, int B,
                                   int T, int C, int NH, float scale)
{
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0)
        return 0;
    /* dq += scale * dscores @ k; dk += scale * dscores^T @ q */
    gemm_desc dq = gemm_attn_dq(B, T, C, NH, scale), dk = gemm_attn_dk(B, T, C, NH, scale);
    int e = gemm_run(x, &dq, dscores, qkv, dqkv);
    return e ? e : gemm_run(x, &dk, dscores, qkv, dqkv);
}

__global__ void k_masked_fill(float *s, const uint8_t *mask, float fill, int NH, int T, size_t n)
{
    size_t tt = (size_t)T * T;
    GRID_STRIDE(i, n) {
        size_t b = i / (tt * (size_t)NH), ij = i % tt;
        if (!mask[b * tt + ij])
            s[i] = fill;
    }
}

extern "C" int opd_masked_fill(tft_cuda_ops *x, float *scores, const uint8_t *mask, float fill, int B, int NH,
                               int T)
{
    size_t n = (size_t)B * NH * T * T;
    if (B <= 0 || NH <= 0 || T <= 0)
        return 0;
    k_masked_fill<<<grid_for(n), TPB, 0, x->stream>>>(scores, mask, fill, NH, T, n);
    return launched(x, "masked_fill");
}

extern "C" int opd_masked_fill_bwd(tft_cuda_ops *x, float *dscores, const uint8_t *mask, int B, int NH, int T)
{
    return opd_masked_fill(x, dscores, mask, 0.0f, B, NH, T);
}

__global__ void k_softmax_fwd(float *probs, const float *scores, int rows, int n)
{
    int row = (int)(blockIdx.x * WARPS + threadIdx.x / 32), lane = (int)(threadIdx.x & 31);
    if (row >= rows)
        return;
    const float *s = scores + (size_t)row * n;
    float *p = probs + (size_t)row * n;
    float maxv = -INFINITY;
    for (int j = lane; j < n; j += 32)
        if (s[j] > maxv)
            maxv = s[j];
    maxv = warp_max(maxv);
    double sum = 0.0;
    for (int j = lane; j < n; j += 32) {
        p[j] = expf(s[j] - maxv);
        sum += p[j];
    }
    sum = warp_sum(sum);
    float inv = (float)(1.0 / sum);
    for (int j = lane; j < n; j += 32)
        p[j] *= inv;
}

__global__ void k_softmax_bwd(float *dscores, const float *dprobs, const float *probs, int rows, int n)
{
    int row = (int)(blockIdx.x * WARPS + threadIdx.x / 32), lane = (int)(threadIdx.x & 31);
    if (row >= rows)
        return;
    const float *p = probs + (size_t)row * n, *dp = dprobs + (size_t)row * n;
    float *ds = dscores + (size_t)row * n;
    double dot = 0.0;
    for (int j = lane; j < n; j += 32)
        dot += (double)dp[j] * p[j];
    float fdot = (float)warp_sum(dot);
    for (int j = lane; j < n; j += 32)
        ds[j] = p[j] * (dp[j] - fdot);
}

extern "C" int opd_softmax_fwd(tft_cuda_ops *x, float *probs, const float *scores, int rows, int n)
{
    if (rows <= 0 || n <= 0)
        return 0;
    k_softmax_fwd<<<rows_grid(rows), TPB, 0, x->stream>>>(probs, scores, rows, n);
    return launched(x, "softmax_fwd");
}

extern "C" int opd_softmax_bwd(tft_cuda_ops *x, float *dscores, const float *dprobs, const float *probs, int rows,
                               int n)
{
    if (rows <= 0 || n <= 0)
        return 0;
    k_softmax_bwd<<<rows_grid(rows), TPB, 0, x->stream>>>(dscores, dprobs, probs, rows, n);
    return launched(x, "softmax_bwd");
}

extern "C" int opd_attn_values_fwd(tft_cuda_ops *x, float *out, const float *probs, const float *qkv, int B,
                                   int T, int C, int NH)
{
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0)
        return 0;
    gemm_desc d = gemm_attn_values(B, T, C, NH);
    return gemm_run(x, &d, probs, qkv, out);
}

extern "C" int opd_attn_values_bwd(tft_cuda_ops *x, float *dprobs, float *dqkv, const float *dout,
                                   const float *probs, const float *qkv, int B, int T, int C, int NH)
{
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0)
        return 0;
    /* dprobs = dout_h @ v_h^T; dv += probs^T @ dout_h */
    gemm_desc dp = gemm_attn_dprobs(B, T, C, NH), dv = gemm_attn_dv(B, T, C, NH);
    int e = gemm_run(x, &dp, dout, qkv, dprobs);
    return e ? e : gemm_run(x, &dv, probs, dout, dqkv);
}

__global__ void k_build_mask(uint8_t *mask, float *maskf, const uint8_t *pad, int T, int off, int combine,
                             size_t n)
{
    size_t tt = (size_t)T * T;
    GRID_STRIDE(i, n) {
        int b = (int)(i / tt), r = (int)(i % tt), qi = r / T, kj = r % T;
        int ok = kj <= qi + off;
        if (combine && pad)
            ok = ok && pad[(size_t)b * T + qi] && pad[(size_t)b * T + kj];
        mask[i] = (uint8_t)ok;
        if (maskf)
            maskf[i] = (float)ok;
    }
}

extern "C" int opd_build_mask(tft_cuda_ops *x, uint8_t *mask, float *maskf, const uint8_t *pad, int B, int T,
                              int causal_offset, int combine)
{
    size_t n = (size_t)B * T * T;
    if (B <= 0 || T <= 0)
        return 0;
    k_build_mask<<<grid_for(n), TPB, 0, x->stream>>>(mask, maskf, pad, T, causal_offset, combine, n);
    return launched(x, "build_mask");
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
    float maxv = -INFINITY;
    for (int j = lane; j < V; j += 32)
        if (l[j] > maxv)
            maxv = l[j];
    maxv = warp_max(maxv);
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

/* Block s: sum of squares of its segment, strided per thread in index
 * order, then a fixed shared-memory tree. */
__global__ void k_sumsq_segments(const float *base, const uint64_t *off, const uint64_t *cnt, double *out)
{
    __shared__ double sh[TPB];
    int t = (int)threadIdx.x;
    const float *x = base + off[blockIdx.x];
    size_t n = cnt[blockIdx.x];
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
    if (t == 0)
        out[blockIdx.x] = sh[0];
}

/* The same for one tensor (a single segment without tables). */
__global__ void k_sumsq(const float *x, size_t n, double *out)
{
    __shared__ double sh[TPB];
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
    if (t == 0)
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
