/*
 * gemm_map.h — a row-major GEMM expressed as a column-major BLAS call
 * (cuBLAS), for ops_cuda_gemm.cu. Host-only arithmetic on ints, no CUDA
 * types, so tests/runtime/cuda_backend checks it on the CPU against a
 * column-major reference.
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

/* ---- the runtime's GEMMs over a (batch, head) grid ------------------------ */

/* A row-major GEMM as an op of tft_ops.h uses it: for every entry (b, h) of
 * an nb x nh grid, operand X (0 = A, 1 = B, 2 = C) starts at element
 * off[X] + b * sb[X] + h * sh[X] of its buffer (a plain matmul: nb = nh =
 * 1). The shapes, transposes and leading dimensions are in g (its batch
 * strides are set per call by gemm_plan). */
typedef struct gemm_desc {
    gemm_rm g;
    float alpha, beta;
    long long off[3], sb[3], sh[3];
    int nb, nh;
} gemm_desc;

/* One batched call of a planned desc: the element offsets of its first A,
 * B, C, the strides between its batch entries, and their count. */
typedef struct gemm_call {
    long long off[3], stride[3];
    int batch;
} gemm_call;

/* d as batched calls: the longer of b and h is each call's batch, the
 * shorter one a loop of min(nb, nh) calls; call o of them. */
static inline int gemm_plan_calls(const gemm_desc *d)
{
    return d->nh <= d->nb ? d->nh : d->nb;
}

static inline gemm_call gemm_plan_call(const gemm_desc *d, int o)
{
    int by_h = d->nh <= d->nb; /* one call per head, batched over b */
    gemm_call c;
    for (int x = 0; x < 3; x++) {
        c.off[x] = d->off[x] + (long long)o * (by_h ? d->sh[x] : d->sb[x]);
        c.stride[x] = by_h ? d->sb[x] : d->sh[x];
    }
    c.batch = by_h ? d->nb : d->nh;
    return c;
}

static inline gemm_desc gemm_desc_of(int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc, float alpha,
                                     float beta)
{
    gemm_desc d;
    d.g = (gemm_rm){ta, tb, m, n, k, lda, ldb, ldc, 0, 0, 0};
    d.alpha = alpha;
    d.beta = beta;
    for (int x = 0; x < 3; x++)
        d.off[x] = d.sb[x] = d.sh[x] = 0;
    d.nb = d.nh = 1;
    return d;
}

/* (b, h) layout of operand x: offset, batch stride, head stride. */
static inline void gemm_desc_bh(gemm_desc *d, int x, long long off, long long sb, long long sh)
{
    d->off[x] = off;
    d->sb[x] = sb;
    d->sh[x] = sh;
}

/* op_matmul_fwd: out (N,OC) = inp (N,C) @ w^T (w: OC,C) + out (the bias
 * fill). A = inp, B = w, C = out. */
static inline gemm_desc gemm_matmul_fwd(int N, int C, int OC)
{
    return gemm_desc_of(0, 1, N, OC, C, C, C, OC, 1.0f, 1.0f);
}

/* op_matmul_bwd: dinp (N,C) += dout (N,OC) @ w (OC,C). A = dout, B = w,
 * C = dinp. */
static inline gemm_desc gemm_matmul_dinp(int N, int C, int OC)
{
    return gemm_desc_of(0, 0, N, C, OC, OC, C, C, 1.0f, 1.0f);
}

/* op_matmul_bwd: dw (OC,C) += dout^T (dout: N,OC) @ inp (N,C). A = dout,
 * B = inp, C = dw. */
static inline gemm_desc gemm_matmul_dw(int N, int C, int OC)
{
    return gemm_desc_of(1, 0, OC, C, N, OC, C, C, 1.0f, 1.0f);
}

/* Attention (tft_ops.h): per (b,h), q, k, v are (T,hs) blocks of qkv
 * (B,T,3C) at columns h*hs (+C for k, +2C for v), row stride 3C; scores and
 * probs are (T,T) blocks of (B,NH,T,T); out is (B,T,C) with head h at
 * columns h*hs. qkv_part: 0 q, 1 k, 2 v. */
