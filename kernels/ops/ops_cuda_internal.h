/*
 * ops_cuda_internal.h — what the device ops' files (ops_cuda.cu,
 * ops_cuda_gemm.cu, ops_cuda_train.cu) share: the context, the launch
 * shapes, the error helpers and the warp reductions. Device functions are
 * here because the library is built without separable compilation: a
 * kernel can only call device code of its own translation unit. Not
 * installed.
 */
#ifndef TFT_OPS_CUDA_INTERNAL_H
#define TFT_OPS_CUDA_INTERNAL_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "tft_cuda_err.h"
#include "tft_ops_cuda.h"

#define TPB 256          /* threads per block */
#define WARPS (TPB / 32) /* rows per block in row kernels */
#define MAX_BLOCKS 4096u /* grid-stride cap */

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

static inline int fail_cuda(tft_cuda_ops *x, cudaError_t e, const char *what)
{
    return tft_cuda_err(x->err, sizeof x->err, e, what);
}

static inline int fail_blas(tft_cuda_ops *x, cublasStatus_t s, const char *what)
{
    snprintf(x->err, sizeof x->err, "%s: cuBLAS status %d", what, (int)s);
    return -EIO;
}

/* After a launch: 0, or -EIO naming the op. */
static inline int launched(tft_cuda_ops *x, const char *what)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : fail_cuda(x, e, what);
}

static inline unsigned grid_for(size_t n)
{
    size_t b = (n + TPB - 1) / TPB;
    return (unsigned)(b == 0 ? 1 : b > MAX_BLOCKS ? MAX_BLOCKS : b);
}

static inline unsigned rows_grid(int rows)
{
    return (unsigned)((rows + WARPS - 1) / WARPS);
}

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

__device__ static inline double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return __shfl_sync(0xffffffffu, v, 0);
}

/* The CPU's running maximum (s > max replaces; NaN never does), per lane,
 * then across lanes; lane 0's result for all. */
__device__ static inline float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = u > v ? u : v;
    }
    return __shfl_sync(0xffffffffu, v, 0);
}

/* The maximum of row s (n elements) as the CPU's loop finds it (s > max
 * replaces; NaN never does): lane `lane` takes every 32nd element, then
 * warp_max; the same value in every lane. Softmax and cross-entropy rows. */
__device__ static inline float row_max(const float *s, int n, int lane)
{
    float maxv = -INFINITY;
    for (int j = lane; j < n; j += 32)
        if (s[j] > maxv)
            maxv = s[j];
    return warp_max(maxv);
}

/* ops_cuda.cu: the column sums of LayerNorm's backward (k_colsum) over N
 * rows of C columns; with inp NULL only db (the matmul's dbias). what
 * names the op in an error. */
int ops_cuda_colsum(tft_cuda_ops *x, float *dw, float *db, const float *dout, const float *inp, const float *mean,
                    const float *rstd, int N, int C, const char *what);

#endif /* TFT_OPS_CUDA_INTERNAL_H */
