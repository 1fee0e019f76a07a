/*
 * gemm_map.h — a row-major GEMM expressed as a column-major BLAS call
 * (cuBLAS), for ops_cuda.cu. Host-only arithmetic on ints, no CUDA types,
 * so tests/cuda_backend checks it on the CPU against a column-major
 * reference.
 *
 * The runtime's matrices are row-major (tft_ops.h); cuBLAS is column-major.
 * A row-major r x c matrix with leading dimension ld is, read column-major,
 * its c x r transpose with the same ld. So the row-major product
 *
 *     C (m x n) = op(A) (m x k) * op(B) (k x n)
 *
 * is the column-major product
 *
 *     C^T (n x m) = op(B)^T (n x k) * op(A)^T (k x m)
 *
 * that is, the same call with the operands A and B swapped, m and n
 * swapped, and each transpose flag, leading dimension and batch stride kept
 * with its own matrix. No data moves.
 */
#ifndef TFT_GEMM_MAP_H
#define TFT_GEMM_MAP_H

/* A row-major (batched) GEMM: C = alpha op(A) op(B) + beta C, per batch
 * entry i at A + i*stride_a, B + i*stride_b, C + i*stride_c (elements). */
typedef struct gemm_rm {
    int trans_a, trans_b;                   /* 1: op(X) = X^T */
    int m, n, k;                            /* C is m x n, the inner dimension k */
    int lda, ldb, ldc;                      /* row-major leading dimensions */
    long long stride_a, stride_b, stride_c; /* batch strides, elements */
} gemm_rm;

/* The column-major call that computes it: cublasGemm*(handle, trans_1,
 * trans_2, m, n, k, alpha, first, ld_1, second, ld_2, beta, C, ldc), where
 * first is the row-major B and second the row-major A. */
typedef struct gemm_cm {
    int trans_1, trans_2;                   /* transa, transb of the call */
    int m, n, k;
    int ld_1, ld_2, ldc;
    long long stride_1, stride_2, stride_c;
} gemm_cm;

static inline gemm_cm gemm_rm_to_cm(gemm_rm g)
{
    gemm_cm c;
    c.trans_1 = g.trans_b;
    c.trans_2 = g.trans_a;
    c.m = g.n;
    c.n = g.m;
    c.k = g.k;
    c.ld_1 = g.ldb;
    c.ld_2 = g.lda;
    c.ldc = g.ldc;
    c.stride_1 = g.stride_b;
    c.stride_2 = g.stride_a;
    c.stride_c = g.stride_c;
    return c;
}

/* 1 when the row-major leading dimensions can hold the matrices as stored
 * (A is k x m when transposed, else m x k; B is n x k or k x n) and the
 * sizes are positive, else 0. cuBLAS's own checks on the column-major call
 * are then satisfied. */
static inline int gemm_rm_valid(const gemm_rm *g)
{
    if (g->m <= 0 || g->n <= 0 || g->k <= 0)
        return 0;
    int a_cols = g->trans_a ? g->m : g->k, b_cols = g->trans_b ? g->k : g->n;
    return g->lda >= a_cols && g->ldb >= b_cols && g->ldc >= g->n;
}

/* Elements spanned by one operand of a batched GEMM stored row-major:
 * rows x cols with leading dimension ld, nb batch entries stride_b apart
 * and nh more stride_h apart (the runtime's (batch, head) products): the
 * offset one past the last element touched. */
static inline long long gemm_span(int rows, int cols, int ld, long long stride_b, int nb, long long stride_h,
                                  int nh)
{
    return (long long)(nb - 1) * stride_b + (long long)(nh - 1) * stride_h + (long long)(rows - 1) * ld + cols;
}

#endif
