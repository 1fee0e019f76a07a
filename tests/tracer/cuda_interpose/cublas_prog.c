/*
 * cublas_prog.c — an unmodified cuBLAS/cuBLASLt program for the cuBLAS
 * interposers: STEPS NVTX "step" ranges, each running cublasSgemm_v2 (C =
 * A B, 64 x 48 x 32, column-major), cublasGemmEx (f32, A transposed),
 * cublasSgemmStridedBatched (4 matrices) and cublasLtMatmul (the same
 * product as the first). --plant S adds 1 to A[0] before step S's first
 * GEMM (the difference tfdiff must name). Prints a checksum of every
 * result; on a CUDA or cuBLAS error (no device, no driver) prints it and
 * exits with status 3, the same with and without tftrace.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 4
#define BATCH 4
enum { M = 64, N = 48, K = 32 };

static int cu(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    printf("cuda error in %s: %s\n", what, cudaGetErrorString(e));
    return 1;
}

static int cb(cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 0;
    printf("cublas error in %s: %d\n", what, (int)s);
    return 1;
}

static double dsum(const float *d, int n)
{
    static float h[M * N * BATCH];
    if (cu(cudaMemcpy(h, d, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost), "cudaMemcpy"))
        exit(3);
    double s = 0;
    for (int i = 0; i < n; i++)
        s += h[i];
    return s;
}

/* Sets D = A B with cublasLt (column-major, no transposes). */
static int lt_gemm(cublasLtHandle_t lt, const float *a, const float *b, float *d, cudaStream_t st)
{
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    if (cb(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate") ||
        cb(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, M, K, M), "layout A") ||
        cb(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, K, N, K), "layout B") ||
        cb(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, M, N, M), "layout D"))
        return 1;
    float one = 1, zero = 0;
    int bad = cb(cublasLtMatmul(lt, op, &one, a, la, b, lb, &zero, d, ld, d, ld, NULL, NULL, 0, st),
                 "cublasLtMatmul");
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    return bad;
}

int main(int argc, char **argv)
{
    int plant = argc == 3 && !strcmp(argv[1], "--plant") ? atoi(argv[2]) : -1;
    cublasHandle_t h;
    cublasLtHandle_t lt;
    if (cb(cublasCreate(&h), "cublasCreate") || cb(cublasLtCreate(&lt), "cublasLtCreate"))
        return 3;
    float *a, *b, *c;
    size_t big = sizeof(float) * M * N * BATCH;
    if (cu(cudaMalloc((void **)&a, big), "cudaMalloc") || cu(cudaMalloc((void **)&b, big), "cudaMalloc") ||
        cu(cudaMalloc((void **)&c, big), "cudaMalloc"))
        return 3;
    static float ha[M * N * BATCH], hb[M * N * BATCH];
    double sum = 0;
    const float one = 1, zero = 0;
    for (int s = 0; s < STEPS; s++) {
        nvtxRangePushA("step");
        for (int i = 0; i < M * N * BATCH; i++) {
            ha[i] = (float)((i * 7 + s) % 13) * 0.125f - 0.5f;
            hb[i] = (float)((i * 3 + 2 * s) % 11) * 0.25f - 1.0f;
        }
        if (s == plant)
            ha[0] += 1.0f;
        if (cu(cudaMemcpy(a, ha, big, cudaMemcpyHostToDevice), "cudaMemcpy") ||
            cu(cudaMemcpy(b, hb, big, cudaMemcpyHostToDevice), "cudaMemcpy"))
            return 3;
        if (cb(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, a, M, b, K, &zero, c, M), "cublasSgemm"))
            return 3;
        sum += dsum(c, M * N);
        if (cb(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &one, a, CUDA_R_32F, K, b, CUDA_R_32F, K, &zero,
                            c, CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx"))
            return 3;
        sum += dsum(c, M * N);
        if (cb(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, a, M, (long long)M * K, b, K,
                                         (long long)K * N, &zero, c, M, (long long)M * N, BATCH),
               "cublasSgemmStridedBatched"))
            return 3;
        sum += dsum(c, M * N * BATCH);
        if (lt_gemm(lt, a, b, c, NULL))
            return 3;
        sum += dsum(c, M * N);
        nvtxRangePop();
    }
    printf("checksum %.3f\n", sum);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    cublasLtDestroy(lt);
    cublasDestroy(h);
    return 0;
}
