/*
 * capture_ref.c — the golden reference of `--capture first-divergence-of`
 * (capture_ref.h): built by the launcher from a trace, probed by the
 * recorder for every fingerprinted tensor while capture is armed.
 *
 * File layout (little-endian, this machine's; the file lives only for the
 * run that uses it): a 48-byte header, then the key filter, then the pair
 * filter, each a bit array of a power-of-two size.
 */
#include "capture_ref.h"

#include "tft_format.h"
#include "tft_u64map.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CAPREF_MAGIC "TFTREF1"
#define CAPREF_PROBES 8u
#define CAPREF_BITS_PER_ENTRY 16u

typedef struct capref_hdr {
    char magic[8];
    uint64_t key_bits, pair_bits; /* powers of two */
    uint64_t entries;
    uint32_t probes, pad;
    uint64_t reserved;
} capref_hdr;

struct capref {
    const capref_hdr *h;
    const uint8_t *keys, *pairs;
    size_t bytes;
};

/* A 64-bit mix (splitmix64 finaliser). */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t key_of(int rank, int64_t step, uint64_t name, uint32_t occ)
{
    uint64_t k = mix((uint64_t)(uint32_t)rank * 0x9e3779b97f4a7c15ull ^ (uint64_t)step);
    k = mix(k ^ name);
    return mix(k ^ ((uint64_t)occ << 1 | 1));
}

static uint64_t pair_of(uint64_t key, uint64_t fp) { return mix(key ^ mix(fp + 0x632be59bd9b4e019ull)); }

/* Double hashing: probe i at h1 + i * h2. */
static void bloom_set(uint8_t *bits, uint64_t nbits, uint64_t h)
{
    uint64_t h1 = h, h2 = mix(h) | 1;
    for (uint32_t i = 0; i < CAPREF_PROBES; i++) {
        uint64_t b = (h1 + i * h2) & (nbits - 1);
        bits[b >> 3] |= (uint8_t)(1u << (b & 7));
    }
}

static bool bloom_has(const uint8_t *bits, uint64_t nbits, uint64_t h)
{
    uint64_t h1 = h, h2 = mix(h) | 1;
    for (uint32_t i = 0; i < CAPREF_PROBES; i++) {
        uint64_t b = (h1 + i * h2) & (nbits - 1);
        if (!(bits[b >> 3] & (1u << (b & 7))))
            return false;
    }
    return true;
}

/* ---- occurrence counting within a step (builder side) ------------------- */

typedef struct occ_map {
    tft_u64map count; /* name id -> its occurrences so far in the step (u32) */
    int64_t step;
} occ_map;

static void occ_reset(occ_map *m, int64_t step)
{
    tft_u64map_clear(&m->count);
    m->step = step;
}

/* The occurrence number of name in the current step (0, 1, ...), or -1
 * (no memory). Name 0 counts as name 1, as the recorder counts them
 * (recorder_capture.c, whose table reserves 0). */
static int64_t occ_next(occ_map *m, uint64_t name)
{
    if (!name)
        name = 1;
    void *v;
    if (tft_u64map_insert(&m->count, name, NULL, NULL, &v) < 0)
        return -1;
    return (*(uint32_t *)v)++;
}

/* ---- building ------------------------------------------------------------- */

static int fail(char *err, size_t errlen, int e, const char *fmt, const char *a, const char *b)
{
    if (err && errlen)
        snprintf(err, errlen, fmt, a, b);
    return e;
}

/* Bloom filter bits for the golden trace t: enough for every record of
 * every chunk (an upper bound of its tensors) at CAPREF_BITS_PER_ENTRY, a
 * power of two from 2^13 to 2^36. */
static uint64_t ref_bits(tft_trace *t)
{
    uint64_t records = 0;
    for (int i = 0; i < tft_trace_nranks(t); i++) {
        tft_reader *r = tft_trace_reader(t, i);
        for (size_t k = 0; k < tft_reader_chunk_count(r); k++)
            records += tft_reader_chunk(r, k)->records;
    }
    uint64_t bits = 1u << 13;
    while (bits < records * CAPREF_BITS_PER_ENTRY && bits < (1ull << 36))
        bits <<= 1;
    return bits;
}

/* Adds the fingerprinted host tensors of rank file i of t to the filters
 * keys and pairs (bits each), counting them in *tensors; occ numbers each
 * name's occurrences in a step. 0 or -errno. */
