/*
 * tft_cuda_err.h — a CUDA runtime error as a message in the caller's
 * buffer (tft_msg.h's convention), for the device ops (ops_cuda*.cu) and
 * tftrain's CUDA backend (model_cuda.c, train_cuda.c). Internal.
 */
#ifndef TFT_CUDA_ERR_H
#define TFT_CUDA_ERR_H

#include "tft_msg.h"

#include <cuda_runtime_api.h>
#include <errno.h>

/* CUDA's reason for e, after clearing the error the CUDA runtime keeps for
 * the next cudaGetLastError (so a later launch check does not report it
 * again). */
static inline const char *tft_cuda_reason(cudaError_t e)
{
    (void)cudaGetLastError();
    return cudaGetErrorString(e);
}

/* 0 for cudaSuccess. Otherwise clears the error (tft_cuda_reason), writes
 * "what: CUDA's reason" into err and returns -EIO. */
static inline int tft_cuda_err(char *err, size_t errlen, cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    return tft_errf(err, errlen, -EIO, "%s: %s", what, tft_cuda_reason(e));
}

#endif
