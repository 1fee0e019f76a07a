/*
 * writer_compact.c — compaction of a flight-recorder rank file (FORMAT.md
 * §3.6 "Compaction"): the live frames of a --keep-steps file copied into a
 * new file beside it, which is renamed over the old one.
 *
 * A keep-steps file grows by every chunk it ever held: retired chunks keep
 * their place as holes (their blocks returned, their bytes still counted in
 * the file's size), and every full chunk carries a kept chunk behind it that
 * readers skip while the full one lives. The compact file holds the header
 * frame, the live full chunks, for each retired chunk an 88-byte retired
 * frame (its chunk header alone: which steps left) followed by its kept
 * chunk, and a fresh index and seek table. Every reader of 1.4 or later
 * reads it as it read the sparse file: the same records in the same order.
 *
 * Crash safety: the new file is written under a hidden name
 * (.rank-NNNNN.tft.compact, which no reader lists), fsynced, checked to
 * stand beside the same file, and renamed over it; the directory is then
 * fsynced. A kill at any moment leaves the old file or the new one under
 * the rank file's name, each complete, plus possibly the hidden leftover
 * (removed by the next compaction of that file).
 *
 * Workload: once per rank file, at close (tft_writer_close) or offline
 * (tfdump --compact). Reads the frame headers once, then copies the live
 * bytes: a few MB for a typical flight recorder.
 */
#define _GNU_SOURCE /* O_CLOEXEC, O_NOFOLLOW with openat */
#include "reader_state_internal.h"
#include "tft_writer_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One frame of the compact file, in order: a chunk copied whole (chunk or
 * kept magic) or a retired frame cut to its chunk header. */
typedef struct compact_frame {
    uint64_t src;           /* offset of the frame in the old file */
    uint32_t magic;         /* FRAME_MAGIC_CHUNK, _KEPT or _RETIRED */
    uint32_t payload;       /* retired: bytes of its payload kept (at most 88) */
    chunk_hdr_disk h;       /* chunks: their header */
} compact_frame;

typedef struct compact_plan {
    uint32_t header_frame;  /* bytes of the header frame (copied as it is) */
    compact_frame *f;
    size_t n, cap;
    uint64_t torn_at;       /* where a torn tail starts, 0 none */
    uint64_t saved;         /* bytes of frames left out or cut (the old index and seek table aside) */
    uint64_t dropped;       /* the dropped counts of the chunks the index lists */
} compact_plan;

static int plan_push(compact_plan *p, const compact_frame *f)
{
    if (p->n == p->cap) {
        size_t ncap = p->cap ? p->cap * 2 : 64;
        compact_frame *nf = realloc(p->f, ncap * sizeof(*nf));
        if (!nf)
            return -ENOMEM;
        p->f = nf;
        p->cap = ncap;
    }
    p->f[p->n++] = *f;
    return 0;
}

/* Checks the header frame: a tftrace file of this major version written in
 * flight-recorder mode. 0, -EPROTO (not one), -ENOTSUP (not keep mode). */
static int plan_header(int fd, uint64_t size, compact_plan *p)
{
    uint32_t fh[2];
    file_hdr_disk h;
    if (size < 8 + sizeof(h) || fmt_pread_full(fd, fh, 8, 0) < 0 || fh[0] != FRAME_MAGIC_HEADER ||
        fh[1] < sizeof(h) || fh[1] > 65536 || 8u + fh[1] > size || fmt_pread_full(fd, &h, sizeof(h), 8) < 0 ||
        memcmp(h.magic, FILE_MAGIC, sizeof(FILE_MAGIC)) != 0 || h.major != TFT_FORMAT_MAJOR)
        return -EPROTO;
    if (h.hdr_bytes == sizeof(h) && h.checksum != fmt_checksum32(&h, offsetof(file_hdr_disk, checksum)))
        return -EPROTO;
    if (h.reserved == 0)
        return -ENOTSUP;
    p->header_frame = 8u + fh[1];
    return 0;
}

/* Walks the frames after the header the way a scanning reader does
 * (FORMAT.md §4.3) and lists what the compact file keeps. A torn tail ends
 * the walk (dropped, as readers drop it); anything a reader would take for
 * damage refuses the compaction (-EILSEQ): the file then stays as it is. */
