/*
 * writer.c — appends records to a rank file: buffers one chunk of raw
 * records, prefixes the string definitions the chunk refers to, compresses it
 * as one zstd frame with a content checksum behind a skippable chunk header,
 * and at close writes the index and the seek table (FORMAT.md §4).
 *
 * Workload: one thread (the collector) appends millions of 32–300 byte
 * records per second; the cost per record is a memcpy and a few compares,
 * compression happens once per chunk. Not thread-safe: one writer, one thread.
 * This file: the chunks (strings, compression, sealing), the append path
 * and the flight-recorder mode; opening and closing the file (header,
 * index, seek table): writer_file.c.
 */
#define _GNU_SOURCE /* fallocate, FALLOC_FL_PUNCH_HOLE */
#include "writer_state_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zstd.h>

/* Makes the other chunk the one the chunk functions work on. */
void fmt_writer_chunk_swap(tft_writer *w)
{
    chunk_state t = w->c;
    w->c = w->kc;
    w->kc = t;
}

void fmt_writer_chunk_reset(tft_writer *w)
{
    w->c.raw_len = 0;
    w->c.rec_count = 0;
    w->c.dropped = 0;
    w->c.first_step = w->c.last_step = TFT_STEP_NONE;
    w->c.first_seq = w->c.last_seq = TFT_SEQ_NONE;
    w->c.first_ts = w->c.last_ts = 0;
    w->c.n_needed = 0;
    w->c.str_bytes = 0;
    w->c.gen = ++w->gen;
}

int fmt_writer_skippable(tft_writer *w, uint32_t magic, const void *payload, uint32_t n)
{
    uint32_t hdr[2] = {magic, n};
    struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)payload, n}};
    size_t total = sizeof(hdr) + n;
    ssize_t r;
    do {
        r = writev(w->fd, iov, 2);
    } while (r < 0 && errno == EINTR);
    if (r < 0)
        return -errno;
    if ((size_t)r < total) { /* short write: finish the rest plainly */
        size_t done = (size_t)r;
        if (done < sizeof(hdr)) {
            int e = fmt_write_full(w->fd, (char *)hdr + done, sizeof(hdr) - done);
            if (e)
                return e;
            done = sizeof(hdr);
        }
        int e = fmt_write_full(w->fd, (const char *)payload + (done - sizeof(hdr)), total - done);
        if (e)
            return e;
    }
    w->offset += total;
    return 0;
}

uint64_t tft_writer_string(tft_writer *w, const char *s, size_t n)
{
    if (n > TFT_STRING_MAX)
        return 0; /* its STRING record would pass TFT_REC_MAX_BYTES */
    uint64_t id = tft_string_id(s, n);
    return strmap_put(&w->strings, id, s, n) ? id : 0;
}

static int need_string(tft_writer *w, uint64_t id)
{
    if (!id)
        return 0;
    /* Ids of registered strings carry the chunk that last listed them; the
     * rare unregistered id (registered later) is deduplicated at seal. */
    strmap_entry *e = strmap_find(&w->strings, id);
    uint32_t mark = w->c.gen;
    if (e) {
        uint32_t *m = w->c.slot ? &e->mark_kept : &e->mark;
        if (*m == mark)
            return 0;
        *m = mark;
        w->c.str_bytes += (sizeof(tft_rec_string) + e->len + 7u) & ~(size_t)7u;
    }
    if (w->c.n_needed == w->c.cap_needed) {
        size_t ncap = w->c.cap_needed ? w->c.cap_needed * 2 : 64;
        uint64_t *nn = realloc(w->c.needed, ncap * sizeof(*nn));
        if (!nn)
            return -ENOMEM;
        w->c.needed = nn;
        w->c.cap_needed = ncap;
    }
    w->c.needed[w->c.n_needed++] = id;
    return 0;
}

