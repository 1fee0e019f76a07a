/*
 * interpose_internal.h — the LD_PRELOAD interposers of libtftrace.so
 * (interpose.c): real-symbol lookup, the re-entry guard, and the prototypes
 * of the functions we define in place of the application's libraries.
 */
#ifndef TFT_INTERPOSE_INTERNAL_H
#define TFT_INTERPOSE_INTERNAL_H

#include "tft.h"

/* Set by tft_coll_enter, cleared by tft_coll_exit (recorder.c): the program
 * is recording this collective itself, so the MPI interposers step aside. */
extern __thread int rec_explicit_coll __attribute__((tls_model("initial-exec")));

/* Address of the next definition of name after libtftrace (dlsym(RTLD_NEXT)),
 * or, when that fails, of a definition in any loaded object (walked with
 * dl_iterate_phdr + dlopen(RTLD_NOLOAD)), as for a library loaded by
 * dlopen(RTLD_LOCAL). NULL when no loaded object defines it. */
void *ip_real(const char *name);

/* CBLAS, with OpenBLAS's LP64 ABI (enums and blasint are int). */
TFT_API void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc);
TFT_API void cblas_dgemm(int order, int transa, int transb, int m, int n, int k, double alpha,
                         const double *a, int lda, const double *b, int ldb, double beta, double *c,
                         int ldc);

#endif
