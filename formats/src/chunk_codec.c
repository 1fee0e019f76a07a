/*
 * chunk_codec.c — the record encodings inside a chunk (FORMAT.md §3.3.1):
 * COLUMNS (records grouped by kind, their 8-byte words transposed into
 * columns, each column delta coded) and SHUFFLE (the word area stored as
 * eight byte planes), alone or together, applied before zstd.
 *
 * Workload: one call per chunk (1–4 MiB); both directions are a few linear
 * passes over the chunk, no allocation after the first chunk. The decoder
 * takes untrusted bytes: every table entry is range checked before it is
 * used, and the decoded records must agree with the table.
 */
#include "format_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define REC_WORDS_MIN (sizeof(tft_rec) / 8u)
#define REC_WORDS_MAX (TFT_REC_MAX_BYTES / 8u)
#define SMALL_KINDS 64u /* kinds below this are bucketed directly */

static inline uint64_t ld64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline void st64(void *p, uint64_t v) { memcpy(p, &v, 8); }

size_t fmt_chunk_table_bytes(uint32_t records)
{
    return ((size_t)records * 4u + 7u) & ~(size_t)7u;
}

size_t fmt_chunk_encoded_size(uint32_t enc, uint32_t records, size_t raw_size)
{
    return raw_size + ((enc & CHUNK_ENC_COLUMNS) ? fmt_chunk_table_bytes(records) : 0);
}

/* Transposes the 8x8 byte matrix x (row i = x[i], column b = byte b):
 * afterwards byte b of x[i] is what byte i of x[b] was. Its own inverse. */
static inline void transpose8(uint64_t x[8])
{
    static const uint64_t m1 = 0x00FF00FF00FF00FFull, m2 = 0x0000FFFF0000FFFFull,
                          m4 = 0x00000000FFFFFFFFull;
    for (int i = 0; i < 8; i += 2) {
        uint64_t t = ((x[i] >> 8) ^ x[i + 1]) & m1;
        x[i + 1] ^= t;
        x[i] ^= t << 8;
    }
    for (int i = 0; i < 8; i += (i & 1) ? 3 : 1) {
        uint64_t t = ((x[i] >> 16) ^ x[i + 2]) & m2;
        x[i + 2] ^= t;
        x[i] ^= t << 16;
    }
    for (int i = 0; i < 4; i++) {
        uint64_t t = ((x[i] >> 32) ^ x[i + 4]) & m4;
        x[i + 4] ^= t;
        x[i] ^= t << 32;
    }
}

/* n words at src -> 8 planes of n bytes at dst: byte b of word i at b*n + i. */
static void shuffle8(char *dst, const char *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x[8];
        memcpy(x, src + 8 * i, 64);
        transpose8(x);
        for (int b = 0; b < 8; b++)
            st64(dst + (size_t)b * n + i, x[b]);
    }
    for (; i < n; i++)
        for (size_t b = 0; b < 8; b++)
            dst[b * n + i] = src[8 * i + b];
}

/* The inverse of shuffle8. With SSE2, 16 words at a time: three rounds of
 * interleaving (bytes of plane pairs, then 16-bit, then 32-bit lanes) turn
 * 16 bytes of each of the 8 planes into the 16 words. */
