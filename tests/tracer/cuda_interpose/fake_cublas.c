/*
 * fake_cublas.c — a stand-in for libcublas/libcublasLt on machines without a
 * GPU (libtft_fake_cublas.so): the handful of entry points fake_prog.c
 * calls, with the real headers' prototypes, computing on host memory (the
 * "device" pointers are host pointers). Column-major, f32 only; enough for
 * the interposers to see real calls with real arguments and results.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>

struct cublasContext {
    cudaStream_t stream;
    cublasPointerMode_t mode;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    *h = calloc(1, sizeof(**h));
    return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t h, cudaStream_t *s)
{
    *s = h->stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t *m)
{
    *m = h->mode;
    return CUBLAS_STATUS_SUCCESS;
}

/* C = alpha op(A) op(B) + beta C, column-major. */
static void gemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, long lda, const float *b,
                 long ldb, float beta, float *c, long ldc)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float s = 0;
            for (int l = 0; l < k; l++)
                s += (ta ? a[l + i * lda] : a[i + l * lda]) * (tb ? b[j + l * ldb] : b[l + j * ldb]);
            c[i + j * ldc] = alpha * s + (beta != 0 ? beta * c[i + j * ldc] : 0);
        }
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                              int n, int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                              const float *beta, float *C, int ldc)
{
    gemm(transa != CUBLAS_OP_N, transb != CUBLAS_OP_N, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    if (Atype != CUDA_R_32F || Btype != CUDA_R_32F || Ctype != CUDA_R_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    gemm(transa != CUBLAS_OP_N, transb != CUBLAS_OP_N, m, n, k, *(const float *)alpha, A, lda, B, ldb,
         *(const float *)beta, C, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const float *alpha, const float *A, int lda,
                                         long long strideA, const float *B, int ldb, long long strideB,
                                         const float *beta, float *C, int ldc, long long strideC, int batchCount)
{
    for (int i = 0; i < batchCount; i++)
        gemm(transa != CUBLAS_OP_N, transb != CUBLAS_OP_N, m, n, k, *alpha, A + i * strideA, lda, B + i * strideB,
             ldb, *beta, C + i * strideC, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long strideA, const void *B, cudaDataType Btype, int ldb,
                                          long long strideB, const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long strideC, int batchCount, cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo)
{
    if (Atype != CUDA_R_32F || Btype != CUDA_R_32F || Ctype != CUDA_R_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    return cublasSgemmStridedBatched(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta,
                                     C, ldc, strideC, batchCount);
}

/* ---- cuBLASLt: descriptors keep their attributes in the opaque words ------ */

struct cublasLtContext {
    int unused;
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    *h = calloc(1, sizeof(**h));
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

/* layout words: type, rows, cols, ld, order, batch, stride */
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld)
{
    *l = calloc(1, sizeof(**l));
    (*l)->data[0] = (uint64_t)type;
    (*l)->data[1] = rows;
    (*l)->data[2] = cols;
    (*l)->data[3] = (uint64_t)ld;
    (*l)->data[4] = CUBLASLT_ORDER_COL;
    (*l)->data[5] = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
    free(l);
    return CUBLAS_STATUS_SUCCESS;
}

static int layout_word(cublasLtMatrixLayoutAttribute_t a, size_t *size)
{
    switch (a) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: *size = 4; return 0;
    case CUBLASLT_MATRIX_LAYOUT_ROWS: *size = 8; return 1;
    case CUBLASLT_MATRIX_LAYOUT_COLS: *size = 8; return 2;
    case CUBLASLT_MATRIX_LAYOUT_LD: *size = 8; return 3;
    case CUBLASLT_MATRIX_LAYOUT_ORDER: *size = 4; return 4;
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: *size = 4; return 5;
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: *size = 8; return 6;
    default: return -1;
    }
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t n)
{
    size_t size;
    int w = layout_word(attr, &size);
    if (w < 0 || n != size)
        return CUBLAS_STATUS_INVALID_VALUE;
    uint64_t v = 0;
    memcpy(&v, buf, n); /* little-endian */
    l->data[w] = v;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                void *buf, size_t n, size_t *written)
{
    size_t size;
    int w = layout_word(attr, &size);
    if (w < 0 || n < size)
        return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(buf, &l->data[w], size);
    *written = size;
    return CUBLAS_STATUS_SUCCESS;
}

/* matmul words: compute, scale type, transa, transb, pointer mode */
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute,
                                        cudaDataType_t scale)
{
    *d = calloc(1, sizeof(**d));
    (*d)->data[0] = (uint64_t)compute;
    (*d)->data[1] = (uint64_t)scale;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
    free(d);
    return CUBLAS_STATUS_SUCCESS;
}

static int desc_word(cublasLtMatmulDescAttributes_t a)
{
    switch (a) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return 0;
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return 1;
    case CUBLASLT_MATMUL_DESC_TRANSA: return 2;
    case CUBLASLT_MATMUL_DESC_TRANSB: return 3;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return 4;
    default: return -1;
    }
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t n)
{
    int w = desc_word(attr);
    if (w < 0 || n != 4)
        return CUBLAS_STATUS_INVALID_VALUE;
    int32_t v;
    memcpy(&v, buf, 4);
    d->data[w] = (uint64_t)(int64_t)v;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, void *buf,
                                              size_t n, size_t *written)
{
    int w = desc_word(attr);
    if (w < 0 || n < 4)
        return CUBLAS_STATUS_INVALID_VALUE;
    int32_t v = (int32_t)d->data[w];
    memcpy(buf, &v, 4);
    *written = 4;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                              cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                              cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSizeInBytes,
                              cudaStream_t stream)
{
    if (Adesc->data[4] != CUBLASLT_ORDER_COL || Ddesc->data[0] != CUDA_R_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    int ta = computeDesc->data[2] != CUBLAS_OP_N, tb = computeDesc->data[3] != CUBLAS_OP_N;
    int m = (int)Ddesc->data[1], n = (int)Ddesc->data[2], k = (int)(ta ? Adesc->data[1] : Adesc->data[2]);
    if (C != D)
        for (int j = 0; j < n; j++)
            memcpy((float *)D + j * (long)Ddesc->data[3], (const float *)C + j * (long)Cdesc->data[3],
                   sizeof(float) * (size_t)m);
    gemm(ta, tb, m, n, k, *(const float *)alpha, A, (long)Adesc->data[3], B, (long)Bdesc->data[3],
         *(const float *)beta, D, (long)Ddesc->data[3]);
    return CUBLAS_STATUS_SUCCESS;
}
