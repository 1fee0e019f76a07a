/*
 * writer_state_internal.h — what the writer's two files share (writer.c: the
 * chunks and the append path; writer_file.c: the file's frames at open and
 * close): the writer's state and its chunk helpers. Not installed.
 */
#ifndef TFT_WRITER_STATE_INTERNAL_H
#define TFT_WRITER_STATE_INTERNAL_H

#include "format_internal.h"
#include "tft_writer_internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <zstd.h>

/* Room in front of a chunk's records for its STRING records, so the chunk
 * compresses from one buffer; larger string blocks take the streaming path. */
#define STRING_HEADROOM (256u * 1024u)

/* Keep mode, per chunk written: a full chunk, alone or followed by the kept
 * chunk of its kept records (its partner); a kept chunk shadowed by its
 * live partner or live itself (the partner retired); a retired full chunk. */
enum { CST_FULL = 0, CST_FULL_PAIRED, CST_KEPT_SHADOW, CST_KEPT_LIVE, CST_RETIRED };

/* Keep mode: a full chunk past this many record bytes ends at the next step
 * boundary, so whole steps retire a few at a time, in blocks the file
 * system can return. */
#define KEEP_SEAL_BYTES (256u * 1024u)

/* The records of one chunk being filled. */
typedef struct chunk_state {
    char *rawbuf;             /* STRING_HEADROOM + chunk_bytes + one max record */
    char *raw;                /* records of the chunk, after the headroom */
    size_t str_bytes;         /* STRING record bytes the chunk will need */
    size_t raw_len;
    uint32_t rec_count;
    uint32_t gen;             /* this chunk's generation: string marks */
    int slot;                 /* 0 the full records' chunk, 1 the kept ones' */
    bool kept;                /* keep mode: holds only records kept for the whole run */
    uint64_t dropped;         /* dropped count to attach to the chunk */
    int64_t first_step, last_step, first_seq, last_seq;
    uint64_t first_ts, last_ts;
    uint64_t *needed;         /* string ids referenced by the chunk, deduplicated */
    size_t n_needed, cap_needed;
} chunk_state;

struct tft_writer {
    int fd;
    int err;                  /* first I/O error, sticky */
    tft_writer_opts opts;
    ZSTD_CCtx *cctx;
    uint64_t offset;          /* file bytes written so far */
    uint32_t header_frame_bytes;
    uint64_t header_at;       /* file offset of the header frame's payload */
    file_hdr_disk hdr;        /* that payload, for tft_writer_set_run_id */

    chunk_state c;            /* the chunk being filled */
    chunk_state kc;           /* --keep-steps: the kept records' chunk, swapped with c */
    int64_t keep_steps;       /* opts.keep_steps: 0 off */
    int64_t max_step;         /* largest step appended, TFT_STEP_NONE before any */
    uint32_t gen;             /* chunk generations handed out (string marks) */
    uint8_t *cstate;          /* keep mode, per index entry: CST_FULL, CST_KEPT, CST_RETIRED */
    size_t next_retire;       /* first index entry that may still retire */
    bool no_punch;            /* the file system refused a hole once */

    char *strbuf;             /* string definitions block, built at seal */
    size_t strbuf_cap;
    char *comp;               /* compressed frame */
    size_t comp_cap;
    uint32_t encoding;        /* CHUNK_ENC_* bits of every chunk (0: plain records) */
    char *enc;                /* the encoded chunk (fmt_chunk_encode) */
    size_t enc_cap;
    fmt_codec codec;

    tft_rec_thread thread;    /* the last THREAD switch appended, repeated at each chunk start */
    bool has_thread;
    strmap strings;           /* every registered string */
    index_entry_disk *index;  /* one entry per sealed chunk */
    size_t n_index, cap_index;
    tft_writer_stats stats;
};

/* Makes the other chunk (keep mode's kept records) the one the chunk
 * functions work on. */
void fmt_writer_chunk_swap(tft_writer *w);
/* Empties the current chunk and gives it a new generation. */
void fmt_writer_chunk_reset(tft_writer *w);
/* Writes a skippable frame (magic, n payload bytes) at the end of the
 * file. 0 or -errno. */
int fmt_writer_skippable(tft_writer *w, uint32_t magic, const void *payload, uint32_t n);

#endif
