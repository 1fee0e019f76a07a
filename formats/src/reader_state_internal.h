/*
 * reader_state_internal.h — what the reader's two files share (reader.c:
 * open, close, chunk loading, records; reader_index.c: the header, the
 * chunk list and the helpers both use): the reader's state and the
 * functions reader.c calls in reader_index.c (never the other way).
 * Not installed.
 */
#ifndef TFT_READER_STATE_INTERNAL_H
#define TFT_READER_STATE_INTERNAL_H

#include "format_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <zstd.h>

enum { CHUNK_UNKNOWN = 0, CHUNK_OK = 1, CHUNK_BAD = 2 };

struct tft_reader {
    int fd;
    uint64_t dev, ino;        /* the file (fstat), so a trace tells two names of one file apart */
    char *name;               /* display name for messages */
    tft_reader_opts opts;
    uint64_t file_size;
    uint64_t data_start;      /* first byte after the header frame */
    tft_file_info info;

    tft_chunk_info *chunks;   /* the chunk list (from the index or a scan) */
    uint8_t *chunk_state;     /* CHUNK_* per chunk: damage is reported once */
    size_t n_chunks, cap_chunks;
    size_t next_chunk;        /* next chunk to load */
    uint64_t holes;           /* damaged chunks tft_reader_next skipped (every pass counts) */
    int64_t hole_lo, hole_hi; /* the steps the skipped chunks held (their union), TFT_STEP_NONE none */

    ZSTD_DCtx *dctx;
    char *comp;               /* chunk header frame + compressed frame, while a chunk loads */
    char *raw;                /* decompressed records of the current chunk */
    size_t raw_cap, raw_len, pos;

    strmap strings;
    tft_thread_info thread;   /* thread of the record returned last (THREAD switches) */
    tft_reader_status st;
    int verifying;            /* tft_reader_verify: check zstd's content checksum too */
    uint32_t keep_steps;      /* file header: flight-recorder mode's N, 0 off */
    int64_t retired_last;     /* largest last step of a retired chunk, TFT_STEP_NONE none */
    uint32_t *gap_frames;     /* load_index: seek-table entries (pairs) of the frames between
                               * live chunks: retired and shadowed kept ones; (0,0) ends a run */
    size_t n_gap_frames, cap_gap_frames;
};

#define RLOG(r, lvl, ...) tft_logf((r)->opts.log, (r)->opts.log_ctx, (lvl), __VA_ARGS__)

/* Whether a chunk header's checksum and bounds hold. Inline: reader.c's
 * chunk loading and reader_index.c's scans both test every header. */
static inline bool fmt_chunk_hdr_valid(const chunk_hdr_disk *h)
{
    return memcmp(h->magic, CHUNK_MAGIC, 4) == 0 &&
           h->checksum == fmt_checksum32(h, offsetof(chunk_hdr_disk, checksum)) &&
           h->raw_size <= CHUNK_RAW_LIMIT && h->comp_size <= ZSTD_compressBound(CHUNK_RAW_LIMIT);
}

/* ---- reader_index.c ---- */

/* Records the first problem and raises the integrity level (TFT_DAMAGED:
 * off is the damaged byte); logged as an error or a warning. */
void fmt_reader_problem(tft_reader *r, int integrity, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reads and checks the header frame into r->info. 0 or -errno (-EPROTO
 * not a tftrace file, -EPROTONOSUPPORT a newer major, ...). */
int fmt_reader_read_header(tft_reader *r);
/* The chunk list from the index through the seek table: 1 when loaded, 0
 * when the file has no usable seek table (not closed), -1 when the tail is
 * present but damaged, a negative errno (< -1) on I/O failure. */
int fmt_reader_load_index(tft_reader *r);
/* The chunk list by walking the frames (tail_damaged: the index was found
 * damaged). 0 or -errno. */
int fmt_reader_scan_frames(tft_reader *r, bool tail_damaged);

#endif
