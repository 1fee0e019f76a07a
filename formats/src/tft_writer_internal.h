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

#include <stdbool.h>
#include <sys/types.h>

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

/* Rewrites the run id in w's file header (the header frame at the start
 * of the file, written in place with a fresh checksum; the rest of the
 * file does not carry the run id). For a process that learns its job's
 * run id after its rank file was opened (agreed through MPI after
 * MPI_Init, docs/MULTINODE.md). 0 or -errno (the header is unchanged on
 * disk then). Not for a file another process reads as it is written. */
int tft_writer_set_run_id(tft_writer *w, const uint8_t run_id[16]);

/* Writes m as dirfd/name the way tft_manifest_writeat writes manifest.json
 * (a temporary file of a fresh name, fsync, rename over the old one): the
 * per-rank manifest fragments of the in-process writer (FORMAT.md §2.4).
 * name must be a plain file name. 0 or -errno. */
int tft_manifest_write_namedat(int dirfd, const tft_manifest *m, unsigned mode, const char *name);

/* tft_manifest_read, refusing a file not owned by owner ((uid_t)-1: any)
 * with -EPERM; tft_manifest_read_dir_owned: its fragments and
 * manifest.json read so (the in-process writer merges only its own user's
 * fragments: another user may plant files in a shared directory). */
int tft_manifest_read_owned(const char *path, uid_t owner, tft_manifest *m, char *err, size_t errlen);
int tft_manifest_read_dir_owned(const char *dir, uid_t owner, tft_manifest *m, char *err, size_t errlen);

/* Whether name is a per-rank manifest fragment's, manifest.rank-*.json. */
bool tft_manifest_fragment_name(const char *name);

/* Adds src (a manifest of the same run: a fragment, or another node's
 * directory) to dst: ranks by file name (src's win; an entry without a host
 * gets src's host), world size and end the largest, start the earliest,
 * complete only when both are, incomplete reasons joined, drops added,
 * collectors appended. dst's run id, command and options stay (src's run id
 * when dst has none); comparing run ids is the caller's business.
 * 0 or -ENOMEM (dst then still valid, partly merged). */
int tft_manifest_merge(tft_manifest *dst, const tft_manifest *src);

#ifdef __cplusplus
}
#endif
#endif /* TFT_WRITER_INTERNAL_H */
