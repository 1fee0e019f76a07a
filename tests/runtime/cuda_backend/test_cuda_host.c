/*
 * test_cuda_host.c — the host-side parts of tftrain's CUDA backend, checked
 * without a GPU:
 *   - the row-major -> column-major GEMM mapping of ops_cuda.cu
 *     (kernels/ops/gemm_map.h): for random shapes, transposes, leading
 *     dimensions and batch strides, a column-major reference GEMM called
 *     with the mapped parameters (as cuBLAS would be) must give exactly the
 *     row-major result (same products, same summation order);
 *   - the dynamic loss scaler (kernels/ops/loss_scale.h): backoff, growth,
 *     bounds;
 *   - the record queue's bookkeeping (kernels/stats/tft_stats_ring.h): FIFO
 *     order, no overlap of live payloads under random traffic, wrap
 *     accounting, full and too-big answers;
 *   - with the CUDA toolkit but no device: the device entry points refuse
 *     cleanly (-ENODEV with a reason) instead of crashing.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_map.h"
#include "loss_scale.h"
#include "tft_stats_ring.h"
#include "tft_test.h"
#include "tft_test_rng.h"

#ifdef TFT_HAVE_TFTOPS
#include "tft_ops.h"
#endif
#ifdef TFT_HAVE_CUDA
#include "tft_format.h"
#include "tft_ops_cuda.h"
#include "tft_stats_cuda.h"
#include "tft_stats_cuda_ring.h"
#endif

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint32_t rnd(uint32_t n) { return (uint32_t)(tft_test_rng(&rng) >> 33) % n; }

/* ---- GEMM mapping ----------------------------------------------------- */

/* Row-major reference: C[i][j] = alpha * sum_p opA[i][p] opB[p][j] + beta C. */
static void gemm_rowmajor(const gemm_rm *g, float alpha, const float *A, const float *B, float beta, float *C,
                          int batch)
{
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < g->m; i++)
            for (int j = 0; j < g->n; j++) {
                double s = 0;
                for (int p = 0; p < g->k; p++) {
                    float a = g->trans_a ? A[b * g->stride_a + (long long)p * g->lda + i]
                                         : A[b * g->stride_a + (long long)i * g->lda + p];
                    float v = g->trans_b ? B[b * g->stride_b + (long long)j * g->ldb + p]
                                         : B[b * g->stride_b + (long long)p * g->ldb + j];
                    s += (double)a * v;
                }
                float *c = &C[b * g->stride_c + (long long)i * g->ldc + j];
                *c = (float)(alpha * s + beta * *c);
            }
}

/* Column-major GEMM with BLAS semantics (what cuBLAS computes): X(r,c) of
 * a column-major matrix with leading dimension ld is X[c*ld + r]. */
static void gemm_colmajor(const gemm_cm *g, float alpha, const float *P1, const float *P2, float beta, float *C,
                          int batch)
{
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < g->m; i++)
            for (int j = 0; j < g->n; j++) {
                double s = 0;
                for (int p = 0; p < g->k; p++) {
                    /* op(P1) is m x k, op(P2) is k x n */
                    float a = g->trans_1 ? P1[b * g->stride_1 + (long long)i * g->ld_1 + p]
                                         : P1[b * g->stride_1 + (long long)p * g->ld_1 + i];
                    float v = g->trans_2 ? P2[b * g->stride_2 + (long long)p * g->ld_2 + j]
                                         : P2[b * g->stride_2 + (long long)j * g->ld_2 + p];
                    s += (double)a * v;
                }
                float *c = &C[b * g->stride_c + (long long)j * g->ldc + i];
                *c = (float)(alpha * s + beta * *c);
            }
}

