/*
 * fuzz_reader.c — libFuzzer target for the rank-file reader.
 *
 * The input becomes a rank file in a memfd, opened by path through
 * /proc/self/fd, and the reader is driven through every entry point:
 * open, verify, next over everything, string lookups for every id a record
 * refers to, seek_step, rewind, and the one-rank trace + merge.
 *
 * How the input is turned into a file (first byte):
 *   0x50 ('P', the first byte of the header frame magic): the input is the
 *        file, so plain rank files are seeds;
 *   otherwise (byte % 5) selects a mutation of a valid sample trace built once
 *   per process with tft_writer (fuzz_sample.h, 5 chunks, closed):
 *   0 XOR patches on the file bytes;
 *   1 truncation (u16 length) then XOR patches;
 *   2 XOR patches on the decompressed records of its chunks, re-sealed with
 *     correct checksums (flags: write the index, recount records), so the
 *     damage reaches record decoding instead of the checksum; with flags
 *     bit 7 the chunks are sealed in a 1.4 encoding (bits 5-6: columns,
 *     shuffle or both, FORMAT.md §3.3.1) and the patches hit the encoded
 *     bytes, so the damage reaches the chunk decoder;
 *   3 the input's own bytes as raw records, sealed into chunks the same way;
 *   4 a writer round trip: the input is a program of tft_writer calls
 *     (register a string of up to 76 KB, append a record of any kind, flush,
 *     add dropped); the file must then read back INTACT with exactly the
 *     records appended and the text of every string they refer to.
 *   Patches are 3 bytes: u16 LE offset (modulo the size), u8 XOR mask.
 *
 * Invariants checked (abort on violation):
 *   - open fails only with EPROTO, EPROTONOSUPPORT, EIO or ENOMEM;
 *   - the status is consistent: integrity in range, bad chunks => DAMAGED,
 *     INTACT => closed and no bad chunk, any problem => a message;
 *   - verify returns 0 exactly when INTACT; next never fails on a memfd;
 *   - every record returned passes tft_rec_check and is not a STRING;
 *   - the records returned are, in order, all records of a subset of the
 *     chunks that a second decoder here (plain ZSTD_decompress, the chunk
 *     decoder for encoded chunks, a record walk)
 *     finds good: nothing comes from a damaged chunk. For the sealed modes
 *     (2, 3) every chunk the second decoder finds good must be returned;
 *   - seek_step returns a suffix of that sequence; the one-rank merge returns
 *     it exactly.
 *
 * Environment: FUZZ_READER_VERBOSE=1 prints one line per input (chunks,
 * good / bad, records, integrity); FUZZ_READER_DUMP=PATH writes the rank
 * file built from the (last) input there, to replay it with tfdump.
 */
#define _GNU_SOURCE /* memfd_create */
#include "format_internal.h"
#include "fuzz_sample.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

#define FUZZ_TARGET "fuzz_reader"
#include "tft_fuzz_check.h"

#define MAX_BASE_CHUNKS 16

/* A growable byte buffer; malloc'd, so records copied at 8-byte offsets stay
 * aligned. Allocation failure aborts: this is a test harness. */
typedef struct bytes {
    uint8_t *p;
    size_t len, cap;
    size_t count; /* records held, when used as a record list */
} bytes;

static void bytes_put(bytes *b, const void *src, size_t n)
{
    if (b->len + n > b->cap) {
        size_t ncap = b->cap ? b->cap * 2 : 4096;
        while (ncap < b->len + n)
            ncap *= 2;
        b->p = realloc(b->p, ncap);
        FUZZ_CHECK(b->p, "out of memory");
        b->cap = ncap;
    }
    if (n)
        memcpy(b->p + b->len, src, n);
    b->len += n;
}

/* Per-process state: the memfd, and the valid sample trace (file bytes and
 * the raw records of each of its chunks). */
static struct {
    int fd;
    char path[64];
    bytes base;                   /* the closed sample rank file */
    uint8_t hdr_frame[8 + sizeof(file_hdr_disk)];
    bytes base_raw;               /* raw records of all chunks, back to back */
    size_t chunk_off[MAX_BASE_CHUNKS + 1]; /* chunk i: base_raw[chunk_off[i], chunk_off[i+1]) */
    uint32_t chunk_records[MAX_BASE_CHUNKS];
    size_t n_chunks;
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
    fmt_codec codec;
    int log_lines;
    int verbose;                  /* FUZZ_READER_VERBOSE set: one line per input */
    const char *dump;             /* FUZZ_READER_DUMP: path to write each built file to */
} G;

static void fuzz_log(void *ctx, int level, const char *msg)
{
    FUZZ_CHECK(level >= TFT_LOG_ERROR && level <= TFT_LOG_DEBUG, "log level %d", level);
    FUZZ_CHECK(strlen(msg) < 4096, "log line too long");
    (*(int *)ctx)++;
}

static void file_set(const uint8_t *p, size_t n)
{
    FUZZ_CHECK(ftruncate(G.fd, 0) == 0, "ftruncate");
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(G.fd, p + done, n - done, (off_t)done);
        FUZZ_CHECK(w > 0, "pwrite");
        done += (size_t)w;
    }
}

/* ---- building files: the sealed modes ------------------------------------------ */

