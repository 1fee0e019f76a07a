/*
 * ckpt.c — tftrain checkpoint files (format and contracts in ckpt.h).
 *
 * Writing: the metadata and tensor table ("head") are serialised into one
 * buffer, the payload hash is computed over the head and the caller's
 * buffers, then header, head and data go to a temp file that is fsync'd and
 * renamed into place. Reading makes two passes: the first checks size and
 * checksum without interpreting anything, the second parses and validates
 * the head against what the caller expects before any buffer is filled.
 */
#include "ckpt.h"
#include "tft_msg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "checkpoint I/O writes host integers and floats as little-endian");

enum { HEADER_BYTES = 32, IO_CHUNK = 1 << 20 };
static const char MAGIC[8] = "TFTCKPT";


int ckpt_path(const char *dir, int64_t step, char *path, size_t cap)
{
    int k = snprintf(path, cap, "%s/ckpt-step-%06" PRId64 ".bin", dir, step);
    return k < 0 || (size_t)k >= cap ? -ENAMETOOLONG : 0;
}

/* ---- atomic file replacement ------------------------------------------------ */

/* Splits path into its directory (dir, "." when none) and base name. */
static int split_path(const char *path, char *dir, size_t cap, const char **base)
{
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) : 1;
    if (dl + 1 > cap)
        return -ENAMETOOLONG;
    if (!slash)
        memcpy(dir, ".", 2);
    else if (dl == 0)
        memcpy(dir, "/", 2);
    else {
        memcpy(dir, path, dl);
        dir[dl] = '\0';
    }
    *base = slash ? slash + 1 : path;
    return 0;
}

/* fsyncs a directory so a rename inside it is durable. File systems that
 * cannot sync directories (EINVAL) are accepted. */
static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 && errno != EINVAL ? -errno : 0;
    close(fd);
    return rc;
}

typedef int (*write_fn)(FILE *f, const void *ctx);

/* Replaces path with what fn writes: temp file ".BASE.tmp.XXXXXX" in the same
 * directory, fflush + fsync, rename, fsync of the directory. On failure the
 * temp file is removed and path is untouched (up to the final fsync). */
static int atomic_write(const char *path, write_fn fn, const void *ctx, char *err, size_t errlen)
{
    char dir[4096], tmp[4096];
    const char *base;
    if (split_path(path, dir, sizeof(dir), &base) ||
        snprintf(tmp, sizeof(tmp), "%s/.%s.tmp.XXXXXX", dir, base) >= (int)sizeof(tmp))
        return tft_errf(err, errlen, -ENAMETOOLONG, "%s: path too long", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return tft_errf(err, errlen, -errno, "%s: cannot create a temp file in %s: %s", path, dir,
                        strerror(errno));
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return tft_errf(err, errlen, -e, "%s: %s", path, strerror(e));
    }
    int rc = fchmod(fd, 0644) < 0 ? -errno : fn(f, ctx);
    if (rc == 0 && fflush(f) != 0)
        rc = -errno;
    if (rc == 0 && fsync(fd) < 0)
        rc = -errno;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    if (rc) {
        unlink(tmp);
        return tft_errf(err, errlen, rc, "%s: cannot write: %s (the previous file, if any, is intact)",
                        path, strerror(-rc));
    }
    rc = fsync_dir(dir);
    if (rc)
        return tft_errf(err, errlen, rc, "%s: written, but syncing directory %s failed: %s", path, dir,
                        strerror(-rc));
    return 0;
}

/* ---- writing ---------------------------------------------------------------- */