static void test_gemm_map(void)
{
    int exact = 0, cases = 0;
    for (int it = 0; it < 300; it++) {
        gemm_rm g = {.trans_a = (int)rnd(2), .trans_b = (int)rnd(2), .m = 1 + (int)rnd(7), .n = 1 + (int)rnd(7),
                     .k = 1 + (int)rnd(7)};
        int a_cols = g.trans_a ? g.m : g.k, a_rows = g.trans_a ? g.k : g.m;
        int b_cols = g.trans_b ? g.k : g.n, b_rows = g.trans_b ? g.n : g.k;
        g.lda = a_cols + (int)rnd(3);
        g.ldb = b_cols + (int)rnd(3);
        g.ldc = g.n + (int)rnd(3);
        int batch = 1 + (int)rnd(3);
        g.stride_a = (long long)a_rows * g.lda + rnd(5);
        g.stride_b = (long long)b_rows * g.ldb + rnd(5);
        g.stride_c = (long long)g.m * g.ldc + rnd(5);
        CHECKF(gemm_rm_valid(&g), "case %d valid", it);
        size_t na = (size_t)(g.stride_a * batch), nb = (size_t)(g.stride_b * batch), nc = (size_t)(g.stride_c * batch);
        float *A = malloc(na * 4), *B = malloc(nb * 4), *C1 = malloc(nc * 4), *C2 = malloc(nc * 4);
        for (size_t i = 0; i < na; i++)
            A[i] = (float)rnd(17) - 8;
        for (size_t i = 0; i < nb; i++)
            B[i] = (float)rnd(13) - 6;
        for (size_t i = 0; i < nc; i++)
            C1[i] = C2[i] = (float)rnd(9) - 4;
        float alpha = it % 3 ? 1.0f : 0.5f, beta = it % 2 ? 1.0f : 0.0f;
        gemm_rowmajor(&g, alpha, A, B, beta, C1, batch);
        gemm_cm c = gemm_rm_to_cm(g);
        /* the call's first operand is the row-major B, its second A */
        gemm_colmajor(&c, alpha, B, A, beta, C2, batch);
        int same = !memcmp(C1, C2, nc * 4);
        exact += same;
        cases++;
        if (!same)
            fprintf(stderr, "gemm map case %d: ta %d tb %d m %d n %d k %d differs\n", it, g.trans_a, g.trans_b, g.m,
                    g.n, g.k);
        free(A), free(B), free(C1), free(C2);
    }
    printf("gemm mapping: %d/%d random cases identical\n", exact, cases);
    CHECK(exact == cases);
    /* the runtime's calls: out (N,OC) = inp (N,C) @ w^T: cuBLAS gets (T, N) on w first */
    gemm_rm mm = {.trans_a = 0, .trans_b = 1, .m = 512, .n = 192, .k = 64, .lda = 64, .ldb = 64, .ldc = 192};
    gemm_cm cm = gemm_rm_to_cm(mm);
    CHECK(cm.trans_1 == 1 && cm.trans_2 == 0 && cm.m == 192 && cm.n == 512 && cm.k == 64 && cm.ld_1 == 64 &&
          cm.ld_2 == 64 && cm.ldc == 192);
    gemm_rm bad = mm;
    bad.lda = 63; /* A (512 x 64) cannot have a row stride below 64 */
    CHECK(!gemm_rm_valid(&bad));
    bad = mm;
    bad.ldc = 100;
    CHECK(!gemm_rm_valid(&bad));
    /* the span of q inside qkv (B=2, T=4, C=8, NH=2: hs 4, ld 24) over (b, h) */
    CHECK(gemm_span(4, 4, 24, 4 * 24, 2, 4, 2) == (long long)(1 * 96 + 1 * 4 + 3 * 24 + 4));
}

#ifdef TFT_HAVE_TFTOPS
/* ---- the runtime's GEMM descriptors against the CPU ops ------------------- */

/* Runs desc d as ops_cuda.cu does (gemm_plan_call's calls, each mapped to a
 * column-major call), with the column-major reference in cuBLAS's place. */
static void run_desc(const gemm_desc *d, const float *A, const float *B, float *C)
{
    for (int i = 0; i < gemm_plan_calls(d); i++) {
        gemm_call k = gemm_plan_call(d, i);
        gemm_rm g = d->g;
        g.stride_a = k.stride[0];
        g.stride_b = k.stride[1];
        g.stride_c = k.stride[2];
        gemm_cm c = gemm_rm_to_cm(g);
        gemm_colmajor(&c, d->alpha, B + k.off[1], A + k.off[0], d->beta, C + k.off[2], k.batch);
    }
}

static float *frand_n(size_t n)
{
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = ((float)rnd(2001) - 1000.0f) / 1000.0f;
    return x;
}