/* Builds the STRING records of the current chunk into w->strbuf. */
static int build_strings(tft_writer *w, size_t *out_len, uint32_t *out_count)
{
    size_t len = 0;
    uint32_t count = 0;
    uint32_t mark = w->c.gen;
    for (size_t i = 0; i < w->c.n_needed; i++) {
        strmap_entry *e = strmap_find(&w->strings, w->c.needed[i]);
        if (!e)
            continue; /* never registered: readers show the id */
        if (e->emitted == mark)
            continue; /* listed twice (registered after its first reference) */
        e->emitted = mark;
        size_t rl = (sizeof(tft_rec_string) + e->len + 7u) & ~(size_t)7u;
        if (len + rl > w->strbuf_cap) {
            size_t ncap = w->strbuf_cap ? w->strbuf_cap : 4096;
            while (ncap < len + rl)
                ncap *= 2;
            char *nb = realloc(w->strbuf, ncap);
            if (!nb)
                return -ENOMEM;
            w->strbuf = nb;
            w->strbuf_cap = ncap;
        }
        tft_rec_string *s = (tft_rec_string *)(w->strbuf + len);
        memset(s, 0, rl);
        s->h.kind = TFT_REC_STRING;
        s->h.len = (uint32_t)rl;
        s->h.step = TFT_STEP_NONE;
        s->h.seq = TFT_SEQ_NONE;
        s->id = w->c.needed[i];
        s->n = e->len;
        memcpy(s->text, e->text, e->len);
        len += rl;
        count++;
    }
    *out_len = len;
    *out_count = count;
    return 0;
}

static int index_push(tft_writer *w, const index_entry_disk *ie)
{
    if (w->n_index == w->cap_index) {
        size_t ncap = w->cap_index ? w->cap_index * 2 : 64;
        index_entry_disk *ni = realloc(w->index, ncap * sizeof(*ni));
        if (!ni)
            return -ENOMEM;
        w->index = ni;
        w->cap_index = ncap;
    }
    if (w->keep_steps) {
        uint8_t *ns = realloc(w->cstate, w->cap_index);
        if (!ns)
            return -ENOMEM;
        w->cstate = ns;
        w->cstate[w->n_index] = w->c.kept ? CST_KEPT_SHADOW : CST_FULL;
        if (w->c.kept && w->n_index && w->cstate[w->n_index - 1] == CST_FULL)
            w->cstate[w->n_index - 1] = CST_FULL_PAIRED; /* sealed right before it */
    }
    w->index[w->n_index++] = *ie;
    return 0;
}

/* Compresses strings + records as one frame. The strings go into the
 * headroom in front of the records so zstd sees one contiguous input (two
 * inputs would send it to its slower external-dictionary match finder). */
static int compress_chunk(tft_writer *w, size_t str_len, uint32_t records, uint32_t *enc,
                          size_t *comp_len)
{
    size_t total = str_len + w->c.raw_len;
    /* a string block beyond the headroom takes the streaming path, unencoded */
    *enc = str_len <= STRING_HEADROOM ? w->encoding : 0;
    size_t bound = ZSTD_compressBound(fmt_chunk_encoded_size(*enc, records, total));
    if (bound > w->comp_cap) {
        char *nc = realloc(w->comp, bound);
        if (!nc)
            return -ENOMEM;
        w->comp = nc;
        w->comp_cap = bound;
    }
    if (str_len <= STRING_HEADROOM) {
        if (str_len)
            memcpy(w->c.raw - str_len, w->strbuf, str_len);
        const char *src = w->c.raw - str_len;
        size_t src_len = total;
        if (*enc) {
            src_len = fmt_chunk_encoded_size(*enc, records, total);
            if (src_len > w->enc_cap) {
                char *ne = realloc(w->enc, src_len);
                if (!ne)
                    return -ENOMEM;
                w->enc = ne;
                w->enc_cap = src_len;
            }
            if (fmt_chunk_encode(&w->codec, *enc, src, total, records, w->enc) < 0)
                return -ENOMEM;
            src = w->enc;
        }
        size_t r = ZSTD_compress2(w->cctx, w->comp, w->comp_cap, src, src_len);
        if (ZSTD_isError(r))
            return -EIO;
        *comp_len = r;
        return 0;
    }
    ZSTD_CCtx_reset(w->cctx, ZSTD_reset_session_only);
    ZSTD_CCtx_setPledgedSrcSize(w->cctx, total);
    ZSTD_outBuffer out = {w->comp, w->comp_cap, 0};
    ZSTD_inBuffer in1 = {w->strbuf, str_len, 0};
    while (in1.pos < in1.size) {
        size_t r = ZSTD_compressStream2(w->cctx, &out, &in1, ZSTD_e_continue);
        if (ZSTD_isError(r))
            return -EIO;
    }
    ZSTD_inBuffer in2 = {w->c.raw, w->c.raw_len, 0};
    for (;;) {
        size_t r = ZSTD_compressStream2(w->cctx, &out, &in2, ZSTD_e_end);
        if (ZSTD_isError(r))
            return -EIO;
        if (r == 0)
            break;
    }
    *comp_len = out.pos;
    return 0;
}

