/*
 * interpose_cuda.c — the CUDA side of libtftrace.so (built with the CUDA
 * toolkit's headers, TFT_HAVE_CUDA; linked with no CUDA library):
 *   - the plugin's questions (tft_cuda_plugin.h): whether CUDA records are
 *     wanted, and its own calls kept out of the interposers; its
 *     registration and the device-statistics queue: devq.c;
 *   - LD_PRELOAD interposers for cuBLAS (cublasSgemm_v2, cublasDgemm_v2,
 *     cublasGemmEx, cublasSgemmStridedBatched, cublasGemmStridedBatchedEx)
 *     and cuBLASLt (cublasLtMatmul): one GEMM op per call, its A and B as
 *     input tensors and C (Lt: D) as output, with the GEMM attributes of
 *     FORMAT.md §5.3 (layout 1: cuBLAS is column-major).
 * NCCL: interpose_nccl.c. NVTX: interpose_nvtx.c.
 *
 * Shapes are the matrices as stored, row-major view, like the cblas
 * interposer: a column-major M x N matrix is recorded as [N, M] (a
 * strided batch as [batch, N, M]). Each wrapper calls the real function with
 * the caller's arguments and returns its status unchanged; recording runs
 * only after a successful call, inside the re-entry guard, with errno kept.
 * When the real function cannot be found the wrappers return
 * CUBLAS_STATUS_NOT_INITIALIZED.
 */
#include "interpose_cuda_internal.h"
#include "tft_stats.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the plugin ------------------------------------------------------------ */

int tft_x_cuda_wanted(void)
{
    ip_depth++;
    int on = ip_active();
    ip_depth--;
    return on;
}

void tft_x_cuda_quiet(int quiet)
{
    if (quiet)
        ip_depth++;
    else if (ip_depth > 0)
        ip_depth--;
}

/* ---- cuBLAS ------------------------------------------------------------------ */

/* tft dtype of a cudaDataType, -1 when we have none. */
static int map_cuda_dtype(int t)
{
    switch (t) {
    case CUDA_R_32F: return TFT_F32;
    case CUDA_R_64F: return TFT_F64;
    case CUDA_R_16F: return TFT_F16;
    case CUDA_R_16BF: return TFT_BF16;
    case CUDA_R_32I: return TFT_I32;
    case CUDA_R_8I: return TFT_I8;
    case CUDA_R_8U: return TFT_U8;
#if CUDART_VERSION >= 11080 /* cudaDataType's fp8 members came with CUDA 11.8 */
    case CUDA_R_8F_E4M3: return TFT_F8E4M3;
    case CUDA_R_8F_E5M2: return TFT_F8E5M2;
#endif
    default: return -1;
    }
}

/* A scalar of cudaDataType t at host address p, as a double; 0 when the
 * type is not a real one we know. */
static double host_scalar(const void *p, int t)
{
    if (!p)
        return 0;
    switch (t) {
    case CUDA_R_32F: { float v; memcpy(&v, p, 4); return v; }
    case CUDA_R_64F: { double v; memcpy(&v, p, 8); return v; }
    case CUDA_R_16F: { uint16_t v; memcpy(&v, p, 2); return tft_f16_to_f32(v); }
    case CUDA_R_16BF: { uint16_t v; memcpy(&v, p, 2); return tft_bf16_to_f32(v); }
    case CUDA_R_32I: { int32_t v; memcpy(&v, p, 4); return v; }
    default: return 0;
    }
}

/* Type of alpha and beta for a cublasComputeType_t. */
static int scale_type(int compute)
{
    switch (compute) {
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC: return CUDA_R_64F;
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC: return CUDA_R_16F;
    case CUBLAS_COMPUTE_32I:
    case CUBLAS_COMPUTE_32I_PEDANTIC: return CUDA_R_32I;
    default: return CUDA_R_32F;
    }
}