/* Checks step, config and tensor names (non-empty, short, unique) and counts. */
static int check_save_args(const ckpt_meta *meta, const ckpt_tensor *t, size_t n, char *err,
                           size_t errlen)
{
    if (meta->step < 0)
        return tft_errf(err, errlen, -EINVAL, "checkpoint step %" PRId64 " is negative", meta->step);
    if (strnlen(meta->config, CKPT_CONFIG_MAX) == CKPT_CONFIG_MAX)
        return tft_errf(err, errlen, -EINVAL, "checkpoint config is not NUL-terminated within %d bytes",
                        CKPT_CONFIG_MAX);
    for (size_t i = 0; i < n; i++) {
        size_t len = t[i].name ? strlen(t[i].name) : 0;
        if (len == 0 || len > CKPT_NAME_MAX)
            return tft_errf(err, errlen, -EINVAL, "checkpoint tensor %zu: name empty or over %d bytes",
                            i, CKPT_NAME_MAX);
        if (t[i].count > SIZE_MAX / sizeof(float) || (t[i].count && !t[i].data))
            return tft_errf(err, errlen, -EINVAL, "checkpoint tensor %s: no data or count too large",
                            t[i].name);
        for (size_t j = 0; j < i; j++)
            if (strcmp(t[i].name, t[j].name) == 0)
                return tft_errf(err, errlen, -EINVAL, "checkpoint tensor %s given twice", t[i].name);
    }
    return 0;
}

static uint8_t *put(uint8_t *p, const void *src, size_t n)
{
    memcpy(p, src, n);
    return p + n;
}

/* Serialises step, rng, cursor, config and the tensor table; *len = bytes. */
static uint8_t *build_head(const ckpt_meta *meta, const ckpt_tensor *t, size_t n, size_t *len)
{
    uint32_t cfg = (uint32_t)strlen(meta->config), nt = (uint32_t)n;
    size_t sz = 8 + 32 + 8 + 4 + cfg + 4;
    for (size_t i = 0; i < n; i++)
        sz += 4 + strlen(t[i].name) + 8;
    uint8_t *head = malloc(sz), *p = head;
    if (!head)
        return NULL;
    p = put(p, &meta->step, 8);
    p = put(p, meta->rng, 32);
    p = put(p, &meta->data_cursor, 8);
    p = put(p, &cfg, 4);
    p = put(p, meta->config, cfg);
    p = put(p, &nt, 4);
    for (size_t i = 0; i < n; i++) {
        uint32_t nl = (uint32_t)strlen(t[i].name);
        p = put(p, &nl, 4);
        p = put(p, t[i].name, nl);
        p = put(p, &t[i].count, 8);
    }
    *len = sz;
    return head;
}

struct ckpt_out {
    const uint8_t *head;    /* serialised head */
    size_t head_len;
    const ckpt_tensor *t;
    size_t n;
};

/* XXH3-64 over head then every tensor's bytes: the payload's hash. */
static int payload_hash(const struct ckpt_out *o, uint64_t *hash)
{
    XXH3_state_t *st = XXH3_createState();
    if (!st)
        return -ENOMEM;
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, o->head, o->head_len);
    for (size_t i = 0; i < o->n; i++)
        XXH3_64bits_update(st, o->t[i].data, (size_t)o->t[i].count * sizeof(float));
    *hash = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return 0;
}

/* write_fn for a checkpoint: header, head, tensor data. */
static int write_ckpt(FILE *f, const void *ctx)
{
    const struct ckpt_out *o = ctx;
    uint64_t payload = o->head_len, hash;
    for (size_t i = 0; i < o->n; i++)
        payload += o->t[i].count * sizeof(float);
    int rc = payload_hash(o, &hash);
    if (rc)
        return rc;
    uint8_t hdr[HEADER_BYTES] = {0};
    uint32_t version = CKPT_VERSION;
    memcpy(hdr, MAGIC, 8);
    memcpy(hdr + 8, &version, 4);
    memcpy(hdr + 16, &payload, 8);
    memcpy(hdr + 24, &hash, 8);
    if (fwrite(hdr, 1, sizeof(hdr), f) != sizeof(hdr) ||
        fwrite(o->head, 1, o->head_len, f) != o->head_len)
        return errno ? -errno : -EIO;
    for (size_t i = 0; i < o->n; i++)
        if (fwrite(o->t[i].data, sizeof(float), o->t[i].count, f) != o->t[i].count)
            return errno ? -errno : -EIO;
    return 0;
}