/* Seals the current chunk: strings + records -> header frame + zstd frame. */
static int seal_chunk(tft_writer *w)
{
    if (w->err)
        return w->err;
    if (w->c.rec_count == 0 && w->c.dropped == 0)
        return 0;
    size_t str_len = 0, comp_len = 0;
    uint32_t str_count = 0, enc = 0;
    int e = build_strings(w, &str_len, &str_count);
    if (!e)
        e = compress_chunk(w, str_len, w->c.rec_count + str_count, &enc, &comp_len);
    if (e)
        return w->err = e;

    chunk_hdr_disk h;
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, CHUNK_MAGIC, 4);
    h.chunk_no = (uint32_t)w->stats.chunks;
    h.records = w->c.rec_count + str_count;
    h.raw_size = (uint32_t)(str_len + w->c.raw_len);
    h.comp_size = (uint32_t)comp_len;
    h.comp_checksum = fmt_checksum32(w->comp, comp_len);
    h.first_step = w->c.first_step;
    h.last_step = w->c.last_step;
    h.first_seq = w->c.first_seq;
    h.last_seq = w->c.last_seq;
    h.first_ts = w->c.first_ts;
    h.last_ts = w->c.last_ts;
    h.dropped = w->c.dropped;
    h.encoding = enc;
    h.checksum = fmt_checksum32(&h, offsetof(chunk_hdr_disk, checksum));

    index_entry_disk ie = {
        .offset = w->offset, .chunk_no = h.chunk_no, .records = h.records,
        .raw_size = h.raw_size, .comp_size = h.comp_size,
        .first_step = h.first_step, .last_step = h.last_step,
        .first_seq = h.first_seq, .last_seq = h.last_seq,
        .first_ts = h.first_ts, .last_ts = h.last_ts, .dropped = h.dropped,
    };
    e = fmt_writer_skippable(w, w->c.kept ? FRAME_MAGIC_KEPT : FRAME_MAGIC_CHUNK, &h, sizeof(h));
    if (!e)
        e = fmt_write_full(w->fd, w->comp, comp_len);
    if (e)
        return w->err = e;
    w->offset += comp_len;
    if ((e = index_push(w, &ie)) < 0)
        return w->err = e;
    w->stats.chunks++;
    w->stats.raw_bytes += h.raw_size;
    if (!w->c.kept)
        w->stats.dropped += w->c.dropped;
    fmt_writer_chunk_reset(w);
    return 0;
}

static void note_range(tft_writer *w, const tft_rec *rec)
{
    if (rec->step != TFT_STEP_NONE) {
        if (w->c.first_step == TFT_STEP_NONE || rec->step < w->c.first_step)
            w->c.first_step = rec->step;
        if (w->c.last_step == TFT_STEP_NONE || rec->step > w->c.last_step)
            w->c.last_step = rec->step;
    }
    if (rec->seq != TFT_SEQ_NONE) {
        if (w->c.first_seq == TFT_SEQ_NONE || rec->seq < w->c.first_seq)
            w->c.first_seq = rec->seq;
        if (w->c.last_seq == TFT_SEQ_NONE || rec->seq > w->c.last_seq)
            w->c.last_seq = rec->seq;
    }
    if (w->c.rec_count == 0)
        w->c.first_ts = rec->ts;
    if (rec->ts > w->c.last_ts)
        w->c.last_ts = rec->ts;
}