static int plan_frames(int fd, uint64_t size, compact_plan *p)
{
    uint64_t off = p->header_frame;
    bool prev_retired = false;
    while (off < size) {
        uint32_t fh[2];
        if (size - off < 8 || fmt_pread_full(fd, fh, 8, off) < 0)
            break;
        uint64_t end = off + 8 + (uint64_t)fh[1];
        if (end > size)
            break;
        bool after_retired = prev_retired;
        prev_retired = fh[0] == FRAME_MAGIC_RETIRED;
        compact_frame f = {.src = off, .magic = fh[0]};
        if ((fh[0] == FRAME_MAGIC_CHUNK || fh[0] == FRAME_MAGIC_KEPT) && fh[1] == sizeof(chunk_hdr_disk)) {
            if (fmt_pread_full(fd, &f.h, sizeof(f.h), off + 8) < 0 || !fmt_chunk_hdr_valid(&f.h))
                return -EILSEQ;
            if (end + f.h.comp_size > size)
                break;
            off = end + f.h.comp_size;
            if (fh[0] == FRAME_MAGIC_KEPT && !after_retired) {
                p->saved += 8 + sizeof(f.h) + f.h.comp_size;
                continue; /* shadowed by its live partner: never read */
            }
            p->dropped += f.h.dropped;
        } else if (fh[0] == FRAME_MAGIC_RETIRED) {
            f.payload = fh[1] < sizeof(chunk_hdr_disk) ? fh[1] : (uint32_t)sizeof(chunk_hdr_disk);
            p->saved += fh[1] - f.payload;
            off = end;
        } else if ((fh[0] & 0xFFFFFFF0u) == 0x184D2A50u && fh[0] != FRAME_MAGIC_HEADER) {
            off = end; /* the old index and seek table, or a frame no reader needs */
            continue;
        } else {
            return -EILSEQ;
        }
        if (plan_push(p, &f) < 0)
            return -ENOMEM;
    }
    p->torn_at = off < size ? off : 0;
    return 0;
}

/* Copies n bytes at src of in to the end of out through buf. */
static int copy_bytes(int in, int out, uint64_t src, uint64_t n, char *buf, size_t cap)
{
    while (n) {
        size_t k = n < cap ? (size_t)n : cap;
        int e = fmt_pread_full(in, buf, k, src);
        if (!e)
            e = fmt_write_full(out, buf, k);
        if (e)
            return e == -ENODATA ? -EIO : e;
        src += k;
        n -= k;
    }
    return 0;
}

static int write_frame(int out, uint32_t magic, const void *payload, uint32_t n)
{
    uint32_t fh[2] = {magic, n};
    int e = fmt_write_full(out, fh, sizeof(fh));
    return e ? e : fmt_write_full(out, payload, n);
}

/* The index (FORMAT.md §3.4) of the compact file's chunks and the seek
 * table (§3.5) of all its frames, as tft_writer_close writes them. */
static int write_tail(int out, const compact_plan *p)
{
    size_t nc = 0;
    for (size_t i = 0; i < p->n; i++)
        nc += p->f[i].magic != FRAME_MAGIC_RETIRED;
    size_t ix_bytes = sizeof(index_hdr_disk) + nc * sizeof(index_entry_disk) + 8;
    size_t nframes = 2 + 2 * nc + (p->n - nc);
    size_t st_bytes = nframes * 8 + 9;
    char *buf = calloc(1, ix_bytes > st_bytes ? ix_bytes : st_bytes);
    if (!buf)
        return -ENOMEM;
    index_hdr_disk *ih = (index_hdr_disk *)buf;
    memcpy(ih->magic, INDEX_MAGIC, 4);
    ih->n_chunks = (uint32_t)nc;
    ih->dropped = p->dropped;
    uint64_t at = p->header_frame;
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++) {
        const compact_frame *f = &p->f[i];
        if (f->magic == FRAME_MAGIC_RETIRED) {
            at += 8 + f->payload;
            continue;
        }
        const chunk_hdr_disk *h = &f->h;
        index_entry_disk ie = {
            .offset = at, .chunk_no = h->chunk_no, .records = h->records,
            .raw_size = h->raw_size, .comp_size = h->comp_size,
            .first_step = h->first_step, .last_step = h->last_step,
            .first_seq = h->first_seq, .last_seq = h->last_seq,
            .first_ts = h->first_ts, .last_ts = h->last_ts, .dropped = h->dropped,
        };
        memcpy(buf + sizeof(*ih) + k++ * sizeof(ie), &ie, sizeof(ie));
        ih->records += h->records;
        ih->raw_bytes += h->raw_size;
        at += 8 + sizeof(*h) + h->comp_size;
    }
    uint32_t sum = fmt_checksum32(buf, ix_bytes - 4);
    memcpy(buf + ix_bytes - 4, &sum, 4);
    int e = write_frame(out, FRAME_MAGIC_INDEX, buf, (uint32_t)ix_bytes);
    if (e)
        goto out;
    uint32_t *ent = (uint32_t *)buf;
    k = 0;
    ent[k++] = p->header_frame;
    ent[k++] = 0;
    for (size_t i = 0; i < p->n; i++) {
        const compact_frame *f = &p->f[i];
        if (f->magic == FRAME_MAGIC_RETIRED) {
            ent[k++] = 8 + f->payload;
            ent[k++] = 0;
            continue;
        }
        ent[k++] = SKIPPABLE_HDR + sizeof(chunk_hdr_disk);
        ent[k++] = 0;
        ent[k++] = f->h.comp_size;
        ent[k++] = f->h.raw_size;
    }
    ent[k++] = (uint32_t)(8 + ix_bytes);
    ent[k++] = 0;
    uint32_t nf = (uint32_t)nframes, magic = SEEKTABLE_FOOTER_MAGIC;
    memcpy(buf + nframes * 8, &nf, 4);
    buf[nframes * 8 + 4] = 0;
    memcpy(buf + nframes * 8 + 5, &magic, 4);
    e = write_frame(out, FRAME_MAGIC_SEEKTABLE, buf, (uint32_t)st_bytes);
