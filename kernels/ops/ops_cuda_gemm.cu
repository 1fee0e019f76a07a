/*
 * ops_cuda_gemm.cu — the device ops that multiply matrices (contract:
 * tft_ops_cuda.h; CPU references: ops.c): GEMMs through cuBLAS with the
 * operands converted to the context's GEMM dtype (gemm_map.h maps each op
 * to row-major descriptors), the matmul, and attention in steps (scores,
 * masking, softmax, values). Kernel shapes and determinism as in
 * ops_cuda.cu's file comment.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gemm_map.h"
#include "ops_cuda_internal.h"
#include "tft_types.h"

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
    return ops_cuda_colsum(x, NULL, dbias, dout, NULL, NULL, NULL, N, OC, "matmul_bwd(dbias)");
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
    float maxv = row_max(s, n, lane);
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
