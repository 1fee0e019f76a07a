/*
 * core_spill.h — what the cross-rank analyses (desyncs, tfdump --check's
 * first non-finite) need of each rank file, extracted in one pass per rank
 * and kept out of memory, so that a trace of many ranks is analysed with
 * a bounded number of rank files open (the ranks in flight) instead of
 * every one at once.
 *
 * A rank's extract is a stream of compact entries (collective, COMM and
 * parameter-tensor records, the strings they name, the result fingerprint
 * of each collective EXIT resolved within the rank), each tagged with the
 * key the old k-way merge of all rank files ordered it by: the running
 * maximum of the rank's (step, seq) so far. Merging the extracts by (key,
 * rank file index) visits the entries in exactly the order that merge
 * visited their records (core_spill.c says why), so the findings do not
 * change.
 *
 * Storage: one unlinked temporary file in $TMPDIR (else /tmp), written in
 * blocks of SPILL_BLOCK bytes; in memory per rank a block list and, while
 * merging, a read buffer of a few KiB. Extraction of distinct ranks may run
 * in parallel threads; everything else is single-threaded.
 */
#ifndef TFT_CORE_SPILL_H
#define TFT_CORE_SPILL_H

#include "core.h"
#include "core_pool.h" /* the extraction of distinct ranks runs on the pool */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct diff_spill diff_spill;

/* A rank's first tensor holding a NaN or an Inf, in merge order. */
typedef struct core_spill_nonfinite {
    bool found;
    int64_t kstep, kseq;      /* merge key (see above) */
    int64_t step, seq;        /* the record's own */
    uint64_t nan, inf;
    char name[96];
} core_spill_nonfinite;

/* An empty spill for nranks rank files; NULL and errno on failure
 * (ENOMEM, or why the temporary file could not be made). */
diff_spill *core_spill_new(int nranks);
void core_spill_free(diff_spill *sp); /* NULL-safe */

/* Reads rank file ri through r once from its start and appends its extract.
 * Safe to call from several threads at once for distinct ri. 0 or a
 * negative errno (a read error of r, -ENOMEM, -ENOSPC/-EIO writing). */
int core_spill_extract(diff_spill *sp, tft_reader *r, int ri);

/* core_spill_extract a record at a time, for a caller that reads the file
 * itself: begin (NULL and errno on failure), every record of the file from
 * its start in order (0 or a negative errno), end (keep false: an
 * abandoned pass; 0 or a write error). */
typedef struct core_spill_extractor core_spill_extractor;
core_spill_extractor *core_spill_extract_begin(diff_spill *sp, tft_reader *r, int ri);
int core_spill_extract_record(core_spill_extractor *x, const tft_rec *rec);
int core_spill_extract_end(core_spill_extractor *x, bool keep);

/* Rank ri's first non-finite tensor (found false: none, or not extracted). */
const core_spill_nonfinite *core_spill_nonfinite_of(const diff_spill *sp, int ri);

/* Transport (tfdiff --mpi): a rank's extract as bytes, and back. export
 * calls emit(ctx, bytes, n) with consecutive pieces of rank ri's entries
 * (not the non-finite summary, which only tfdump --check reads); import appends such bytes
 * to rank ri of another spill. 0 or a negative errno (emit's own). */
int core_spill_export(const diff_spill *sp, int ri, int (*emit)(void *ctx, const void *p, size_t n), void *ctx);
int core_spill_import(diff_spill *sp, int ri, const void *p, size_t n);
/* Bytes of rank ri's extract (what export emits). */
uint64_t core_spill_bytes(const diff_spill *sp, int ri);

/* One entry of an extract: this header, then (SPILL_COLL, SPILL_COMM) the
 * record, zero-padded to its current layout's size, (SPILL_STR) the
 * text, NUL-terminated, or (SPILL_CLOCK) the rank's core_clock_pair from
 * then on (core_clock.h), written when a CLOCK record changed it. 8-byte
 * aligned, len a multiple of 8. */
enum { SPILL_COLL = 1, SPILL_COMM, SPILL_PARAM, SPILL_STR, SPILL_CLOCK, SPILL_GRAD };
typedef struct spill_ent {
    uint32_t len;             /* bytes, this header included */
    uint16_t kind;            /* SPILL_* */
    uint16_t has_fp;          /* SPILL_COLL: fp holds the result's fingerprint; SPILL_PARAM: 1 when all zero */
    int64_t kstep, kseq;      /* merge key */
    int64_t step;             /* SPILL_COLL: the record's step, else the rank's last; SPILL_PARAM/GRAD: its step */
    uint64_t fp;              /* SPILL_COLL (has_fp), SPILL_PARAM/GRAD: fingerprint; SPILL_STR: text bytes */
    uint64_t name;            /* SPILL_PARAM, SPILL_STR: string id; SPILL_GRAD (grad.X): the id of param.X */
} spill_ent;

/* The extracts of every rank merged by (key, rank file index). next gives
 * 1 and the entry (valid until the next call) and its rank file index, 0
 * at the end, or a negative errno. */
typedef struct core_spill_merge core_spill_merge;
core_spill_merge *core_spill_merge_open(diff_spill *sp);
int core_spill_merge_next(core_spill_merge *m, const spill_ent **e, int *ri);
void core_spill_merge_close(core_spill_merge *m); /* NULL-safe */

#endif
