/*
 * test_codec.c — the 1.4 chunk encodings (FORMAT.md §3.3.1): a trace
 * written by the 1.3 writer (fixtures/format-1.3.tft, see gen_fixture.c)
 * reads back exactly; every encoding round-trips through writer and
 * reader, the default one stores fewer bytes than plain records; the
 * decoder survives damaged encoded bytes with an error, never a crash
 * (this test runs under ASan), and keeps kinds it does not know.
 */
#include "fixture_stream.h"
#include "format_internal.h"
#include "tft_test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* the fixture's records, back to back */
typedef struct recbuf {
    char *p;
    size_t len, cap;
    uint32_t n;
} recbuf;

static int put(void *ctx, const tft_rec *rec)
{
    recbuf *b = ctx;
    if (b->len + rec->len > b->cap) {
        size_t ncap = b->cap ? 2 * b->cap : 65536;
        while (ncap < b->len + rec->len)
            ncap *= 2;
        char *np = realloc(b->p, ncap);
        if (!np)
            return -ENOMEM;
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->len, rec, rec->len);
    b->len += rec->len;
    b->n++;
    return 0;
}

static void fixture_names(uint64_t names[FIXTURE_TENSORS + 1])
{
    char b[16];
    for (int i = 0; i < FIXTURE_TENSORS; i++) {
        int n = snprintf(b, sizeof(b), "w%d", i);
        names[i] = tft_string_id(b, (size_t)n);
    }
    names[FIXTURE_TENSORS] = tft_string_id("MPI_Allreduce", 13);
}

/* Reads every record of path; checks it is INTACT, of minor version
 * `minor`, and returns exactly the records of exp. */
static void check_file(const char *path, const recbuf *exp, int minor)
{
    tft_reader *r = tft_reader_open(path, NULL);
    CHECKF(r != NULL, "%s: %s", path, strerror(errno));
    if (!r)
        return;
    CHECKF(tft_reader_info(r)->minor == minor, "%s: minor %d", path, tft_reader_info(r)->minor);
    const tft_rec *rec;
    size_t pos = 0, n = 0, mism = 0;
    while (tft_reader_next(r, &rec) == 1) {
        if (pos + rec->len > exp->len || memcmp(rec, exp->p + pos, rec->len) != 0)
            mism++;
        pos += rec->len;
        n++;
    }
    tft_reader_status st;
    tft_reader_get_status(r, &st);
    CHECKF(n == exp->n && mism == 0, "%s: %zu records (want %u), %zu differ", path, n, exp->n, mism);
    CHECKF(st.integrity == TFT_INTACT && st.chunks_bad == 0, "%s: integrity %d (%s)", path,
           st.integrity, st.first_problem);
    const char *s = tft_reader_string(r, tft_string_id("w7", 2));
    CHECK(s && strcmp(s, "w7") == 0);
    tft_reader_close(r);
}

static off_t write_encoded(const char *path, const recbuf *exp, unsigned enc)
{
    tft_writer *w = tft_writer_open(path, NULL, &TFT_WRITER_OPTS(.chunk_bytes = 64 * 1024,
                                                                 .sync = 0, .encoding = enc));
    CHECK(w != NULL);
    if (!w)
        return 0;
    char b[16];
    for (int i = 0; i < FIXTURE_TENSORS; i++)
        tft_writer_string(w, b, (size_t)snprintf(b, sizeof(b), "w%d", i));
    tft_writer_string(w, "MPI_Allreduce", 13);
    for (size_t pos = 0; pos < exp->len; pos += ((const tft_rec *)(exp->p + pos))->len)
        CHECK(tft_writer_append(w, (const tft_rec *)(exp->p + pos)) == 0);
    CHECK(tft_writer_close(w) == 0);
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : 0;
}

/* Encodes buf with enc, then flips bytes of the encoding one at a time:
 * the decoder must return the records or -EBADMSG with a reason. */