static void unshuffle8(char *dst, const char *src, size_t n)
{
    size_t i = 0;
#ifdef __SSE2__
    for (; i + 16 <= n; i += 16) {
        __m128i p[8];
        for (int b = 0; b < 8; b++)
            p[b] = _mm_loadu_si128((const __m128i *)(src + (size_t)b * n + i));
        /* q[2k]: bytes 2k, 2k+1 of words 0..7; q[2k+1]: of words 8..15 */
        __m128i q[8], r[8];
        for (int k = 0; k < 4; k++) {
            q[2 * k] = _mm_unpacklo_epi8(p[2 * k], p[2 * k + 1]);
            q[2 * k + 1] = _mm_unpackhi_epi8(p[2 * k], p[2 * k + 1]);
        }
        /* r[h*4 + 2m + x]: bytes 4m..4m+3 of words 8h + 4x .. 8h + 4x + 3 */
        for (int h = 0; h < 2; h++)
            for (int m = 0; m < 2; m++) {
                r[h * 4 + 2 * m] = _mm_unpacklo_epi16(q[4 * m + h], q[4 * m + 2 + h]);
                r[h * 4 + 2 * m + 1] = _mm_unpackhi_epi16(q[4 * m + h], q[4 * m + 2 + h]);
            }
        /* words 8h + 4x + {0,1} and {2,3}: low and high 4 bytes interleaved */
        for (int h = 0; h < 2; h++)
            for (int x = 0; x < 2; x++) {
                char *o = dst + 8 * (i + 8 * (size_t)h + 4 * (size_t)x);
                __m128i lo = r[h * 4 + x], hi = r[h * 4 + 2 + x];
                _mm_storeu_si128((__m128i *)o, _mm_unpacklo_epi32(lo, hi));
                _mm_storeu_si128((__m128i *)(o + 16), _mm_unpackhi_epi32(lo, hi));
            }
    }
#endif
    for (; i + 8 <= n; i += 8) {
        uint64_t x[8];
        for (int b = 0; b < 8; b++)
            x[b] = ld64(src + (size_t)b * n + i);
        transpose8(x);
        memcpy(dst + 8 * i, x, 64);
    }
    for (; i < n; i++)
        for (size_t b = 0; b < 8; b++)
            dst[8 * i + b] = src[b * n + i];
}

static int grow(void **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 4096;
    while (ncap < need)
        ncap *= 2;
    void *np = realloc(*p, ncap);
    if (!np)
        return -ENOMEM;
    *p = np;
    *cap = ncap;
    return 0;
}

