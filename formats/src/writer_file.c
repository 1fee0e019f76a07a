/*
 * writer_file.c — the frames of a rank file around its chunks (FORMAT.md
 * §4): opening a writer (its options resolved for an older caller's
 * smaller struct, the header frame), a run id written into the header
 * late, and at close the index of the live chunks and the seek table;
 * freeing a writer, whole or abandoned (a torn file, for tests and a
 * collection given up); in keep mode, the compaction after a close
 * (writer_compact.c). The chunks themselves: writer.c.
 */
#include "writer_state_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

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
    return fmt_writer_skippable(w, FRAME_MAGIC_HEADER, &h, sizeof(h));
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
    fmt_writer_chunk_reset(w);
    if (w->keep_steps) {
        fmt_writer_chunk_swap(w);
        fmt_writer_chunk_reset(w);
        fmt_writer_chunk_swap(w);
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
    int e = fmt_writer_skippable(w, FRAME_MAGIC_INDEX, buf, (uint32_t)payload);
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
    int e = fmt_writer_skippable(w, FRAME_MAGIC_SEEKTABLE, buf, (uint32_t)payload);
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

/* The path of w's file, when /proc names it and the name is still that
 * file's; "" otherwise (then nothing is compacted). */
static void writer_path(const tft_writer *w, char *path, size_t n)
{
    char link[64];
    struct stat a, b;
    path[0] = '\0';
    snprintf(link, sizeof(link), "/proc/self/fd/%d", w->fd);
    ssize_t k = readlink(link, path, n - 1);
    if (k <= 0 || path[0] != '/') {
        path[0] = '\0';
        return;
    }
    path[k] = '\0';
    if (fstat(w->fd, &a) < 0 || lstat(path, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        path[0] = '\0'; /* unlinked, renamed or replaced since it was opened */
}

/* Keep mode, after a clean close: the file rewritten without its retired
 * chunks' holes and its shadowed kept chunks (writer_compact.c). A failed
 * compaction leaves the file as it was, which reads the same. */
static void writer_compact(const tft_writer *w, const char *path)
{
    tft_compact_stats st;
    int e = path[0] ? tft_rank_compact(path, w->opts.sync != 0, &st) : -ENOENT;
    if (e)
        tft_logf(w->opts.log, w->opts.log_ctx, TFT_LOG_WARN,
                 "keep-steps: %s: not compacted (%s); it reads as it is, %s compacts it later",
                 path[0] ? path : "the rank file", strerror(-e), "tfdump --compact");
    else if (st.compacted)
        tft_logf(w->opts.log, w->opts.log_ctx, TFT_LOG_INFO, "keep-steps: %s compacted: %llu -> %llu bytes", path,
                 (unsigned long long)st.before_bytes, (unsigned long long)st.after_bytes);
}

int tft_writer_close(tft_writer *w)
{
    if (!w)
        return 0;
    int e = tft_writer_flush(w);
    if (!e) {
        uint64_t before = w->offset;
        e = write_index(w);
        if (!e)
            e = write_seek_table(w, (uint32_t)(w->offset - before));
    }
    if (!e && w->opts.sync && fsync(w->fd) < 0 && errno != EINVAL && errno != EROFS)
        e = -errno;
    char path[PATH_MAX] = "";
    bool compact = !e && w->opts.keep_steps > 0 && w->n_index > 0;
    if (compact)
        writer_path(w, path, sizeof(path));
    if (close(w->fd) < 0 && !e)
        e = -errno;
    w->fd = -1;
    if (compact && !e)
        writer_compact(w, path);
    writer_free(w);
    return e;
}

void tft_writer_abandon(tft_writer *w)
{
    if (w)
        writer_free(w);
}