int ckpt_write(const char *path, const ckpt_meta *meta, const ckpt_tensor *t, size_t n, char *err,
               size_t errlen)
{
    int rc = check_save_args(meta, t, n, err, errlen);
    if (rc)
        return rc;
    struct ckpt_out o = {.t = t, .n = n};
    uint8_t *head = build_head(meta, t, n, &o.head_len);
    if (!head)
        return tft_errf(err, errlen, -ENOMEM, "%s: out of memory", path);
    o.head = head;
    errno = 0;
    rc = atomic_write(path, write_ckpt, &o, err, errlen);
    free(head);
    return rc;
}

/* write_fn for DIR/latest: the checkpoint's base name and a newline. */
static int write_latest(FILE *f, const void *ctx)
{
    return fprintf(f, "%s\n", (const char *)ctx) < 0 ? -EIO : 0;
}

int ckpt_save(const char *dir, const ckpt_meta *meta, const ckpt_tensor *t, size_t n, char *path,
              size_t cap, char *err, size_t errlen)
{
    char file[4096], latest[4096];
    if (ckpt_path(dir, meta->step, file, sizeof(file)) ||
        snprintf(latest, sizeof(latest), "%s/latest", dir) >= (int)sizeof(latest))
        return tft_errf(err, errlen, -ENAMETOOLONG, "%s: checkpoint directory path too long", dir);
    if (mkdir(dir, 0777) < 0 && errno != EEXIST)
        return tft_errf(err, errlen, -errno, "%s: cannot create checkpoint directory: %s", dir,
                        strerror(errno));
    int rc = ckpt_write(file, meta, t, n, err, errlen);
    if (rc)
        return rc;
    rc = atomic_write(latest, write_latest, strrchr(file, '/') + 1, err, errlen);
    if (rc)
        return rc;
    if (path && snprintf(path, cap, "%s", file) >= (int)cap)
        return tft_errf(err, errlen, -ENAMETOOLONG, "%s: saved, but the path does not fit the buffer",
                        file);
    return 0;
}

/* ---- reading: pass 1, size and checksum --------------------------------------- */

/* Reads the header of f and checks magic, version and size. On success f is
 * positioned at the payload, *payload holds its size and *hash the stored
 * checksum. */
static int verify_header(FILE *f, const char *path, uint64_t *payload, uint64_t *hash, char *err,
                         size_t errlen)
{
    struct stat st;
    uint8_t hdr[HEADER_BYTES];
    if (fstat(fileno(f), &st) < 0)
        return tft_errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
    if (fread(hdr, 1, sizeof(hdr), f) != sizeof(hdr) || memcmp(hdr, MAGIC, 8) != 0)
        return tft_errf(err, errlen, -EBADMSG, "%s: not a tftrain checkpoint (bad magic or shorter "
                        "than its header); point --resume at a ckpt-step-*.bin file", path);
    uint32_t version;
    uint64_t size, stored, want_size = (uint64_t)st.st_size - HEADER_BYTES;
    memcpy(&version, hdr + 8, 4);
    memcpy(&size, hdr + 16, 8);
    memcpy(&stored, hdr + 24, 8);
    if (version > CKPT_VERSION || version == 0)
        return tft_errf(err, errlen, -EPROTONOSUPPORT, "%s: checkpoint format version %u, this build "
                        "reads version %d; use a matching tftrain", path, version, CKPT_VERSION);
    if (size != want_size)
        return tft_errf(err, errlen, -EBADMSG, "%s: corrupt checkpoint: truncated or extended (header "
                        "says %" PRIu64 " payload bytes, file has %" PRIu64 "); use an earlier "
                        "checkpoint", path, size, want_size);
    *payload = size;
    *hash = stored;
    return 0;
}

/* Hashes the remaining size bytes of f and compares with the header's hash. */
static int verify_checksum(FILE *f, const char *path, uint64_t size, uint64_t stored, char *err,
                           size_t errlen)
{
    XXH3_state_t *st = XXH3_createState();
    uint8_t *buf = malloc(IO_CHUNK);
    int rc = 0;
    if (!st || !buf) {
        rc = tft_errf(err, errlen, -ENOMEM, "%s: out of memory", path);
        goto out;
    }
    XXH3_64bits_reset(st);
    for (uint64_t left = size; left > 0;) {
        size_t want = left < IO_CHUNK ? (size_t)left : IO_CHUNK;
        if (fread(buf, 1, want, f) != want) {
            rc = tft_errf(err, errlen, -EIO, "%s: read error: %s", path, strerror(errno ? errno : EIO));
            goto out;
        }
        XXH3_64bits_update(st, buf, want);
        left -= want;
    }
    uint64_t got = XXH3_64bits_digest(st);
    if (got != stored)
        rc = tft_errf(err, errlen, -EBADMSG, "%s: corrupt checkpoint: checksum mismatch (stored "
                      "%016" PRIx64 ", computed %016" PRIx64 "); use an earlier checkpoint", path,
                      stored, got);
out:
    XXH3_freeState(st);
    free(buf);
    return rc;
}

