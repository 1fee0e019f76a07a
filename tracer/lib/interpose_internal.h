/*
 * interpose_internal.h — the LD_PRELOAD interposers of libtftrace.so
 * (interpose.c): real-symbol lookup, the re-entry guard, and the prototypes
 * of the functions we define in place of the application's libraries.
 */
#ifndef TFT_INTERPOSE_INTERNAL_H
#define TFT_INTERPOSE_INTERNAL_H

#include "tft.h"
#include "tft_format.h" /* record layouts, tft_string_id */

#include <stdatomic.h>

/* Marks a definition that takes the place of another library's function
 * (malloc, MPI_*, cblas_*, ...) or is an injection entry a library calls
 * (NVTX): exported from libtftrace.so like the public API, but unversioned,
 * so that it interposes versioned references such as malloc@GLIBC_2.2.5
 * (the dynamic linker binds those to an LD_PRELOADed definition only when
 * it has no version or the base one). Every such name is listed in
 * interposed.txt, which the install test (tests/install) compares with what
 * libtftrace.so exports; the version script (libtftrace.map.in) must not
 * name them. */
#define TFT_INTERPOSE __attribute__((visibility("default")))

/* Set by tft_coll_enter, cleared by tft_coll_exit (recorder.c): the program
 * is recording this collective itself, so the MPI interposers step aside. */
extern __thread int rec_explicit_coll __attribute__((tls_model("initial-exec")));

/* Address of the next definition of name after libtftrace (dlsym(RTLD_NEXT)),
 * or, when that fails, of a definition in any loaded object (walked with
 * dl_iterate_phdr + dlopen(RTLD_NOLOAD)), as for a library loaded by
 * dlopen(RTLD_LOCAL). NULL when no loaded object defines it. */
void *ip_real(const char *name);

/* ip_real cached in *cache; a miss is retried on the next call (the library
 * may be loaded later). Inline: a hit is one load on every intercepted call. */
void *ip_real_fill(void *_Atomic *cache, const char *name);
static inline void *ip_real_cached(void *_Atomic *cache, const char *name)
{
    void *p = atomic_load_explicit(cache, memory_order_acquire);
    return __builtin_expect(p != NULL, 1) ? p : ip_real_fill(cache, name);
}

/* Depth of interposer frames on this thread; > 0 means "pass through":
 * an interposer increments it around the real call and its recording.
 * Defined with the recorder's thread state (recorder_state.c), which raises
 * it too (its set-up, the device queue). */
extern __thread int ip_depth __attribute__((tls_model("initial-exec")));

/* 1 when interposed calls are to be recorded (recording on, interposers not
 * turned off, main program not linked with libtftrace). Call with
 * ip_depth > 0: the first call decides, and may allocate. */
int ip_active(void);

/* CBLAS, with OpenBLAS's LP64 ABI (enums and blasint are int). */
TFT_INTERPOSE void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                               const float *a, int lda, const float *b, int ldb, float beta, float *c,
                               int ldc);
TFT_INTERPOSE void cblas_dgemm(int order, int transa, int transb, int m, int n, int k, double alpha,
                               const double *a, int lda, const double *b, int ldb, double beta, double *c,
                               int ldc);

TFT_INTERPOSE void cblas_ssyrk(int order, int uplo, int trans, int n, int k, float alpha, const float *a, int lda,
                               float beta, float *c, int ldc);
TFT_INTERPOSE void cblas_dsyrk(int order, int uplo, int trans, int n, int k, double alpha, const double *a, int lda,
                               double beta, double *c, int ldc);
TFT_INTERPOSE void cblas_sgemv(int order, int trans, int m, int n, float alpha, const float *a, int lda,
                               const float *x, int incx, float beta, float *y, int incy);
TFT_INTERPOSE void cblas_dgemv(int order, int trans, int m, int n, double alpha, const double *a, int lda,
                               const double *x, int incx, double beta, double *y, int incy);

/* The same calls as wheels' OpenBLAS builds name them (interpose.c,
 * CBLAS_FLAVOUR): PRE prefix, SUF suffix, I the index type. */
#define TFT_CBLAS_FLAVOUR_DECLS(PRE, SUF, I)                                                                   \
    TFT_INTERPOSE void PRE##cblas_sgemm##SUF(int, int, int, I, I, I, float, const float *, I, const float *, I, \
                                             float, float *, I);                                              \
    TFT_INTERPOSE void PRE##cblas_dgemm##SUF(int, int, int, I, I, I, double, const double *, I, const double *, \
                                             I, double, double *, I);                                         \
    TFT_INTERPOSE void PRE##cblas_ssyrk##SUF(int, int, int, I, I, float, const float *, I, float, float *, I);  \
    TFT_INTERPOSE void PRE##cblas_dsyrk##SUF(int, int, int, I, I, double, const double *, I, double, double *,  \
                                             I);                                                              \
    TFT_INTERPOSE void PRE##cblas_sgemv##SUF(int, int, I, I, float, const float *, I, const float *, I, float,  \
                                             float *, I);                                                     \
    TFT_INTERPOSE void PRE##cblas_dgemv##SUF(int, int, I, I, double, const double *, I, const double *, I,      \
                                             double, double *, I);
TFT_CBLAS_FLAVOUR_DECLS(scipy_, 64_, int64_t) /* numpy >= 2 wheels (scipy-openblas64) */
TFT_CBLAS_FLAVOUR_DECLS(, 64_, int64_t)       /* older numpy wheels (openblas64_) */
TFT_CBLAS_FLAVOUR_DECLS(scipy_, , int)        /* SciPy wheels (scipy-openblas32) */

#endif