static float *copy_n(const float *x, size_t n)
{
    float *y = malloc(n * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}

/* Worst |a - b| / (1 + |b|) over n; prints it under name. */
static double cmp(const char *name, const float *a, const float *b, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));
        w = e > w || e != e ? e : w;
    }
    printf("  %-22s worst rel. difference %.2e\n", name, w);
    return w;
}

/* One shape: every desc of ops_cuda.cu, executed through the plan and
 * mapping, against ops.c (OpenBLAS). */
static void descs_shape(int Bn, int T, int C, int NH)
{
    size_t BT = (size_t)Bn * T, att = (size_t)Bn * NH * T * T;
    int OC = 3 * C;
    float scale = 0.37f;
    printf("gemm descriptors vs ops.c, B %d T %d C %d NH %d (%s):\n", Bn, T, C, NH,
           NH <= Bn ? "a call per head" : "a call per batch row");
    float *qkv = frand_n(BT * 3 * C), *ds = frand_n(att), *probs = frand_n(att), *dout = frand_n(BT * C);
    float *inp = frand_n(BT * C), *w = frand_n((size_t)OC * C), *dmm = frand_n(BT * OC);
    /* scores */
    float *s_ref = calloc(att, 4), *s_got = calloc(att, 4);
    op_attn_scores_fwd(s_ref, qkv, Bn, T, C, NH, scale);
    gemm_desc d = gemm_attn_scores(Bn, T, C, NH, scale);
    run_desc(&d, qkv, qkv, s_got);
    CHECK(cmp("attn_scores_fwd", s_got, s_ref, att) < 1e-5);
    /* scores backward: dq then dk into the same dqkv */
    float *dqkv0 = frand_n(BT * 3 * C), *dq_ref = copy_n(dqkv0, BT * 3 * C), *dq_got = copy_n(dqkv0, BT * 3 * C);
    op_attn_scores_bwd(dq_ref, ds, qkv, Bn, T, C, NH, scale);
    d = gemm_attn_dq(Bn, T, C, NH, scale);
    run_desc(&d, ds, qkv, dq_got);
    d = gemm_attn_dk(Bn, T, C, NH, scale);
    run_desc(&d, ds, qkv, dq_got);
    CHECK(cmp("attn_scores_bwd", dq_got, dq_ref, BT * 3 * C) < 1e-5);
    /* values */
    float *o_ref = calloc(BT * C, 4), *o_got = calloc(BT * C, 4);
    op_attn_values_fwd(o_ref, probs, qkv, Bn, T, C, NH);
    d = gemm_attn_values(Bn, T, C, NH);
    run_desc(&d, probs, qkv, o_got);
    CHECK(cmp("attn_values_fwd", o_got, o_ref, BT * C) < 1e-5);
    float *dp_ref = calloc(att, 4), *dp_got = calloc(att, 4);
    float *dv_ref = copy_n(dqkv0, BT * 3 * C), *dv_got = copy_n(dqkv0, BT * 3 * C);
    op_attn_values_bwd(dp_ref, dv_ref, dout, probs, qkv, Bn, T, C, NH);
    d = gemm_attn_dprobs(Bn, T, C, NH);
    run_desc(&d, dout, qkv, dp_got);
    d = gemm_attn_dv(Bn, T, C, NH);
    run_desc(&d, probs, dout, dv_got);
    CHECK(cmp("attn_values_bwd dprobs", dp_got, dp_ref, att) < 1e-5);
    CHECK(cmp("attn_values_bwd dv", dv_got, dv_ref, BT * 3 * C) < 1e-5);
    /* matmul: out (N,OC) = inp @ w^T; dinp += dout @ w; dw += dout^T @ inp */
    int N = (int)BT;
    float *m_ref = calloc((size_t)N * OC, 4), *m_got = calloc((size_t)N * OC, 4);
    op_matmul_fwd(m_ref, inp, w, NULL, N, C, OC);
    d = gemm_matmul_fwd(N, C, OC);
    run_desc(&d, inp, w, m_got);
    CHECK(cmp("matmul_fwd", m_got, m_ref, (size_t)N * OC) < 1e-5);
    float *di_ref = copy_n(inp, BT * C), *di_got = copy_n(inp, BT * C);
    float *dw_ref = copy_n(w, (size_t)OC * C), *dw_got = copy_n(w, (size_t)OC * C);
    op_matmul_bwd(di_ref, dw_ref, NULL, dmm, inp, w, N, C, OC);
    d = gemm_matmul_dinp(N, C, OC);
    run_desc(&d, dmm, w, di_got);
    d = gemm_matmul_dw(N, C, OC);
    run_desc(&d, dmm, inp, dw_got);
    CHECK(cmp("matmul_bwd dinp", di_got, di_ref, BT * C) < 1e-5);
    CHECK(cmp("matmul_bwd dw", dw_got, dw_ref, (size_t)OC * C) < 1e-5);
    float *all[] = {qkv, ds, probs, dout, inp, w, dmm, s_ref, s_got, dqkv0, dq_ref, dq_got, o_ref, o_got,
                    dp_ref, dp_got, dv_ref, dv_got, m_ref, m_got, di_ref, di_got, dw_ref, dw_got};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        free(all[i]);
}