static int append_one(tft_writer *w, const tft_rec *rec);

/* A THREAD switch is remembered and repeated at the start of every later
 * chunk (before its first record), so each chunk names the thread of its
 * first records and decodes alone (FORMAT.md §5.13). */
static int thread_note(tft_writer *w, const tft_rec *rec)
{
    if (rec->kind == TFT_REC_THREAD && rec->len >= sizeof(tft_rec_thread)) {
        const tft_rec_thread *t = (const tft_rec_thread *)rec;
        if (t->event == TFT_THREAD_SWITCH) {
            memcpy(&w->thread, t, sizeof(w->thread));
            w->thread.h.len = sizeof(w->thread);
            w->has_thread = true;
        }
        return 0;
    }
    if (w->c.rec_count == 0 && w->has_thread)
        return append_one(w, &w->thread.h);
    return 0;
}

/* ---- flight-recorder mode (opts.keep_steps, FORMAT.md §3.6) ---------------- */

/* Records kept for the whole run: everything but ops, kernels, captures and
 * tensors of more than one element. */
static bool rec_kept(const tft_rec *rec)
{
    switch (rec->kind) {
    case TFT_REC_OP:
    case TFT_REC_KERNEL:
    case TFT_REC_CAPTURE:
        return false;
    case TFT_REC_TENSOR:
        return tft_rec_is_scalar(rec);
    default:
        return true;
    }
}

/* Retires full chunk i: its frame header becomes a skippable frame spanning
 * the chunk (one 8-byte write, so the file reads the same whether a kill
 * comes before or after it), then the blocks under the compressed records
 * go back to the file system. The chunk header stays, so a reader knows
 * which steps left. */
static void retire_chunk(tft_writer *w, size_t i)
{
    const index_entry_disk *ie = &w->index[i];
    uint32_t hdr[2] = {FRAME_MAGIC_RETIRED, (uint32_t)sizeof(chunk_hdr_disk) + ie->comp_size};
    ssize_t r;
    do {
        r = pwrite(w->fd, hdr, sizeof(hdr), (off_t)ie->offset);
    } while (r < 0 && errno == EINTR);
    if (r != (ssize_t)sizeof(hdr)) { /* not seekable or failing: keep everything */
        tft_logf(w->opts.log, w->opts.log_ctx, TFT_LOG_WARN,
                 "keep-steps: cannot retire a chunk (%s); all records kept",
                 r < 0 ? strerror(errno) : "short write");
        w->keep_steps = -1;
        return;
    }
    if (w->cstate[i] == CST_FULL_PAIRED)
        w->cstate[i + 1] = CST_KEPT_LIVE; /* readers see it from the rewrite on */
    w->cstate[i] = CST_RETIRED;
    w->stats.retired_chunks++;
    uint64_t from = ie->offset + SKIPPABLE_HDR + sizeof(chunk_hdr_disk);
    if (!w->no_punch && ie->comp_size &&
        fallocate(w->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)from,
                  (off_t)ie->comp_size) < 0) {
        /* the file reads the same; only the blocks stay allocated */
        tft_logf(w->opts.log, w->opts.log_ctx, TFT_LOG_WARN,
                 "keep-steps: cannot punch holes (%s); retired chunks keep their disk blocks",
                 strerror(errno));
        w->no_punch = true;
    }
}

/* Retires the full chunks whose steps are all older than the last keep_steps. */
static void retire_old(tft_writer *w)
{
    if (w->keep_steps <= 0 || w->max_step == TFT_STEP_NONE)
        return;
    int64_t keep_from = w->max_step - w->keep_steps + 1;
    for (; w->next_retire < w->n_index && w->keep_steps > 0; w->next_retire++) {
        size_t i = w->next_retire;
        if ((w->cstate[i] != CST_FULL && w->cstate[i] != CST_FULL_PAIRED) ||
            w->index[i].last_step == TFT_STEP_NONE)
            continue; /* kept records, or records before any step: never retired */
        if (w->index[i].last_step >= keep_from)
            break;
        retire_chunk(w, i);
    }
}

