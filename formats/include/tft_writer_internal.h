/*
 * tft_writer_internal.h — the rank-file writer's entry beyond the public
 * API (tft_format.h), for tftrace's own code: the collector, which drops
 * the writers of a collection it gives up, and the tests, fuzzers and the
 * sample generator, which make torn files with it. Not installed, and not
 * exported from libtftrace.so: programs link the static format library
 * (tftformat) for it.
 */
#ifndef TFT_WRITER_INTERNAL_H
#define TFT_WRITER_INTERNAL_H

#include "tft_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Frees w without sealing its chunk or writing the index and seek table:
 * the file ends as a crashed writer's would (records already flushed stay
 * readable, FORMAT.md §4.1 "torn"). The fd is closed. NULL-safe. */
void tft_writer_abandon(tft_writer *w);

#ifdef __cplusplus
}
#endif
#endif /* TFT_WRITER_INTERNAL_H */
