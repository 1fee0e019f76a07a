/*
 * reader.c — streams the records of one rank file in order.
 *
 * Opening reads the header frame and the index (found through the seek
 * table at the end of the file); when the file was not closed or its tail is
 * damaged, the chunk list is rebuilt by walking the frames, dropping a torn
 * tail and resynchronising past damaged frames. Chunks are decompressed one
 * at a time, so memory is one chunk (<= 4 MiB raw) plus the chunk list (80
 * bytes per chunk) and the distinct strings, whatever the file size.
 *
 * Input is untrusted: every size read from the file is bounds-checked before
 * it is used, and damage is reported, never asserted.
 *
 * This file: opening and closing a reader, loading a chunk, the records in
 * order; what opening reads — the header and the chunk list, from the index
 * or a scan — is in reader_index.c.
 */
#include "reader_state_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_getFrameHeader, ZSTD_frameHeader */
#include <zstd.h>
#include <zstd_errors.h>

/* An encoded chunk's zstd output and the decoder's tables are needed only
 * while a chunk loads, so the readers of one thread share them: a merge of
 * N rank files holds N decoded chunks, not 2N. Freed when the thread's last
 * open reader closes (a reader closed on another thread than it was opened
 * on leaves them until that thread closes its last one). */
typedef struct decode_scratch {
    char *enc;
    size_t enc_cap;
    fmt_codec codec;
    long readers;             /* readers opened on this thread, still open */
} decode_scratch;
static _Thread_local decode_scratch tl_scratch;

static void decode_scratch_free(void)
{
    free(tl_scratch.enc);
    fmt_codec_free(&tl_scratch.codec);
    memset(&tl_scratch, 0, sizeof(tl_scratch));
}

static void decode_scratch_release(void)
{
    if (--tl_scratch.readers <= 0)
        decode_scratch_free();
}

/* ---- open / close ------------------------------------------------------------ */

tft_reader *tft_reader_open(const char *path, const tft_reader_opts *opts)
{
    tft_reader *r = calloc(1, sizeof(*r));
    if (!r) {
        errno = ENOMEM;
        return NULL;
    }
    r->hole_lo = r->hole_hi = TFT_STEP_NONE;
    int e = 0;
    tl_scratch.readers++; /* tft_reader_close releases it, on every path */
    r->fd = -1;
    r->retired_last = TFT_STEP_NONE;
    strmap_init(&r->strings);
    if (opts)
        memcpy(&r->opts, opts, opts->sz < sizeof(r->opts) ? opts->sz : sizeof(r->opts));
    r->opts.sz = sizeof(r->opts);
    r->name = strdup(r->opts.display_name ? r->opts.display_name : path);
    r->opts.display_name = NULL;
    r->dctx = ZSTD_createDCtx();
    if (!r->name || !r->dctx) {
        e = ENOMEM;
        goto err_out;
    }
    /* O_NONBLOCK: opening a FIFO must not wait for a writer */
    r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat sb;
    if (r->fd < 0 || fstat(r->fd, &sb) < 0) {
        e = errno;
        RLOG(r, TFT_LOG_ERROR, "%s: cannot open: %s", r->name, strerror(e));
        goto err_out;
    }
    if (!S_ISREG(sb.st_mode)) {
        e = EISDIR;
        RLOG(r, TFT_LOG_ERROR, "%s: not a regular file", r->name);
        goto err_out;
    }
    r->file_size = (uint64_t)sb.st_size;
    r->dev = (uint64_t)sb.st_dev;
    r->ino = (uint64_t)sb.st_ino;
    r->st.file_bytes = r->file_size;
    if ((e = -fmt_reader_read_header(r)) != 0)
        goto err_out;
    int li = fmt_reader_load_index(r);
    if (li < -1) {
        e = -li;
        goto err_out;
    }
    if (li == 1)
        r->st.closed = 1;
    else if ((e = -fmt_reader_scan_frames(r, li == -1)) != 0)
        goto err_out;
    r->st.chunks = r->n_chunks;
    return r;
err_out:
    tft_reader_close(r);
    errno = e ? e : EIO;
    return NULL;
}

void tft_reader_close(tft_reader *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    ZSTD_freeDCtx(r->dctx);
    strmap_free(&r->strings);
    free(r->chunks);
    free(r->gap_frames);
    free(r->chunk_state);
    free(r->comp);
    free(r->raw);
    decode_scratch_release();
    free(r->name);
    free(r);
}

void fmt_reader_file_id(const tft_reader *r, uint64_t *dev, uint64_t *ino)
{
    *dev = r->dev;
    *ino = r->ino;
}