/* Seals the full chunk, then the kept records' one behind it: the kept
 * chunk's SYNC watermarks stay true (FORMAT.md §5.14), since every record
 * before them in the file, the full chunk's included, is of their steps or
 * earlier. */
static int seal_pair(tft_writer *w)
{
    int e = seal_chunk(w);
    fmt_writer_chunk_swap(w);
    if (!e)
        e = seal_chunk(w);
    fmt_writer_chunk_swap(w);
    if (!e)
        retire_old(w);
    return e;
}

static int keep_append(tft_writer *w, const tft_rec *rec)
{
    size_t lim = w->opts.chunk_bytes;
    bool new_step = rec->step != TFT_STEP_NONE && w->max_step != TFT_STEP_NONE && rec->step > w->max_step;
    bool full = w->c.raw_len + w->c.str_bytes + rec->len > lim ||
                w->kc.raw_len + w->kc.str_bytes + rec->len > lim;
    /* the kept chunk holds the kept records of the full one before it, again */
    if ((w->c.rec_count || w->kc.rec_count) &&
        (full || (new_step && w->c.raw_len + w->c.str_bytes >= KEEP_SEAL_BYTES))) {
        int e = seal_pair(w);
        if (e)
            return e;
    }
    if (rec->step != TFT_STEP_NONE && (w->max_step == TFT_STEP_NONE || rec->step > w->max_step))
        w->max_step = rec->step;
    int e = thread_note(w, rec); /* every record goes into the full chunk */
    if (!e)
        e = append_one(w, rec);
    if (e || !rec_kept(rec))
        return e;
    fmt_writer_chunk_swap(w); /* and a kept one into the kept chunk too */
    e = thread_note(w, rec);
    if (!e)
        e = append_one(w, rec);
    fmt_writer_chunk_swap(w);
    if (!e)
        w->stats.records--; /* appended once */
    return e;
}

int tft_writer_append(tft_writer *w, const tft_rec *rec)
{
    if (!w || !rec)
        return -EINVAL;
    if (w->err)
        return w->err;
    if (tft_rec_check(rec, rec->len) < 0 || rec->kind == TFT_REC_STRING)
        return -EINVAL;
    if (w->keep_steps)
        return keep_append(w, rec);
    if (w->c.raw_len + w->c.str_bytes + rec->len > w->opts.chunk_bytes && w->c.rec_count) {
        int e = seal_chunk(w);
        if (e)
            return e;
    }
    int e = thread_note(w, rec);
    if (e)
        return e;
    return append_one(w, rec);
}

/* Appends rec to the current chunk, which has room for it. */
static int append_one(tft_writer *w, const tft_rec *rec)
{
    uint64_t ids[4];
    int n = tft_rec_string_ids(rec, ids);
    for (int i = 0; i < n; i++)
        if (need_string(w, ids[i]) < 0)
            return -ENOMEM;
    note_range(w, rec);
    memcpy(w->c.raw + w->c.raw_len, rec, rec->len);
    w->c.raw_len += rec->len;
    w->c.rec_count++;
    w->stats.records++;
    return 0;
}

void tft_writer_add_dropped(tft_writer *w, uint64_t n)
{
    if (w && w->keep_steps)
        w->kc.dropped += n; /* on both chunks of the pair: one of them is read */
    if (w)
        w->c.dropped += n;
}

int tft_writer_flush(tft_writer *w)
{
    if (!w)
        return -EINVAL;
    return w->keep_steps ? seal_pair(w) : seal_chunk(w);
}

int tft_writer_get_stats(const tft_writer *w, tft_writer_stats *out)
{
    if (!w || !out || out->sz < TFT_WRITER_STATS_V1_SZ)
        return -EINVAL;
    tft_writer_stats st = w->stats;
    st.file_bytes = w->offset;
    size_t n = out->sz < sizeof(st) ? out->sz : sizeof(st);
    memcpy((char *)out + sizeof(out->sz), (const char *)&st + sizeof(st.sz), n - sizeof(st.sz));
    return 0;
}
