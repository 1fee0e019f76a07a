/*
 * test_format.c — the trace format library against its contract:
 * round trip of every record kind over many chunks and several ranks,
 * truncation at every byte of the tail, a flipped bit at every byte,
 * unknown kinds, version rules, index rebuild, seeking and the manifest;
 * dtype names, sizes and fp8 records in 1.3 and 1.2 files.
 */
#include "tft_format.h"
#include "tft_test.h"
#include "tft_test_rng.h"
#include "tft_writer_internal.h" /* tft_writer_abandon: torn files */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

static char tmpdir[256];

typedef struct recset {
    tft_rec **recs;  /* expected records (copies), strings excluded */
    size_t n, cap;
} recset;

static void recset_add(recset *s, const tft_rec *r)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->recs = realloc(s->recs, s->cap * sizeof(*s->recs));
    }
    s->recs[s->n] = malloc(r->len);
    memcpy(s->recs[s->n], r, r->len);
    s->n++;
}

static void recset_free(recset *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->recs[i]);
    free(s->recs);
    memset(s, 0, sizeof(*s));
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) { return tft_test_rng(&rng); }

static const char *names[] = {"tokens", "emb", "L0.qkv", "L0.attn.probs", "L0.fc", "loss",
                              "grad_norm", "MPI_Allreduce", "site:alloc", "ckpt/step-10",
                              "gemm_kernel", "L0/attn"};
#define NNAMES (sizeof(names) / sizeof(names[0]))

static void hdr(tft_rec *h, uint16_t kind, uint32_t len, int64_t step, int64_t seq, uint64_t ts)
{
    memset(h, 0, len);
    h->kind = kind;
    h->len = len;
    h->ts = ts;
    h->step = step;
    h->seq = seq;
}

/* Emits one record of kind k (cycling through all kinds and an unknown one). */
static void make_record(int k, int64_t step, int64_t seq, uint64_t ts, char *buf, uint64_t *ids)
{
    tft_rec *h = (tft_rec *)buf;
    switch (k) {
    case 0: {
        tft_rec_step *r = (tft_rec_step *)buf;
        hdr(h, TFT_REC_STEP, sizeof(*r), step, TFT_SEQ_NONE, ts);
        r->phase = rnd() & 1;
        break;
    }
    case 1: {
        tft_rec_op *r = (tft_rec_op *)buf;
        int nin = 2, nout = 1, nattr = 3;
        hdr(h, TFT_REC_OP, sizeof(*r) + 8 * (nin + nout + nattr), step, seq, ts);
        r->name = ids[rnd() % NNAMES];
        r->scope = ids[11];
        r->op_kind = TFT_OP_GEMM;
        r->n_in = nin;
        r->n_out = nout;
        r->n_attr = nattr;
        for (int i = 0; i < nin + nout + nattr; i++)
            r->ids[i] = rnd();
        break;
    }
    case 2: {
        tft_rec_tensor *r = (tft_rec_tensor *)buf;
        hdr(h, TFT_REC_TENSOR, sizeof(*r), step, seq, ts);
        r->id = rnd();
        r->name = ids[rnd() % NNAMES];
        r->dtype = TFT_F32;
        r->mode = TFT_STATS_FULL;
        r->ndim = 3;
        r->shape[0] = 4, r->shape[1] = 64, r->shape[2] = 256;
        r->stats.numel = 65536;
        r->stats.mean = (double)(rnd() % 1000) / 1000.0;
        r->stats.fingerprint = rnd();
        r->stats.max = 3.0;
        break;
    }
    case 3: {
        tft_rec_alloc *r = (tft_rec_alloc *)buf;
        hdr(h, TFT_REC_ALLOC, sizeof(*r), step, seq, ts);
        r->ptr = rnd();
        r->bytes = 1u << 20;
        r->site = ids[8];
        break;
    }
    case 4: {
        tft_rec_free *r = (tft_rec_free *)buf;
        hdr(h, TFT_REC_FREE, sizeof(*r), step, seq, ts);
        r->ptr = rnd();
        break;
    }
    case 5: {
        tft_rec_collective *r = (tft_rec_collective *)buf;
        hdr(h, TFT_REC_COLLECTIVE, sizeof(*r), step, seq, ts);
        r->comm = 0xabcdef;
        r->coll_seq = (uint64_t)seq;
        r->count = 1000;
        r->name = ids[7];
        r->type = TFT_COLL_ALLREDUCE;
        r->redop = TFT_REDOP_SUM;
        r->nranks = 2;
        break;
    }
    case 6: {
        tft_rec_kernel *r = (tft_rec_kernel *)buf;
        hdr(h, TFT_REC_KERNEL, sizeof(*r), step, seq, ts);
        r->name = ids[10];
        r->grid[0] = 128;
        r->block[0] = 256;
        break;
    }
    case 7: {
        tft_rec_checkpoint *r = (tft_rec_checkpoint *)buf;
        hdr(h, TFT_REC_CHECKPOINT, sizeof(*r), step, TFT_SEQ_NONE, ts);
        r->path = ids[9];
        r->recipe = 0;
        break;
    }
    case 8: {
        tft_rec_process *r = (tft_rec_process *)buf;
        hdr(h, TFT_REC_PROCESS, sizeof(*r), TFT_STEP_NONE, TFT_SEQ_NONE, ts);
        r->event = TFT_PROC_RSS;
        r->rss = rnd();
        break;
    }
    case 9: {
        tft_rec_dropped *r = (tft_rec_dropped *)buf; /* a 1.0-1.3 length: still read */
        hdr(h, TFT_REC_DROPPED, TFT_REC_DROPPED_MIN_BYTES, step, seq, ts);
        r->count = 3;
        break;
    }
    default: { /* a record kind from the future: 40 bytes of payload */
        hdr(h, 200, 72, step, seq, ts);
        memset(buf + 32, 0x5a, 40);
        break;
    }
    }
}

static void path_in_tmp(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", tmpdir, name);
}

