/*
 * writer.c — appends records to a rank file: buffers one chunk of raw
 * records, prefixes the string definitions the chunk refers to, compresses it
 * as one zstd frame with a content checksum behind a skippable chunk header,
 * and at close writes the index and the seek table (FORMAT.md §4).
 *
 * Workload: one thread (the collector) appends millions of 32–300 byte
 * records per second; the cost per record is a memcpy and a few compares,
 * compression happens once per chunk. Not thread-safe: one writer, one thread.
 */
#define _GNU_SOURCE /* fallocate, FALLOC_FL_PUNCH_HOLE */
#include "format_internal.h"
#include "tft_writer_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
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

/* Makes the other chunk the one the chunk functions work on. */
static void chunk_swap(tft_writer *w)
{
    chunk_state t = w->c;
    w->c = w->kc;
    w->kc = t;
}

static void chunk_reset(tft_writer *w)
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

static int write_skippable(tft_writer *w, uint32_t magic, const void *payload, uint32_t n)
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

static size_t clamp_chunk(size_t v)
{
    if (v == 0)
        return 1u << 20;
    if (v < CHUNK_RAW_MIN)
        return CHUNK_RAW_MIN;
    return v > CHUNK_RAW_MAX ? CHUNK_RAW_MAX : v;
}

static size_t n_known(const tft_writer_opts *o)
{
    return o ? o->sz : 0;
}

/* Fills defaults for fields an older caller's (smaller) opts lacks. */
static void opts_resolve(tft_writer_opts *dst, const tft_writer_opts *src)
{
    *dst = TFT_WRITER_OPTS(.zstd_level = 1, .chunk_bytes = 1u << 20, .sync = 1);
    if (src) {
        size_t n = src->sz < sizeof(*dst) ? src->sz : sizeof(*dst);
        memcpy(dst, src, n);
        dst->sz = sizeof(*dst);
        if (n <= offsetof(tft_writer_opts, sync))
            dst->sync = 1;
    }
    if (dst->zstd_level < 1 || dst->zstd_level > 19)
        dst->zstd_level = 1;
    dst->chunk_bytes = clamp_chunk(dst->chunk_bytes);
    if (n_known(src) <= offsetof(tft_writer_opts, keep_steps) || dst->keep_steps < 0)
        dst->keep_steps = 0;
    if (dst->encoding == 0) /* also an older caller's opts, which lack the field */
        dst->encoding = TFT_ENC_COLUMNS | TFT_ENC_SHUFFLE;
}

static int write_file_header(tft_writer *w, const tft_file_info *info)
{
    file_hdr_disk h;
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, FILE_MAGIC, sizeof(FILE_MAGIC));
    h.major = TFT_FORMAT_MAJOR;
    h.minor = TFT_FORMAT_MINOR;
    h.hdr_bytes = sizeof(h);
    if (info) {
        memcpy(h.run_id, info->run_id, sizeof(h.run_id));
        h.rank = info->rank;
        h.world_size = info->world_size;
        h.pid = info->pid;
        h.flags = info->flags;
        h.start_realtime_ns = info->start_realtime_ns;
        h.start_monotonic_ns = info->start_monotonic_ns;
        memcpy(h.host, info->host, sizeof(h.host));
        h.host[sizeof(h.host) - 1] = '\0';
    }
    if (w->keep_steps) /* FORMAT.md §3: the flight-recorder mode's N */
        h.reserved = w->keep_steps > UINT32_MAX ? UINT32_MAX : (uint32_t)w->keep_steps;
    if (!info) {
        h.world_size = -1;
    }
    h.checksum = fmt_checksum32(&h, offsetof(file_hdr_disk, checksum));
    w->header_frame_bytes = SKIPPABLE_HDR + sizeof(h);
    w->header_at = w->offset + SKIPPABLE_HDR;
    w->hdr = h;
    return write_skippable(w, FRAME_MAGIC_HEADER, &h, sizeof(h));
}

int tft_writer_set_run_id(tft_writer *w, const uint8_t run_id[16])
{
    if (!w)
        return -EINVAL;
    if (!memcmp(w->hdr.run_id, run_id, 16))
        return 0;
    file_hdr_disk h = w->hdr;
    memcpy(h.run_id, run_id, 16);
    h.checksum = fmt_checksum32(&h, offsetof(file_hdr_disk, checksum));
    ssize_t k;
    do
        k = pwrite(w->fd, &h, sizeof(h), (off_t)w->header_at);
    while (k < 0 && errno == EINTR);
    if (k != (ssize_t)sizeof(h))
        return k < 0 ? -errno : -EIO;
    w->hdr = h;
    return 0;
}