/* ---- reading: pass 2, parse and match ------------------------------------------ */

/* Sequential reader over the payload that never runs past its end. */
struct reader {
    FILE *f;
    uint64_t left;          /* payload bytes not yet read */
};

static int rd(struct reader *r, void *dst, uint64_t n)
{
    if (n > r->left)
        return -EBADMSG;
    if (n && fread(dst, 1, (size_t)n, r->f) != n)
        return -EIO;
    r->left -= n;
    return 0;
}

/* One tensor of the checkpoint's table. */
struct entry {
    char name[CKPT_NAME_MAX + 1];
    uint64_t count;         /* floats */
    size_t match;           /* index into the caller's tensors, SIZE_MAX = none yet */
};

/* Reads step, rng, cursor and config into m. */
static int parse_meta(struct reader *r, ckpt_meta *m)
{
    uint32_t cfg;
    int rc = rd(r, &m->step, 8);
    if (!rc)
        rc = rd(r, m->rng, 32);
    if (!rc)
        rc = rd(r, &m->data_cursor, 8);
    if (!rc)
        rc = rd(r, &cfg, 4);
    if (!rc && cfg >= CKPT_CONFIG_MAX)
        rc = -EBADMSG;
    if (!rc)
        rc = rd(r, m->config, cfg);
    if (!rc)
        m->config[cfg] = '\0';
    return rc;
}

/* Reads the tensor table into *out (malloc'd, *ne entries) and checks that
 * the data that follows is exactly the table's floats. */