/* Counts records by their length fields (the way a writer would lay them
 * out), stopping at the first that cannot be framed. */
static uint32_t walk_count(const uint8_t *raw, size_t n)
{
    uint32_t count = 0;
    size_t pos = 0;
    while (n - pos >= sizeof(tft_rec)) {
        uint32_t len;
        memcpy(&len, raw + pos + 4, 4);
        if (len < sizeof(tft_rec) || len % 8 || len > n - pos)
            break;
        pos += len;
        count++;
    }
    return count;
}

/* Appends one chunk (header frame + zstd frame with content size and
 * checksum) holding raw[0..n), as the writer would seal it. */
static void seal_chunk(bytes *out, const uint8_t *raw, size_t n, uint32_t chunk_no,
                       uint32_t records, index_entry_disk *ie, uint32_t enc,
                       const uint8_t *patch, size_t np);

/* Patches are 3 bytes: u16 LE offset (modulo the size), u8 XOR mask. */
static void apply_patches(uint8_t *p, size_t n, const uint8_t *patch, size_t np)
{
    if (!n)
        return;
    for (size_t i = 0; i + 3 <= np; i += 3) {
        size_t at = ((size_t)patch[i] | (size_t)patch[i + 1] << 8) % n;
        p[at] ^= patch[i + 2];
    }
}

/* Encodes raw[0..n) (records of it as walk_count finds them, the rest
 * dropped) and patches the encoded bytes; returns them (malloc'd) and their
 * size in *len, the raw bytes encoded in *raw_len. */
static uint8_t *encode_patched(const uint8_t *raw, size_t n, uint32_t enc, const uint8_t *patch,
                               size_t np, size_t *len, size_t *raw_len, uint32_t *records)
{
    uint32_t count = walk_count(raw, n);
    size_t pos = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t l;
        memcpy(&l, raw + pos + 4, 4);
        pos += l;
    }
    *raw_len = pos;
    *records = count;
    *len = fmt_chunk_encoded_size(enc, count, pos);
    uint8_t *e = malloc(*len + 1);
    FUZZ_CHECK(e, "out of memory");
    FUZZ_CHECK(fmt_chunk_encode(&G.codec, enc, (const char *)raw, pos, count, (char *)e) == 0,
               "fmt_chunk_encode");
    apply_patches(e, *len, patch, np);
    return e;
}

static void seal_chunk(bytes *out, const uint8_t *raw, size_t n, uint32_t chunk_no,
                       uint32_t records, index_entry_disk *ie, uint32_t enc,
                       const uint8_t *patch, size_t np)
{
    chunk_hdr_disk h;
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, CHUNK_MAGIC, 4);
    h.chunk_no = chunk_no;
    h.records = records;
    h.raw_size = (uint32_t)n;
    h.first_step = h.last_step = TFT_STEP_NONE;
    h.first_seq = h.last_seq = TFT_SEQ_NONE;
    /* step / seq / ts ranges over the records that frame, as note_range does */
    size_t pos = 0;
    bool first = true;
    while (n - pos >= sizeof(tft_rec)) {
        tft_rec r;
        memcpy(&r, raw + pos, sizeof(r));
        if (r.len < sizeof(tft_rec) || r.len % 8 || r.len > n - pos)
            break;
        pos += r.len;
        if (r.kind == TFT_REC_STRING)
            continue;
        if (r.step != TFT_STEP_NONE) {
            if (h.first_step == TFT_STEP_NONE || r.step < h.first_step)
                h.first_step = r.step;
            if (h.last_step == TFT_STEP_NONE || r.step > h.last_step)
                h.last_step = r.step;
        }
        if (r.seq != TFT_SEQ_NONE) {
            if (h.first_seq == TFT_SEQ_NONE || r.seq < h.first_seq)
                h.first_seq = r.seq;
            if (h.last_seq == TFT_SEQ_NONE || r.seq > h.last_seq)
                h.last_seq = r.seq;
        }
        if (first)
            h.first_ts = r.ts;
        if (r.ts > h.last_ts)
            h.last_ts = r.ts;
        first = false;
    }
    const uint8_t *src = raw;
    size_t src_len = n;
    uint8_t *encoded = NULL;
    if (enc) {
        uint32_t count;
        size_t raw_len;
        encoded = encode_patched(raw, n, enc, patch, np, &src_len, &raw_len, &count);
        src = encoded;
        h.raw_size = (uint32_t)raw_len;
        (void)count; /* a header count other than the encoder's makes the chunk damaged */
        h.encoding = enc;
    }
    size_t bound = ZSTD_compressBound(src_len);
    uint8_t *comp = malloc(bound);
    FUZZ_CHECK(comp, "out of memory");
    size_t c = ZSTD_compress2(G.cctx, comp, bound, src, src_len);
    FUZZ_CHECK(!ZSTD_isError(c), "ZSTD_compress2: %s", ZSTD_getErrorName(c));
    free(encoded);
    h.comp_size = (uint32_t)c;
    h.comp_checksum = fmt_checksum32(comp, c);
    h.checksum = fmt_checksum32(&h, offsetof(chunk_hdr_disk, checksum));
    *ie = (index_entry_disk){
        .offset = out->len, .chunk_no = h.chunk_no, .records = h.records,
        .raw_size = h.raw_size, .comp_size = h.comp_size,
        .first_step = h.first_step, .last_step = h.last_step,
        .first_seq = h.first_seq, .last_seq = h.last_seq,
        .first_ts = h.first_ts, .last_ts = h.last_ts, .dropped = h.dropped,
    };
    uint32_t fh[2] = {FRAME_MAGIC_CHUNK, sizeof(h)};
    bytes_put(out, fh, sizeof(fh));
    bytes_put(out, &h, sizeof(h));
    bytes_put(out, comp, c);
    free(comp);
}