void fmt_codec_free(fmt_codec *c)
{
    if (!c)
        return;
    free(c->off);
    free(c->order);
    free(c->words);
    free(c->table);
    free(c->goff);
    memset(c, 0, sizeof(*c));
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Fills c->off (byte offset of record i) and c->order (record indices
 * grouped by ascending kind, in file order within a kind) from the table
 * kinds[]/words[] of n records. Returns 0 or -ENOMEM. */
static int group_by_kind(fmt_codec *c, const uint16_t *kinds, const uint16_t *words, uint32_t n)
{
    if (grow((void **)&c->off, &c->off_cap, (size_t)n * 4) < 0 ||
        grow((void **)&c->order, &c->order_cap, ((size_t)n / 2 + 1 + n) * 8) < 0)
        return -ENOMEM;
    uint32_t count[SMALL_KINDS + 1] = {0};
    uint32_t pos = 0;
    for (uint32_t i = 0; i < n; i++) {
        c->off[i] = pos;
        pos += (uint32_t)words[i] * 8u;
        count[kinds[i] < SMALL_KINDS ? kinds[i] : SMALL_KINDS]++;
    }
    uint32_t start[SMALL_KINDS + 1], sum = 0;
    for (uint32_t k = 0; k <= SMALL_KINDS; k++) {
        start[k] = sum;
        sum += count[k];
    }
    uint32_t *order = (uint32_t *)c->order;
    uint64_t *big = NULL;
    size_t n_big = count[SMALL_KINDS];
    for (uint32_t i = 0; i < n; i++)
        if (kinds[i] < SMALL_KINDS)
            order[start[kinds[i]]++] = i;
    if (n_big) {
        /* rare kinds (unknown to this version): sort (kind, index) pairs,
         * which keeps file order within a kind. The pairs go in the upper
         * half of c->order, past the n u32 indices. */
        big = c->order + (n + 1) / 2;
        size_t k = 0;
        for (uint32_t i = 0; i < n; i++)
            if (kinds[i] >= SMALL_KINDS)
                big[k++] = (uint64_t)kinds[i] << 32 | i;
        qsort(big, n_big, sizeof(*big), cmp_u64);
        uint32_t at = start[SMALL_KINDS]; /* not advanced: only small kinds were placed */
        for (size_t j = 0; j < n_big; j++)
            order[at + j] = (uint32_t)big[j];
    }
    return 0;
}

/* Words 1..3 of a record (timestamp, step, seq) are coded as differences
 * from the previous record of the kind, the others as XOR with it. */
static inline int subtract_word(size_t j) { return j >= 1 && j <= 3; }

/* The group of records order[a..b): all of kind kinds[order[a]]. */
static size_t group_end(const uint16_t *kinds, const uint32_t *order, size_t a, size_t n)
{
    size_t b = a + 1;
    while (b < n && kinds[order[b]] == kinds[order[a]])
        b++;
    return b;
}

int fmt_chunk_encode(fmt_codec *c, uint32_t enc, const char *raw, size_t raw_size,
                     uint32_t records, char *out)
{
    if (raw_size == 0)
        return 0; /* a chunk of only a dropped count: nothing to encode */
    if (!(enc & CHUNK_ENC_COLUMNS)) {
        if (enc & CHUNK_ENC_SHUFFLE)
            shuffle8(out, raw, raw_size / 8);
        else
            memcpy(out, raw, raw_size);
        return 0;
    }
    size_t tb = fmt_chunk_table_bytes(records);
    uint16_t *kinds = (uint16_t *)out, *words = kinds + records;
    memset(out, 0, tb);
    size_t pos = 0;
    for (uint32_t i = 0; i < records; i++) {
        const tft_rec *r = (const tft_rec *)(raw + pos);
        kinds[i] = r->kind;
        words[i] = (uint16_t)(r->len / 8);
        pos += r->len;
    }
    if (group_by_kind(c, kinds, words, records) < 0)
        return -ENOMEM;
    char *area = out + tb;
    if ((enc & CHUNK_ENC_SHUFFLE) && grow((void **)&c->words, &c->words_cap, raw_size) < 0)
        return -ENOMEM;
    char *dst = (enc & CHUNK_ENC_SHUFFLE) ? (char *)c->words : area;
    const uint32_t *order = (const uint32_t *)c->order;
    size_t w = 0;
    for (size_t a = 0; a < records;) {
        size_t b = group_end(kinds, order, a, records);
        size_t maxw = 0;
        for (size_t i = a; i < b; i++)
            maxw = words[order[i]] > maxw ? words[order[i]] : maxw;
        for (size_t j = 0; j < maxw; j++) {
            uint64_t prev = 0;
            int sub = subtract_word(j);
            for (size_t i = a; i < b; i++) {
                uint32_t r = order[i];
                if (words[r] <= j)
                    continue;
                uint64_t v = ld64(raw + c->off[r] + 8 * j);
                st64(dst + 8 * w++, sub ? v - prev : v ^ prev);
                prev = v;
            }
        }
        a = b;
    }
    if (enc & CHUNK_ENC_SHUFFLE)
        shuffle8(area, dst, raw_size / 8);
    return 0;
}

/* Checks the table of an encoded chunk: n records of 4..8192 words whose
 * sizes add up to raw_size. */
static const char *table_check(const uint16_t *words, uint32_t n, size_t raw_size)
{
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (words[i] < REC_WORDS_MIN || words[i] > REC_WORDS_MAX)
            return "record table holds an impossible length";
        total += words[i];
    }
    return total * 8 == raw_size ? NULL : "record table does not add up to the chunk's size";
}

/* Undoes the column coding of one group, the records order[a, b) of one
 * kind (goff: their offsets in out, in group order): word j of each, j
 * from 0 to the longest, delta (subtract_word) or xor coded against the
 * group's previous record, read from the word area at word w on. Returns
 * the word after the group's. Static, one caller: inlined into the
 * decoder's loop. */
