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

/* What a compaction did (tft_rank_compact). Sizes in bytes: st_size
 * (apparent) and st_blocks x 512 (allocated) before and after. */
typedef struct tft_compact_stats {
    int compacted;          /* 1: the file was rewritten; 0: compact already */
    uint64_t before_bytes, before_blocks;
    uint64_t after_bytes, after_blocks;
    uint64_t torn_bytes;    /* a torn tail left out (a writer killed mid-chunk), 0 none */
} tft_compact_stats;

/* Compacts the flight-recorder rank file dirfd/name (FORMAT.md §3.6,
 * "Compaction"): writes its live frames (the header, the live full chunks,
 * each retired chunk's header followed by its kept chunk, a new index and
 * seek table) into the hidden file .NAME.compact beside it, fsyncs it
 * (sync), renames it over NAME and fsyncs the directory. Readers read the
 * same records from the new file; a torn tail is left out as readers leave
 * it. The file must not be written meanwhile (a live writer's later
 * chunks would go to the replaced file). Returns 0 (st->compacted 0 when
 * there was nothing to leave out), -ENOTSUP for a file not written with
 * keep_steps, -EPROTO for one that is not a rank file of this major
 * version, -EILSEQ for a damaged one (left as it is: readers skip its
 * damage, a compaction would have to decide), or another -errno; on every
 * failure the file is unchanged. st (may be NULL) is filled in all cases. */
int tft_rank_compact_at(int dirfd, const char *name, bool sync, tft_compact_stats *st);
/* The same on a path (its directory opened for the call). */
int tft_rank_compact(const char *path, bool sync, tft_compact_stats *st);

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