int fmt_reader_peek(const char *path, tft_file_info *info, uint64_t *dev, uint64_t *ino)
{
    tft_reader r = {.fd = -1, .name = (char *)path}; /* no log: nothing is said */
    struct stat sb;
    r.fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (r.fd < 0)
        return -errno;
    int e = fstat(r.fd, &sb) < 0 ? -errno : !S_ISREG(sb.st_mode) ? -EISDIR : 0;
    if (!e) {
        r.file_size = (uint64_t)sb.st_size;
        e = fmt_reader_read_header(&r);
    }
    close(r.fd);
    if (e)
        return e;
    *info = r.info;
    *dev = (uint64_t)sb.st_dev;
    *ino = (uint64_t)sb.st_ino;
    return 0;
}

const tft_file_info *tft_reader_info(const tft_reader *r) { return &r->info; }
const char *tft_reader_name(const tft_reader *r) { return r->name; }
size_t tft_reader_chunk_count(const tft_reader *r) { return r->n_chunks; }

const tft_chunk_info *tft_reader_chunk(const tft_reader *r, size_t i)
{
    return i < r->n_chunks ? &r->chunks[i] : NULL;
}

const char *tft_reader_string(const tft_reader *r, uint64_t id)
{
    strmap_entry *e = strmap_find(&r->strings, id);
    return e ? e->text : NULL;
}

void tft_reader_thread(const tft_reader *r, tft_thread_info *out)
{
    *out = r->thread;
}

void tft_reader_get_status(const tft_reader *r, tft_reader_status *out)
{
    *out = r->st;
}

/* ---- chunk loading ------------------------------------------------------------ */

static int grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    char *nb = realloc(*buf, need);
    if (!nb)
        return -ENOMEM;
    *buf = nb;
    *cap = need;
    return 0;
}

/* The steps of loading a chunk share one result: 0 so far intact; 1 the
 * chunk is damaged, *why saying how (reported once, its records skipped);
 * a negative errno when reading failed or memory ran out. */

/* Walks the decompressed records: structure and record count; interns
 * STRING records. 0, 1 ("malformed record") or -ENOMEM. */
static int check_records(tft_reader *r, const tft_chunk_info *ci, const char **why)
{
    size_t pos = 0;
    uint32_t count = 0;
    while (pos < r->raw_len) {
        const tft_rec *rec = (const tft_rec *)(r->raw + pos);
        if (tft_rec_check(rec, r->raw_len - pos) < 0)
            break;
        if (rec->kind == TFT_REC_STRING) {
            const tft_rec_string *s = (const tft_rec_string *)rec;
            if (!strmap_put(&r->strings, s->id, s->text, s->n))
                return -ENOMEM;
        }
        pos += rec->len;
        count++;
    }
    if (pos < r->raw_len || count != ci->records) {
        *why = "malformed record";
        return 1;
    }
    return 0;
}

/* The chunk's zstd frame must be exactly one frame of comp_size bytes with a
 * content checksum and the recorded content size, so a flipped flag bit
 * cannot switch the checksum off or end the frame early. */
static bool frame_shape_ok(const char *frame, const tft_chunk_info *ci, size_t content)
{
    ZSTD_frameHeader fh;
    if (ZSTD_getFrameHeader(&fh, frame, ci->comp_size) != 0 || fh.frameType != ZSTD_frame ||
        !fh.checksumFlag || fh.frameContentSize != content)
        return false;
    return ZSTD_findFrameCompressedSize(frame, ci->comp_size) == ci->comp_size;
}

/* Chunk ci's header frame (at r->comp, its zstd frame behind it) against
 * its index entry, the frame's checksum, the encoding and the zstd frame
 * header: 0 with *h and *content (the frame's decompressed bytes) set, or
 * 1. */
static int chunk_check(const tft_reader *r, const tft_chunk_info *ci, chunk_hdr_disk *h, size_t *content,
                       const char **why)
{
    const char *frame = r->comp + 8 + sizeof(*h);
    memcpy(h, r->comp + 8, sizeof(*h));
    uint32_t fmagic = fmt_get_u32(r->comp);
    if ((fmagic != FRAME_MAGIC_CHUNK && fmagic != FRAME_MAGIC_KEPT) || fmt_get_u32(r->comp + 4) != sizeof(*h) ||
        !fmt_chunk_hdr_valid(h) || h->comp_size != ci->comp_size || h->raw_size != ci->raw_size)
        *why = "chunk header checksum mismatch";
    else if (fmt_checksum32(frame, ci->comp_size) != h->comp_checksum)
        *why = "checksum mismatch";
    /* an encoded chunk (1.4) decompresses to its encoding, decoded after */
    else if (h->encoding & ~CHUNK_ENC_KNOWN)
        *why = "unknown chunk encoding (written by a newer tftrace: upgrade tftrace)";
    else if ((h->encoding & CHUNK_ENC_COLUMNS) && h->records > ci->raw_size / sizeof(tft_rec))
        *why = "record count impossible for the chunk's size";
    else if (!frame_shape_ok(frame, ci, *content = fmt_chunk_encoded_size(h->encoding, h->records, ci->raw_size)))
        *why = "compressed frame header corrupt";
    return *why ? 1 : 0;
}