static size_t decode_group(const uint16_t *words, const uint32_t *order, const uint32_t *goff, size_t a, size_t b,
                           const char *area, size_t w, char *out)
{
    size_t maxw = 0;
    bool uniform = true;
    for (size_t i = a; i < b; i++) {
        uint16_t x = words[order[i]];
        uniform &= x == words[order[a]];
        maxw = x > maxw ? x : maxw;
    }
    for (size_t j = 0; j < maxw; j++) {
        uint64_t prev = 0;
        char *o = out + 8 * j;
        if (uniform && subtract_word(j)) {
            for (size_t i = a; i < b; i++, w++)
                st64(o + goff[i], prev += ld64(area + 8 * w));
        } else if (uniform) {
            for (size_t i = a; i < b; i++, w++)
                st64(o + goff[i], prev ^= ld64(area + 8 * w));
        } else {
            int sub = subtract_word(j);
            for (size_t i = a; i < b; i++) {
                if (words[order[i]] <= j)
                    continue;
                uint64_t v = ld64(area + 8 * w++);
                prev = sub ? prev + v : prev ^ v;
                st64(o + goff[i], prev);
            }
        }
    }
    return w;
}

/* The decoded records' own kind and length fields against the table: NULL
 * when they agree, else what is wrong. */
static const char *records_agree(const char *out, const uint32_t *off, const uint16_t *kinds, const uint16_t *words,
                                 uint32_t records)
{
    for (uint32_t i = 0; i < records; i++) {
        const tft_rec *r = (const tft_rec *)(out + off[i]);
        if (r->kind != kinds[i] || r->len != (uint32_t)words[i] * 8u)
            return "record table disagrees with its records";
    }
    return NULL;
}

int fmt_chunk_decode(fmt_codec *c, uint32_t enc, const char *in, size_t in_size,
                     uint32_t records, char *out, size_t raw_size, const char **why)
{
    *why = NULL;
    if (enc & ~CHUNK_ENC_KNOWN) {
        *why = "unknown chunk encoding (written by a newer tftrace)";
        return -EBADMSG;
    }
    if (raw_size % 8 || in_size != fmt_chunk_encoded_size(enc, records, raw_size)) {
        *why = "encoded size differs from its header";
        return -EBADMSG;
    }
    if (raw_size == 0) {
        *why = records ? "record table does not add up to the chunk's size" : NULL;
        return records ? -EBADMSG : 0;
    }
    if (!(enc & CHUNK_ENC_COLUMNS)) {
        if (enc & CHUNK_ENC_SHUFFLE)
            unshuffle8(out, in, raw_size / 8);
        else
            memcpy(out, in, raw_size);
        return 0;
    }
    size_t tb = fmt_chunk_table_bytes(records);
    /* the table is copied: in may be any alignment */
    if (grow((void **)&c->table, &c->table_cap, tb) < 0)
        return -ENOMEM;
    memcpy(c->table, in, tb);
    const uint16_t *kinds = c->table, *words = kinds + records;
    if ((*why = table_check(words, records, raw_size)))
        return -EBADMSG;
    if (group_by_kind(c, kinds, words, records) < 0)
        return -ENOMEM;
    const char *area = in + tb;
    if (enc & CHUNK_ENC_SHUFFLE) {
        if (grow((void **)&c->words, &c->words_cap, raw_size) < 0)
            return -ENOMEM;
        unshuffle8((char *)c->words, area, raw_size / 8);
        area = (const char *)c->words;
    }
    const uint32_t *order = (const uint32_t *)c->order;
    /* offsets in group order, so the column loops read one array */
    if (grow((void **)&c->goff, &c->goff_cap, (size_t)records * 4) < 0)
        return -ENOMEM;
    uint32_t *goff = c->goff;
    for (uint32_t i = 0; i < records; i++)
        goff[i] = c->off[order[i]];
    size_t w = 0;
    for (size_t a = 0; a < records;) {
        size_t b = group_end(kinds, order, a, records);
        w = decode_group(words, order, goff, a, b, area, w, out);
        a = b;
    }
    /* the records' own kind and length fields must agree with the table */
    *why = records_agree(out, c->off, kinds, words, records);
    return *why ? -EBADMSG : 0;
}