/* Appends the index frame and the seek table (FORMAT.md §4), as the writer's
 * close does. */
static void seal_index(bytes *out, const index_entry_disk *ie, size_t n)
{
    uint64_t ix_start = out->len;
    index_hdr_disk ih = {.n_chunks = (uint32_t)n};
    memcpy(ih.magic, INDEX_MAGIC, 4);
    for (size_t i = 0; i < n; i++) {
        ih.records += ie[i].records;
        ih.raw_bytes += ie[i].raw_size;
    }
    bytes pay = {0};
    bytes_put(&pay, &ih, sizeof(ih));
    bytes_put(&pay, ie, n * sizeof(*ie));
    uint32_t zero = 0;
    bytes_put(&pay, &zero, 4);
    uint32_t sum = fmt_checksum32(pay.p, pay.len);
    bytes_put(&pay, &sum, 4);
    uint32_t fh[2] = {FRAME_MAGIC_INDEX, (uint32_t)pay.len};
    bytes_put(out, fh, sizeof(fh));
    bytes_put(out, pay.p, pay.len);
    free(pay.p);
    uint32_t ix_bytes = (uint32_t)(out->len - ix_start);

    size_t nframes = 2 + 2 * n;
    uint32_t sh[2] = {FRAME_MAGIC_SEEKTABLE, (uint32_t)(nframes * 8 + 9)};
    bytes_put(out, sh, sizeof(sh));
    uint32_t e[2] = {sizeof(G.hdr_frame), 0};
    bytes_put(out, e, 8);
    for (size_t i = 0; i < n; i++) {
        uint32_t ce[4] = {SKIPPABLE_HDR + sizeof(chunk_hdr_disk), 0, ie[i].comp_size, ie[i].raw_size};
        bytes_put(out, ce, sizeof(ce));
    }
    uint32_t last[2] = {ix_bytes, 0};
    bytes_put(out, last, 8);
    uint32_t nf = (uint32_t)nframes, magic = SEEKTABLE_FOOTER_MAGIC;
    uint8_t desc = 0;
    bytes_put(out, &nf, 4);
    bytes_put(out, &desc, 1);
    bytes_put(out, &magic, 4);
}

/* Seals pieces [cut[i], cut[i+1]) of raw into a file after the sample's
 * header frame. flags bit0: write the index; bit1: each chunk's record count
 * is what walk_count finds, else records[i] or, without records, the walk
 * count XOR (flags >> 2 & 3) (a wrong count when that is nonzero). */
static void seal_file(bytes *out, const uint8_t *raw, const size_t *cut, size_t npieces,
                        const uint32_t *records, unsigned flags, uint32_t enc,
                        const uint8_t *patch, size_t np)
{
    index_entry_disk ie[64];
    FUZZ_CHECK(npieces <= 64, "too many pieces");
    out->len = 0;
    bytes_put(out, G.hdr_frame, sizeof(G.hdr_frame));
    for (size_t i = 0; i < npieces; i++) {
        const uint8_t *p = raw + cut[i];
        size_t n = cut[i + 1] - cut[i];
        uint32_t rc = walk_count(p, n);
        if (!(flags & 2))
            rc = records ? records[i] : rc ^ ((flags >> 2) & 3);
        seal_chunk(out, p, n, (uint32_t)i, rc, &ie[i], enc, patch, np);
    }
    if (flags & 1)
        seal_index(out, ie, npieces);
}

/* ---- the sample trace ---------------------------------------------------------- */