/* What zstd's error code says of a chunk's frame: 1 with *why, or -ENOMEM. */
static int zstd_damage(size_t err, const char **why)
{
    if (ZSTD_getErrorCode(err) == ZSTD_error_memory_allocation)
        return -ENOMEM;
    *why = ZSTD_getErrorCode(err) == ZSTD_error_checksum_wrong ? "checksum mismatch" : "compressed data corrupt";
    return 1;
}

/* Decompresses a plain chunk's frame into r->raw. The XXH3 of the
 * compressed bytes already guards against damage on disk; zstd's own
 * content checksum (XXH64 of the output, ~10% of read time) is checked by
 * tft_reader_verify only. 0, 1 or -ENOMEM. */
static int decompress_plain(tft_reader *r, const tft_chunk_info *ci, const char *frame, const char **why)
{
    ZSTD_DCtx_setParameter(r->dctx, ZSTD_d_forceIgnoreChecksum,
                           r->verifying ? ZSTD_d_validateChecksum : ZSTD_d_ignoreChecksum);
    size_t got = ZSTD_decompressDCtx(r->dctx, r->raw, ci->raw_size + 8, frame, ci->comp_size);
    if (ZSTD_isError(got))
        return zstd_damage(got, why);
    if (got != ci->raw_size) {
        *why = "decompressed size differs from its header";
        return 1;
    }
    r->raw_len = got;
    return 0;
}

/* Decompresses an encoded chunk's frame (content bytes) into the thread's
 * scratch and decodes it into r->raw. 0, 1 or -ENOMEM. */
static int decode_chunk(tft_reader *r, const chunk_hdr_disk *h, const char *frame, size_t content,
                        const char **why)
{
    decode_scratch *ds = &tl_scratch;
    if (grow(&ds->enc, &ds->enc_cap, content + 8) < 0)
        return -ENOMEM;
    ZSTD_DCtx_setParameter(r->dctx, ZSTD_d_forceIgnoreChecksum,
                           r->verifying ? ZSTD_d_validateChecksum : ZSTD_d_ignoreChecksum);
    size_t got = ZSTD_decompressDCtx(r->dctx, ds->enc, content + 8, frame, h->comp_size);
    if (ZSTD_isError(got))
        return zstd_damage(got, why);
    if (got != content) {
        *why = "decompressed size differs from its header";
        return 1;
    }
    const char *what = NULL;
    int de = fmt_chunk_decode(&ds->codec, h->encoding, ds->enc, content, h->records, r->raw, h->raw_size, &what);
    if (de == -ENOMEM)
        return de;
    if (de) {
        *why = what ? what : "encoded records corrupt";
        return 1;
    }
    r->raw_len = h->raw_size;
    return 0;
}

/* Chunk i was read whole (0) or found damaged (1, why): its counts and its
 * damage go into the status once. */
static void chunk_note(tft_reader *r, size_t i, int damaged, const char *why)
{
    const tft_chunk_info *ci = &r->chunks[i];
    if (damaged && r->chunk_state[i] != CHUNK_BAD) {
        r->chunk_state[i] = CHUNK_BAD;
        r->st.chunks_bad++;
        fmt_reader_problem(r, TFT_DAMAGED, ci->offset,
                           "chunk %zu %s at byte %llu; its records are lost, the other chunks are intact", i, why,
                           (unsigned long long)ci->offset);
    } else if (!damaged && r->chunk_state[i] == CHUNK_UNKNOWN) {
        r->chunk_state[i] = CHUNK_OK;
        r->st.raw_bytes += ci->raw_size;
        r->st.dropped += ci->dropped;
    }
}

/* Loads chunk i into r->raw. Returns 0, 1 when the chunk is damaged (reported
 * and skipped), or a negative errno on I/O failure. The compressed bytes
 * (at most the file's size) are held only while the chunk loads; the raw
 * buffer grows to a chunk's stated size only once its checksum and frame
 * header agree with that size, so a damaged header costs no memory. */