static int64_t f64_bits(double v)
{
    int64_t b;
    memcpy(&b, &v, sizeof(b));
    return b;
}

/* A column-major GEMM: C (m x n) = alpha op(A) op(B) + beta C, batched. */
typedef struct gemm_call {
    const char *name, *name_a, *name_b;
    int ta, tb;                  /* 1 when op(X) transposes X */
    int64_t m, n, k;
    int dt_a, dt_b, dt_c;        /* tft dtypes, -1 unknown */
    const void *a, *b, *c;
    int64_t lda, ldb, ldc;
    int64_t batch, sa, sb, sc;   /* batch count (1: none) and element strides */
    int have_scalars;            /* alpha, beta known (host pointer mode) */
    double alpha, beta;
} gemm_call;

/* A stored column-major matrix of rows x cols as a devq tensor. */
static void col_tensor(devq_tensor *t, const char *name, int dtype, const void *p, int64_t rows, int64_t cols,
                       int64_t ld, int64_t batch, int64_t stride)
{
    t->name = name;
    t->dtype = dtype;
    int d = 0;
    if (batch > 1)
        t->shape[d++] = batch;
    t->shape[d++] = cols;
    t->shape[d++] = rows;
    t->ndim = d;
    int ok = rows >= 0 && cols >= 0 && ld >= (rows > 1 ? rows : 1) && batch >= 1 && stride >= 0;
    t->mem = (tft_cuda_tensor){.ptr = ok ? p : NULL, .dtype = dtype, .rows = (uint64_t)(ok ? rows : 0),
                               .cols = (uint64_t)(ok ? cols : 0), .ld = (uint64_t)(ok ? ld : 0),
                               .batch = (uint64_t)(ok ? batch : 1), .stride = (uint64_t)(ok ? stride : 0)};
}

static void record_gemm(const gemm_call *g, void *stream)
{
    devq_call c;
    memset(&c, 0, sizeof(c));
    c.kind = DEVQ_OP;
    c.op_name = g->name;
    c.op_kind = TFT_OP_GEMM;
    c.nt = 3;
    /* op(A) is m x k: A is stored k x m when transposed. */
    col_tensor(&c.t[0], g->name_a, g->dt_a, g->a, g->ta ? g->k : g->m, g->ta ? g->m : g->k, g->lda, g->batch,
               g->sa);
    col_tensor(&c.t[1], g->name_b, g->dt_b, g->b, g->tb ? g->n : g->k, g->tb ? g->k : g->n, g->ldb, g->batch,
               g->sb);
    col_tensor(&c.t[2], g->name, g->dt_c, g->c, g->m, g->n, g->ldc, g->batch, g->sc);
    int64_t attr[12] = {g->m, g->n, g->k, g->ta, g->tb, g->dt_c, 1, g->lda, g->ldb, g->ldc,
                        f64_bits(g->alpha), f64_bits(g->beta)};
    c.n_attr = g->have_scalars ? 12 : 10;
    memcpy(c.attr, attr, sizeof(attr));
    devq_submit(&c, stream, -1);
}

/* The handle's stream and whether alpha/beta are host pointers. */
static void *handle_stream(cublasHandle_t h, int *host_scalars)
{
    static void *_Atomic gs, *_Atomic gp;
    __typeof__(&cublasGetStream_v2) get_stream = (__typeof__(&cublasGetStream_v2))ip_real_cached(
        &gs, "cublasGetStream_v2");
    __typeof__(&cublasGetPointerMode_v2) get_mode = (__typeof__(&cublasGetPointerMode_v2))ip_real_cached(
        &gp, "cublasGetPointerMode_v2");
    cudaStream_t s = NULL;
    if (!get_stream || get_stream(h, &s) != CUBLAS_STATUS_SUCCESS)
        s = NULL;
    cublasPointerMode_t m = CUBLAS_POINTER_MODE_DEVICE;
    *host_scalars = get_mode && get_mode(h, &m) == CUBLAS_STATUS_SUCCESS && m == CUBLAS_POINTER_MODE_HOST;
    return (void *)s;
}