static int parse_table(struct reader *r, struct entry **out, uint32_t *ne)
{
    uint32_t n, nl;
    int rc = rd(r, &n, 4);
    if (rc)
        return rc;
    if (n > r->left / 12)
        return -EBADMSG;
    struct entry *e = calloc(n ? n : 1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    uint64_t data = 0;
    for (uint32_t i = 0; i < n && !rc; i++) {
        rc = rd(r, &nl, 4);
        if (!rc && (nl == 0 || nl > CKPT_NAME_MAX))
            rc = -EBADMSG;
        if (!rc)
            rc = rd(r, e[i].name, nl);
        if (!rc)
            rc = rd(r, &e[i].count, 8);
        if (!rc && e[i].count > (UINT64_MAX - data) / sizeof(float))
            rc = -EBADMSG;
        data += e[i].count * sizeof(float);
        e[i].match = SIZE_MAX;
    }
    if (!rc && data != r->left)
        rc = -EBADMSG;
    if (rc) {
        free(e);
        return rc;
    }
    *out = e;
    *ne = n;
    return 0;
}

/* Next non-empty "key=value" line of *p (a line without '=' is a key with
 * an empty value); advances *p. Returns 0 at the end. */
static int cfg_next(const char **p, const char **key, int *klen, const char **val, int *vlen)
{
    while (**p == '\n')
        (*p)++;
    if (!**p)
        return 0;
    const char *end = strchr(*p, '\n'), *eq;
    if (!end)
        end = *p + strlen(*p);
    eq = memchr(*p, '=', (size_t)(end - *p));
    *key = *p;
    *klen = (int)((eq ? eq : end) - *p);
    *val = eq ? eq + 1 : end;
    *vlen = (int)(end - *val);
    *p = end;
    return 1;
}

/* Finds key in cfg; returns 1 and its value when present. */
static int cfg_find(const char *cfg, const char *key, int klen, const char **val, int *vlen)
{
    const char *k;
    int kl;
    while (cfg_next(&cfg, &k, &kl, val, vlen))
        if (kl == klen && memcmp(k, key, (size_t)klen) == 0)
            return 1;
    return 0;
}

/* Every key of want must be in have with the same value, and vice versa. */
static int check_config(const char *path, const char *have, const char *want, char *err,
                        size_t errlen)
{
    const char *p = want, *k, *v, *hv;
    int kl, vl, hvl;
    while (cfg_next(&p, &k, &kl, &v, &vl)) {
        if (!cfg_find(have, k, kl, &hv, &hvl))
            return tft_errf(err, errlen, -EINVAL, "%s: config mismatch: checkpoint has no %.*s, this "
                            "run %.*s=%.*s; resume with matching settings or use a fresh checkpoint "
                            "directory", path, kl, k, kl, k, vl, v);
        if (hvl != vl || memcmp(hv, v, (size_t)vl) != 0)
            return tft_errf(err, errlen, -EINVAL, "%s: config mismatch: checkpoint has %.*s=%.*s, "
                            "this run %.*s=%.*s; resume with matching settings or use a fresh "
                            "checkpoint directory", path, kl, k, hvl, hv, kl, k, vl, v);
    }
    for (p = have; cfg_next(&p, &k, &kl, &v, &vl);)
        if (!cfg_find(want, k, kl, &hv, &hvl))
            return tft_errf(err, errlen, -EINVAL, "%s: config mismatch: checkpoint has %.*s=%.*s, "
                            "this run does not set %.*s; use a matching tftrain", path, kl, k, vl, v,
                            kl, k);
    return 0;
}

/* Pairs the checkpoint's tensors with the caller's by name and count. */
static int match_tensors(const char *path, struct entry *e, uint32_t ne, const ckpt_tensor *t,
                         size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t j = 0;
        while (j < ne && strcmp(e[j].name, t[i].name) != 0)
            j++;
        if (j == ne)
            return tft_errf(err, errlen, -EINVAL, "%s: checkpoint has no tensor %s; it was saved by "
                            "a different model", path, t[i].name);
        if (e[j].match != SIZE_MAX)
            return tft_errf(err, errlen, -EINVAL, "%s: tensor %s requested twice", path, t[i].name);
        if (e[j].count != t[i].count)
            return tft_errf(err, errlen, -EINVAL, "%s: tensor %s has %" PRIu64 " floats in the "
                            "checkpoint, this run %" PRIu64 "; the model shapes differ", path,
                            t[i].name, e[j].count, t[i].count);
        e[j].match = i;
    }
    for (uint32_t j = 0; j < ne; j++)
        if (e[j].match == SIZE_MAX)
            return tft_errf(err, errlen, -EINVAL, "%s: checkpoint has tensor %s, which this run "
                            "does not have; it was saved by a different model", path, e[j].name);
    return 0;
}

/* Reads the data of each entry into its matched buffer (skips NULL ones). */
static int fill_tensors(struct reader *r, const struct entry *e, uint32_t ne, const ckpt_tensor *t)
{
    for (uint32_t j = 0; j < ne; j++) {
        uint64_t bytes = e[j].count * sizeof(float);
        float *dst = t[e[j].match].data;
        int rc = dst ? rd(r, dst, bytes)
                     : fseeko(r->f, (off_t)bytes, SEEK_CUR) < 0 ? -errno : 0;
        if (rc)
            return rc;
        if (!dst)
            r->left -= bytes;
    }
    return 0;
}

/* Pass 2: parses the payload at r, validates it against the caller's
 * expectations, fills the tensors and then meta. */
static int load_payload(struct reader *r, const char *path, const char *expect_config,
                        const ckpt_tensor *t, size_t n, ckpt_meta *meta, char *err, size_t errlen)
{
    ckpt_meta m;
    struct entry *e = NULL;
    uint32_t ne = 0;
    int rc = parse_meta(r, &m);
    if (!rc)
        rc = parse_table(r, &e, &ne);
    if (rc == -EBADMSG)
        return tft_errf(err, errlen, rc, "%s: corrupt checkpoint: malformed header despite a valid "
                        "checksum (written by a buggy tftrain?); use an earlier checkpoint", path);
    if (rc)
        return tft_errf(err, errlen, rc, "%s: cannot read: %s", path, strerror(-rc));
    if (expect_config)
        rc = check_config(path, m.config, expect_config, err, errlen);
    if (!rc)
        rc = match_tensors(path, e, ne, t, n, err, errlen);
    if (!rc && (rc = fill_tensors(r, e, ne, t)) != 0)
        tft_errf(err, errlen, rc, "%s: read error while loading tensors: %s", path, strerror(-rc));
    free(e);
    if (!rc)
        *meta = m;
    return rc;
}