static void test_gemm_descs(void)
{
    descs_shape(3, 5, 12, 3); /* nh <= nb: one call per head */
    descs_shape(2, 7, 16, 4); /* nh > nb: one call per batch row */
    descs_shape(1, 9, 8, 1);  /* one call, batch 1 */
}
#endif

/* ---- loss scaler ------------------------------------------------------ */

static void test_loss_scale(void)
{
    tft_loss_scale s;
    tft_loss_scale_init(&s, TFT_LOSS_SCALE_INIT, 3);
    CHECK(s.scale == 65536.0f && s.good_steps == 0 && s.skipped == 0);
    tft_loss_scale_update(&s, 1); /* overflow: skip, halve */
    CHECK(s.scale == 32768.0f && s.skipped == 1 && s.good_steps == 0);
    tft_loss_scale_update(&s, 0);
    tft_loss_scale_update(&s, 0);
    CHECK(s.scale == 32768.0f && s.good_steps == 2);
    tft_loss_scale_update(&s, 0); /* third finite step in a row: doubles */
    CHECK(s.scale == 65536.0f && s.good_steps == 0);
    tft_loss_scale_update(&s, 0);
    tft_loss_scale_update(&s, 1); /* an overflow resets the run */
    CHECK(s.scale == 32768.0f && s.good_steps == 0 && s.skipped == 2);
    for (int i = 0; i < 40; i++)
        tft_loss_scale_update(&s, 1);
    CHECKF(s.scale == TFT_LOSS_SCALE_MIN, "backoff floor: %g", (double)s.scale);
    for (int i = 0; i < 300; i++)
        tft_loss_scale_update(&s, 0);
    CHECKF(s.scale == TFT_LOSS_SCALE_MAX, "growth ceiling: %g", (double)s.scale);
    /* powers of two only: unscaling is exact */
    int e;
    CHECK(frexpf(s.scale, &e) == 0.5f);
    tft_loss_scale_init(&s, 8.0f, 0); /* interval <= 0 becomes 1 */
    tft_loss_scale_update(&s, 0);
    CHECK(s.scale == 16.0f);
}

/* ---- ring bookkeeping ----------------------------------------------------- */