static int load_chunk(tft_reader *r, size_t i)
{
    const tft_chunk_info *ci = &r->chunks[i];
    size_t hdr = 8 + sizeof(chunk_hdr_disk);
    size_t total = hdr + ci->comp_size;
    r->raw_len = r->pos = 0;
    memset(&r->thread, 0, sizeof(r->thread)); /* a chunk names its own threads */
    free(r->comp);
    if (!(r->comp = malloc(total)))
        return -ENOMEM;
    const char *why = NULL;
    chunk_hdr_disk h;
    size_t content = 0;
    int e = fmt_pread_full(r->fd, r->comp, total, ci->offset);
    if (e == -ENODATA)
        e = -EIO;
    if (!e)
        e = chunk_check(r, ci, &h, &content, &why);
    if (!e && grow(&r->raw, &r->raw_cap, ci->raw_size + 8) < 0)
        e = -ENOMEM;
    if (!e && h.encoding) {
        e = decode_chunk(r, &h, r->comp + hdr, content, &why);
        if (tl_scratch.readers <= 0) /* a thread that opened no reader keeps nothing */
            decode_scratch_free();
    } else if (!e) {
        e = decompress_plain(r, ci, r->comp + hdr, &why);
    }
    if (!e)
        e = check_records(r, ci, &why);
    if (e >= 0)
        chunk_note(r, i, e, why);
    free(r->comp);
    r->comp = NULL;
    if (e)
        r->raw_len = 0;
    return e;
}

int tft_reader_next(tft_reader *r, const tft_rec **rec)
{
    for (;;) {
        while (r->pos < r->raw_len) {
            const tft_rec *x = (const tft_rec *)(r->raw + r->pos);
            r->pos += x->len;
            if (x->kind == TFT_REC_STRING)
                continue;
            if (x->kind == TFT_REC_THREAD && x->len >= sizeof(tft_rec_thread) &&
                ((const tft_rec_thread *)x)->event == TFT_THREAD_SWITCH) {
                const tft_rec_thread *t = (const tft_rec_thread *)x;
                r->thread = (tft_thread_info){.known = 1, .tid = t->tid, .index = t->index, .name = t->name};
            }
            r->st.records++;
            *rec = x;
            return 1;
        }
        if (r->next_chunk >= r->n_chunks)
            return 0;
        int e = load_chunk(r, r->next_chunk++);
        if (e < 0)
            return e;
        if (e == 1) {   /* a damaged chunk: the records after it are not the ones before's sequel */
            const tft_chunk_info *ci = &r->chunks[r->next_chunk - 1];
            r->holes++;
            if (ci->first_step != TFT_STEP_NONE && (r->hole_lo == TFT_STEP_NONE || ci->first_step < r->hole_lo))
                r->hole_lo = ci->first_step;
            if (ci->last_step != TFT_STEP_NONE && (r->hole_hi == TFT_STEP_NONE || ci->last_step > r->hole_hi))
                r->hole_hi = ci->last_step;
        }
    }
}

uint64_t tft_reader_holes(const tft_reader *r)
{
    return r->holes;
}

int tft_reader_hole_steps(const tft_reader *r, int64_t *lo, int64_t *hi)
{
    *lo = r->hole_lo;
    *hi = r->hole_hi;
    return r->hole_lo != TFT_STEP_NONE && r->hole_hi != TFT_STEP_NONE;
}

int tft_reader_rewind(tft_reader *r)
{
    r->next_chunk = 0;
    r->raw_len = r->pos = 0;
    memset(&r->thread, 0, sizeof(r->thread));
    return 0;
}

int tft_reader_seek_step(tft_reader *r, int64_t step)
{
    size_t i = 0;
    while (i < r->n_chunks &&
           (r->chunks[i].last_step == TFT_STEP_NONE || r->chunks[i].last_step < step))
        i++;
    /* chunks without steps just before the target may hold its first records */
    while (i > 0 && r->chunks[i - 1].last_step == TFT_STEP_NONE)
        i--;
    r->next_chunk = i;
    r->raw_len = r->pos = 0;
    return 0;
}

int tft_reader_verify(tft_reader *r, tft_reader_status *out)
{
    r->verifying = 1;
    for (size_t i = 0; i < r->n_chunks; i++) {
        int e = load_chunk(r, i);
        if (e < 0) {
            r->verifying = 0;
            return e;
        }
    }
    r->verifying = 0;
    tft_reader_rewind(r);
    if (out)
        *out = r->st;
    return r->st.integrity == TFT_INTACT ? 0 : 1;
}
