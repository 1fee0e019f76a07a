/*
 * gemm_sites_lib.c — the BLAS calls of the gemm-sites test, in a library
 * the program loads with dlopen(RTLD_LOCAL): OpenBLAS comes in as its
 * dependency, outside the global scope, as numpy's does (the interposers
 * then find the real functions by walking the loaded objects). Every CBLAS
 * function libtftrace interposes, from more than one call site, with
 * padded leading dimensions, transposes, strided and reversed vectors,
 * and operands that stay the same or change in place between calls (the
 * statistics memo must never serve what they held before).
 */
#include <cblas.h>
#include <stdio.h>

enum { M = 5, N = 4, K = 3, ITERS = 8 };

static float a1[M * (K + 1)], b1[K * N], c1[M * (N + 2)];
static float a2[K * M], b2[N * K], c2[M * N];
static double dsa[40 * 3], dsc[40 * 40];
static float ssa[6 * 4], ssc[6 * 6], gva[M * N], gvx[2 * N], gvy[M];
static double dga[M * N], dgx[M], dgy[N];

/* call site one: row-major, A padded (lda = K + 1), C padded (ldc = N + 2) */
static void site_one(void)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a1, K + 1, b1, N, 0.0f, c1, N + 2);
}

/* call site two: column-major, both transposed, beta != 0 (C is read) */
static void site_two(void)
{
    cblas_sgemm(CblasColMajor, CblasTrans, CblasTrans, M, N, K, 0.5f, a2, K, b2, N, 1.5f, c2, M);
}

static double sum_f(const float *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return s;
}

/* exported: the project builds with -fvisibility=hidden */
__attribute__((visibility("default"))) double sites_run(void)
{
    for (int i = 0; i < M * (K + 1); i++)
        a1[i] = (float)(i % 7) * 0.5f - 1.0f;
    for (int i = 0; i < K * N; i++)
        b1[i] = (float)(i % 5) - 2.0f, b2[i] = (float)(i % 3) * 0.25f;
    for (int i = 0; i < K * M; i++)
        a2[i] = (float)i * 0.125f;
    for (int i = 0; i < 40 * 3; i++)
        dsa[i] = (double)(i % 11) - 5.0;
    for (int i = 0; i < 6 * 4; i++)
        ssa[i] = (float)(i % 4) + 0.5f;
    for (int i = 0; i < M * N; i++)
        gva[i] = (float)(i % 6) - 2.5f, dga[i] = (double)i * 0.5;
    for (int i = 0; i < 2 * N; i++)
        gvx[i] = (float)i;
    for (int i = 0; i < M; i++)
        dgx[i] = 1.0 + i;
    double sum = 0;
    for (int it = 0; it < ITERS; it++) {
        if (it == 3 || it == 5)
            a1[2] += 1.0f; /* in place: the same address, other bytes */
        if (it < 3)
            a2[it] -= 0.5f; /* changes at every call, then stays */
        site_one();
        site_two();
        sum += sum_f(c1, M * (N + 2)) + sum_f(c2, M * N);
    }
    double da[4] = {1, 2, 3, 4}, db[4] = {5, 6, 7, 8}, dc[4];
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0, da, 2, db, 2, 0.0, dc, 2);
    for (int it = 0; it < 3; it++) {
        cblas_ssyrk(CblasRowMajor, CblasUpper, CblasNoTrans, 6, 4, 1.0f, ssa, 4, 0.0f, ssc, 6);
        /* 40 x 40 f64: a triangle too big for the stack */
        cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, 40, 3, 1.0, dsa, 3, 0.0, dsc, 40);
        cblas_sgemv(CblasRowMajor, CblasNoTrans, M, N, 1.0f, gva, N, gvx, 2, 0.0f, gvy, -1);
        cblas_dgemv(CblasRowMajor, CblasTrans, M, N, 2.0, dga, N, dgx, 1, 0.0, dgy, 1);
        ssa[it] += 1.0f;
        sum += ssc[0] + ssc[35] + dsc[0] + dsc[40 * 40 - 1] + sum_f(gvy, M) + dgy[0] + dgy[N - 1];
    }
    return sum + dc[0] + dc[3];
}