/* Writes nrec records (all kinds) to path; returns expected records. */
static void write_file(const char *path, int rank, size_t nrec, size_t chunk, bool close_it, recset *out)
{
    tft_file_info fi = {0};
    fi.rank = rank;
    fi.world_size = 3;
    fi.pid = 1234;
    snprintf(fi.host, sizeof(fi.host), "testhost");
    tft_writer_opts o = TFT_WRITER_OPTS(.chunk_bytes = chunk, .sync = 0);
    tft_writer *w = tft_writer_open(path, &fi, &o);
    CHECK(w != NULL);
    if (!w)
        return;
    uint64_t ids[NNAMES];
    for (size_t i = 0; i < NNAMES; i++)
        ids[i] = tft_writer_string(w, names[i], strlen(names[i]));
    _Alignas(8) char buf[1024];
    for (size_t i = 0; i < nrec; i++) {
        int64_t step = (int64_t)(i / 500), seq = (int64_t)i;
        make_record((int)(i % 11), step, seq, 1000 + i * 10, buf, ids);
        CHECK(tft_writer_append(w, (tft_rec *)buf) == 0);
        recset_add(out, (tft_rec *)buf);
    }
    if (close_it) {
        CHECK(tft_writer_close(w) == 0);
    } else {
        CHECK(tft_writer_flush(w) == 0);
        tft_writer_abandon(w);
    }
}

static int read_all(tft_reader *r, recset *exp, size_t skip_from, size_t skip_to, size_t *mismatch)
{
    const tft_rec *rec;
    size_t i = 0, got = 0;
    *mismatch = 0;
    while (tft_reader_next(r, &rec) == 1) {
        if (i == skip_from)
            i = skip_to;
        if (i >= exp->n || rec->len != exp->recs[i]->len || memcmp(rec, exp->recs[i], rec->len) != 0)
            (*mismatch)++;
        i++;
        got++;
    }
    return (int)got;
}

static void test_roundtrip(void)
{
    char path[512];
    path_in_tmp(path, sizeof(path), "rt.tft");
    recset exp = {0};
    write_file(path, 0, 40000, 64 * 1024, true, &exp);
    tft_reader *r = tft_reader_open(path, NULL);
    CHECK(r != NULL);
    if (!r)
        return;
    CHECK(tft_reader_chunk_count(r) > 20);
    CHECK(tft_reader_info(r)->rank == 0);
    CHECK(strcmp(tft_reader_info(r)->host, "testhost") == 0);
    size_t mism;
    int got = read_all(r, &exp, SIZE_MAX, 0, &mism);
    CHECKF((size_t)got == exp.n, "got %d of %zu", got, exp.n);
    CHECK(mism == 0);
    /* every referenced string resolves, in every chunk (strings repeat per chunk) */
    tft_reader_rewind(r);
    const tft_rec *rec;
    size_t unresolved = 0;
    while (tft_reader_next(r, &rec) == 1)
        if (rec->kind == TFT_REC_TENSOR && !tft_reader_string(r, ((const tft_rec_tensor *)rec)->name))
            unresolved++;
    CHECK(unresolved == 0);
    tft_reader_status st;
    CHECK(tft_reader_verify(r, &st) == 0);
    CHECK(st.integrity == TFT_INTACT && st.closed && !st.index_rebuilt && st.chunks_bad == 0);
    CHECK(st.dropped == (exp.n / 11) * 0 + 0); /* no dropped counts were added */
    /* each chunk alone decodes its strings: seek into the middle */
    tft_reader_close(r);
    r = tft_reader_open(path, NULL);
    tft_reader_seek_step(r, 40);
    size_t first = SIZE_MAX;
    while (tft_reader_next(r, &rec) == 1) {
        if (rec->step < 40)
            continue;
        if (rec->kind == TFT_REC_TENSOR)
            CHECK(tft_reader_string(r, ((const tft_rec_tensor *)rec)->name) != NULL);
        if (first == SIZE_MAX)
            first = (size_t)rec->seq;
    }
    CHECK(first == 40 * 500); /* the first record of step 40 */
    tft_reader_close(r);
    recset_free(&exp);
}

static void test_unknown_and_dropped(void)
{
    char path[512];
    path_in_tmp(path, sizeof(path), "unk.tft");
    tft_writer *w = tft_writer_open(path, NULL, NULL);
    _Alignas(8) char buf[256];
    hdr((tft_rec *)buf, 777, 48, 1, 1, 5);
    CHECK(tft_writer_append(w, (tft_rec *)buf) == 0);
    hdr((tft_rec *)buf, TFT_REC_STEP, sizeof(tft_rec_step), 2, TFT_SEQ_NONE, 6);
    CHECK(tft_writer_append(w, (tft_rec *)buf) == 0);
    hdr((tft_rec *)buf, TFT_REC_STEP, 36, 2, TFT_SEQ_NONE, 6); /* not 8-aligned */
    CHECK(tft_writer_append(w, (tft_rec *)buf) == -EINVAL);
    hdr((tft_rec *)buf, TFT_REC_TENSOR, 40, 2, 0, 6); /* shorter than a tensor */
    CHECK(tft_writer_append(w, (tft_rec *)buf) == -EINVAL);
    tft_writer_add_dropped(w, 17);
    CHECK(tft_writer_close(w) == 0);
    tft_reader *r = tft_reader_open(path, NULL);
    const tft_rec *rec;
    CHECK(tft_reader_next(r, &rec) == 1 && rec->kind == 777 && rec->len == 48);
    CHECK(tft_reader_next(r, &rec) == 1 && rec->kind == TFT_REC_STEP && rec->step == 2);
    CHECK(tft_reader_next(r, &rec) == 0);
    tft_reader_status st;
    tft_reader_get_status(r, &st);
    CHECK(st.dropped == 17);
    CHECK(strcmp(tft_rec_kind_name(777), "?") == 0);
    tft_reader_close(r);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n);
    CHECK(fread(b, 1, *n, f) == *n);
    fclose(f);
    return b;
}

static void spit(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(fwrite(b, 1, n, f) == n);
    fclose(f);
}

/* Chunk boundaries of a closed file, from its index. */
static size_t chunk_bounds(const char *path, uint64_t *off, uint64_t *end, uint32_t *recs, size_t max)
{
    tft_reader *r = tft_reader_open(path, NULL);
    size_t n = tft_reader_chunk_count(r);
    for (size_t i = 0; i < n && i < max; i++) {
        const tft_chunk_info *c = tft_reader_chunk(r, i);
        off[i] = c->offset;
        end[i] = c->offset + 96 + c->comp_size;
        recs[i] = c->records;
    }
    tft_reader_close(r);
    return n;
}