tft_writer *tft_writer_open(const char *path, const tft_file_info *info,
                            const tft_writer_opts *opts)
{
    /* never through a symbolic link: a link planted at path would make the
     * writer truncate whatever it points to */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        tft_writer_opts o;
        opts_resolve(&o, opts);
        tft_logf(o.log, o.log_ctx, TFT_LOG_ERROR, "%s: cannot create: %s%s", path, strerror(e),
                e == ELOOP ? " (a symbolic link: not followed)" : "");
        errno = e;
        return NULL;
    }
    return tft_writer_fdopen(fd, info, opts);
}

tft_writer *tft_writer_fdopen(int fd, const tft_file_info *info, const tft_writer_opts *opts)
{
    tft_writer *w = calloc(1, sizeof(*w));
    if (!w) {
        if (fd >= 0)
            close(fd);
        errno = ENOMEM;
        return NULL;
    }
    int e = 0;
    strmap_init(&w->strings);
    opts_resolve(&w->opts, opts);
    w->fd = fd;
    if (w->fd < 0) {
        e = EBADF;
        goto err_out;
    }
    w->keep_steps = (int64_t)w->opts.keep_steps;
    w->max_step = TFT_STEP_NONE;
    w->c.rawbuf = malloc(STRING_HEADROOM + w->opts.chunk_bytes + TFT_REC_MAX_BYTES);
    w->c.raw = w->c.rawbuf ? w->c.rawbuf + STRING_HEADROOM : NULL;
    if (w->keep_steps) {
        w->kc.rawbuf = malloc(STRING_HEADROOM + w->opts.chunk_bytes + TFT_REC_MAX_BYTES);
        w->kc.raw = w->kc.rawbuf ? w->kc.rawbuf + STRING_HEADROOM : NULL;
        w->kc.slot = 1;
        w->kc.kept = true;
    }
    w->cctx = ZSTD_createCCtx();
    if (!w->c.rawbuf || !w->cctx || (w->keep_steps && !w->kc.rawbuf)) {
        e = ENOMEM;
        goto err_out;
    }
    ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, w->opts.zstd_level);
    ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_contentSizeFlag, 1);
    w->encoding = w->opts.encoding & TFT_ENC_NONE ? 0 : w->opts.encoding & CHUNK_ENC_KNOWN;
    chunk_reset(w);
    if (w->keep_steps) {
        chunk_swap(w);
        chunk_reset(w);
        chunk_swap(w);
    }
    e = -write_file_header(w, info);
    if (e)
        goto err_out;
    return w;
err_out:
    if (w->fd >= 0)
        close(w->fd);
    ZSTD_freeCCtx(w->cctx);
    free(w->c.rawbuf);
    free(w->kc.rawbuf);
    free(w);
    errno = e ? e : EIO;
    return NULL;
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
    e = write_skippable(w, w->c.kept ? FRAME_MAGIC_KEPT : FRAME_MAGIC_CHUNK, &h, sizeof(h));
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
    chunk_reset(w);
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
    case TFT_REC_TENSOR: {
        if (rec->len < sizeof(tft_rec_tensor))
            return false;
        const tft_rec_tensor *t = (const tft_rec_tensor *)rec;
        int64_t n = 1;
        for (int i = 0; i < t->ndim && i < TFT_MAX_NDIM; i++)
            n *= t->shape[i];
        return n == 1;
    }
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
    chunk_swap(w);
    if (!e)
        e = seal_chunk(w);
    chunk_swap(w);
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
    chunk_swap(w); /* and a kept one into the kept chunk too */
    e = thread_note(w, rec);
    if (!e)
        e = append_one(w, rec);
    chunk_swap(w);
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

static bool is_retired(const tft_writer *w, size_t i)
{
    return w->cstate && w->cstate[i] == CST_RETIRED;
}

/* Not in the index: retired, or a kept chunk whose partner is live. */
static bool is_unlisted(const tft_writer *w, size_t i)
{
    return w->cstate && (w->cstate[i] == CST_RETIRED || w->cstate[i] == CST_KEPT_SHADOW);
}