static inline void gemm_qkv(gemm_desc *d, int x, int T, int C, int NH, int qkv_part)
{
    gemm_desc_bh(d, x, (long long)qkv_part * C, (long long)T * 3 * C, C / NH);
}

static inline void gemm_tt(gemm_desc *d, int x, int T, int NH)
{
    gemm_desc_bh(d, x, 0, (long long)NH * T * T, (long long)T * T);
}

static inline void gemm_out(gemm_desc *d, int x, int T, int C, int NH)
{
    gemm_desc_bh(d, x, 0, (long long)T * C, C / NH);
}

/* op_attn_scores_fwd: scores = scale * q k^T. A = qkv, B = qkv, C = scores. */
static inline gemm_desc gemm_attn_scores(int B, int T, int C, int NH, float scale)
{
    gemm_desc d = gemm_desc_of(0, 1, T, T, C / NH, 3 * C, 3 * C, T, scale, 0.0f);
    gemm_qkv(&d, 0, T, C, NH, 0);
    gemm_qkv(&d, 1, T, C, NH, 1);
    gemm_tt(&d, 2, T, NH);
    d.nb = B;
    d.nh = NH;
    return d;
}

/* op_attn_scores_bwd, q part: dq += scale * dscores @ k. A = dscores,
 * B = qkv, C = dqkv. */
static inline gemm_desc gemm_attn_dq(int B, int T, int C, int NH, float scale)
{
    gemm_desc d = gemm_desc_of(0, 0, T, C / NH, T, T, 3 * C, 3 * C, scale, 1.0f);
    gemm_tt(&d, 0, T, NH);
    gemm_qkv(&d, 1, T, C, NH, 1);
    gemm_qkv(&d, 2, T, C, NH, 0);
    d.nb = B;
    d.nh = NH;
    return d;
}

/* op_attn_scores_bwd, k part: dk += scale * dscores^T @ q. A = dscores,
 * B = qkv, C = dqkv. */
static inline gemm_desc gemm_attn_dk(int B, int T, int C, int NH, float scale)
{
    gemm_desc d = gemm_desc_of(1, 0, T, C / NH, T, T, 3 * C, 3 * C, scale, 1.0f);
    gemm_tt(&d, 0, T, NH);
    gemm_qkv(&d, 1, T, C, NH, 0);
    gemm_qkv(&d, 2, T, C, NH, 1);
    d.nb = B;
    d.nh = NH;
    return d;
}

/* op_attn_values_fwd: out_h = probs @ v. A = probs, B = qkv, C = out. */
static inline gemm_desc gemm_attn_values(int B, int T, int C, int NH)
{
    gemm_desc d = gemm_desc_of(0, 0, T, C / NH, T, T, 3 * C, C, 1.0f, 0.0f);
    gemm_tt(&d, 0, T, NH);
    gemm_qkv(&d, 1, T, C, NH, 2);
    gemm_out(&d, 2, T, C, NH);
    d.nb = B;
    d.nh = NH;
    return d;
}

/* op_attn_values_bwd: dprobs = dout_h @ v^T. A = dout, B = qkv,
 * C = dprobs. */
static inline gemm_desc gemm_attn_dprobs(int B, int T, int C, int NH)
{
    gemm_desc d = gemm_desc_of(0, 1, T, T, C / NH, C, 3 * C, T, 1.0f, 0.0f);
    gemm_out(&d, 0, T, C, NH);
    gemm_qkv(&d, 1, T, C, NH, 2);
    gemm_tt(&d, 2, T, NH);
    d.nb = B;
    d.nh = NH;
    return d;
}

/* op_attn_values_bwd: dv += probs^T @ dout_h. A = probs, B = dout,
 * C = dqkv. */
static inline gemm_desc gemm_attn_dv(int B, int T, int C, int NH)
{
    gemm_desc d = gemm_desc_of(1, 0, T, C / NH, T, T, C, 3 * C, 1.0f, 1.0f);
    gemm_tt(&d, 0, T, NH);
    gemm_out(&d, 1, T, C, NH);
    gemm_qkv(&d, 2, T, C, NH, 2);
    d.nb = B;
    d.nh = NH;
    return d;
}

#endif