static int ref_add_rank(tft_trace *t, int i, occ_map *occ, uint8_t *keys, uint8_t *pairs, uint64_t bits,
                        uint64_t *tensors)
{
    int rank = tft_trace_rank_id(t, i);
    tft_reader *r = tft_trace_reader(t, i);
    occ_reset(occ, TFT_STEP_NONE);
    const tft_rec *rec;
    int st;
    while ((st = tft_reader_next(r, &rec)) == 1) {
        if (rec->kind != TFT_REC_TENSOR || rec->len < sizeof(tft_rec_tensor))
            continue;
        const tft_rec_tensor *tr = (const tft_rec_tensor *)rec;
        if (tr->h.step != occ->step)
            occ_reset(occ, tr->h.step);
        int64_t n = occ_next(occ, tr->name);
        if (n < 0)
            return -ENOMEM;
        if (tr->mode < TFT_STATS_HEALTH || tr->device_kind != TFT_DEV_CPU)
            continue;
        uint64_t k = key_of(rank, tr->h.step, tr->name, (uint32_t)n);
        bloom_set(keys, bits, k);
        bloom_set(pairs, bits, pair_of(k, tr->stats.fingerprint));
        (*tensors)++;
    }
    return st < 0 ? st : 0;
}

/* Writes the bytes of buf as the file path (created 0600). 0, or -EIO with
 * a message in err. */
static int ref_write(const char *path, const uint8_t *buf, size_t bytes, char *err, size_t errlen)
{
    int e = 0, fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t off = 0;
    while (fd >= 0 && off < bytes) {
        ssize_t w = write(fd, buf + off, bytes - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    if (fd < 0 || off < bytes)
        e = fail(err, errlen, -EIO, "%s: cannot write: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    return e;
}

int capref_build(const char *golden, const char *path, uint64_t *tensors, char *err, size_t errlen)
{
    *tensors = 0;
    tft_trace *t = tft_trace_open(golden, NULL);
    if (!t)
        return fail(err, errlen, -errno, "%s: cannot open: %s", golden, strerror(errno));
    uint64_t bits = ref_bits(t);
    size_t bytes = sizeof(capref_hdr) + 2 * (size_t)(bits / 8);
    uint8_t *buf = calloc(1, bytes);
    occ_map occ = {.step = TFT_STEP_NONE};
    tft_u64map_init(&occ.count, &(tft_u64map_opts){.vsize = sizeof(uint32_t), .min_cap = 1024});
    if (!buf || tft_u64map_reserve(&occ.count) < 0) {
        free(buf);
        tft_trace_close(t);
        return fail(err, errlen, -ENOMEM, "%s%s: out of memory", golden, "");
    }
    capref_hdr *h = (capref_hdr *)buf;
    memcpy(h->magic, CAPREF_MAGIC, 8);
    h->key_bits = h->pair_bits = bits;
    h->probes = CAPREF_PROBES;
    uint8_t *keys = buf + sizeof(*h), *pairs = keys + bits / 8;
    int e = 0;
    for (int i = 0; i < tft_trace_nranks(t) && !e; i++)
        e = ref_add_rank(t, i, &occ, keys, pairs, bits, tensors);
    tft_trace_close(t);
    tft_u64map_free(&occ.count);
    h->entries = *tensors;
    if (!e && *tensors == 0)
        e = fail(err, errlen, -ENODATA, "%s: no fingerprinted tensors (recorded with --stats shape?)%s", golden, "");
    else if (e)
        fail(err, errlen, e, "%s: cannot read: %s", golden, strerror(-e));
    if (!e)
        e = ref_write(path, buf, bytes, err, errlen);
    free(buf);
    return e;
}

/* ---- probing (recorder side) -------------------------------------------- */

capref *capref_open(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat sb;
    capref *r = NULL;
    void *p = MAP_FAILED;
    if (fstat(fd, &sb) == 0 && (size_t)sb.st_size >= sizeof(capref_hdr))
        p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return NULL;
    const capref_hdr *h = p;
    uint64_t kb = h->key_bits, pb = h->pair_bits;
    bool ok = !memcmp(h->magic, CAPREF_MAGIC, 8) && kb >= 8 && pb >= 8 && !(kb & (kb - 1)) && !(pb & (pb - 1)) &&
              h->probes == CAPREF_PROBES && sizeof(*h) + kb / 8 + pb / 8 <= (uint64_t)sb.st_size;
    if (ok)
        r = malloc(sizeof(*r));
    if (!r) {
        munmap(p, (size_t)sb.st_size);
        return NULL;
    }
    r->h = h;
    r->keys = (const uint8_t *)p + sizeof(*h);
    r->pairs = r->keys + kb / 8;
    r->bytes = (size_t)sb.st_size;
    return r;
}

int capref_diverged(const capref *r, int rank, int64_t step, uint64_t name_id, uint32_t occurrence,
                    uint64_t fingerprint)
{
    uint64_t k = key_of(rank, step, name_id, occurrence);
    return bloom_has(r->keys, r->h->key_bits, k) && !bloom_has(r->pairs, r->h->pair_bits, pair_of(k, fingerprint));
}