static void load_base(void)
{
    G.verbose = getenv("FUZZ_READER_VERBOSE") != NULL;
    G.dump = getenv("FUZZ_READER_DUMP");
    G.fd = memfd_create("fuzz_reader", 0);
    FUZZ_CHECK(G.fd >= 0, "memfd_create: %s", strerror(errno));
    snprintf(G.path, sizeof(G.path), "/proc/self/fd/%d", G.fd);
    G.cctx = ZSTD_createCCtx();
    G.dctx = ZSTD_createDCtx();
    FUZZ_CHECK(G.cctx && G.dctx, "zstd contexts");
    ZSTD_CCtx_setParameter(G.cctx, ZSTD_c_compressionLevel, 1);
    ZSTD_CCtx_setParameter(G.cctx, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(G.cctx, ZSTD_c_contentSizeFlag, 1);

    int e = sample_write_rank_file(G.path, SAMPLE_STEPS, 1);
    FUZZ_CHECK(e == 0, "writing the sample trace: %s", strerror(-e));
    off_t size = lseek(G.fd, 0, SEEK_END);
    FUZZ_CHECK(size > (off_t)sizeof(G.hdr_frame), "sample trace size");
    G.base.p = malloc((size_t)size);
    FUZZ_CHECK(G.base.p && pread(G.fd, G.base.p, (size_t)size, 0) == size, "reading the sample");
    G.base.len = G.base.cap = (size_t)size;
    memcpy(G.hdr_frame, G.base.p, sizeof(G.hdr_frame));

    /* walk its chunk frames and keep each chunk's raw records */
    size_t off = sizeof(G.hdr_frame);
    while (off + 8 <= G.base.len) {
        uint32_t fh[2];
        memcpy(fh, G.base.p + off, 8);
        if (fh[0] != FRAME_MAGIC_CHUNK) {
            off += 8 + fh[1];
            continue;
        }
        chunk_hdr_disk h;
        memcpy(&h, G.base.p + off + 8, sizeof(h));
        FUZZ_CHECK(G.n_chunks < MAX_BASE_CHUNKS, "sample has too many chunks");
        size_t at = G.base_raw.len;
        size_t content = fmt_chunk_encoded_size(h.encoding, h.records, h.raw_size);
        uint8_t *tmp = malloc(content + 1), *rec = malloc(h.raw_size + 1);
        FUZZ_CHECK(tmp && rec, "out of memory");
        size_t got = ZSTD_decompressDCtx(G.dctx, tmp, content, G.base.p + off + 8 + sizeof(h),
                                         h.comp_size);
        const char *why = NULL;
        FUZZ_CHECK(got == content && fmt_chunk_decode(&G.codec, h.encoding, (char *)tmp, got,
                                                      h.records, (char *)rec, h.raw_size, &why) == 0,
                   "sample chunk %zu does not decompress", G.n_chunks);
        bytes_put(&G.base_raw, rec, h.raw_size);
        free(tmp);
        free(rec);
        G.chunk_off[G.n_chunks] = at;
        G.chunk_records[G.n_chunks] = h.records;
        G.n_chunks++;
        off += 8 + sizeof(h) + h.comp_size;
    }
    G.chunk_off[G.n_chunks] = G.base_raw.len;
    FUZZ_CHECK(G.n_chunks >= 2, "sample has %zu chunks", G.n_chunks);
}

/* ---- input -> file ---------------------------------------------------------- */

/* Builds the file for one input into *file. Returns true when every frame
 * was sealed here with valid checksums (the strict oracle applies). */
static bool make_file(const uint8_t *d, size_t n, bytes *file)
{
    file->len = 0;
    if (n == 0 || d[0] == 0x50) {
        bytes_put(file, d, n);
        return false;
    }
    unsigned mode = d[0] % 5;
    d++, n--;
    if (mode == 0 || mode == 1) {
        bytes_put(file, G.base.p, G.base.len);
        if (mode == 1 && n >= 2) {
            file->len = ((size_t)d[0] | (size_t)d[1] << 8) % (G.base.len + 1);
            d += 2, n -= 2;
        }
        apply_patches(file->p, file->len, d, n);
        return false;
    }
    unsigned flags = n ? d[0] : 1;
    if (n)
        d++, n--;
    if (mode == 2 && (flags & 0x80)) { /* damage in the encoded bytes */
        uint32_t enc = 1 + ((flags >> 5) & 3) % 3;
        seal_file(file, G.base_raw.p, G.chunk_off, G.n_chunks, G.chunk_records, flags, enc, d, n);
        return true;
    }
    if (mode == 2) {
        uint8_t *raw = malloc(G.base_raw.len);
        FUZZ_CHECK(raw, "out of memory");
        memcpy(raw, G.base_raw.p, G.base_raw.len);
        apply_patches(raw, G.base_raw.len, d, n);
        seal_file(file, raw, G.chunk_off, G.n_chunks, G.chunk_records, flags, 0, NULL, 0);
        free(raw);
        return true;
    }
    /* mode 3: the input is raw records; cut after whole records once a piece
     * reaches 64 << (flags >> 4 & 7) bytes */
    uint8_t *raw = malloc(n + 1);
    FUZZ_CHECK(raw, "out of memory");
    memcpy(raw, d, n);
    size_t piece = (size_t)64 << ((flags >> 4) & 7);
    size_t cut[65] = {0};
    size_t npieces = 0, pos = 0, start = 0;
    while (npieces < 63 && n - pos >= sizeof(tft_rec)) {
        uint32_t len;
        memcpy(&len, raw + pos + 4, 4);
        if (len < sizeof(tft_rec) || len % 8 || len > n - pos)
            break;
        pos += len;
        if (pos - start >= piece) {
            cut[++npieces] = pos;
            start = pos;
        }
    }
    if (start < n || npieces == 0)
        cut[++npieces] = n;
    seal_file(file, raw, cut, npieces, NULL, flags, 0, NULL, 0);
    free(raw);
    return true;
}

/* ---- the second decoder ---------------------------------------------------------- */

/* Decodes chunk ci of file independently of the reader: the zstd frame must
 * decompress (zstd checks its content checksum) to exactly raw_size bytes of
 * well-framed records, ci->records of them. Appends the non-STRING records
 * to *recs and returns true when the chunk is good. */
static bool oracle_chunk(const bytes *file, const tft_chunk_info *ci, bytes *recs)
{
    size_t hdr = 8 + sizeof(chunk_hdr_disk);
    if (ci->offset + hdr + ci->comp_size > file->len)
        return false;
    const uint8_t *frame = file->p + ci->offset + hdr;
    chunk_hdr_disk h;
    memcpy(&h, file->p + ci->offset + 8, sizeof(h));
    uint32_t enc = h.encoding;
    if ((enc & ~CHUNK_ENC_KNOWN) || ((enc & CHUNK_ENC_COLUMNS) && ci->records > ci->raw_size / 32))
        return false;
    size_t content = fmt_chunk_encoded_size(enc, ci->records, ci->raw_size);
    if (ZSTD_getFrameContentSize(frame, ci->comp_size) != content)
        return false;
    uint8_t *raw = malloc((size_t)ci->raw_size + 8), *coded = malloc(content + 8);
    FUZZ_CHECK(raw && coded, "out of memory");
    size_t got = ZSTD_decompressDCtx(G.dctx, coded, content, frame, ci->comp_size);
    const char *why = NULL;
    bool ok = !ZSTD_isError(got) && got == content &&
              fmt_chunk_decode(&G.codec, enc, (char *)coded, content, ci->records, (char *)raw,
                               ci->raw_size, &why) == 0;
    free(coded);
    got = ci->raw_size;
    size_t pos = 0;
    uint32_t count = 0;
    while (ok && pos < got) {
        const tft_rec *r = (const tft_rec *)(raw + pos);
        if (tft_rec_check(r, got - pos) < 0) {
            ok = false;
            break;
        }
        if (r->kind != TFT_REC_STRING) {
            bytes_put(recs, r, r->len);
            recs->count++;
        }
        pos += r->len;
        count++;
    }
    free(raw);
    return ok && count == ci->records;
}

/* ---- driving the reader ------------------------------------------------------------ */

static void check_record(tft_reader *r, const tft_rec *rec)
{
    FUZZ_CHECK(tft_rec_check(rec, rec->len) == 0, "malformed record returned (kind %u len %u)",
               rec->kind, rec->len);
    FUZZ_CHECK(rec->kind != TFT_REC_STRING, "STRING record returned");
    uint64_t ids[4];
    int n = tft_rec_string_ids(rec, ids);
    for (int i = 0; i < n; i++) {
        const char *s = tft_reader_string(r, ids[i]);
        if (s)
            FUZZ_CHECK(strlen(s) <= TFT_REC_MAX_BYTES, "string longer than a record");
    }
}

/* Reads the remaining records into *out. */
static void read_rest(tft_reader *r, bytes *out)
{
    const tft_rec *rec;
    int e;
    tft_reader_status before, after;
    tft_reader_get_status(r, &before);
    size_t n0 = out->count;
    while ((e = tft_reader_next(r, &rec)) == 1) {
        check_record(r, rec);
        bytes_put(out, rec, rec->len);
        out->count++;
    }
    FUZZ_CHECK(e == 0, "tft_reader_next failed: %s", strerror(-e));
    tft_reader_get_status(r, &after);
    FUZZ_CHECK(after.records - before.records == out->count - n0, "status.records %llu != %zu",
               (unsigned long long)(after.records - before.records), out->count - n0);
}

static void check_status(const tft_reader_status *st, size_t n_chunks, uint64_t file_size)
{
    FUZZ_CHECK(st->integrity >= TFT_INTACT && st->integrity <= TFT_DAMAGED, "integrity %d",
               st->integrity);
    FUZZ_CHECK(st->chunks == n_chunks && st->chunks_bad <= st->chunks, "chunks %llu bad %llu",
               (unsigned long long)st->chunks, (unsigned long long)st->chunks_bad);
    FUZZ_CHECK(!st->chunks_bad || st->integrity == TFT_DAMAGED, "bad chunks but integrity %d",
               st->integrity);
    FUZZ_CHECK(st->integrity != TFT_INTACT || (st->closed && !st->index_rebuilt),
               "INTACT but closed=%d index_rebuilt=%d", st->closed, st->index_rebuilt);
    FUZZ_CHECK(memchr(st->first_problem, 0, sizeof(st->first_problem)), "message unterminated");
    FUZZ_CHECK(st->integrity == TFT_INTACT || st->first_problem[0],
               "integrity %d without a message", st->integrity);
    FUZZ_CHECK(st->torn_offset <= file_size && st->bad_offset <= file_size,
               "torn_offset %llu / bad_offset %llu past the end",
               (unsigned long long)st->torn_offset, (unsigned long long)st->bad_offset);
}

static bool is_suffix(const bytes *all, const bytes *tail)
{
    return tail->len == 0 || (tail->len <= all->len && tail->count <= all->count &&
                              memcmp(all->p + all->len - tail->len, tail->p, tail->len) == 0);
}

/* The one-rank trace over the same file must merge to the same records. */
static void check_merge(const bytes *all, int order)
{
    tft_reader_opts o = TFT_READER_OPTS(.log = fuzz_log, .log_ctx = &G.log_lines);
    tft_trace *t = tft_trace_open(G.path, &o);
    FUZZ_CHECK(t, "tft_trace_open failed after tft_reader_open succeeded: %s", strerror(errno));
    FUZZ_CHECK(tft_trace_nranks(t) == 1, "nranks %d", tft_trace_nranks(t));
    tft_merge *m = tft_merge_open(t, order);
    FUZZ_CHECK(m, "tft_merge_open: %s", strerror(errno));
    size_t pos = 0, count = 0;
    const tft_rec *rec;
    int idx, e;
    while ((e = tft_merge_next(m, &rec, &idx)) == 1) {
        FUZZ_CHECK(idx == 0, "rank index %d", idx);
        FUZZ_CHECK(pos + rec->len <= all->len && memcmp(all->p + pos, rec, rec->len) == 0,
                   "merge record %zu differs from the reader's", count);
        pos += rec->len;
        count++;
    }
    FUZZ_CHECK(e == 0 && pos == all->len, "merge ended early (%d) at record %zu of %zu", e, count,
               all->count);
    tft_merge_close(m);
    tft_trace_close(t);
}

static void check_reader(const bytes *file, bool sealed, size_t n_sealed, uint64_t seed)
{
    tft_reader_opts o = TFT_READER_OPTS(.log = fuzz_log, .log_ctx = &G.log_lines,
                                        .display_name = "fuzz.tft");
    errno = 0;
    tft_reader *r = tft_reader_open(G.path, &o);
    if (!r) {
        int e = errno;
        FUZZ_CHECK(e == EPROTO || e == EPROTONOSUPPORT || e == EIO || e == ENOMEM,
                   "open failed with errno %d (%s)", e, strerror(e));
        FUZZ_CHECK(!sealed, "a sealed file was refused: %s", strerror(e));
        return;
    }
    const tft_file_info *info = tft_reader_info(r);
    FUZZ_CHECK(memchr(info->host, 0, sizeof(info->host)), "host unterminated");
    size_t nc = tft_reader_chunk_count(r);
    FUZZ_CHECK(tft_reader_chunk(r, nc) == NULL, "chunk past the end");
    uint64_t prev_end = 0;
    for (size_t i = 0; i < nc; i++) {
        const tft_chunk_info *ci = tft_reader_chunk(r, i);
        uint64_t end = ci->offset + 8 + sizeof(chunk_hdr_disk) + ci->comp_size;
        FUZZ_CHECK(ci->offset >= prev_end && end <= file->len,
                   "chunk %zu [%llu, %llu) overlaps or leaves the file (%zu bytes)", i,
                   (unsigned long long)ci->offset, (unsigned long long)end, file->len);
        prev_end = end;
    }
    if (sealed)
        FUZZ_CHECK(nc == n_sealed, "%zu of %zu sealed chunks found", nc, n_sealed);

    tft_reader_status st;
    int v = tft_reader_verify(r, &st);
    FUZZ_CHECK(v == 0 || v == 1, "verify returned %d", v);
    check_status(&st, nc, file->len);
    FUZZ_CHECK(v == (st.integrity == TFT_INTACT ? 0 : 1), "verify %d but integrity %d", v,
               st.integrity);

    bytes all = {0};
    read_rest(r, &all);
    tft_reader_status st2;
    tft_reader_get_status(r, &st2);
    check_status(&st2, nc, file->len);
    FUZZ_CHECK(st2.chunks_bad == st.chunks_bad && st2.integrity == st.integrity,
               "reading after verify changed the verdict");

    /* records come, in order, from chunks the second decoder finds good */
    size_t pos = 0, good = 0;
    bytes expect = {0};
    for (size_t i = 0; i < nc; i++) {
        expect.len = expect.count = 0;
        if (!oracle_chunk(file, tft_reader_chunk(r, i), &expect))
            continue;
        good++;
        bool match = expect.len == 0 || (expect.len <= all.len - pos &&
                                         memcmp(all.p + pos, expect.p, expect.len) == 0);
        FUZZ_CHECK(match || !sealed, "good chunk %zu of a sealed file not returned", i);
        if (match)
            pos += expect.len;
    }
    free(expect.p);
    FUZZ_CHECK(pos == all.len, "records at byte %zu of %zu come from no good chunk", pos, all.len);
    FUZZ_CHECK(nc - st.chunks_bad <= good, "reader accepted %llu chunks, only %zu are good",
               (unsigned long long)(nc - st.chunks_bad), good);
    if (sealed)
        FUZZ_CHECK(nc - st.chunks_bad == good, "reader rejected %llu good chunks",
                   (unsigned long long)(good - (nc - st.chunks_bad)));
    if (G.verbose)
        fprintf(stderr, "fuzz_reader: %zu bytes%s: %zu chunks, %zu good, %llu bad, %zu records, "
                "integrity %d closed %d rebuilt %d\n", file->len, sealed ? " (sealed)" : "", nc,
                good, (unsigned long long)st.chunks_bad, all.count, st.integrity, st.closed,
                st.index_rebuilt);

    /* seeking returns a suffix of the full sequence */
    int64_t steps[6] = {INT64_MIN, INT64_MAX, 0, (int64_t)seed, 1, 2};
    if (nc) {
        steps[4] = tft_reader_chunk(r, seed % nc)->first_step;
        steps[5] = tft_reader_chunk(r, (seed >> 8) % nc)->last_step;
    }
    bytes tail = {0};
    for (int i = 0; i < 6; i++) {
        tail.len = tail.count = 0;
        FUZZ_CHECK(tft_reader_seek_step(r, steps[i]) == 0, "seek_step");
        read_rest(r, &tail);
        FUZZ_CHECK(is_suffix(&all, &tail), "seek_step(%lld) gave records not at the end",
                   (long long)steps[i]);
    }
    tail.len = tail.count = 0;
    tft_reader_rewind(r);
    read_rest(r, &tail);
    FUZZ_CHECK(tail.len == all.len && (!all.len || memcmp(tail.p, all.p, all.len) == 0),
               "rewind differs");
    free(tail.p);
    tft_reader_close(r);

    check_merge(&all, (seed & 1) ? TFT_ORDER_TIME : TFT_ORDER_STEP_SEQ);
    free(all.p);
}

/* ---- mode 4: writer round trip ----------------------------------------------------- */

#define RT_MAX_STRINGS 16

typedef struct rt_string {
    uint64_t id;
    char *text;
    size_t len;
} rt_string;

typedef struct rt_input {
    const uint8_t *p;
    size_t n, pos;
} rt_input;

static unsigned rt_byte(rt_input *in) { return in->pos < in->n ? in->p[in->pos++] : 0; }

/* A string id for a record field: one registered so far (or 0 / an unknown
 * id, which readers show as an id). */
static uint64_t rt_ref(rt_input *in, const rt_string *str, int nstr)
{
    unsigned b = rt_byte(in);
    if (b == 0xff)
        return 0x1234567890abcdefull; /* never registered */
    return nstr ? str[b % (unsigned)nstr].id : 0;
}

/* Builds one record into buf from the input; returns its kind. */
static unsigned rt_record(rt_input *in, char *buf, const rt_string *str, int nstr, uint64_t t)
{
    unsigned kind = 2 + rt_byte(in) % 12; /* 2..11, 12 unknown, 13 STRING */
    tft_rec *h = (tft_rec *)buf;
    size_t len = kind <= 11 ? tft_rec_min_size((uint16_t)kind) : 32 + 8 * (rt_byte(in) % 8);
    tft_rec_op *op = (tft_rec_op *)buf;
    unsigned n_in = 0, n_out = 0, n_attr = 0;
    if (kind == TFT_REC_OP) {
        n_in = rt_byte(in) % 5, n_out = rt_byte(in) % 3, n_attr = rt_byte(in) % 7;
        len += 8 * (n_in + n_out + n_attr);
    }
    memset(buf, 0xa5, len); /* padding and ids: arbitrary bytes round-trip too */
    h->kind = (uint16_t)(kind == 12 ? 300 + rt_byte(in) : kind == 13 ? TFT_REC_STRING : kind);
    h->flags = (uint16_t)rt_byte(in);
    h->len = (uint32_t)len;
    h->ts = t * 1000;
    h->step = rt_byte(in) == 0 ? TFT_STEP_NONE : (int64_t)(t / 16);
    h->seq = rt_byte(in) == 0 ? TFT_SEQ_NONE : (int64_t)t;
    switch (kind) {
    case TFT_REC_OP:
        op->n_in = (uint8_t)n_in, op->n_out = (uint8_t)n_out, op->n_attr = (uint8_t)n_attr;
        op->name = rt_ref(in, str, nstr);
        op->scope = rt_ref(in, str, nstr);
        break;
    case TFT_REC_TENSOR:
        ((tft_rec_tensor *)buf)->ndim = (uint8_t)(rt_byte(in) % (TFT_MAX_NDIM + 1));
        ((tft_rec_tensor *)buf)->name = rt_ref(in, str, nstr);
        break;
    case TFT_REC_ALLOC: ((tft_rec_alloc *)buf)->site = rt_ref(in, str, nstr); break;
    case TFT_REC_COLLECTIVE: ((tft_rec_collective *)buf)->name = rt_ref(in, str, nstr); break;
    case TFT_REC_KERNEL: ((tft_rec_kernel *)buf)->name = rt_ref(in, str, nstr); break;
    case TFT_REC_CHECKPOINT:
        ((tft_rec_checkpoint *)buf)->path = rt_ref(in, str, nstr);
        ((tft_rec_checkpoint *)buf)->recipe = rt_ref(in, str, nstr);
        break;
    case 13: {
        tft_rec_string *sr = (tft_rec_string *)buf;
        sr->n = 0;
        break;
    }
    default: break;
    }
    return kind;
}

/* Every string a returned record refers to that was registered must read
 * back with its text. */
static void rt_check_strings(tft_reader *r, const tft_rec *rec, const rt_string *str, int nstr)
{
    uint64_t ids[4];
    int n = tft_rec_string_ids(rec, ids);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < nstr; k++) {
            if (str[k].id != ids[i])
                continue;
            const char *t = tft_reader_string(r, ids[i]);
            FUZZ_CHECK(t && strlen(t) == str[k].len && memcmp(t, str[k].text, str[k].len) == 0,
                       "string %d (%zu bytes) referenced by a %s record reads back as %s", k,
                       str[k].len, tft_rec_kind_name(rec->kind), t ? "other text" : "NULL");
            break;
        }
}

