/*
 * cap_gemm.c — an unmodified CBLAS program for the op-replay tests: three
 * gemms exercising what a replay must reproduce from the OP record's
 * attributes and the captured matrices:
 *   op 2: sgemm, row-major, no transposes, beta 0, ldc > N
 *   op 5: sgemm, column-major, A transposed with lda > rows, alpha 0.75,
 *         beta 0.5 (C's prior value is needed)
 *   op 8: dgemm, row-major, B transposed, alpha 2, beta 1
 * (op numbers: each gemm is preceded by its A and B tensors, 3 ops each).
 * Prints a checksum of the results.
 */
#include <cblas.h>
#include <stdio.h>

enum { M = 7, N = 5, K = 6 };

int main(void)
{
    float a[M * K], b[K * N], c[M * (N + 3)];
    for (int i = 0; i < M * K; i++)
        a[i] = (float)((i * 7) % 13) * 0.3f - 1.1f;
    for (int i = 0; i < K * N; i++)
        b[i] = (float)((i * 5) % 11) * 0.7f - 2.0f;
    for (int i = 0; i < M * (N + 3); i++)
        c[i] = -99.0f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N + 3);
    double sum = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            sum += c[i * (N + 3) + j];

    /* column-major C (M x N, ldc = M) = 0.75 * A^T B + 0.5 C, A stored K x M
     * column-major with lda = K + 2 */
    float at[(K + 2) * M], c2[M * N];
    for (int i = 0; i < (K + 2) * M; i++)
        at[i] = (float)((i * 3) % 17) * 0.25f - 1.0f;
    for (int i = 0; i < M * N; i++)
        c2[i] = (float)(i % 9) * 0.5f;
    cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, M, N, K, 0.75f, at, K + 2, b, K, 0.5f, c2, M);
    for (int i = 0; i < M * N; i++)
        sum += c2[i];

    double da[M * K], db[N * K], dc[M * N];
    for (int i = 0; i < M * K; i++)
        da[i] = 1.0 / (i + 1);
    for (int i = 0; i < N * K; i++)
        db[i] = (i % 4) - 1.5;
    for (int i = 0; i < M * N; i++)
        dc[i] = i * 0.125;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 2.0, da, K, db, K, 1.0, dc, N);
    for (int i = 0; i < M * N; i++)
        sum += dc[i];
    printf("checksum %.9g\n", sum);
    return 0;
}
