/*
 * gemm_prog.c — an unmodified program for the CBLAS interposer test: CALLS
 * cblas_sgemm calls (row-major with ldc > N, and column-major) and
 * one cblas_dgemm. --plant N adds 1 to A[0] before call N (0-based).
 * Prints the checksum of every C so a change of results would show.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CALLS 8
enum { M = 5, N = 4, K = 3, LDC = N + 2 };

int main(int argc, char **argv)
{
    int plant = -1;
    if (argc == 3 && !strcmp(argv[1], "--plant"))
        plant = atoi(argv[2]);
    float a[M * K], b[K * N], c[M * LDC];
    double sum = 0;
    for (int call = 0; call < CALLS; call++) {
        for (int i = 0; i < M * K; i++)
            a[i] = (float)((i * 7 + call) % 11) * 0.25f;
        for (int i = 0; i < K * N; i++)
            b[i] = (float)((i * 5 + call) % 13) * 0.5f - 1.0f;
        for (int i = 0; i < M * LDC; i++)
            c[i] = -99.0f; /* padding columns must not enter the statistics */
        if (call == plant)
            a[0] += 1.0f;
        if (call % 2 == 0) /* C (M x N) row-major with ldc = N + 2 */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c, LDC);
        else /* the same product in column-major: C^T (N x M) = B^T A^T */
            cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, N, M, K, 1.0f, b, N, a, K, 0.0f, c, N);
        for (int i = 0; i < M * N; i++)
            sum += c[i];
    }
    double da[4] = {1, 2, 3, 4}, db[4] = {5, 6, 7, 8}, dc[4];
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0, da, 2, db, 2, 0.0, dc, 2);
    printf("checksum %.6f %.1f\n", sum, dc[0] + dc[3]);
    return 0;
}
