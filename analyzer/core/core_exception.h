/*
 * core_exception.h — an uncaught exception of a rank (EXCEPTION records,
 * FORMAT.md §5.18, format 1.7) as tfdump and tfdiff say it:
 * "RuntimeError at step 37 in model.tok_emb: The size of tensor a ...".
 */
#ifndef TFT_CORE_EXCEPTION_H
#define TFT_CORE_EXCEPTION_H

#include "core.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct core_exception {
    bool known;           /* a rank file had one (the first is kept) */
    int64_t step;         /* its header's step (TFT_STEP_NONE outside steps) */
    char type[64];
    char where[160];      /* "" when not known */
    char message[384];    /* its first line */
} core_exception;

/* Keeps rec (of reader r) in *x when it is an EXCEPTION record and x has
 * none yet; any other record is ignored. */
void core_exception_take(core_exception *x, const tft_reader *r, const tft_rec *rec);

/* "RuntimeError at step 37 in model.tok_emb: msg" (no " in ..." when the
 * module is unknown). */
const char *core_exception_text(const core_exception *x, char *buf, size_t n);

#endif