/* Records readable from the first n bytes of a file image. */
static size_t count_prefix(const char *tmp, const unsigned char *b, size_t n)
{
    spit(tmp, b, n);
    tft_reader *r = tft_reader_open(tmp, NULL);
    const tft_rec *rec;
    size_t got = 0;
    while (r && tft_reader_next(r, &rec) == 1)
        got++;
    tft_reader_close(r);
    return got;
}

/* Records of the chunk (strings excluded) = expected records whose index
 * falls in it; the writer puts whole records in order, so prefix sums work. */
static void test_truncation(void)
{
    char path[512], cut[512];
    path_in_tmp(path, sizeof(path), "trunc.tft");
    path_in_tmp(cut, sizeof(cut), "trunc-cut.tft");
    recset exp = {0};
    write_file(path, 1, 2400, 64 * 1024, true, &exp);
    size_t n;
    unsigned char *b = slurp(path, &n);
    uint64_t off[64], end[64];
    uint32_t recs[64];
    size_t nc = chunk_bounds(path, off, end, recs, 64);
    CHECK(nc >= 3 && nc < 64);
    size_t before_last = count_prefix(cut, b, end[nc - 2]);
    const tft_rec *rec;
    CHECK(before_last > 0 && before_last < exp.n);

    size_t bad = 0, checked = 0;
    for (uint64_t t = off[nc - 1]; t < n; t++) {
        spit(cut, b, t);
        tft_reader *r = tft_reader_open(cut, NULL);
        if (!r) {
            bad++;
            continue;
        }
        size_t mism;
        size_t got = (size_t)read_all(r, &exp, SIZE_MAX, 0, &mism);
        tft_reader_status st;
        tft_reader_get_status(r, &st);
        size_t want = t < end[nc - 1] ? before_last : exp.n;
        if (got != want || mism || st.integrity != TFT_TORN || st.closed) {
            if (bad < 3)
                fprintf(stderr, "cut at %llu (last chunk %llu..%llu, file %zu): got %zu want %zu "
                        "mism %zu integrity %d closed %d\n", (unsigned long long)t,
                        (unsigned long long)off[nc - 1], (unsigned long long)end[nc - 1], n, got,
                        want, mism, st.integrity, st.closed);
            bad++;
        }
        checked++;
        tft_reader_close(r);
    }
    CHECKF(bad == 0, "%zu of %zu truncation offsets misread", bad, checked);
    CHECK(checked > 1000);
    /* a cut inside an earlier chunk keeps the chunks before it */
    spit(cut, b, off[1] + 50);
    tft_reader *r = tft_reader_open(cut, NULL);
    size_t got = 0;
    while (r && tft_reader_next(r, &rec) == 1)
        got++;
    tft_reader_status st;
    tft_reader_get_status(r, &st);
    CHECK(got > 0 && got < before_last && st.integrity == TFT_TORN && st.torn_offset == off[1]);
    tft_reader_close(r);
    free(b);
    recset_free(&exp);
}

/* Flips one bit at every byte offset; checks the exact outcome by region. */
static void test_bitflips(void)
{
    char path[512], flip[512];
    path_in_tmp(path, sizeof(path), "flip.tft");
    path_in_tmp(flip, sizeof(flip), "flip-x.tft");
    recset exp = {0};
    write_file(path, 2, 1600, 64 * 1024, true, &exp);
    size_t n;
    unsigned char *b = slurp(path, &n);
    uint64_t off[64], end[64];
    uint32_t recs[64];
    size_t nc = chunk_bounds(path, off, end, recs, 64);
    /* non-string records per chunk, from files cut after each chunk */
    size_t per_chunk[64] = {0};
    for (size_t c = 0; c < nc; c++)
        per_chunk[c] = count_prefix(flip, b, end[c]) - (c ? count_prefix(flip, b, end[c - 1]) : 0);
    size_t wrong = 0, tested = 0;
    for (size_t i = 0; i < n; i++) {
        b[i] ^= (unsigned char)(1u << (i % 8));
        spit(flip, b, n);
        b[i] ^= (unsigned char)(1u << (i % 8));
        tft_reader *r = tft_reader_open(flip, NULL);
        tested++;
        if (i < off[0]) { /* file header: refused, or read whole but flagged */
            if (!r) {
                if (errno != EPROTO && errno != EPROTONOSUPPORT)
                    wrong++;
                continue;
            }
        } else if (!r) {
            wrong++;
            continue;
        }
        const tft_rec *rec;
        size_t got = 0;
        while (tft_reader_next(r, &rec) == 1)
            got++;
        tft_reader_status st;
        tft_reader_get_status(r, &st);
        size_t want = exp.n;
        for (size_t c = 0; c < nc; c++)
            if (i >= off[c] && i < end[c])
                want = exp.n - per_chunk[c];
        if (got != want || st.integrity != TFT_DAMAGED) {
            if (wrong < 5)
                fprintf(stderr, "flip at %zu: got %zu want %zu integrity %d (%s)\n", i, got, want,
                        st.integrity, st.first_problem);
            wrong++;
        }
        tft_reader_close(r);
    }
    CHECKF(wrong == 0, "%zu of %zu bit flips misreported", wrong, tested);
    free(b);
    recset_free(&exp);
}

static void patch_header(const char *path, uint16_t major, uint16_t minor)
{
    size_t n;
    unsigned char *b = slurp(path, &n);
    memcpy(b + 16, &major, 2);
    memcpy(b + 18, &minor, 2);
    uint32_t sum = (uint32_t)XXH3_64bits(b + 8, 132);
    memcpy(b + 8 + 132, &sum, 4);
    spit(path, b, n);
    free(b);
}

static char last_log[512];
static void log_cb(void *ctx, int level, const char *msg)
{
    (void)ctx;
    (void)level;
    snprintf(last_log, sizeof(last_log), "%s", msg);
}

