/*
 * reader_index.c — what opening a rank file reads (reader.c opens): the
 * header frame, then the chunk list — from the index, found through the
 * seek table at the end of a closed file, or, for a file that was not
 * closed or whose tail is damaged, by walking the frames, dropping a torn
 * tail and resynchronising past damaged frames; the chunks a flight
 * recorder retired (FORMAT.md §3.6). Every size read is bounds-checked;
 * damage is reported through fmt_reader_problem, which is here for
 * reader.c's use too.
 */
#include "reader_state_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_getFrameHeader, ZSTD_frameHeader */
#include <zstd.h>

/* ---- problems, for reader.c too ------------------------------------------ */

void fmt_reader_problem(tft_reader *r, int integrity, uint64_t off, const char *fmt, ...)
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

/* ---- the chunk list ------------------------------------------------------ */

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

/* ---- header -------------------------------------------------------------- */

int fmt_reader_read_header(tft_reader *r)
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
        fmt_reader_problem(r, TFT_DAMAGED, 8, "header checksum mismatch; rank/host/clock fields may be wrong");
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
        !fmt_chunk_hdr_valid(&h) || h.last_step == TFT_STEP_NONE)
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
        !fmt_chunk_hdr_valid(&h) || *off + 8 + sizeof(h) + h.comp_size > limit ||
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
int fmt_reader_load_index(tft_reader *r)
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
            if (fmt_chunk_hdr_valid(&h)) {
                found = off + i;
                goto out;
            }
        }
    }
out:
    free(buf);
    return found;
}

/* A frame at off runs past the end of the file: the tail of a file that
 * was not closed is torn (the chunks before it are complete); in a closed
 * one (tail_damaged) the frame's size is corrupt. */
static void scan_torn(tft_reader *r, uint64_t off, bool tail_damaged)
{
    if (tail_damaged) { /* the file was closed: a frame size is corrupt, not a tear */
        fmt_reader_problem(r, TFT_DAMAGED, off, "frame at byte %llu has a corrupt size; %zu chunks before it are intact",
                           (unsigned long long)off, r->n_chunks);
        return;
    }
    fmt_reader_problem(r, TFT_TORN, off,
                       "torn tail at byte %llu: the last %llu bytes (an unfinished chunk) were dropped; "
                       "%zu complete chunks before it are intact",
                       (unsigned long long)off, (unsigned long long)(r->file_size - off), r->n_chunks);
    r->st.torn_offset = off;
}

/* After a scan: why the list had to be rebuilt. closed: the file ends as a
 * closed one does (a seek-table footer), so a missing index (its magic
 * flipped into another skippable frame's) is damage too. */
static void scan_verdict(tft_reader *r, bool closed)
{
    uint64_t size = r->file_size;
    if (closed)
        fmt_reader_problem(r, TFT_DAMAGED, size, "seek table damaged; the chunk list was rebuilt by scanning");
    else if (r->st.integrity == TFT_INTACT) {
        /* cut exactly at a frame boundary: complete chunks, no index */
        fmt_reader_problem(r, TFT_TORN, size, "file was not closed (no index); %zu chunks recovered by scanning",
                           r->n_chunks);
        r->st.torn_offset = size;
    }
    r->st.index_rebuilt = 1;
}

int fmt_reader_scan_frames(tft_reader *r, bool tail_damaged)
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
            fmt_reader_problem(r, TFT_TORN, off, "torn tail at byte %llu: %llu bytes of an unfinished frame dropped",
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
            if (fmt_chunk_hdr_valid(&h)) {
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
        fmt_reader_problem(r, TFT_DAMAGED, off,
                           "damaged frame at byte %llu (after chunk %zu); skipped %llu bytes to the next intact chunk",
                           (unsigned long long)off, r->n_chunks, (unsigned long long)(next - off));
        off = next;
        continue;
    torn:
        scan_torn(r, off, tail_damaged);
        break;
    }
    scan_verdict(r, tail_damaged || (saw_index && saw_seektable));
    return 0;
}