static int is_trans(cublasOperation_t op) { return op != CUBLAS_OP_N; }

/* The common tail of the cuBLAS wrappers: called after a successful real
 * call, inside the guard. */
static void after_cublas(cublasHandle_t h, gemm_call *g, const void *alpha, const void *beta, int stype)
{
    int saved = errno;
    if (ip_active()) {
        int host = 0;
        void *stream = handle_stream(h, &host);
        g->have_scalars = host;
        if (host) {
            g->alpha = host_scalar(alpha, stype);
            g->beta = host_scalar(beta, stype);
        }
        record_gemm(g, stream);
    }
    errno = saved;
}


TFT_INTERPOSE cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                            int m, int n, int k, const float *alpha, const float *A, int lda,
                                            const float *B, int ldb, const float *beta, float *C, int ldc)
{
    static void *_Atomic fn_cache;
    REAL(fn, cublasSgemm_v2);
    if (!fn)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (ip_depth)
        return fn(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    ip_depth++;
    cublasStatus_t st = fn(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    if (st == CUBLAS_STATUS_SUCCESS) {
        gemm_call g = {"cublasSgemm", "cublasSgemm.A", "cublasSgemm.B", is_trans(transa), is_trans(transb),
                       m, n, k, TFT_F32, TFT_F32, TFT_F32, A, B, C, lda, ldb, ldc, 1, 0, 0, 0, 0, 0, 0};
        after_cublas(handle, &g, alpha, beta, CUDA_R_32F);
    }
    ip_depth--;
    return st;
}

TFT_INTERPOSE cublasStatus_t cublasDgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                            int m, int n, int k, const double *alpha, const double *A, int lda,
                                            const double *B, int ldb, const double *beta, double *C, int ldc)
{
    static void *_Atomic fn_cache;
    REAL(fn, cublasDgemm_v2);
    if (!fn)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (ip_depth)
        return fn(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    ip_depth++;
    cublasStatus_t st = fn(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    if (st == CUBLAS_STATUS_SUCCESS) {
        gemm_call g = {"cublasDgemm", "cublasDgemm.A", "cublasDgemm.B", is_trans(transa), is_trans(transb),
                       m, n, k, TFT_F64, TFT_F64, TFT_F64, A, B, C, lda, ldb, ldc, 1, 0, 0, 0, 0, 0, 0};
        after_cublas(handle, &g, alpha, beta, CUDA_R_64F);
    }
    ip_depth--;
    return st;
}

TFT_INTERPOSE cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                          int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
                                          const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
                                          cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                          cublasGemmAlgo_t algo)
{
    static void *_Atomic fn_cache;
    REAL(fn, cublasGemmEx);
    if (!fn)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (ip_depth)
        return fn(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                  computeType, algo);
    ip_depth++;
    cublasStatus_t st = fn(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype,
                           ldc, computeType, algo);
    if (st == CUBLAS_STATUS_SUCCESS) {
        gemm_call g = {"cublasGemmEx", "cublasGemmEx.A", "cublasGemmEx.B", is_trans(transa), is_trans(transb),
                       m, n, k, map_cuda_dtype(Atype), map_cuda_dtype(Btype), map_cuda_dtype(Ctype), A, B, C,
                       lda, ldb, ldc, 1, 0, 0, 0, 0, 0, 0};
        after_cublas(handle, &g, alpha, beta, scale_type(computeType));
    }
    ip_depth--;
    return st;
}

TFT_INTERPOSE cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                                       cublasOperation_t transb, int m, int n, int k, const float *alpha,
                                                       const float *A, int lda, long long strideA, const float *B,
                                                       int ldb, long long strideB, const float *beta, float *C, int ldc,
                                                       long long strideC, int batchCount)
{
    static void *_Atomic fn_cache;
    REAL(fn, cublasSgemmStridedBatched);
    if (!fn)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (ip_depth)
        return fn(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc,
                  strideC, batchCount);
    ip_depth++;
    cublasStatus_t st = fn(handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C,
                           ldc, strideC, batchCount);
    if (st == CUBLAS_STATUS_SUCCESS) {
        gemm_call g = {"cublasSgemmStridedBatched", "cublasSgemmStridedBatched.A", "cublasSgemmStridedBatched.B",
                       is_trans(transa), is_trans(transb), m, n, k, TFT_F32, TFT_F32, TFT_F32, A, B, C, lda, ldb,
                       ldc, batchCount, strideA, strideB, strideC, 0, 0, 0};
        after_cublas(handle, &g, alpha, beta, CUDA_R_32F);
    }
    ip_depth--;
    return st;
}

TFT_INTERPOSE cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                                        cublasOperation_t transb, int m, int n, int k, const void *alpha,
                                                        const void *A, cudaDataType Atype, int lda, long long strideA,
                                                        const void *B, cudaDataType Btype, int ldb, long long strideB,
                                                        const void *beta, void *C, cudaDataType Ctype, int ldc,
                                                        long long strideC, int batchCount,
                                                        cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    static void *_Atomic fn_cache;
    REAL(fn, cublasGemmStridedBatchedEx);
    if (!fn)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (ip_depth)
        return fn(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C,
                  Ctype, ldc, strideC, batchCount, computeType, algo);
    ip_depth++;
    cublasStatus_t st = fn(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB,
                           beta, C, Ctype, ldc, strideC, batchCount, computeType, algo);
    if (st == CUBLAS_STATUS_SUCCESS) {
        gemm_call g = {"cublasGemmStridedBatchedEx", "cublasGemmStridedBatchedEx.A",
                       "cublasGemmStridedBatchedEx.B", is_trans(transa), is_trans(transb), m, n, k,
                       map_cuda_dtype(Atype), map_cuda_dtype(Btype), map_cuda_dtype(Ctype), A, B, C, lda, ldb,
                       ldc, batchCount, strideA, strideB, strideC, 0, 0, 0};
        after_cublas(handle, &g, alpha, beta, scale_type(computeType));
    }
    ip_depth--;
    return st;
}