static void test_versions_and_rebuild(void)
{
    char path[512];
    path_in_tmp(path, sizeof(path), "ver.tft");
    recset exp = {0};
    write_file(path, 0, 3000, 64 * 1024, true, &exp);
    patch_header(path, 1, 9); /* newer minor: opens */
    tft_reader *r = tft_reader_open(path, NULL);
    CHECK(r != NULL);
    size_t mism;
    CHECK(r && (size_t)read_all(r, &exp, SIZE_MAX, 0, &mism) == exp.n && mism == 0);
    tft_reader_status st;
    if (r) {
        tft_reader_get_status(r, &st);
        CHECK(st.integrity == TFT_INTACT);
        CHECK(tft_reader_info(r)->minor == 9);
    }
    tft_reader_close(r);
    patch_header(path, 2, 0); /* newer major: refused with a clear message */
    tft_reader_opts o = TFT_READER_OPTS(.log = log_cb);
    errno = 0;
    r = tft_reader_open(path, &o);
    CHECK(r == NULL && errno == EPROTONOSUPPORT);
    CHECK(strstr(last_log, "upgrade") != NULL && strstr(last_log, "2.0") != NULL);
    recset_free(&exp);

    /* missing index: flushed but never closed */
    recset e2 = {0};
    path_in_tmp(path, sizeof(path), "noindex.tft");
    write_file(path, 0, 5000, 64 * 1024, false, &e2);
    r = tft_reader_open(path, NULL);
    CHECK(r != NULL);
    CHECK(r && (size_t)read_all(r, &e2, SIZE_MAX, 0, &mism) == e2.n && mism == 0);
    if (r) {
        tft_reader_get_status(r, &st);
        CHECK(st.index_rebuilt && !st.closed && st.integrity == TFT_TORN);
    }
    tft_reader_close(r);
    recset_free(&e2);

    /* not a trace, empty, missing */
    path_in_tmp(path, sizeof(path), "garbage.tft");
    spit(path, "hello world, not a trace at all", 31);
    CHECK(tft_reader_open(path, &o) == NULL && errno == EPROTO);
    CHECK(strstr(last_log, "garbage.tft") != NULL);
    spit(path, "", 0);
    CHECK(tft_reader_open(path, &o) == NULL && errno == EPROTO);
    path_in_tmp(path, sizeof(path), "missing.tft");
    CHECK(tft_reader_open(path, &o) == NULL && errno == ENOENT);
}

static void test_trace_dir_merge(void)
{
    char dir[512], path[600];
    path_in_tmp(dir, sizeof(dir), "multi.trace");
    mkdir(dir, 0755);
    tft_manifest m = {0};
    snprintf(m.run_id, sizeof(m.run_id), "0123456789abcdef0123456789abcdef");
    snprintf(m.host, sizeof(m.host), "testhost");
    char *argv[] = {"./train", "--steps", "10"};
    m.argv = argv;
    m.argc = 3;
    m.world_size = 3;
    m.complete = 1;
    m.exit_status = 0;
    m.start_ns = 1764486000123456789ull;
    tft_manifest_rank ranks[3];
    size_t total = 0;
    for (int k = 0; k < 3; k++) {
        recset e = {0};
        snprintf(path, sizeof(path), "%s/rank-%05d.tft", dir, k);
        rng = 1000 + (uint64_t)k;
        write_file(path, k, 3000 + (size_t)k * 500, 64 * 1024, true, &e);
        total += e.n;
        recset_free(&e);
        ranks[k] = (tft_manifest_rank){.rank = k, .pid = 100 + k, .exited = 1, .exit_code = k};
        snprintf(ranks[k].file, sizeof(ranks[k].file), "rank-%05d.tft", k);
    }
    m.ranks = ranks;
    m.nranks = 3;
    CHECK(tft_manifest_write(dir, &m) == 0);
    tft_trace *t = tft_trace_open(dir, NULL);
    CHECK(t != NULL);
    if (!t)
        return;
    CHECK(tft_trace_nranks(t) == 3 && tft_trace_rank_id(t, 2) == 2);
    const tft_manifest *mm = tft_trace_manifest(t);
    CHECK(mm && mm->argc == 3 && strcmp(mm->argv[2], "10") == 0 && mm->nranks == 3);
    CHECK(mm && mm->ranks[2].exit_code == 2 && mm->start_ns == 1764486000123456789ull);
    for (int order = 0; order < 2; order++) {
        tft_merge *mg = tft_merge_open(t, order);
        const tft_rec *rec;
        int ri;
        size_t n = 0, disorder = 0;
        uint64_t last_ts = 0;
        int64_t last_step = INT64_MIN;
        while (tft_merge_next(mg, &rec, &ri) == 1) {
            n++;
            if (order == TFT_ORDER_TIME) {
                disorder += rec->ts < last_ts;
                last_ts = rec->ts;
            } else if (rec->step != TFT_STEP_NONE) {
                disorder += rec->step < last_step;
                last_step = rec->step;
            }
        }
        CHECK(n == total);
        CHECK(disorder == 0);
        tft_merge_close(mg);
    }
    tft_trace_close(t);
    /* a damaged manifest does not hide the rank files */
    snprintf(path, sizeof(path), "%s/manifest.json", dir);
    spit(path, "{not json", 9);
    t = tft_trace_open(dir, NULL);
    CHECK(t && tft_trace_nranks(t) == 3 && tft_trace_manifest(t) == NULL);
    tft_trace_close(t);
}

static void test_manifest(void)
{
    tft_manifest m;
    char err[256];
    const char *good = "{\"format\":\"tftrace\",\"format_version\":\"1.3\",\"run_id\":\"ab\","
                       "\"command\":[\"a\",\"b c\"],\"world_size\":2,\"start_ns\":\"42\","
                       "\"options\":{\"stats\":\"full\"},"
                       "\"ranks\":[{\"rank\":0,\"file\":\"rank-00000.tft\",\"exit\":{\"signal\":9}},"
                       "{\"rank\":1,\"file\":\"rank-00001.tft\",\"exit\":null}]}";
    CHECK(tft_manifest_parse(good, strlen(good), &m, err, sizeof(err)) == 0);
    CHECK(m.minor == 3 && m.argc == 2 && strcmp(m.argv[1], "b c") == 0 && m.start_ns == 42);
    CHECK(m.nranks == 2 && m.ranks[0].signal == 9 && m.ranks[0].exited && !m.ranks[1].exited);
    CHECK(m.options_json && strstr(m.options_json, "full"));
    char *js = tft_manifest_to_json(&m);
    tft_manifest m2;
    CHECK(js && tft_manifest_parse(js, strlen(js), &m2, err, sizeof(err)) == 0);
    CHECK(m2.nranks == 2 && m2.ranks[0].signal == 9 && m2.argc == 2 && m2.world_size == 2);
    free(js);
    tft_manifest_free(&m2);
    tft_manifest_free(&m);
    CHECK(tft_manifest_parse("{\"x\":1", 6, &m, err, sizeof(err)) == -EPROTO && err[0]);
    const char *newer = "{\"format\":\"tftrace\",\"format_version\":\"7.0\",\"ranks\":[]}";
    CHECK(tft_manifest_parse(newer, strlen(newer), &m, err, sizeof(err)) == -EPROTONOSUPPORT);
    CHECK(strstr(err, "upgrade") != NULL);
    const char *evil = "{\"format\":\"tftrace\",\"format_version\":\"1.0\","
                       "\"ranks\":[{\"rank\":0,\"file\":\"../../etc/passwd\"}]}";
    CHECK(tft_manifest_parse(evil, strlen(evil), &m, err, sizeof(err)) == -EPROTO);
    CHECK(tft_manifest_parse("", 0, &m, err, sizeof(err)) == -EPROTO);
}

