/*
 * tft_writer_internal.h — the format library's writing entries beyond the
 * public API (tft_format.h), for tftrace's own code: the collector, which
 * drops the writers of a collection it gives up; the tests, fuzzers and the
 * sample generator, which make torn files with it; `tfdump --extract`, which
 * writes a manifest with an object of its own. Not installed, and not
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

/* Writes JSON (a manifest's text, as tft_manifest_to_json gives it, possibly
 * with objects added) as dirfd/manifest.json the way tft_manifest_writeat
 * does: a temporary file of a fresh name (O_EXCL, no links followed), a
 * trailing newline, fsync, rename over the old one. mode 0: 0644 less the
 * umask, else exactly mode. Returns 0 or -errno; nothing is left behind on
 * failure. */
int tft_manifest_write_textat(int dirfd, const char *json, unsigned mode);

#ifdef __cplusplus
}
#endif
#endif /* TFT_WRITER_INTERNAL_H */