int ckpt_load(const char *path, const char *expect_config, const ckpt_tensor *t, size_t n,
              ckpt_meta *meta, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return tft_errf(err, errlen, -errno, "%s: cannot open checkpoint: %s", path, strerror(errno));
    uint64_t size = 0, hash = 0;
    int rc = verify_header(f, path, &size, &hash, err, errlen);
    if (!rc)
        rc = verify_checksum(f, path, size, hash, err, errlen);
    if (!rc && fseeko(f, HEADER_BYTES, SEEK_SET) < 0)
        rc = tft_errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
    if (!rc) {
        struct reader r = {f, size};
        rc = load_payload(&r, path, expect_config, t, n, meta, err, errlen);
    }
    fclose(f);
    return rc;
}

/* ---- finding the newest ------------------------------------------------------- */

/* Parses "ckpt-step-N.bin" exactly; returns N or -1. */
static int64_t ckpt_name_step(const char *name)
{
    const char *p = name + 10;
    if (strncmp(name, "ckpt-step-", 10) != 0 || *p < '0' || *p > '9')
        return -1;
    int64_t step = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (step > (INT64_MAX - 9) / 10)
            return -1;
        step = step * 10 + (*p - '0');
    }
    return strcmp(p, ".bin") == 0 ? step : -1;
}

/* The name in DIR/latest (without its newline) into name. Returns 0,
 * -ENOENT when there is no latest file, -EBADMSG when it holds no
 * checkpoint file name. */
static int read_latest(const char *dir, char *name, size_t cap)
{
    char p[4096];
    if (snprintf(p, sizeof(p), "%s/latest", dir) >= (int)sizeof(p))
        return -ENAMETOOLONG;
    FILE *f = fopen(p, "r");
    if (!f)
        return -errno;
    size_t n = fread(name, 1, cap - 1, f);
    fclose(f);
    name[n] = '\0';
    name[strcspn(name, "\n")] = '\0';
    return ckpt_name_step(name) < 0 ? -EBADMSG : 0;
}

/* The ckpt-step-N.bin of dir with the largest N into name; -ENOENT if none. */
static int scan_newest(DIR *d, char *name, size_t cap)
{
    int64_t best = -1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int64_t s = ckpt_name_step(de->d_name);
        if (s > best && strlen(de->d_name) < cap) {
            best = s;
            strcpy(name, de->d_name);
        }
    }
    return best < 0 ? -ENOENT : 0;
}

int ckpt_find_latest(const char *dir, char *path, size_t cap, char *err, size_t errlen)
{
    char name[256];
    struct stat st;
    DIR *d = opendir(dir);
    if (!d)
        return tft_errf(err, errlen, -errno, "%s: cannot open checkpoint directory: %s", dir,
                        strerror(errno));
    int rc = read_latest(dir, name, sizeof(name));
    if (rc == -EBADMSG) {
        closedir(d);
        return tft_errf(err, errlen, rc, "%s/latest: does not name a ckpt-step-N.bin file; remove it "
                        "to fall back to the newest checkpoint file", dir);
    }
    if (rc == 0 && (snprintf(path, cap, "%s/%s", dir, name) >= (int)cap || stat(path, &st) < 0))
        rc = -ENOENT;
    if (rc)
        rc = scan_newest(d, name, sizeof(name));
    closedir(d);
    if (rc)
        return tft_errf(err, errlen, -ENOENT, "%s: no checkpoint found (no ckpt-step-*.bin file)", dir);
    if (snprintf(path, cap, "%s/%s", dir, name) >= (int)cap)
        return tft_errf(err, errlen, -ENAMETOOLONG, "%s/%s: path too long", dir, name);
    return 0;
}
