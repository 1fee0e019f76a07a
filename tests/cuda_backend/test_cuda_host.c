/*
 * test_cuda_host.c — the host-side parts of tftrain's CUDA backend, checked
 * without a GPU:
 *   - the row-major -> column-major GEMM mapping of ops_cuda.cu
 *     (kernels/gemm_map.h): for random shapes, transposes, leading
 *     dimensions and batch strides, a column-major reference GEMM called
 *     with the mapped parameters (as cuBLAS would be) must give exactly the
 *     row-major result (same products, same summation order);
 *   - the dynamic loss scaler (kernels/loss_scale.h): backoff, growth,
 *     bounds;
 *   - the record queue's bookkeeping (kernels/tft_stats_ring.h): FIFO
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
#include "../common/tft_test.h"

#ifdef TFT_HAVE_CUDA
#include "tft_format.h"
#include "tft_ops_cuda.h"
#include "tft_stats_cuda.h"
#include "tft_stats_cuda_ring.h"
#endif

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 33) % n;
}

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
    test_loss_scale();
    test_ring();
#ifdef TFT_HAVE_CUDA
    test_no_device();
#endif
    return TEST_DONE();
}