static void damage(const recbuf *raw, uint32_t enc)
{
    fmt_codec c = {0};
    size_t n = fmt_chunk_encoded_size(enc, raw->n, raw->len);
    char *e = malloc(n), *out = malloc(raw->len);
    CHECK(e && out);
    if (!e || !out)
        goto out;
    CHECK(fmt_chunk_encode(&c, enc, raw->p, raw->len, raw->n, e) == 0);
    const char *why = NULL;
    CHECK(fmt_chunk_decode(&c, enc, e, n, raw->n, out, raw->len, &why) == 0 &&
          memcmp(out, raw->p, raw->len) == 0);
    CHECK(fmt_chunk_decode(&c, enc, e, n - 8, raw->n, out, raw->len, &why) == -EBADMSG && why);
    CHECK(fmt_chunk_decode(&c, enc | 0x10, e, n, raw->n, out, raw->len, &why) == -EBADMSG && why &&
          strstr(why, "unknown chunk encoding"));
    size_t bad = 0, caught = 0;
    uint64_t rng = 12345;
    for (int k = 0; k < 1500; k++) {
        size_t at = k < 500 && (enc & CHUNK_ENC_COLUMNS) ? fixture_rnd(&rng) % fmt_chunk_table_bytes(raw->n)
                                                           : fixture_rnd(&rng) % n;
        uint8_t mask = (uint8_t)(1u << (fixture_rnd(&rng) % 8));
        e[at] ^= mask;
        int r = fmt_chunk_decode(&c, enc, e, n, raw->n, out, raw->len, &why);
        if (r != 0 && (r != -EBADMSG || !why))
            bad++;
        caught += r != 0;
        e[at] ^= mask;
    }
    CHECKF(bad == 0, "encoding %u: %zu damaged inputs without a clear error", enc, bad);
    /* a flipped table (kind or length) is always caught, not decoded into other records */
    if (enc & CHUNK_ENC_COLUMNS)
        CHECKF(caught >= 450, "encoding %u: only %zu of 1500 flips caught", enc, caught);
out:
    free(e);
    free(out);
    fmt_codec_free(&c);
}

/* Records of kinds this version does not know (>= 64 go the slow path),
 * lengths varying within a kind: the encodings keep them byte for byte. */
static void unknown_kinds(void)
{
    recbuf b = {0};
    _Alignas(8) char buf[256];
    uint64_t rng = 99;
    for (int i = 0; i < 300; i++) {
        static const uint16_t kinds[] = {TFT_REC_OP, 200, 64, 65535, 63, TFT_REC_TENSOR};
        uint16_t k = kinds[fixture_rnd(&rng) % 6];
        uint32_t len = k == TFT_REC_TENSOR ? sizeof(tft_rec_tensor) : 32 + 8 * (uint32_t)(fixture_rnd(&rng) % 20);
        for (size_t j = 0; j < len; j++)
            buf[j] = (char)fixture_rnd(&rng);
        tft_rec *h = (tft_rec *)buf;
        h->kind = k, h->len = len, h->flags = 0;
        CHECK(put(&b, h) == 0);
    }
    for (uint32_t enc = 1; enc <= 3; enc++) {
        fmt_codec c = {0};
        size_t n = fmt_chunk_encoded_size(enc, b.n, b.len);
        char *e = malloc(n), *out = malloc(b.len);
        const char *why = NULL;
        CHECK(e && out && fmt_chunk_encode(&c, enc, b.p, b.len, b.n, e) == 0 &&
              fmt_chunk_decode(&c, enc, e, n, b.n, out, b.len, &why) == 0 &&
              memcmp(out, b.p, b.len) == 0);
        free(e);
        free(out);
        fmt_codec_free(&c);
    }
    free(b.p);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_codec FIXTURE_DIR TMPDIR\n");
        return 2;
    }
    uint64_t names[FIXTURE_TENSORS + 1];
    fixture_names(names);
    recbuf exp = {0};
    CHECK(fixture_stream(names, put, &exp) == 0 && exp.n == FIXTURE_RECORDS);

    char path[4096];
    snprintf(path, sizeof(path), "%s/format-1.3.tft", argv[1]);
    check_file(path, &exp, 3); /* written by the 1.3 writer */

    static const unsigned encs[] = {TFT_ENC_NONE, TFT_ENC_COLUMNS, TFT_ENC_SHUFFLE, 0};
    off_t size[4];
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof(path), "%s/test_codec.%d.%u.tft", argv[2], (int)getpid(), encs[i]);
        size[i] = write_encoded(path, &exp, encs[i]);
        check_file(path, &exp, TFT_FORMAT_MINOR);
        unlink(path);
    }
    CHECKF(size[3] < size[0], "default encoding %lld B, plain records %lld B", (long long)size[3],
           (long long)size[0]);

    for (uint32_t enc = 1; enc <= 3; enc++)
        damage(&exp, enc);
    unknown_kinds();
    free(exp.p);
    return TEST_DONE();
}