/* CAPTURE records (format 1.1): structural checks, string reference,
 * pass-through, and the byte shuffle's round trip. */
static void test_capture_record(void)
{
    _Alignas(8) char buf[sizeof(tft_rec_capture) + 64];
    tft_rec_capture *c = (tft_rec_capture *)buf;
    memset(buf, 0, sizeof(buf));
    hdr(&c->h, TFT_REC_CAPTURE, sizeof(tft_rec_capture) + 24, 3, 7, 9);
    c->tensor = 42;
    c->total = 40;
    c->offset = 16;
    c->n = 20; /* 20 bytes + 4 of padding */
    c->role = TFT_CAPTURE_INPUT;
    c->dtype = TFT_F32;
    c->ndim = 2;
    c->shape[0] = 2, c->shape[1] = 5;
    CHECK(sizeof(tft_rec_capture) == 144 && TFT_CAPTURE_PART_MAX == 65392);
    CHECK(tft_rec_min_size(TFT_REC_CAPTURE) == 144 && !strcmp(tft_rec_kind_name(TFT_REC_CAPTURE), "capture"));
    CHECK(tft_rec_check(&c->h, sizeof(buf)) == 0);
    c->n = 25; /* past total */
    CHECK(tft_rec_check(&c->h, sizeof(buf)) == -EBADMSG);
    c->n = 20, c->offset = UINT64_MAX - 4; /* offset + n overflows */
    CHECK(tft_rec_check(&c->h, sizeof(buf)) == -EBADMSG);
    c->offset = 16, c->role = 3;
    CHECK(tft_rec_check(&c->h, sizeof(buf)) == -EBADMSG);
    c->role = TFT_CAPTURE_OUTPUT, c->ndim = 9;
    CHECK(tft_rec_check(&c->h, sizeof(buf)) == -EBADMSG);
    c->ndim = 2, c->total = 100, c->n = 30; /* more bytes than the record holds */
    CHECK(tft_rec_check(&c->h, sizeof(buf)) == -EBADMSG);
    c->total = 40, c->n = 20;

    /* written and read back, with its name's definition in the chunk */
    char path[512];
    path_in_tmp(path, sizeof(path), "cap.tft");
    tft_writer *w = tft_writer_open(path, NULL, NULL);
    CHECK(w != NULL);
    c->name = tft_writer_string(w, "L0.qkv", 6);
    for (int i = 0; i < 20; i++)
        c->data[i] = (uint8_t)(i * 11);
    CHECK(tft_writer_append(w, &c->h) == 0);
    c->role = 5;
    CHECK(tft_writer_append(w, &c->h) == -EINVAL);
    CHECK(tft_writer_close(w) == 0);
    tft_reader *r = tft_reader_open(path, NULL);
    const tft_rec *rec = NULL;
    bool got = r && tft_reader_next(r, &rec) == 1 && rec->kind == TFT_REC_CAPTURE;
    CHECK(got);
    if (got) { /* the record's fields exist only then */
        const tft_rec_capture *rc = (const tft_rec_capture *)rec;
        CHECK(rc->tensor == 42 && rc->n == 20 && rc->data[19] == 209 && rc->shape[1] == 5);
        CHECK(tft_reader_string(r, rc->name) && !strcmp(tft_reader_string(r, rc->name), "L0.qkv"));
        CHECK(tft_reader_next(r, &rec) == 0);
    }
    tft_reader_close(r);

    uint8_t src[24], sh[24], back[24];
    for (int i = 0; i < 24; i++)
        src[i] = (uint8_t)i;
    tft_capture_shuffle(sh, src, 24, 4, 0);
    CHECK(sh[0] == 0 && sh[1] == 4 && sh[6] == 1 && sh[23] == 23); /* first bytes, then second bytes */
    tft_capture_shuffle(back, sh, 24, 4, 1);
    CHECK(memcmp(back, src, 24) == 0);
    tft_capture_shuffle(sh, src, 22, 4, 0); /* not a multiple: copied */
    CHECK(memcmp(sh, src, 22) == 0);
}


/* Format 1.2: THREAD switches repeated at every chunk start (each chunk
 * names its thread), tft_reader_thread, SYNC and COMM records, the
 * 112-byte COLLECTIVE with its tag, and a 1.1 reader's 104-byte
 * COLLECTIVE still accepted (tag: none). */