static void writer_roundtrip(const uint8_t *d, size_t n)
{
    rt_input in = {d, n, 0};
    rt_string str[RT_MAX_STRINGS];
    int nstr = 0;
    size_t chunk = (size_t)64 << (rt_byte(&in) % 5); /* 64 KiB .. 1 MiB */
    tft_writer *w = sample_writer_open(G.path, NULL, &TFT_WRITER_OPTS(.chunk_bytes = chunk, .sync = 0));
    FUZZ_CHECK(w, "opening the writer: %s", strerror(errno));
    bytes expect = {0};
    uint64_t dropped = 0, t = 0;
    _Alignas(8) char buf[1024];
    while (in.pos < in.n && expect.count < 20000) {
        unsigned op = rt_byte(&in);
        if (op % 8 == 0 && nstr < RT_MAX_STRINGS) { /* register a string */
            size_t len = 1 + (size_t)rt_byte(&in) * 300 + rt_byte(&in);
            char *text = malloc(len + 1);
            FUZZ_CHECK(text, "out of memory");
            size_t k = (size_t)snprintf(text, len + 1, "s%d:", nstr);
            if (k > len)
                k = len;
            memset(text + k, 'a' + nstr, len - k);
            text[len] = '\0';
            uint64_t id = tft_writer_string(w, text, len);
            if (id) {
                str[nstr++] = (rt_string){id, text, len};
            } else {
                free(text); /* refused (too long): never referenced */
            }
        } else if (op % 8 == 1) {
            FUZZ_CHECK(tft_writer_flush(w) == 0, "flush failed");
        } else if (op % 8 == 2) {
            unsigned k = rt_byte(&in);
            tft_writer_add_dropped(w, k);
            dropped += k;
        } else {
            unsigned kind = rt_record(&in, buf, str, nstr, t++);
            int e = tft_writer_append(w, (const tft_rec *)buf);
            if (kind == 13) {
                FUZZ_CHECK(e == -EINVAL, "a STRING record was accepted (%d)", e);
                continue;
            }
            FUZZ_CHECK(e == 0, "a valid %s record was refused: %d", tft_rec_kind_name((uint16_t)kind), e);
            bytes_put(&expect, buf, ((tft_rec *)buf)->len);
            expect.count++;
        }
    }
    tft_writer_stats ws = TFT_WRITER_STATS();
    tft_writer_get_stats(w, &ws);
    FUZZ_CHECK(ws.records == expect.count, "writer counted %llu records of %zu",
               (unsigned long long)ws.records, expect.count);
    FUZZ_CHECK(tft_writer_close(w) == 0, "tft_writer_close failed");

    tft_reader *r = tft_reader_open(G.path, &TFT_READER_OPTS(.log = fuzz_log, .log_ctx = &G.log_lines));
    FUZZ_CHECK(r, "the writer's file does not open: %s", strerror(errno));
    tft_reader_status st;
    FUZZ_CHECK(tft_reader_verify(r, &st) == 0, "the writer's file is not intact: %s", st.first_problem);
    size_t pos = 0, count = 0;
    const tft_rec *rec;
    int e;
    while ((e = tft_reader_next(r, &rec)) == 1) {
        FUZZ_CHECK(pos + rec->len <= expect.len && memcmp(expect.p + pos, rec, rec->len) == 0,
                   "record %zu differs from the one appended", count);
        rt_check_strings(r, rec, str, nstr);
        pos += rec->len;
        count++;
    }
    FUZZ_CHECK(e == 0 && count == expect.count, "read %zu of %zu records (%d)", count, expect.count, e);
    tft_reader_get_status(r, &st);
    FUZZ_CHECK(st.dropped == dropped, "dropped %llu, added %llu", (unsigned long long)st.dropped,
               (unsigned long long)dropped);
    if (G.verbose)
        fprintf(stderr, "fuzz_reader: writer round trip: %zu records, %d strings, %llu chunks, "
                "%llu dropped\n", count, nstr, (unsigned long long)st.chunks,
                (unsigned long long)dropped);
    tft_reader_close(r);
    free(expect.p);
    for (int k = 0; k < nstr; k++)
        free(str[k].text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bytes file;
    if (!G.cctx)
        load_base();
    if (size > (1u << 20))
        return 0;
    if (size && data[0] != 0x50 && data[0] % 5 == 4) {
        writer_roundtrip(data + 1, size - 1);
        return 0;
    }
    bool sealed = make_file(data, size, &file);
    size_t n_sealed = 0;
    if (sealed) { /* count what seal_file wrote: chunk frames are the magics at frame starts */
        size_t off = sizeof(G.hdr_frame);
        while (off + 8 <= file.len) {
            uint32_t fh[2];
            memcpy(fh, file.p + off, 8);
            if (fh[0] != FRAME_MAGIC_CHUNK)
                break;
            chunk_hdr_disk h;
            memcpy(&h, file.p + off + 8, sizeof(h));
            off += 8 + sizeof(h) + h.comp_size;
            n_sealed++;
        }
    }
    file_set(file.p, file.len);
    if (G.dump) { /* FUZZ_READER_DUMP=PATH: keep the rank file built from the input */
        FILE *f = fopen(G.dump, "wb");
        FUZZ_CHECK(f && fwrite(file.p, 1, file.len, f) == file.len && fclose(f) == 0,
                   "cannot write %s", G.dump);
    }
    uint64_t seed = tft_string_id((const char *)data, size);
    check_reader(&file, sealed, n_sealed, seed);
    return 0;
}
