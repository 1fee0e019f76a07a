/*
 * fake_prog.c — an unmodified cuBLAS/cuBLASLt/NCCL program for the
 * interposer tests without a GPU, linked with the fake libraries
 * (fake_cublas.c, fake_nccl.c: host memory stands for device memory).
 * When FAKE_PLUGIN names a library, it is loaded and its
 * InitializeInjection called, as the CUDA driver would do for
 * CUDA_INJECTION64_PATH.
 *
 * STEPS NVTX "step" ranges; each: cublasSgemm_v2 (C 5 x 4 = A 5 x 3 B 3 x 4,
 * ldc 7 with -99 in the padding rows), cublasGemmEx (A transposed),
 * cublasSgemmStridedBatched (2 matrices), cublasLtMatmul; then NCCL on
 * communicators c0 and c1 (ranks 0 and 1 of one 2-rank communicator: the
 * same unique id) and c2 (another id, 1 rank): an ncclAllReduce (sum) on c0
 * and on c1, then a group of ncclBroadcast (c0), ncclSend (c2),
 * ncclAllReduce (max, c2), ncclReduceScatter (c0), ncclSend/ncclRecv (c0).
 * --plant S adds 1 to A[0]
 * in step S. Prints a checksum of the results.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 4
enum { M = 5, N = 4, K = 3, LDC = 7, COUNT = 8 };

static void must(int ok, const char *what)
{
    if (!ok) {
        printf("error: %s\n", what);
        exit(3);
    }
}

static void load_plugin(void)
{
    const char *p = getenv("FAKE_PLUGIN");
    if (!p || !*p)
        return;
    void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    must(h != NULL, dlerror());
    int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
    must(init && init(), "InitializeInjection");
}

static double gemms(cublasHandle_t h, cublasLtHandle_t lt, int step, int plant)
{
    static float a[2 * M * K], b[2 * K * N], c[2 * LDC * N];
    for (int i = 0; i < 2 * M * K; i++)
        a[i] = (float)((i * 7 + step) % 11) * 0.25f;
    for (int i = 0; i < 2 * K * N; i++)
        b[i] = (float)((i * 5 + step) % 13) * 0.5f - 1.0f;
    for (int i = 0; i < 2 * LDC * N; i++)
        c[i] = -99.0f;
    if (step == plant)
        a[0] += 1.0f;
    const float one = 1, zero = 0;
    double s = 0;
    must(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, a, M, b, K, &zero, c, LDC) == 0, "sgemm");
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++)
            s += c[i + j * LDC];
    /* A read as K x M, transposed */
    must(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &one, a, CUDA_R_32F, K, b, CUDA_R_32F, K, &zero, c,
                      CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == 0,
         "gemmex");
    for (int i = 0; i < M * N; i++)
        s += c[i];
    must(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, a, M, M * K, b, K, K * N, &zero, c, M,
                                   M * N, 2) == 0,
         "strided");
    for (int i = 0; i < 2 * M * N; i++)
        s += c[i];
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    /* one check each: a failed one exits, so every layout used below was made */
    must(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == 0, "lt matmul descriptor");
    must(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, M, K, M) == 0, "lt layout A");
    must(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, K, N, K) == 0, "lt layout B");
    must(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, M, N, M) == 0, "lt layout D");
    must(cublasLtMatmul(lt, op, &one, a, la, b, lb, &zero, c, ld, c, ld, NULL, NULL, 0, NULL) == 0, "ltmatmul");
    for (int i = 0; i < M * N; i++)
        s += c[i];
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    return s;
}

static double collectives(ncclComm_t c0, ncclComm_t c1, ncclComm_t c2, int step)
{
    static float x[2 * COUNT], y[2 * COUNT], z[COUNT];
    for (int i = 0; i < 2 * COUNT; i++)
        x[i] = (float)(i % 5 + step);
    double s = 0;
    must(ncclAllReduce(x, y, COUNT, ncclFloat, ncclSum, c0, NULL) == 0, "allreduce c0");
    must(ncclAllReduce(x, y + COUNT, COUNT, ncclFloat, ncclSum, c1, NULL) == 0, "allreduce c1");
    for (int i = 0; i < 2 * COUNT; i++)
        s += y[i];
    must(ncclGroupStart() == 0, "group start");
    must(ncclBroadcast(x, y, COUNT, ncclFloat, 0, c0, NULL) == 0, "broadcast");
    /* a send of c2's only rank to itself: must not shift c2's collectives */
    must(ncclSend(x, COUNT, ncclFloat, 0, c2, NULL) == 0, "send c2");
    must(ncclAllReduce(x, z, COUNT, ncclFloat, ncclMax, c2, NULL) == 0, "allreduce c2");
    must(ncclReduceScatter(x, y + COUNT, COUNT, ncclFloat, ncclSum, c0, NULL) == 0, "reduce_scatter");
    must(ncclSend(x, COUNT, ncclFloat, 1, c0, NULL) == 0 && ncclRecv(y, COUNT, ncclFloat, 1, c0, NULL) == 0, "p2p");
    must(ncclGroupEnd() == 0, "group end");
    for (int i = 0; i < COUNT; i++)
        s += z[i] + y[COUNT + i];
    return s;
}

int main(int argc, char **argv)
{
    int plant = argc == 3 && !strcmp(argv[1], "--plant") ? atoi(argv[2]) : -1;
    load_plugin();
    cublasHandle_t h;
    cublasLtHandle_t lt;
    must(cublasCreate(&h) == 0 && cublasLtCreate(&lt) == 0, "create");
    ncclUniqueId id, id2;
    ncclComm_t c0, c1, c2;
    must(ncclGetUniqueId(&id) == 0 && ncclGetUniqueId(&id2) == 0, "unique id");
    must(ncclCommInitRank(&c0, 2, id, 0) == 0 && ncclCommInitRank(&c1, 2, id, 1) == 0 &&
             ncclCommInitRank(&c2, 1, id2, 0) == 0,
         "comm init");
    double sum = 0;
    for (int s = 0; s < STEPS; s++) {
        nvtxRangePushA("step");
        sum += gemms(h, lt, s, plant);
        sum += collectives(c0, c1, c2, s);
        nvtxRangePop();
    }
    printf("checksum %.4f\n", sum);
    ncclCommDestroy(c0);
    ncclCommDestroy(c1);
    ncclCommDestroy(c2);
    cublasLtDestroy(lt);
    cublasDestroy(h);
    return 0;
}
