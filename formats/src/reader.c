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
 */
#include "format_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_getFrameHeader, ZSTD_frameHeader */
#include <zstd.h>
#include <zstd_errors.h>

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

#define RLOG(r, lvl, ...) tft_logf((r)->opts.log, (r)->opts.log_ctx, (lvl), __VA_ARGS__)

/* Records the first problem and raises the integrity level. */
static void problem(tft_reader *r, int integrity, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void problem(tft_reader *r, int integrity, uint64_t off, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (integrity > r->st.integrity)
        r->st.integrity = integrity;
    if (integrity == TFT_DAMAGED && r->st.bad_offset == 0)
        r->st.bad_offset = off;
    if (!r->st.first_problem[0] &&
        snprintf(r->st.first_problem, sizeof(r->st.first_problem), "%s: %s", r->name, msg) < 0)
        r->st.first_problem[0] = '\0';
    RLOG(r, integrity == TFT_DAMAGED ? TFT_LOG_ERROR : TFT_LOG_WARN, "%s: %s", r->name, msg);
}

static int chunks_push(tft_reader *r, const tft_chunk_info *ci)
{
    if (r->n_chunks == r->cap_chunks) {
        size_t ncap = r->cap_chunks ? r->cap_chunks * 2 : 64;
        tft_chunk_info *nc = realloc(r->chunks, ncap * sizeof(*nc));
        if (!nc)
            return -ENOMEM;
        r->chunks = nc;
        uint8_t *ns = realloc(r->chunk_state, ncap);
        if (!ns)
            return -ENOMEM;
        r->chunk_state = ns;
        r->cap_chunks = ncap;
    }
    r->chunk_state[r->n_chunks] = CHUNK_UNKNOWN;
    r->chunks[r->n_chunks++] = *ci;
    return 0;
}

static void chunk_from_hdr(tft_chunk_info *ci, const chunk_hdr_disk *h, uint64_t off)
{
    *ci = (tft_chunk_info){
        .offset = off, .chunk_no = h->chunk_no, .records = h->records,
        .raw_size = h->raw_size, .comp_size = h->comp_size,
        .first_step = h->first_step, .last_step = h->last_step,
        .first_seq = h->first_seq, .last_seq = h->last_seq,
        .first_ts = h->first_ts, .last_ts = h->last_ts, .dropped = h->dropped,
    };
}

static bool chunk_hdr_valid(const chunk_hdr_disk *h)
{
    return memcmp(h->magic, CHUNK_MAGIC, 4) == 0 &&
           h->checksum == fmt_checksum32(h, offsetof(chunk_hdr_disk, checksum)) &&
           h->raw_size <= CHUNK_RAW_LIMIT && h->comp_size <= ZSTD_compressBound(CHUNK_RAW_LIMIT);
}

/* ---- header -------------------------------------------------------------- */

static int read_header(tft_reader *r)
{
    uint32_t fh[2];
    if (r->file_size == 0) {
        RLOG(r, TFT_LOG_ERROR, "%s: empty file (the recorder wrote nothing)", r->name);
        return -EPROTO;
    }
    if (r->file_size < 8 || fmt_pread_full(r->fd, fh, 8, 0) < 0 || fh[0] != FRAME_MAGIC_HEADER) {
        RLOG(r, TFT_LOG_ERROR, "%s: not a tftrace rank file (bad magic at byte 0)", r->name);
        return -EPROTO;
    }
    uint32_t n = fh[1];
    if (n < 16 || n > 4096 || 8u + n > r->file_size) {
        RLOG(r, TFT_LOG_ERROR, "%s: header frame truncated or malformed (%u bytes)", r->name, n);
        return -EPROTO;
    }
    char buf[4096];
    if (fmt_pread_full(r->fd, buf, n, 8) < 0)
        return -EIO;
    file_hdr_disk h;
    memset(&h, 0, sizeof(h));
    memcpy(&h, buf, n < sizeof(h) ? n : sizeof(h));
    if (memcmp(h.magic, FILE_MAGIC, sizeof(FILE_MAGIC)) != 0) {
        RLOG(r, TFT_LOG_ERROR, "%s: not a tftrace rank file (bad header magic)", r->name);
        return -EPROTO;
    }
    if (h.major > TFT_FORMAT_MAJOR) {
        RLOG(r, TFT_LOG_ERROR,
             "%s: written by trace format %u.%u; this build reads %d.x — upgrade tftrace",
             r->name, h.major, h.minor, TFT_FORMAT_MAJOR);
        return -EPROTONOSUPPORT;
    }
    r->data_start = 8u + n;
    if (n < sizeof(h) || fmt_get_u32(buf + n - 4) != fmt_checksum32(buf, n - 4))
        problem(r, TFT_DAMAGED, 8, "header checksum mismatch; rank/host/clock fields may be wrong");
    if (n >= sizeof(h))
        r->keep_steps = h.reserved;
    r->info.major = h.major;
    r->info.minor = h.minor;
    memcpy(r->info.run_id, h.run_id, 16);
    r->info.rank = h.rank;
    r->info.world_size = h.world_size;
    r->info.pid = h.pid;
    r->info.flags = h.flags;
    r->info.start_realtime_ns = h.start_realtime_ns;
    r->info.start_monotonic_ns = h.start_monotonic_ns;
    memcpy(r->info.host, h.host, sizeof(r->info.host));
    r->info.host[sizeof(r->info.host) - 1] = '\0';
    return 0;
}

/* ---- retired chunks (flight-recorder mode, FORMAT.md §3.6) ------------------ */

/* Notes the steps of the retired chunk whose frame starts at off (its chunk
 * header stays readable); a damaged one is left out silently: the frame
 * is skippable either way. */
static void note_retired(tft_reader *r, uint64_t off, uint32_t frame_payload)
{
    chunk_hdr_disk h;
    if (frame_payload < sizeof(h) || fmt_pread_full(r->fd, &h, sizeof(h), off + 8) < 0 ||
        !chunk_hdr_valid(&h) || h.last_step == TFT_STEP_NONE)
        return;
    if (r->retired_last == TFT_STEP_NONE || h.last_step > r->retired_last)
        r->retired_last = h.last_step;
}

int tft_reader_full_steps(const tft_reader *r, long long *keep_steps, int64_t *first_full,
                          int64_t *last)
{
    if (!r)
        return -EINVAL;
    int64_t lo = TFT_STEP_NONE, hi = TFT_STEP_NONE;
    for (size_t i = 0; i < r->n_chunks; i++) {
        const tft_chunk_info *c = &r->chunks[i];
        if (c->first_step != TFT_STEP_NONE && (lo == TFT_STEP_NONE || c->first_step < lo))
            lo = c->first_step;
        if (c->last_step != TFT_STEP_NONE && (hi == TFT_STEP_NONE || c->last_step > hi))
            hi = c->last_step;
    }
    if (r->retired_last != TFT_STEP_NONE)
        lo = r->retired_last + 1; /* a live chunk may hold the rest of that step */
    if (hi != TFT_STEP_NONE && lo != TFT_STEP_NONE && lo > hi)
        lo = TFT_STEP_NONE; /* no step in full */
    if (keep_steps)
        *keep_steps = r->keep_steps;
    if (first_full)
        *first_full = lo;
    if (last)
        *last = hi;
    return 0;
}

static int gap_push(tft_reader *r, uint32_t frame_bytes, uint32_t decompressed)
{
    if (r->n_gap_frames + 2 > r->cap_gap_frames) {
        size_t ncap = r->cap_gap_frames ? r->cap_gap_frames * 2 : 32;
        uint32_t *ng = realloc(r->gap_frames, ncap * sizeof(*ng));
        if (!ng)
            return -ENOMEM;
        r->gap_frames = ng;
        r->cap_gap_frames = ncap;
    }
    r->gap_frames[r->n_gap_frames++] = frame_bytes;
    r->gap_frames[r->n_gap_frames++] = decompressed;
    return 0;
}

/* Steps over the unlisted frame at *off (before limit): a retired chunk, or a
 * kept chunk shadowed by its live partner; notes their seek-table entries.
 * Returns 0, or -1 when something else is there. */
static int gap_frame(tft_reader *r, uint64_t *off, uint64_t limit)
{
    uint32_t fh[2];
    if (fmt_pread_full(r->fd, fh, 8, *off) < 0 || *off + 8 + (uint64_t)fh[1] > limit)
        return -1;
    if (fh[0] == FRAME_MAGIC_RETIRED) {
        if (gap_push(r, 8 + fh[1], 0) < 0)
            return -1;
        note_retired(r, *off, fh[1]);
        *off += 8 + (uint64_t)fh[1];
        return 0;
    }
    chunk_hdr_disk h;
    if (fh[0] != FRAME_MAGIC_KEPT || fh[1] != sizeof(h) || fmt_pread_full(r->fd, &h, sizeof(h), *off + 8) < 0 ||
        !chunk_hdr_valid(&h) || *off + 8 + sizeof(h) + h.comp_size > limit ||
        gap_push(r, 8 + sizeof(h), 0) < 0 || gap_push(r, h.comp_size, h.raw_size) < 0)
        return -1;
    *off += 8 + sizeof(h) + (uint64_t)h.comp_size;
    return 0;
}

/* ---- index via the seek table -------------------------------------------- */

/* Checks every seek-table entry against the chunk list from the index, so a
 * flipped bit anywhere in the tail is found. Returns 1 when they agree. */
static int seek_table_matches(tft_reader *r, uint64_t st_off, uint64_t nframes, uint64_t ix_frame)
{
    if (nframes != 2 + 2 * (uint64_t)r->n_chunks + r->n_gap_frames / 2 - r->n_chunks)
        return -1;
    uint32_t *ent = malloc(nframes * 8);
    if (!ent)
        return -ENOMEM;
    int ok = fmt_pread_full(r->fd, ent, nframes * 8, st_off + 8) == 0 &&
             ent[0] == r->data_start && ent[1] == 0 && ent[2 * nframes - 2] == ix_frame &&
             ent[2 * nframes - 1] == 0;
    /* gap_frames: the retired frames before each live chunk, each run ended by a 0 */
    const uint32_t *e = ent + 2;
    size_t g = 0;
    for (size_t i = 0; ok && i < r->n_chunks; i++) {
        for (; ok && g < r->n_gap_frames && r->gap_frames[g]; g += 2, e += 2)
            ok = e[0] == r->gap_frames[g] && e[1] == r->gap_frames[g + 1];
        g += 2;
        ok = ok && e[0] == SKIPPABLE_HDR + sizeof(chunk_hdr_disk) && e[1] == 0 &&
             e[2] == r->chunks[i].comp_size && e[3] == r->chunks[i].raw_size;
        e += 4;
    }
    for (; ok && g < r->n_gap_frames; g += 2, e += 2)
        ok = r->gap_frames[g] && e[0] == r->gap_frames[g] && e[1] == r->gap_frames[g + 1];
    free(ent);
    return ok ? 1 : -1;
}

/* Loads the chunk list from the index. Returns 1 when loaded, 0 when the file
 * has no usable seek table (not closed), -1 when the tail is present but
 * damaged, negative errno (< -1) on I/O failure. */
static int load_index(tft_reader *r)
{
    uint64_t size = r->file_size;
    uint8_t foot[9];
    if (size < r->data_start + 8 + 9 || fmt_pread_full(r->fd, foot, 9, size - 9) < 0)
        return 0;
    if (fmt_get_u32(foot + 5) != SEEKTABLE_FOOTER_MAGIC)
        return 0;
    if (foot[4] != 0)
        return -1; /* descriptor: per-frame checksums are not written by us */
    uint64_t nframes = fmt_get_u32(foot);
    uint64_t st_bytes = 8 + nframes * 8 + 9;
    if (nframes < 2 || st_bytes > size - r->data_start)
        return -1;
    uint64_t st_off = size - st_bytes;
    uint32_t sh[2], last[2];
    if (fmt_pread_full(r->fd, sh, 8, st_off) < 0 || sh[0] != FRAME_MAGIC_SEEKTABLE ||
        sh[1] != st_bytes - 8)
        return -1;
    if (fmt_pread_full(r->fd, last, 8, st_off + 8 + (nframes - 1) * 8) < 0)
        return -1;
    uint64_t ix_frame = last[0];
    if (ix_frame < 8 + sizeof(index_hdr_disk) + 8 || ix_frame > st_off - r->data_start)
        return -1;
    uint64_t ix_off = st_off - ix_frame;
    uint64_t payload = ix_frame - 8;
    char *buf = malloc(payload);
    if (!buf)
        return -ENOMEM;
    int ret = -1;
    uint32_t ih[2];
    if (fmt_pread_full(r->fd, ih, 8, ix_off) < 0 || ih[0] != FRAME_MAGIC_INDEX || ih[1] != payload ||
        fmt_pread_full(r->fd, buf, payload, ix_off + 8) < 0)
        goto out;
    if (fmt_get_u32(buf + payload - 4) != fmt_checksum32(buf, payload - 4))
        goto out;
    index_hdr_disk hd;
    memcpy(&hd, buf, sizeof(hd));
    if (memcmp(hd.magic, INDEX_MAGIC, 4) != 0 ||
        sizeof(hd) + (uint64_t)hd.n_chunks * sizeof(index_entry_disk) + 8 != payload)
        goto out;
    uint64_t expect = r->data_start;
    for (uint32_t i = 0; i < hd.n_chunks; i++) {
        index_entry_disk e;
        memcpy(&e, buf + sizeof(hd) + (size_t)i * sizeof(e), sizeof(e));
        uint64_t end = e.offset + 8 + sizeof(chunk_hdr_disk) + e.comp_size;
        while (expect < e.offset) /* retired or shadowed chunks between live ones */
            if (gap_frame(r, &expect, e.offset) < 0)
                goto out;
        if (gap_push(r, 0, 0) < 0)
            goto out;
        if (e.offset != expect || end > ix_off || e.raw_size > CHUNK_RAW_LIMIT)
            goto out;
        expect = end;
        tft_chunk_info ci = {
            .offset = e.offset, .chunk_no = e.chunk_no, .records = e.records,
            .raw_size = e.raw_size, .comp_size = e.comp_size,
            .first_step = e.first_step, .last_step = e.last_step,
            .first_seq = e.first_seq, .last_seq = e.last_seq,
            .first_ts = e.first_ts, .last_ts = e.last_ts, .dropped = e.dropped,
        };
        if (chunks_push(r, &ci) < 0) {
            ret = -ENOMEM;
            goto out;
        }
    }
    while (expect < ix_off) /* after the last live chunk */
        if (gap_frame(r, &expect, ix_off) < 0)
            goto out;
    ret = expect == ix_off ? seek_table_matches(r, st_off, nframes, ix_frame) : -1;
out:
    free(buf);
    if (ret != 1) {
        r->n_chunks = 0;
        r->retired_last = TFT_STEP_NONE;
    }
    r->n_gap_frames = 0;
    return ret;
}

/* ---- index by scanning ----------------------------------------------------- */

/* Finds the next valid chunk header frame at or after from; returns its
 * offset, or the file size when there is none. Reads in 64 KiB windows. */
static uint64_t resync(tft_reader *r, uint64_t from)
{
    enum { WIN = 65536, HDR = 8 + sizeof(chunk_hdr_disk) };
    char *buf = malloc(WIN + HDR);
    uint64_t found = r->file_size;
    if (!buf)
        return found;
    for (uint64_t off = from; off + HDR <= r->file_size; off += WIN) {
        uint64_t n = r->file_size - off;
        if (n > WIN + HDR)
            n = WIN + HDR;
        if (fmt_pread_full(r->fd, buf, n, off) < 0)
            break;
        for (uint64_t i = 0; i + HDR <= n && i < WIN; i++) {
            if (fmt_get_u32(buf + i) != FRAME_MAGIC_CHUNK || fmt_get_u32(buf + i + 4) != sizeof(chunk_hdr_disk))
                continue;
            chunk_hdr_disk h;
            memcpy(&h, buf + i + 8, sizeof(h));
            if (chunk_hdr_valid(&h)) {
                found = off + i;
                goto out;
            }
        }
    }
out:
    free(buf);
    return found;
}

static int scan_frames(tft_reader *r, bool tail_damaged)
{
    uint64_t off = r->data_start, size = r->file_size;
    bool saw_index = false, saw_seektable = false;
    bool prev_retired = false; /* the frame before was a retired chunk: a kept one after it is read */
    if (r->st.integrity == TFT_DAMAGED) /* header size field may be wrong: find chunk 0 */
        off = resync(r, SKIPPABLE_HDR);
    r->n_chunks = 0;
    while (off < size) {
        uint32_t fh[2];
        if (size - off < 8) {
            problem(r, TFT_TORN, off, "torn tail at byte %llu: %llu bytes of an unfinished frame dropped",
                    (unsigned long long)off, (unsigned long long)(size - off));
            r->st.torn_offset = off;
            break;
        }
        if (fmt_pread_full(r->fd, fh, 8, off) < 0)
            return -EIO;
        uint64_t end = off + 8 + (uint64_t)fh[1];
        bool after_retired = prev_retired;
        prev_retired = fh[0] == FRAME_MAGIC_RETIRED;
        if ((fh[0] == FRAME_MAGIC_CHUNK || fh[0] == FRAME_MAGIC_KEPT) && fh[1] == sizeof(chunk_hdr_disk)) {
            chunk_hdr_disk h;
            if (end > size) {
                goto torn;
            }
            if (fmt_pread_full(r->fd, &h, sizeof(h), off + 8) < 0)
                return -EIO;
            if (chunk_hdr_valid(&h)) {
                if (end + h.comp_size > size)
                    goto torn;
                if (fh[0] == FRAME_MAGIC_KEPT && !after_retired) { /* its partner is live */
                    off = end + h.comp_size;
                    continue;
                }
                tft_chunk_info ci;
                chunk_from_hdr(&ci, &h, off);
                if (chunks_push(r, &ci) < 0)
                    return -ENOMEM;
                off = end + h.comp_size;
                continue;
            }
        } else if ((fh[0] & 0xFFFFFFF0u) == 0x184D2A50u && fh[0] != FRAME_MAGIC_HEADER) {
            /* index, seek table or a future skippable frame: skip it whole */
            if (end > size)
                goto torn;
            if (fh[0] == FRAME_MAGIC_INDEX)
                saw_index = true;
            if (fh[0] == FRAME_MAGIC_RETIRED)
                note_retired(r, off, fh[1]);
            if (fh[0] == FRAME_MAGIC_SEEKTABLE && end == size)
                saw_seektable = true;
            off = end;
            continue;
        }
        uint64_t next = resync(r, off + 1);
        problem(r, TFT_DAMAGED, off,
                "damaged frame at byte %llu (after chunk %zu); skipped %llu bytes to the next intact chunk",
                (unsigned long long)off, r->n_chunks, (unsigned long long)(next - off));
        off = next;
        continue;
    torn:
        if (tail_damaged) { /* the file was closed: a frame size is corrupt, not a tear */
            problem(r, TFT_DAMAGED, off,
                    "frame at byte %llu has a corrupt size; %zu chunks before it are intact",
                    (unsigned long long)off, r->n_chunks);
            break;
        }
        problem(r, TFT_TORN, off,
                "torn tail at byte %llu: the last %llu bytes (an unfinished chunk) were dropped; "
                "%zu complete chunks before it are intact",
                (unsigned long long)off, (unsigned long long)(size - off), r->n_chunks);
        r->st.torn_offset = off;
        break;
    }
    /* a seek-table footer says the file was closed: a missing index (its
     * magic flipped into another skippable frame's) is damage too */
    if (tail_damaged || (saw_index && saw_seektable))
        problem(r, TFT_DAMAGED, size, "seek table damaged; the chunk list was rebuilt by scanning");
    else if (r->st.integrity == TFT_INTACT) {
        /* cut exactly at a frame boundary: complete chunks, no index */
        problem(r, TFT_TORN, size, "file was not closed (no index); %zu chunks recovered by scanning",
                r->n_chunks);
        r->st.torn_offset = size;
    }
    r->st.index_rebuilt = 1;
    return 0;
}

/* ---- open / close ------------------------------------------------------------ */

tft_reader *tft_reader_open(const char *path, const tft_reader_opts *opts)
{
    tft_reader *r = calloc(1, sizeof(*r));
    if (!r) {
        errno = ENOMEM;
        return NULL;
    }
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
    if ((e = -read_header(r)) != 0)
        goto err_out;
    int li = load_index(r);
    if (li < -1) {
        e = -li;
        goto err_out;
    }
    if (li == 1)
        r->st.closed = 1;
    else if ((e = -scan_frames(r, li == -1)) != 0)
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
        e = read_header(&r);
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

/* Walks the decompressed records: structure and record count; interns
 * STRING records. Returns 0 or -EBADMSG with *bad_at set. */
static int check_records(tft_reader *r, const tft_chunk_info *ci, size_t *bad_at)
{
    size_t pos = 0;
    uint32_t count = 0;
    while (pos < r->raw_len) {
        const tft_rec *rec = (const tft_rec *)(r->raw + pos);
        if (tft_rec_check(rec, r->raw_len - pos) < 0) {
            *bad_at = pos;
            return -EBADMSG;
        }
        if (rec->kind == TFT_REC_STRING) {
            const tft_rec_string *s = (const tft_rec_string *)rec;
            if (!strmap_put(&r->strings, s->id, s->text, s->n))
                return -ENOMEM;
        }
        pos += rec->len;
        count++;
    }
    if (count != ci->records) {
        *bad_at = pos;
        return -EBADMSG;
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

/* Decompresses an encoded chunk's frame (content bytes) into the thread's
 * scratch and decodes it into r->raw. Returns NULL (r->raw_len set) or what is wrong;
 * *e = -ENOMEM when memory ran out. */
static const char *decode_chunk(tft_reader *r, const chunk_hdr_disk *h, const char *frame,
                                size_t content, int *e)
{
    decode_scratch *ds = &tl_scratch;
    if (grow(&ds->enc, &ds->enc_cap, content + 8) < 0) {
        *e = -ENOMEM;
        return NULL;
    }
    ZSTD_DCtx_setParameter(r->dctx, ZSTD_d_forceIgnoreChecksum,
                           r->verifying ? ZSTD_d_validateChecksum : ZSTD_d_ignoreChecksum);
    size_t got = ZSTD_decompressDCtx(r->dctx, ds->enc, content + 8, frame, h->comp_size);
    if (ZSTD_isError(got)) {
        if (ZSTD_getErrorCode(got) == ZSTD_error_memory_allocation) {
            *e = -ENOMEM;
            return NULL;
        }
        return ZSTD_getErrorCode(got) == ZSTD_error_checksum_wrong ? "checksum mismatch"
                                                                   : "compressed data corrupt";
    }
    if (got != content)
        return "decompressed size differs from its header";
    const char *why = NULL;
    int de = fmt_chunk_decode(&ds->codec, h->encoding, ds->enc, content, h->records, r->raw,
                              h->raw_size, &why);
    if (de == -ENOMEM) {
        *e = de;
        return NULL;
    }
    if (de)
        return why ? why : "encoded records corrupt";
    r->raw_len = h->raw_size;
    return NULL;
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
    int e = fmt_pread_full(r->fd, r->comp, total, ci->offset);
    if (e == -ENODATA)
        e = -EIO;
    if (e)
        goto out;
    const char *why = NULL;
    chunk_hdr_disk h;
    memcpy(&h, r->comp + 8, sizeof(h));
    uint32_t fmagic = fmt_get_u32(r->comp);
    if ((fmagic != FRAME_MAGIC_CHUNK && fmagic != FRAME_MAGIC_KEPT) || fmt_get_u32(r->comp + 4) != sizeof(h) ||
        !chunk_hdr_valid(&h) || h.comp_size != ci->comp_size ||
        h.raw_size != ci->raw_size)
        why = "chunk header checksum mismatch";
    const char *frame = r->comp + hdr;
    size_t bad_at = 0;
    if (!why && fmt_checksum32(frame, ci->comp_size) != h.comp_checksum)
        why = "checksum mismatch";
    /* an encoded chunk (1.4) decompresses to its encoding, decoded below */
    uint32_t enc = why ? 0 : h.encoding;
    if (enc & ~CHUNK_ENC_KNOWN)
        why = "unknown chunk encoding (written by a newer tftrace: upgrade tftrace)";
    else if ((enc & CHUNK_ENC_COLUMNS) && h.records > ci->raw_size / sizeof(tft_rec))
        why = "record count impossible for the chunk's size";
    size_t content = fmt_chunk_encoded_size(enc, h.records, ci->raw_size);
    if (!why && !frame_shape_ok(frame, ci, content))
        why = "compressed frame header corrupt";
    if (!why && grow(&r->raw, &r->raw_cap, ci->raw_size + 8) < 0) {
        e = -ENOMEM;
        goto out;
    }
    if (!why && enc) {
        why = decode_chunk(r, &h, frame, content, &e);
        if (tl_scratch.readers <= 0) /* a thread that opened no reader keeps nothing */
            decode_scratch_free();
    }
    if (e)
        goto out;
    if (!why && !enc) {
        /* The XXH3 of the compressed bytes already guards against damage on
         * disk; zstd's own content checksum (XXH64 of the output, ~10% of
         * read time) is checked by tft_reader_verify only. */
        ZSTD_DCtx_setParameter(r->dctx, ZSTD_d_forceIgnoreChecksum,
                               r->verifying ? ZSTD_d_validateChecksum : ZSTD_d_ignoreChecksum);
        size_t got = ZSTD_decompressDCtx(r->dctx, r->raw, ci->raw_size + 8, frame, ci->comp_size);
        if (ZSTD_isError(got))
            why = ZSTD_getErrorCode(got) == ZSTD_error_checksum_wrong ? "checksum mismatch"
                  : ZSTD_getErrorCode(got) == ZSTD_error_memory_allocation ? NULL
                                                                         : "compressed data corrupt";
        else if (got != ci->raw_size)
            why = "decompressed size differs from its header";
        else
            r->raw_len = got;
        if (ZSTD_isError(got) && !why) {
            e = -ENOMEM;
            goto out;
        }
    }
    if (!why) {
        int ce = check_records(r, ci, &bad_at);
        if (ce == -ENOMEM) {
            e = ce;
            goto out;
        }
        if (ce)
            why = "malformed record";
    }
    if (why) {
        r->raw_len = 0;
        if (r->chunk_state[i] != CHUNK_BAD) {
            r->chunk_state[i] = CHUNK_BAD;
            r->st.chunks_bad++;
            problem(r, TFT_DAMAGED, ci->offset,
                    "chunk %zu %s at byte %llu; its records are lost, the other chunks are intact",
                    i, why, (unsigned long long)ci->offset);
        }
        e = 1;
        goto out;
    }
    if (r->chunk_state[i] == CHUNK_UNKNOWN) {
        r->chunk_state[i] = CHUNK_OK;
        r->st.raw_bytes += ci->raw_size;
        r->st.dropped += ci->dropped;
    }
out:
    free(r->comp);
    r->comp = NULL;
    if (e < 0)
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
    }
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