out:
    free(buf);
    return e;
}

/* Writes the compact file's frames to out. */
static int write_compact(int in, int out, const compact_plan *p)
{
    size_t cap = 1u << 20;
    char *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    int e = copy_bytes(in, out, 0, p->header_frame, buf, cap);
    for (size_t i = 0; !e && i < p->n; i++) {
        const compact_frame *f = &p->f[i];
        if (f->magic == FRAME_MAGIC_RETIRED) {
            char h[sizeof(chunk_hdr_disk)];
            e = fmt_pread_full(in, h, f->payload, f->src + 8);
            e = e ? (e == -ENODATA ? -EIO : e) : write_frame(out, FRAME_MAGIC_RETIRED, h, f->payload);
        } else {
            e = copy_bytes(in, out, f->src, 8 + sizeof(f->h) + (uint64_t)f->h.comp_size, buf, cap);
        }
    }
    free(buf);
    return e ? e : write_tail(out, p);
}

/* The test hook of FORMAT.md §3.6's crash-safety test: TFT_TEST_COMPACT=kill
 * kills the process after the compact file is written and synced, before
 * the rename, as a kill at the worst moment would. */
static void test_hook_before_rename(void)
{
    const char *t = getenv("TFT_TEST_COMPACT");
    if (t && !strcmp(t, "kill"))
        raise(SIGKILL);
}

/* Writes the compact file as dirfd/tmp and renames it over dirfd/name,
 * which must still be the file in (same device and inode). */
static int replace_file(int in, const struct stat *sin, int dirfd, const char *name, const char *tmp,
                        const compact_plan *p, bool sync)
{
    int out = -1;
    for (int k = 0; k < 2 && out < 0; k++) {
        out = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0 && (errno != EEXIST || k || unlinkat(dirfd, tmp, 0) < 0)) /* a killed compaction's */
            return -errno;
    }
    int e = fchmod(out, sin->st_mode & 07777) < 0 ? -errno : 0;
    if (!e)
        e = write_compact(in, out, p);
    if (!e && sync && fsync(out) < 0 && errno != EINVAL && errno != EROFS)
        e = -errno;
    if (close(out) < 0 && !e)
        e = -errno;
    struct stat snow;
    if (!e && (fstatat(dirfd, name, &snow, AT_SYMLINK_NOFOLLOW) < 0 || snow.st_dev != sin->st_dev ||
               snow.st_ino != sin->st_ino))
        e = -ESTALE; /* the name moved to another file meanwhile: leave it */
    if (!e) {
        test_hook_before_rename();
        if (renameat(dirfd, tmp, dirfd, name) < 0)
            e = -errno;
    }
    if (e) {
        unlinkat(dirfd, tmp, 0);
        return e;
    }
    if (sync && fsync(dirfd) < 0 && errno != EINVAL && errno != EROFS)
        return -errno; /* renamed; only its durability is in doubt */
    return 0;
}

int tft_rank_compact_at(int dirfd, const char *name, bool sync, tft_compact_stats *st)
{
    tft_compact_stats s = {0};
    compact_plan p = {0};
    char tmp[PATH_MAX];
    if (strchr(name, '/') || snprintf(tmp, sizeof(tmp), ".%s.compact", name) >= (int)sizeof(tmp))
        return -EINVAL;
    int in = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0)
        return -errno;
    struct stat sin;
    int e = fstat(in, &sin) < 0 ? -errno : S_ISREG(sin.st_mode) ? 0 : -EINVAL;
    if (!e) {
        s.before_bytes = (uint64_t)sin.st_size;
        s.before_blocks = (uint64_t)sin.st_blocks * 512u;
        e = plan_header(in, s.before_bytes, &p);
    }
    if (!e)
        e = plan_frames(in, s.before_bytes, &p);
    if (!e) {
        s.torn_bytes = p.torn_at ? s.before_bytes - p.torn_at : 0;
        s.after_bytes = s.before_bytes;
        s.after_blocks = s.before_blocks;
        if (p.saved || p.torn_at) /* else compact already */
            e = replace_file(in, &sin, dirfd, name, tmp, &p, sync);
        if (!e && (p.saved || p.torn_at)) {
            struct stat snew;
            s.compacted = 1;
            if (fstatat(dirfd, name, &snew, AT_SYMLINK_NOFOLLOW) == 0) {
                s.after_bytes = (uint64_t)snew.st_size;
                s.after_blocks = (uint64_t)snew.st_blocks * 512u;
            }
        }
    }
    close(in);
    free(p.f);
    if (st)
        *st = s;
    return e;
}

int tft_rank_compact(const char *path, bool sync, tft_compact_stats *st)
{
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    if (!slash)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == path)
        snprintf(dir, sizeof(dir), "/");
    else if ((size_t)(slash - path) >= sizeof(dir))
        return -ENAMETOOLONG;
    else
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return -errno;
    int e = tft_rank_compact_at(dirfd, slash ? slash + 1 : path, sync, st);
    close(dirfd);
    return e;
}