static void test_threads_comm(void)
{
    char path[512];
    path_in_tmp(path, sizeof(path), "threads.tft");
    tft_writer_opts wo = TFT_WRITER_OPTS(.chunk_bytes = 64 * 1024, .sync = 0);
    tft_writer *w = tft_writer_open(path, NULL, &wo);
    CHECK(w != NULL);
    if (!w)
        return;
    _Alignas(8) char buf[512];
    tft_rec_thread th[2];
    for (int t = 0; t < 2; t++) {
        hdr(&th[t].h, TFT_REC_THREAD, sizeof(th[t]), TFT_STEP_NONE, TFT_SEQ_NONE, 1);
        th[t].event = TFT_THREAD_SWITCH;
        th[t].tid = 100 + t;
        th[t].index = (uint32_t)t;
        th[t].name = tft_writer_string(w, t ? "worker" : "main", t ? 6 : 4);
    }
    /* 4000 tensors in runs of 100 per thread: 1 MB, many chunks */
    int expect_thread[4000];
    for (int i = 0; i < 4000; i++) {
        int t = (i / 100) % 2;
        if (i % 100 == 0)
            CHECK(tft_writer_append(w, &th[t].h) == 0);
        tft_rec_tensor *r = (tft_rec_tensor *)buf;
        hdr(&r->h, TFT_REC_TENSOR, sizeof(*r), i / 500, i, 10 + (uint64_t)i);
        r->id = (uint64_t)i + 1;
        CHECK(tft_writer_append(w, &r->h) == 0);
        expect_thread[i] = t;
        if (i % 500 == 499) {
            tft_rec_sync sy;
            hdr(&sy.h, TFT_REC_SYNC, sizeof(sy), i / 500 + 1, TFT_SEQ_NONE, 11);
            CHECK(tft_writer_append(w, &sy.h) == 0);
        }
    }
    tft_rec_thread end = th[1];
    end.event = TFT_THREAD_END;
    CHECK(tft_writer_append(w, &end.h) == 0);
    /* collectives: 1.2 with a tag, and a 1.1-sized one */
    tft_rec_collective *c = (tft_rec_collective *)buf;
    hdr(&c->h, TFT_REC_COLLECTIVE, sizeof(*c), 9, 9, 12);
    c->type = TFT_COLL_RECV;
    c->tag = 7;
    CHECK(sizeof(*c) == 112 && tft_rec_min_size(TFT_REC_COLLECTIVE) == TFT_REC_COLLECTIVE_MIN_BYTES);
    CHECK(tft_writer_append(w, &c->h) == 0);
    c->h.len = TFT_REC_COLLECTIVE_MIN_BYTES;
    CHECK(tft_writer_append(w, &c->h) == 0);
    /* COMM: members within the record, or malformed */
    tft_rec_comm *cm = (tft_rec_comm *)buf;
    hdr(&cm->h, TFT_REC_COMM, sizeof(*cm) + 8, TFT_STEP_NONE, TFT_SEQ_NONE, 13);
    cm->comm = 0x1234;
    cm->name = tft_writer_string(w, "MPI_Comm_split", 14);
    cm->size = 2;
    cm->n_members = 2;
    cm->members[0] = 1;
    cm->members[1] = 3;
    CHECK(tft_writer_append(w, &cm->h) == 0);
    cm->n_members = 3; /* 12 bytes of members in an 8-byte tail */
    CHECK(tft_writer_append(w, &cm->h) == -EINVAL);
    CHECK(tft_writer_close(w) == 0);

    tft_reader *r = tft_reader_open(path, NULL);
    CHECK(r != NULL);
    if (!r)
        return;
    CHECK(tft_reader_chunk_count(r) > 4);
    const tft_rec *rec;
    int tensors = 0, syncs = 0, ends = 0, tags[2] = {0, 0}, ncoll = 0, comms = 0;
    while (tft_reader_next(r, &rec) == 1) {
        tft_thread_info ti;
        tft_reader_thread(r, &ti);
        if (rec->kind == TFT_REC_TENSOR) {
            const tft_rec_tensor *t = (const tft_rec_tensor *)rec;
            int i = (int)t->id - 1;
            CHECKF(ti.known && (int)ti.index == expect_thread[i] && ti.tid == 100 + expect_thread[i],
                   "tensor %d: thread %u known %d, want %d", i, ti.index, ti.known, expect_thread[i]);
            const char *nm = tft_reader_string(r, ti.name);
            CHECK(nm && !strcmp(nm, expect_thread[i] ? "worker" : "main"));
            tensors++;
        }
        syncs += rec->kind == TFT_REC_SYNC;
        if (rec->kind == TFT_REC_THREAD && ((const tft_rec_thread *)rec)->event == TFT_THREAD_END) {
            ends++;
            CHECK(ti.index == 1); /* an end does not switch */
        }
        if (rec->kind == TFT_REC_COLLECTIVE)
            tags[ncoll++ & 1] = tft_rec_coll_tag((const tft_rec_collective *)rec);
        if (rec->kind == TFT_REC_COMM) {
            const tft_rec_comm *x = (const tft_rec_comm *)rec;
            CHECK(x->n_members == 2 && x->members[1] == 3 && !strcmp(tft_reader_string(r, x->name), "MPI_Comm_split"));
            comms++;
        }
    }
    CHECK(tensors == 4000 && syncs == 8 && ends == 1 && comms == 1);
    CHECK(ncoll == 2 && tags[0] == 7 && tags[1] == TFT_TAG_NONE);
    /* seeking into the middle: the chunk's first record names its thread */
    CHECK(tft_reader_seek_step(r, 5) == 0);
    int seen = 0;
    while (tft_reader_next(r, &rec) == 1 && seen < 1) {
        if (rec->kind != TFT_REC_TENSOR)
            continue;
        tft_thread_info ti;
        tft_reader_thread(r, &ti);
        int i = (int)((const tft_rec_tensor *)rec)->id - 1;
        CHECKF(ti.known && (int)ti.index == expect_thread[i], "after seek: tensor %d thread %u", i, ti.index);
        seen++;
    }
    CHECK(seen == 1);
    tft_reader_close(r);
}

/* dtypes (tft_types.h): every code has a name that parses back and a
 * size; the fp8 codes of 1.3 and their torch-style aliases. TENSOR and
 * CAPTURE records of fp8 read back unchanged, in a 1.3 file and in one
 * whose header says 1.2 (the reader never checks a dtype), next to a code
 * no version defines (what a 1.2 reader meets in a 1.3 file: it names it
 * "?" and reads on). */