/* ---- cuBLASLt ---------------------------------------------------------------- */

/* What a matrix layout says. */
typedef struct lt_layout {
    int ok;
    int dtype;          /* tft dtype, -1 unknown */
    int order;          /* cublasLtOrder_t */
    uint64_t rows, cols;
    int64_t ld, stride;
    int32_t batch;
} lt_layout;

static int lt_attr(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a, void *buf, size_t n)
{
    static void *_Atomic get_cache;
    REAL(get, cublasLtMatrixLayoutGetAttribute);
    size_t written = 0;
    return get && get(l, a, buf, n, &written) == CUBLAS_STATUS_SUCCESS && written == n;
}

static lt_layout lt_read(cublasLtMatrixLayout_t l)
{
    lt_layout r = {.order = CUBLASLT_ORDER_COL, .batch = 1};
    uint32_t type = 0;
    r.ok = l && lt_attr(l, CUBLASLT_MATRIX_LAYOUT_TYPE, &type, sizeof(type)) &&
           lt_attr(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &r.rows, sizeof(r.rows)) &&
           lt_attr(l, CUBLASLT_MATRIX_LAYOUT_COLS, &r.cols, sizeof(r.cols)) &&
           lt_attr(l, CUBLASLT_MATRIX_LAYOUT_LD, &r.ld, sizeof(r.ld));
    if (!r.ok)
        return r;
    int32_t order = CUBLASLT_ORDER_COL;
    if (lt_attr(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof(order)))
        r.order = order;
    if (!lt_attr(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &r.batch, sizeof(r.batch)) || r.batch < 1)
        r.batch = 1;
    if (!lt_attr(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &r.stride, sizeof(r.stride)))
        r.stride = 0;
    r.dtype = map_cuda_dtype((int)type);
    return r;
}

