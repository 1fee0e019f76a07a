/*
 * faulty_blas.c — an LD_PRELOAD library standing for a faulty machine in
 * the op-replay tests: its cblas_sgemm runs the real one (the next in the
 * search order) and then damages C[0] as FAULTY_BLAS says: "lsb" flips the
 * lowest mantissa bit (a rounding-sized change, as another summation order
 * gives), "add" adds 1 (a fault no rounding explains). Placed after
 * libtftrace in LD_PRELOAD, the recorder sees the damaged result.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                         float *, int);

__attribute__((visibility("default"))) void cblas_sgemm(int order, int ta, int tb, int m, int n, int k,
                                                        float alpha, const float *a, int lda, const float *b,
                                                        int ldb, float beta, float *c, int ldc)
{
    sgemm_fn real = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");
    if (!real)
        abort();
    real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    const char *mode = getenv("FAULTY_BLAS");
    if (!mode || m <= 0 || n <= 0)
        return;
    if (!strcmp(mode, "lsb")) {
        uint32_t u;
        memcpy(&u, c, 4);
        u ^= 1u;
        memcpy(c, &u, 4);
    } else if (!strcmp(mode, "add")) {
        c[0] += 1.0f;
    }
}