static void test_dtypes(void)
{
    static const unsigned char sizes[TFT_DTYPE_COUNT] = {4, 8, 2, 2, 4, 8, 1, 1, 2, 2, 4, 8, 1, 1, 1};
    CHECK(TFT_DTYPE_COUNT == 15 && TFT_F8E4M3 == 13 && TFT_F8E5M2 == 14);
    for (int d = 0; d < TFT_DTYPE_COUNT; d++) {
        CHECKF(tft_dtype_size(d) == sizes[d], "size of %s", tft_dtype_name(d));
        CHECKF(strcmp(tft_dtype_name(d), "?") && tft_dtype_parse(tft_dtype_name(d)) == d, "name of %d", d);
    }
    CHECK(!strcmp(tft_dtype_name(TFT_F8E4M3), "f8e4m3") && !strcmp(tft_dtype_name(TFT_F8E5M2), "f8e5m2"));
    CHECK(tft_dtype_parse("float8_e4m3fn") == TFT_F8E4M3 && tft_dtype_parse("fp8e4m3") == TFT_F8E4M3 &&
          tft_dtype_parse("float8_e5m2") == TFT_F8E5M2 && tft_dtype_parse("fp8e5m2") == TFT_F8E5M2);
    CHECK(tft_dtype_parse("float8_e4m3fnuz") == -EINVAL && tft_dtype_parse("f8") == -EINVAL);
    CHECK(tft_dtype_size(TFT_DTYPE_COUNT) == 0 && !strcmp(tft_dtype_name(TFT_DTYPE_COUNT), "?") &&
          tft_dtype_size(200) == 0 && !strcmp(tft_dtype_name(-1), "?"));

    static const uint8_t codes[3] = {TFT_F8E4M3, TFT_F8E5M2, 200};
    for (int minor = TFT_FORMAT_MINOR; minor >= 2; minor = minor == TFT_FORMAT_MINOR ? 2 : 0) {
        char path[512];
        path_in_tmp(path, sizeof(path), "dtypes.tft");
        /* the 1.2 file: plain records, as a 1.2 writer wrote them */
        tft_writer_opts o = TFT_WRITER_OPTS(.encoding = minor < TFT_FORMAT_MINOR ? TFT_ENC_NONE : 0);
        tft_writer *w = tft_writer_open(path, NULL, &o);
        CHECK(w != NULL);
        if (!w)
            return;
        recset exp = {0};
        _Alignas(8) char buf[sizeof(tft_rec_tensor) + sizeof(tft_rec_capture)]; /* either record */
        for (int i = 0; i < 3; i++) {
            tft_rec_tensor *t = (tft_rec_tensor *)buf;
            hdr(&t->h, TFT_REC_TENSOR, sizeof(*t), 0, i, 10 + (uint64_t)i);
            t->id = (uint64_t)i + 1;
            t->name = tft_writer_string(w, "w8", 2);
            t->dtype = codes[i];
            t->mode = TFT_STATS_FULL;
            t->ndim = 1;
            t->shape[0] = 4;
            t->stats.numel = 4;
            t->stats.nan = (uint64_t)i;
            t->stats.max = 448.0;
            CHECK(tft_writer_append(w, &t->h) == 0);
            recset_add(&exp, &t->h);
            tft_rec_capture *c = (tft_rec_capture *)buf;
            hdr(&c->h, TFT_REC_CAPTURE, sizeof(*c) + 8, 0, i, 20 + (uint64_t)i);
            c->tensor = (uint64_t)i + 1;
            c->total = 4;
            c->n = 4;
            c->name = tft_writer_string(w, "w8", 2);
            c->dtype = codes[i];
            c->ndim = 1;
            c->shape[0] = 4;
            memcpy(c->data, "\x7e\x7f\x80\x01", 4);
            CHECK(tft_writer_append(w, &c->h) == 0);
            recset_add(&exp, &c->h);
        }
        CHECK(tft_writer_close(w) == 0);
        if (minor != TFT_FORMAT_MINOR)
            patch_header(path, 1, (uint16_t)minor);
        tft_reader *r = tft_reader_open(path, NULL);
        CHECK(r != NULL);
        size_t mism = 1;
        CHECKF(r && (size_t)read_all(r, &exp, SIZE_MAX, 0, &mism) == exp.n && mism == 0,
               "fp8 and unknown dtypes in a %d.%d file", TFT_FORMAT_MAJOR, minor);
        if (r) {
            tft_reader_status st;
            tft_reader_get_status(r, &st);
            CHECK(st.integrity == TFT_INTACT && st.chunks_bad == 0 && tft_reader_info(r)->minor == minor);
        }
        tft_reader_close(r);
        recset_free(&exp);
    }
}

/* tft_format_version is the format's version, the header's macros; the
 * library's own version (tft_version) is another, MAJOR.MINOR.PATCH, and
 * what a manifest written without one records as its tool. */
static void test_version_strings(void)
{
    char want[32];
    snprintf(want, sizeof(want), "%d.%d", TFT_FORMAT_MAJOR, TFT_FORMAT_MINOR);
    CHECKF(!strcmp(tft_format_version(), want), "tft_format_version() %s, want %s", tft_format_version(), want);
    unsigned a, b, c;
    char end;
    CHECKF(sscanf(tft_version(), "%u.%u.%u%c", &a, &b, &c, &end) == 3, "tft_version() %s", tft_version());
    tft_manifest m = {.major = TFT_FORMAT_MAJOR, .minor = TFT_FORMAT_MINOR, .world_size = 1};
    char *json = tft_manifest_to_json(&m);
    CHECK(json != NULL);
    tft_manifest back;
    char err[256];
    CHECK(json && tft_manifest_parse(json, strlen(json), &back, err, sizeof(err)) == 0);
    if (json) {
        CHECKF(!strcmp(back.tool_version, tft_version()), "tool_version %s", back.tool_version);
        tft_manifest_free(&back);
    }
    free(json);
}

/* tft_writer_stats is filled as far as the caller's sz: a caller built
 * with the first published struct, a newer one with a larger struct (the
 * bytes past what this library knows stay as they were), one whose sz is
 * too small (refused, nothing written). */