/* A matrix of an Lt layout as a devq tensor: column order like cuBLAS, row
 * order with the rows contiguous, other (tiled) orders shape only. */
static void lt_tensor(devq_tensor *t, const char *name, const void *p, const lt_layout *l)
{
    if (l->order == CUBLASLT_ORDER_ROW) {
        col_tensor(t, name, l->dtype, p, (int64_t)l->cols, (int64_t)l->rows, l->ld, l->batch, l->stride);
    } else {
        col_tensor(t, name, l->dtype, p, (int64_t)l->rows, (int64_t)l->cols, l->ld, l->batch, l->stride);
        if (l->order != CUBLASLT_ORDER_COL)
            t->mem.ptr = NULL;
    }
}

static int lt_desc_i32(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, int32_t dflt)
{
    static void *_Atomic get_cache;
    REAL(get, cublasLtMatmulDescGetAttribute);
    int32_t v = dflt;
    size_t written = 0;
    if (!get || get(d, a, &v, sizeof(v), &written) != CUBLAS_STATUS_SUCCESS || written != sizeof(v))
        return dflt;
    return v;
}

static void record_lt(cublasLtMatmulDesc_t desc, const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                      const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta, void *D,
                      cublasLtMatrixLayout_t Ddesc, void *stream)
{
    lt_layout la = lt_read(Adesc), lb = lt_read(Bdesc), ld = lt_read(Ddesc);
    if (!la.ok || !lb.ok || !ld.ok)
        return;
    int ta = lt_desc_i32(desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N) != CUBLAS_OP_N;
    int tb = lt_desc_i32(desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N) != CUBLAS_OP_N;
    int host = lt_desc_i32(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_POINTER_MODE_HOST) ==
               CUBLASLT_POINTER_MODE_HOST;
    int stype = lt_desc_i32(desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, CUDA_R_32F);
    devq_call c;
    memset(&c, 0, sizeof(c));
    c.kind = DEVQ_OP;
    c.op_name = "cublasLtMatmul";
    c.op_kind = TFT_OP_GEMM;
    c.nt = 3;
    lt_tensor(&c.t[0], "cublasLtMatmul.A", A, &la);
    lt_tensor(&c.t[1], "cublasLtMatmul.B", B, &lb);
    lt_tensor(&c.t[2], "cublasLtMatmul", D, &ld);
    int64_t k = (int64_t)(ta ? la.rows : la.cols);
    double a = host ? host_scalar(alpha, stype) : 0, b = host ? host_scalar(beta, stype) : 0;
    int64_t attr[12] = {(int64_t)ld.rows, (int64_t)ld.cols, k, ta, tb, ld.dtype,
                        ld.order == CUBLASLT_ORDER_ROW ? 0 : 1, la.ld, lb.ld, ld.ld, f64_bits(a), f64_bits(b)};
    c.n_attr = host ? 12 : 10;
    memcpy(c.attr, attr, sizeof(attr));
    devq_submit(&c, stream, -1);
}

TFT_INTERPOSE cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                                            const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                                            cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                                            cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                                            const cublasLtMatmulAlgo_t *algo, void *workspace,
                                            size_t workspaceSizeInBytes, cudaStream_t stream)
{
    static void *_Atomic fn_cache;
    REAL(fn, cublasLtMatmul);
    if (!fn)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (ip_depth)
        return fn(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
                  workspaceSizeInBytes, stream);
    ip_depth++;
    cublasStatus_t st = fn(lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo,
                           workspace, workspaceSizeInBytes, stream);
    if (st == CUBLAS_STATUS_SUCCESS) {
        int saved = errno;
        if (ip_active())
            record_lt(computeDesc, alpha, A, Adesc, B, Bdesc, beta, D, Ddesc, (void *)stream);
        errno = saved;
    }
    ip_depth--;
    return st;
}