static int write_index(tft_writer *w)
{
    size_t n = 0;
    for (size_t i = 0; i < w->n_index; i++)
        n += !is_unlisted(w, i);
    size_t payload = sizeof(index_hdr_disk) + n * sizeof(index_entry_disk) + 8;
    char *buf = calloc(1, payload);
    if (!buf)
        return -ENOMEM;
    index_hdr_disk *ih = (index_hdr_disk *)buf;
    memcpy(ih->magic, INDEX_MAGIC, 4);
    ih->n_chunks = (uint32_t)n;
    ih->records = 0;
    ih->dropped = w->stats.dropped;
    ih->raw_bytes = 0;
    size_t k = 0;
    for (size_t i = 0; i < w->n_index; i++) {
        if (is_unlisted(w, i))
            continue; /* the index lists live chunks only (FORMAT.md §3.6) */
        ih->records += w->index[i].records;
        ih->raw_bytes += w->index[i].raw_size;
        memcpy(buf + sizeof(*ih) + k++ * sizeof(index_entry_disk), &w->index[i], sizeof(index_entry_disk));
    }
    uint32_t sum = fmt_checksum32(buf, payload - 4);
    memcpy(buf + payload - 4, &sum, 4);
    int e = write_skippable(w, FRAME_MAGIC_INDEX, buf, (uint32_t)payload);
    free(buf);
    return e;
}

/* Seek table in the zstd seekable layout: one (compressed, decompressed)
 * entry per frame before it; skippable frames decompress to 0 bytes. */
static int write_seek_table(tft_writer *w, uint32_t index_frame_bytes)
{
    size_t nframes = 2;
    for (size_t i = 0; i < w->n_index; i++)
        nframes += is_retired(w, i) ? 1 : 2;
    size_t payload = nframes * 8 + 9;
    char *buf = malloc(payload);
    if (!buf)
        return -ENOMEM;
    uint32_t *ent = (uint32_t *)buf;
    size_t k = 0;
    ent[k++] = w->header_frame_bytes;
    ent[k++] = 0;
    for (size_t i = 0; i < w->n_index; i++) {
        if (is_retired(w, i)) { /* one skippable frame spanning the chunk */
            ent[k++] = SKIPPABLE_HDR + sizeof(chunk_hdr_disk) + w->index[i].comp_size;
            ent[k++] = 0;
            continue;
        }
        ent[k++] = SKIPPABLE_HDR + sizeof(chunk_hdr_disk);
        ent[k++] = 0;
        ent[k++] = w->index[i].comp_size;
        ent[k++] = w->index[i].raw_size;
    }
    ent[k++] = index_frame_bytes;
    ent[k++] = 0;
    uint32_t nf = (uint32_t)nframes, magic = SEEKTABLE_FOOTER_MAGIC;
    memcpy(buf + nframes * 8, &nf, 4);
    buf[nframes * 8 + 4] = 0; /* descriptor: no per-frame checksums */
    memcpy(buf + nframes * 8 + 5, &magic, 4);
    int e = write_skippable(w, FRAME_MAGIC_SEEKTABLE, buf, (uint32_t)payload);
    free(buf);
    return e;
}

static void writer_free(tft_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    ZSTD_freeCCtx(w->cctx);
    strmap_free(&w->strings);
    free(w->c.rawbuf);
    free(w->c.needed);
    free(w->kc.rawbuf);
    free(w->kc.needed);
    free(w->cstate);
    free(w->strbuf);
    free(w->comp);
    free(w->enc);
    fmt_codec_free(&w->codec);
    free(w->index);
    free(w);
}

int tft_writer_close(tft_writer *w)
{
    if (!w)
        return 0;
    int e = w->keep_steps ? seal_pair(w) : seal_chunk(w);
    if (!e) {
        uint64_t before = w->offset;
        e = write_index(w);
        if (!e)
            e = write_seek_table(w, (uint32_t)(w->offset - before));
    }
    if (!e && w->opts.sync && fsync(w->fd) < 0 && errno != EINVAL && errno != EROFS)
        e = -errno;
    if (close(w->fd) < 0 && !e)
        e = -errno;
    w->fd = -1;
    writer_free(w);
    return e;
}

void tft_writer_abandon(tft_writer *w)
{
    if (w)
        writer_free(w);
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