static void test_ring(void)
{
    enum { ARENA = 4096, NSLOT = 16 };
    static _Alignas(16) uint8_t arena[ARENA];
    tft_sring_slot slots[NSLOT];
    tft_sring r;
    void *p;
    CHECK(tft_sring_init(&r, arena + 1, 100, slots, NSLOT) == -EINVAL); /* misaligned */
    CHECK(tft_sring_init(&r, arena, ARENA, slots, 0) == -EINVAL);
    CHECK(tft_sring_init(&r, arena, ARENA, slots, NSLOT) == 0);
    CHECK(tft_sring_head(&r) == -ENOENT);
    CHECK(tft_sring_reserve(&r, ARENA + 1, &p) == -E2BIG);
    /* a payload never straddles the end: 3000 + 1200 wraps to 0 once 3000 is gone */
    int a = tft_sring_reserve(&r, 3000, &p);
    CHECK(a == 0 && p == arena);
    CHECK(tft_sring_reserve(&r, 1200, &p) == -EAGAIN); /* 3008 + 1200 > 4096, and 0.. is held */
    int b = tft_sring_reserve(&r, 1000, &p);
    CHECK(b == 1 && p == arena + 3008);
    tft_sring_pop(&r);
    int c = tft_sring_reserve(&r, 1200, &p); /* skips the 80-byte tail, starts at 0 */
    CHECK(c == 2 && p == arena && r.slots[c].span == 80 + 1200);
    CHECK(tft_sring_head(&r) == 1);
    tft_sring_pop(&r);
    tft_sring_pop(&r);
    CHECK(r.used == 0 && r.count == 0);
    /* zero-length records take a slot and no space */
    for (int i = 0; i < NSLOT; i++)
        CHECK(tft_sring_reserve(&r, 0, &p) >= 0 && p == NULL);
    CHECK(tft_sring_reserve(&r, 0, &p) == -EAGAIN); /* out of slots */
    for (int i = 0; i < NSLOT; i++)
        tft_sring_pop(&r);
    /* random traffic: live payloads never overlap, FIFO order holds */
    uint32_t tags[NSLOT];
    uint32_t next_tag = 1, expect_tag = 1;
    int overlaps = 0, order = 0, ops = 0;
    for (int it = 0; it < 20000; it++) {
        if (rnd(3) && r.count) { /* consume the head */
            int h = tft_sring_head(&r);
            uint8_t *q = tft_sring_payload(&r, (uint32_t)h);
            for (size_t j = 0; q && j < r.slots[h].len; j++)
                if (q[j] != (uint8_t)tags[h]) {
                    overlaps++;
                    break;
                }
            order += tags[h] != expect_tag++;
            tft_sring_pop(&r);
        } else {
            size_t len = rnd(5) ? rnd(700) : rnd(ARENA);
            int i = tft_sring_reserve(&r, len, &p);
            if (i == -EAGAIN)
                continue;
            CHECK(i >= 0);
            if (i < 0)
                continue;
            tags[i] = next_tag++;
            if (len)
                memset(p, (uint8_t)tags[i], len);
            ops++;
        }
        if (r.used > r.arena_bytes)
            overlaps += 1000;
    }
    printf("ring: %d reservations, %d overwritten payloads, %d out of order\n", ops, overlaps, order);
    CHECK(ops > 5000 && overlaps == 0 && order == 0);
}

/* ---- no device -------------------------------------------------------------- */

#ifdef TFT_HAVE_CUDA
static void noop_emit(void *ctx, const void *meta, const void *payload, size_t len, int status)
{
    (void)ctx, (void)meta, (void)payload, (void)len, (void)status;
}

static void test_no_device(void)
{
    if (tft_stats_cuda_available()) {
        printf("a CUDA device is present: the no-device checks are skipped\n");
        return;
    }
    char err[256] = "";
    tft_cuda_ops *x = (tft_cuda_ops *)1;
    tft_cuda_ops_opts o = {.sz = sizeof(o), .gemm_dtype = TFT_BF16, .gemm_ws_elems = 1024};
    int e = tft_cuda_ops_new(&x, &o, err, sizeof(err));
    printf("tft_cuda_ops_new without a device: %d (%s)\n", e, err);
    CHECK(e == -ENODEV && x == NULL && strstr(err, "no CUDA device"));
    o.gemm_dtype = 99;
    CHECK(tft_cuda_ops_new(&x, &o, err, sizeof(err)) == -EINVAL);
    tft_cuda_ops_free(NULL);
    tft_dring *r = (tft_dring *)1;
    tft_dring_opts ro = {.sz = sizeof(ro), .meta_bytes = 64, .emit = noop_emit};
    CHECK(tft_dring_new(&r, &ro) == -ENODEV && r == NULL);
    ro.emit = NULL;
    CHECK(tft_dring_new(&r, &ro) == -EINVAL);
    tft_dring_free(NULL);
}
#endif

int main(void)
{
    test_gemm_map();
#ifdef TFT_HAVE_TFTOPS
    test_gemm_descs();
#endif
    test_loss_scale();
    test_ring();
#ifdef TFT_HAVE_CUDA
    test_no_device();
#endif
    return TEST_DONE();
}