static void test_writer_stats_sz(void)
{
    char path[512];
    path_in_tmp(path, sizeof(path), "stats.tft");
    tft_file_info fi = {0};
    tft_writer_opts o = TFT_WRITER_OPTS(.sync = 0);
    tft_writer *w = tft_writer_open(path, &fi, &o);
    CHECK(w != NULL);
    if (!w)
        return;
    _Alignas(8) char buf[1024];
    uint64_t ids[NNAMES];
    for (size_t i = 0; i < NNAMES; i++)
        ids[i] = tft_writer_string(w, names[i], strlen(names[i]));
    for (int i = 0; i < 10; i++) {
        make_record(i % 11, 0, i, 1000 + (uint64_t)i, buf, ids);
        CHECK(tft_writer_append(w, (tft_rec *)buf) == 0);
    }
    tft_writer_add_dropped(w, 3);
    CHECK(tft_writer_flush(w) == 0);
    tft_writer_stats full = TFT_WRITER_STATS();
    CHECK(tft_writer_get_stats(w, &full) == 0);
    CHECK(full.sz == sizeof(full) && full.records == 10 && full.chunks == 1 && full.dropped == 3);
    CHECK(full.raw_bytes > 0 && full.file_bytes > 0);

    _Alignas(8) unsigned char mem[sizeof(tft_writer_stats) + 32], canary[sizeof(mem)];
    memset(canary, 0xa5, sizeof(canary));
    size_t sizes[2] = {TFT_WRITER_STATS_V1_SZ, sizeof(tft_writer_stats) + 16};
    for (int k = 0; k < 2; k++) { /* the first published size; a newer caller's */
        memcpy(mem, canary, sizeof(mem));
        memcpy(mem, &sizes[k], sizeof(size_t));
        CHECK(tft_writer_get_stats(w, (tft_writer_stats *)mem) == 0);
        size_t known = sizes[k] < sizeof(full) ? sizes[k] : sizeof(full);
        CHECKF(!memcmp(mem + sizeof(size_t), (const char *)&full + sizeof(size_t), known - sizeof(size_t)),
               "sz %zu: the fields it covers differ", sizes[k]);
        CHECKF(!memcmp(mem + known, canary + known, sizeof(mem) - known), "sz %zu: bytes past it written",
               sizes[k]);
        CHECK(!memcmp(mem, &sizes[k], sizeof(size_t))); /* sz stays the caller's */
    }
    size_t tiny = TFT_WRITER_STATS_V1_SZ - 8;
    memcpy(mem, canary, sizeof(mem));
    memcpy(mem, &tiny, sizeof(size_t));
    CHECK(tft_writer_get_stats(w, (tft_writer_stats *)mem) == -EINVAL);
    CHECK(!memcmp(mem + sizeof(size_t), canary + sizeof(size_t), sizeof(mem) - sizeof(size_t)));
    CHECK(tft_writer_get_stats(w, NULL) == -EINVAL && tft_writer_get_stats(NULL, &full) == -EINVAL);
    CHECK(tft_writer_close(w) == 0);
}

/* keep_steps (FORMAT.md §3.6): 60 steps of 200 large tensors and a loss,
 * full records for the last 3 steps only. Closed or not, the file reads:
 * a loss for every step, the large tensors of the steps said full and of
 * no other, whole steps retired. */
static void keep_steps_write(const char *path, bool close_it, uint64_t *retired)
{
    tft_writer_opts o = TFT_WRITER_OPTS(.sync = 0, .keep_steps = 3);
    tft_writer *w = tft_writer_open(path, NULL, &o);
    CHECK(w != NULL);
    if (!w)
        return;
    uint64_t big = tft_writer_string(w, "act", 3), loss = tft_writer_string(w, "loss", 4);
    int64_t seq = 0;
    for (int64_t step = 0; step < 60; step++) {
        tft_rec_step sr = {.h = {.kind = TFT_REC_STEP, .len = sizeof(sr), .ts = (uint64_t)step * 100,
                                 .step = step, .seq = TFT_SEQ_NONE}, .phase = TFT_STEP_BEGIN};
        CHECK(tft_writer_append(w, &sr.h) == 0);
        for (int i = 0; i <= 200; i++) {
            tft_rec_tensor t;
            memset(&t, 0, sizeof(t));
            t.h = (tft_rec){.kind = TFT_REC_TENSOR, .len = sizeof(t), .ts = (uint64_t)step * 100 + 1,
                            .step = step, .seq = seq++};
            t.id = (uint64_t)seq;
            t.name = i < 200 ? big : loss;
            t.dtype = TFT_F32;
            t.device = -1;
            t.ndim = 1;
            t.shape[0] = i < 200 ? 1000 : 1;
            CHECK(tft_writer_append(w, &t.h) == 0);
        }
        sr.h.ts += 2;
        sr.phase = TFT_STEP_END;
        CHECK(tft_writer_append(w, &sr.h) == 0);
    }
    tft_writer_stats ws = TFT_WRITER_STATS();
    CHECK(tft_writer_get_stats(w, &ws) == 0);
    *retired = ws.retired_chunks;
    if (close_it) {
        CHECK(tft_writer_close(w) == 0);
    } else {
        tft_writer_abandon(w); /* as after a kill: no index, the last steps unwritten */
    }
}

static void test_keep_steps(void)
{
    for (int closed = 1; closed >= 0; closed--) {
        char path[600];
        path_in_tmp(path, sizeof(path), closed ? "keep-closed.tft" : "keep-killed.tft");
        uint64_t retired = 0;
        keep_steps_write(path, closed, &retired);
        CHECK(retired >= 5);
        tft_reader *r = tft_reader_open(path, NULL);
        CHECK(r != NULL);
        if (!r)
            continue;
        long long keep = 0;
        int64_t first = TFT_STEP_NONE, last = TFT_STEP_NONE;
        CHECK(tft_reader_full_steps(r, &keep, &first, &last) == 0);
        CHECK(keep == 3);
        if (closed)
            CHECK(last == 59 && first <= 57 && first >= 40);
        else
            CHECK(last >= 40 && first != TFT_STEP_NONE && first <= last && first > 10);
        int losses[60] = {0}, bigs[60] = {0}, steps = 0;
        const tft_rec *rec;
        int64_t prev = 0;
        bool ordered = true;
        while (tft_reader_next(r, &rec) == 1) {
            if (rec->step < prev)
                ordered = false;
            prev = rec->step;
            if (rec->kind == TFT_REC_STEP && ((const tft_rec_step *)rec)->phase == TFT_STEP_END)
                steps++;
            if (rec->kind == TFT_REC_TENSOR && rec->step >= 0 && rec->step < 60)
                (((const tft_rec_tensor *)rec)->shape[0] == 1 ? losses : bigs)[rec->step]++;
        }
        CHECK(ordered);
        CHECK(steps == (closed ? 60 : steps) && steps >= (int)last);
        int wrong = 0;
        for (int s = 0; s <= last && s < 60; s++)
            wrong += losses[s] != 1 || bigs[s] != (s >= first ? 200 : 0);
        CHECK(wrong == 0);
        tft_reader_status st;
        CHECK(tft_reader_verify(r, &st) == 0 || !closed);
        CHECK(closed ? st.integrity == TFT_INTACT && st.closed && !st.index_rebuilt
                     : st.integrity == TFT_TORN && st.index_rebuilt);
        tft_reader_close(r);
    }
}

int main(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/tft-test-format-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_roundtrip();
    test_unknown_and_dropped();
    test_truncation();
    test_bitflips();
    test_versions_and_rebuild();
    test_trace_dir_merge();
    test_manifest();
    test_capture_record();
    test_threads_comm();
    test_writer_stats_sz();
    test_version_strings();
    test_dtypes();
    test_keep_steps();
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (!getenv("TFT_TEST_KEEP") && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return TEST_DONE();
}
