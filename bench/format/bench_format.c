/*
 * bench_format.c — throughput of the rank-file writer and reader against
 * plain zstd on the same bytes.
 *
 *   bench_format [--records N] [--reps N] [--dir DIR] [--level L] [--only abcd]
 *                [--encoding both|columns|shuffle|none] [--dict]
 *
 * Generates a realistic record stream in memory (default 1.5 M records):
 * per step, for ~200 named tensors of a 24-layer model, an op record and a
 * tensor record with FULL statistics (shapes repeating per step, random
 * 64-bit fingerprints, means and stds drifting slowly with noise), a
 * collective, allocations and frees. Then measures, alternating, best of
 * --reps (default 5):
 *   (a) tft_writer writing the stream to DIR/bench_format.tft (zstd level L,
 *       default 1; default 1 MiB chunks; no fsync: the page cache, not the disk);
 *   (b) ZSTD_compressCCtx level L of the same bytes, cut at the same record
 *       boundaries into <= 1 MiB pieces, into memory;
 *   (c) tft_reader streaming every record of that file, touching each;
 *   (d) ZSTD_decompressDCtx of the frames of (b) from memory, walking the
 *       records the same way.
 * and prints records/s, MB/s of raw record bytes and bytes per record
 * stored, with the ratios (a)/(b) and (c)/(d). Goal: both ratios >= 0.8.
 *
 * --encoding picks the writer's chunk encoding (FORMAT.md §3.3.1; default
 * both = columns + shuffle, the writer's default; none = plain records as
 * 1.3 wrote them). --dict also measures (e) a zstd dictionary per trace:
 * 64 KiB trained (ZDICT_trainFromBuffer) on the first four pieces of (b),
 * then every piece compressed with it, to compare its bytes per record.
 * After the table come BENCH-RESULT lines (bench/run.sh): bytes per record
 * stored by (a) against the 32 B goal, and the ratios (a)/(b), (c)/(d).
 *
 * DIR defaults to /dev/shm (falls back to /tmp), so the figures are CPU
 * cost, not the disk. --only runs some of the measurements in the loop (for
 * perf record); the file and frames the others need are made once before. This is a program, not a test: it asserts nothing
 * about speed, but exits 1 if the reader returns other records than written.
 */
#include "tft_format.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zdict.h>
#include <zstd.h>

#define CHUNK_BYTES (1u << 20) /* the writer's default chunk size */
#define N_LAYERS 24

/* ---- the record stream ------------------------------------------------------- */

typedef struct stream {
    char *buf;          /* records back to back, each 8-aligned */
    size_t len, cap;
    size_t records;
    const char **names; /* texts of every string id used */
    size_t n_names;
} stream;

static uint64_t rng_state = 0x853c49e6748fea9bull;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}
/* uniform in [-1, 1) */
static double noise(void) { return (double)(rnd() >> 11) * (2.0 / 9007199254740992.0) - 1.0; }

static void *stream_reserve(stream *s, size_t n)
{
    if (s->len + n > s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : (64u << 20);
        while (ncap < s->len + n)
            ncap *= 2;
        char *nb = realloc(s->buf, ncap);
        if (!nb) {
            fprintf(stderr, "bench_format: out of memory for %zu bytes of records\n", ncap);
            exit(1);
        }
        s->buf = nb;
        s->cap = ncap;
    }
    void *p = s->buf + s->len;
    memset(p, 0, n);
    s->len += n;
    s->records++;
    return p;
}

static void rec_init(tft_rec *h, uint16_t kind, uint32_t len, int64_t step, int64_t seq, uint64_t *ts)
{
    h->kind = kind;
    h->len = len;
    *ts += 200 + rnd() % 800; /* a few hundred ns between events */
    h->ts = *ts;
    h->step = step;
    h->seq = seq;
}

/* One tensor of the model: name, producing op, shape, and the statistics it
 * drifts from. */
typedef struct tensor_kind {
    uint64_t name, op, scope;
    int gemm;
    int ndim;
    int64_t shape[4];
    double mean0, std0;
} tensor_kind;

static const char *const sublayer[8] = {"attn.q", "attn.k", "attn.v", "attn.probs",
                                         "attn.out", "mlp.fc1", "mlp.act", "mlp.fc2"};
static const char *const sublayer_op[8] = {"aten::mm", "aten::mm", "aten::mm", "aten::softmax",
                                            "aten::mm", "aten::mm", "aten::gelu", "aten::mm"};

static uint64_t name_id(stream *s, const char *text)
{
    for (size_t i = 0; i < s->n_names; i++)
        if (strcmp(s->names[i], text) == 0)
            return tft_string_id(text, strlen(text));
    char *copy = strdup(text);
    const char **nn = realloc(s->names, (s->n_names + 1) * sizeof(*nn));
    if (!copy || !nn) {
        fprintf(stderr, "bench_format: out of memory\n");
        exit(1);
    }
    s->names = nn;
    s->names[s->n_names++] = copy;
    return tft_string_id(text, strlen(text));
}

/* Builds the ~200 tensor kinds (24 layers x 8, plus embedding, logits,
 * loss, grad norm). Returns how many. */
static int make_kinds(stream *s, tensor_kind *k, int cap)
{
    char b[64];
    int n = 0;
    uint64_t mm = name_id(s, "aten::mm");
    for (int l = 0; l < N_LAYERS; l++) {
        snprintf(b, sizeof(b), "L%d/%s", l, "block");
        uint64_t scope = name_id(s, b);
        for (int j = 0; j < 8 && n < cap; j++, n++) {
            snprintf(b, sizeof(b), "L%d.%s", l, sublayer[j]);
            k[n] = (tensor_kind){.name = name_id(s, b), .scope = scope, .ndim = 3,
                                 .shape = {8, 1024, j == 5 || j == 6 ? 16384 : 4096},
                                 .mean0 = 0.01 * noise(), .std0 = 0.5 + 0.5 * (double)(rnd() % 100) / 100};
            k[n].op = strcmp(sublayer_op[j], "aten::mm") == 0 ? mm : name_id(s, sublayer_op[j]);
            k[n].gemm = k[n].op == mm;
            if (j == 3) { /* probs: (B, heads, T, T) */
                k[n].ndim = 4;
                k[n].shape[1] = 32, k[n].shape[2] = 1024, k[n].shape[3] = 1024;
                k[n].mean0 = 1.0 / 1024, k[n].std0 = 0.01;
            }
        }
    }
    static const char *const extra[] = {"emb", "logits", "loss", "grad_norm"};
    for (int i = 0; i < 4 && n < cap; i++, n++)
        k[n] = (tensor_kind){.name = name_id(s, extra[i]), .op = mm, .gemm = i < 2,
                             .ndim = i < 2 ? 3 : 0, .shape = {8, 1024, i ? 50304 : 4096},
                             .mean0 = i == 2 ? 3.2 : 0.0, .std0 = 1.0};
    return n;
}

static void put_tensor(stream *s, const tensor_kind *k, int64_t step, int64_t seq, uint64_t *ts,
                       uint64_t id)
{
    tft_rec_tensor *t = stream_reserve(s, sizeof(*t));
    rec_init(&t->h, TFT_REC_TENSOR, sizeof(*t), step, seq, ts);
    t->id = id;
    t->name = k->name;
    t->dtype = TFT_BF16;
    t->device_kind = TFT_DEV_CUDA;
    t->mode = TFT_STATS_FULL;
    t->ndim = (uint8_t)k->ndim;
    uint64_t numel = 1;
    for (int d = 0; d < k->ndim; d++) {
        t->shape[d] = k->shape[d];
        numel *= (uint64_t)k->shape[d];
    }
    tft_stats *st = &t->stats;
    double drift = 1.0 + 1e-4 * (double)step;
    st->numel = numel;
    st->zero = rnd() % (numel / 1000 + 1);
    st->under_fp16 = rnd() % (numel / 100 + 1);
    st->over_fp16 = (rnd() % 1000) == 0;
    st->fingerprint = rnd();
    st->mean = k->mean0 * drift + 1e-4 * noise();
    st->std = k->std0 * drift * (1.0 + 1e-3 * noise());
    st->min = st->mean - 4.5 * st->std * (1.0 + 0.1 * noise());
    st->max = st->mean + 4.5 * st->std * (1.0 + 0.1 * noise());
    st->absmax = st->max > -st->min ? st->max : -st->min;
    st->l1 = (double)numel * st->std * 0.7978845608;
    st->l2 = st->std * sqrt((double)numel);
}

static void put_op(stream *s, const tensor_kind *k, int64_t step, int64_t seq, uint64_t *ts,
                   uint64_t in_id, uint64_t out_id)
{
    int n_attr = k->gemm ? 6 : 0;
    uint32_t len = (uint32_t)(sizeof(tft_rec_op) + 8u * (uint32_t)(2 + n_attr));
    tft_rec_op *o = stream_reserve(s, len);
    rec_init(&o->h, TFT_REC_OP, len, step, seq, ts);
    o->name = k->op;
    o->scope = k->scope;
    o->op_kind = k->gemm ? TFT_OP_GEMM : TFT_OP_RUNTIME;
    o->n_in = 1, o->n_out = 1, o->n_attr = (uint8_t)n_attr;
    o->ids[0] = in_id, o->ids[1] = out_id;
    if (n_attr) {
        int64_t a[6] = {8 * 1024, k->shape[2], 4096, 0, 1, TFT_BF16};
        memcpy(&o->ids[2], a, sizeof(a));
    }
}

static void generate(stream *s, size_t target)
{
    tensor_kind kinds[256];
    int nk = make_kinds(s, kinds, 256);
    uint64_t coll_name = name_id(s, "ncclAllReduce");
    uint64_t site = name_id(s, "c10::CUDACachingAllocator");
    uint64_t ts = 1000000000, tensor_id = 1;
    int64_t seq = 0;
    for (int64_t step = 0; s->records < target; step++) {
        tft_rec_step *b = stream_reserve(s, sizeof(*b));
        rec_init(&b->h, TFT_REC_STEP, sizeof(*b), step, TFT_SEQ_NONE, &ts);
        b->phase = TFT_STEP_BEGIN;
        uint64_t prev = tensor_id;
        for (int i = 0; i < nk; i++, seq++) {
            uint64_t out = ++tensor_id;
            put_op(s, &kinds[i], step, seq, &ts, prev, out);
            put_tensor(s, &kinds[i], step, seq, &ts, out);
            prev = out;
            if (i % 25 == 0) { /* the caching allocator grows now and then */
                tft_rec_alloc *a = stream_reserve(s, sizeof(*a));
                rec_init(&a->h, TFT_REC_ALLOC, sizeof(*a), step, seq, &ts);
                a->ptr = 0x7f0000000000ull + (rnd() & 0xffffff000ull);
                a->bytes = 2u << 20;
                a->site = site;
                a->device_kind = TFT_DEV_CUDA;
                tft_rec_free *f = stream_reserve(s, sizeof(*f));
                rec_init(&f->h, TFT_REC_FREE, sizeof(*f), step, seq, &ts);
                f->ptr = a->ptr;
                f->bytes = a->bytes;
                f->device_kind = TFT_DEV_CUDA;
            }
        }
        tft_rec_collective *c = stream_reserve(s, sizeof(*c));
        rec_init(&c->h, TFT_REC_COLLECTIVE, sizeof(*c), step, seq++, &ts);
        c->h.flags = TFT_COLL_FLAG_EXIT;
        c->comm = 0x5eed, c->coll_seq = (uint64_t)step, c->count = 1u << 27;
        c->t_enter = ts - 3000000, c->t_exit = ts;
        c->result = tensor_id;
        c->name = coll_name;
        c->type = TFT_COLL_ALLREDUCE, c->dtype = TFT_BF16, c->redop = TFT_REDOP_SUM;
        c->root = -1, c->rank = 0, c->nranks = 8;
        tft_rec_step *e = stream_reserve(s, sizeof(*e));
        rec_init(&e->h, TFT_REC_STEP, sizeof(*e), step, TFT_SEQ_NONE, &ts);
        e->phase = TFT_STEP_END;
    }
}

/* ---- measurements -------------------------------------------------------------- */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what, int e)
{
    fprintf(stderr, "bench_format: %s: %s\n", what, strerror(e));
    exit(1);
}

static unsigned g_encoding; /* --encoding: the writer's chunk encoding (0 = its default) */

/* (a) Returns the file size. */
static uint64_t run_writer(const stream *s, const char *path, int level)
{
    tft_file_info info = {.rank = 0, .world_size = 8, .pid = (int32_t)getpid()};
    strcpy(info.host, "bench");
    tft_writer *w = tft_writer_open(path, &info,
                                    &TFT_WRITER_OPTS(.zstd_level = level, .sync = 0, .encoding = g_encoding));
    if (!w)
        die(path, errno);
    for (size_t i = 0; i < s->n_names; i++)
        tft_writer_string(w, s->names[i], strlen(s->names[i]));
    for (size_t pos = 0; pos < s->len;) {
        const tft_rec *r = (const tft_rec *)(s->buf + pos);
        int e = tft_writer_append(w, r);
        if (e)
            die("tft_writer_append", -e);
        pos += r->len;
    }
    tft_writer_stats ws = TFT_WRITER_STATS();
    tft_writer_get_stats(w, &ws);
    int e = tft_writer_close(w);
    if (e)
        die("tft_writer_close", -e);
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : ws.file_bytes;
}

/* Frames of the baseline: pieces cut at record boundaries, <= CHUNK_BYTES. */
typedef struct frames {
    char *buf;
    size_t cap, len;
    size_t *off, *size, n, cap_n;
} frames;

/* (b) Returns the compressed bytes. */
static size_t run_compress(const stream *s, ZSTD_CCtx *cctx, int level, frames *f)
{
    f->len = f->n = 0;
    for (size_t pos = 0; pos < s->len;) {
        size_t start = pos;
        while (pos < s->len) {
            uint32_t len = ((const tft_rec *)(s->buf + pos))->len;
            if (pos + len - start > CHUNK_BYTES)
                break;
            pos += len;
        }
        size_t bound = ZSTD_compressBound(pos - start);
        if (f->len + bound > f->cap || f->n == f->cap_n) {
            fprintf(stderr, "bench_format: baseline buffer too small\n");
            exit(1);
        }
        size_t c = ZSTD_compressCCtx(cctx, f->buf + f->len, bound, s->buf + start, pos - start, level);
        if (ZSTD_isError(c)) {
            fprintf(stderr, "bench_format: ZSTD_compressCCtx: %s\n", ZSTD_getErrorName(c));
            exit(1);
        }
        f->off[f->n] = f->len;
        f->size[f->n++] = c;
        f->len += c;
    }
    return f->len;
}

/* Touches a record the way a consumer would: reads its header fields. */
static inline uint64_t touch(const tft_rec *r)
{
    return r->len + r->ts + (uint64_t)r->step + r->kind;
}

/* (c) Returns the number of records; *sum gets the touched values. */
static size_t run_reader(const char *path, uint64_t *sum)
{
    tft_reader *r = tft_reader_open(path, NULL);
    if (!r)
        die(path, errno);
    const tft_rec *rec;
    size_t n = 0;
    uint64_t acc = 0;
    int e;
    while ((e = tft_reader_next(r, &rec)) == 1) {
        acc += touch(rec);
        n++;
    }
    if (e < 0)
        die("tft_reader_next", -e);
    tft_reader_close(r);
    *sum = acc;
    return n;
}

/* (d) Returns the number of records; *sum as in (c). */
static size_t run_decompress(const frames *f, ZSTD_DCtx *dctx, char *raw, uint64_t *sum)
{
    size_t n = 0;
    uint64_t acc = 0;
    for (size_t i = 0; i < f->n; i++) {
        size_t got = ZSTD_decompressDCtx(dctx, raw, CHUNK_BYTES, f->buf + f->off[i], f->size[i]);
        if (ZSTD_isError(got)) {
            fprintf(stderr, "bench_format: ZSTD_decompressDCtx: %s\n", ZSTD_getErrorName(got));
            exit(1);
        }
        for (size_t pos = 0; pos < got;) {
            const tft_rec *r = (const tft_rec *)(raw + pos);
            acc += touch(r);
            pos += r->len;
            n++;
        }
    }
    *sum = acc;
    return n;
}

static void row(const char *label, double secs, size_t records, size_t raw_bytes, double stored)
{
    printf("  %-26s %8.3f s %9.2f M rec/s %9.1f MB/s %9.1f B/rec\n", label, secs,
           (double)records / secs / 1e6, (double)raw_bytes / secs / 1e6, stored / (double)records);
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_format [--records N] [--reps N] [--dir DIR] [--level L] "
                    "[--only abcd] [--encoding both|columns|shuffle|none] [--dict]\n");
    exit(2);
}

typedef struct bench {
    size_t target;        /* records to generate */
    int reps, level;
    const char *dir;      /* where the rank file goes */
    bool run[4];          /* which of (a)..(d) to time */
    bool dict;            /* --dict: also (e), a trained dictionary */
    const char *encoding; /* --encoding's name */
    char path[4096];
    stream s;
    uint64_t want;        /* sum of touch() over all records */
    frames f;             /* the baseline's compressed pieces */
    char *raw;            /* one decompressed piece */
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
    double best[4];       /* best seconds of (a)..(d) */
    uint64_t file_bytes;
    size_t comp_bytes;
} bench;

static void parse_args(bench *b, int argc, char **argv)
{
    const char *only = "abcd";
    b->target = 1500000, b->reps = 5, b->level = 1;
    b->encoding = "both";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dict") == 0) {
            b->dict = true;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        if (strcmp(argv[i], "--records") == 0)
            b->target = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--reps") == 0)
            b->reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--dir") == 0)
            b->dir = argv[++i];
        else if (strcmp(argv[i], "--level") == 0)
            b->level = atoi(argv[++i]);
        else if (strcmp(argv[i], "--only") == 0)
            only = argv[++i];
        else if (strcmp(argv[i], "--encoding") == 0)
            b->encoding = argv[++i];
        else
            usage();
    }
    if (strcmp(b->encoding, "both") == 0)
        g_encoding = TFT_ENC_COLUMNS | TFT_ENC_SHUFFLE;
    else if (strcmp(b->encoding, "columns") == 0)
        g_encoding = TFT_ENC_COLUMNS;
    else if (strcmp(b->encoding, "shuffle") == 0)
        g_encoding = TFT_ENC_SHUFFLE;
    else if (strcmp(b->encoding, "none") == 0)
        g_encoding = TFT_ENC_NONE;
    else
        usage();
    if (!b->target || b->reps < 1 || b->level < 1 || b->level > 19)
        usage();
    for (int i = 0; i < 4; i++)
        b->run[i] = strchr(only, 'a' + i) != NULL;
    struct stat sb;
    if (!b->dir)
        b->dir = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(b->path, sizeof(b->path), "%s/bench_format.%d.tft", b->dir, (int)getpid());
}

/* Generates the stream and allocates the baseline's buffers. */
static void setup(bench *b)
{
    generate(&b->s, b->target);
    for (size_t pos = 0; pos < b->s.len; pos += ((const tft_rec *)(b->s.buf + pos))->len)
        b->want += touch((const tft_rec *)(b->s.buf + pos));
    frames *f = &b->f;
    f->cap = ZSTD_compressBound(b->s.len) + (b->s.len / CHUNK_BYTES + 2) * 1024;
    f->cap_n = b->s.len / (CHUNK_BYTES / 2) + 16;
    f->buf = malloc(f->cap);
    f->off = malloc(f->cap_n * sizeof(size_t));
    f->size = malloc(f->cap_n * sizeof(size_t));
    b->raw = malloc(CHUNK_BYTES);
    b->cctx = ZSTD_createCCtx();
    b->dctx = ZSTD_createDCtx();
    if (!f->buf || !f->off || !f->size || !b->raw || !b->cctx || !b->dctx)
        die("allocating buffers", ENOMEM);
    for (int i = 0; i < 4; i++)
        b->best[i] = 1e30;
}

/* Times (a)..(d) in turn, reps times; returns 1 when a reading differed. */
static int measure(bench *b)
{
    const stream *s = &b->s;
    int bad = 0;
    /* what the reading steps need when their writing step is not timed */
    if (!b->run[0])
        b->file_bytes = run_writer(s, b->path, b->level);
    if (!b->run[1])
        b->comp_bytes = run_compress(s, b->cctx, b->level, &b->f);
    for (int rep = 0; rep < b->reps; rep++) {
        double t[5];
        uint64_t sum_r = b->want, sum_d = b->want;
        size_t nr = s->records, nd = s->records;
        t[0] = now();
        if (b->run[0])
            b->file_bytes = run_writer(s, b->path, b->level);
        t[1] = now();
        if (b->run[1])
            b->comp_bytes = run_compress(s, b->cctx, b->level, &b->f);
        t[2] = now();
        if (b->run[2])
            nr = run_reader(b->path, &sum_r);
        t[3] = now();
        if (b->run[3])
            nd = run_decompress(&b->f, b->dctx, b->raw, &sum_d);
        t[4] = now();
        for (int i = 0; i < 4; i++)
            if (b->run[i] && t[i + 1] - t[i] < b->best[i])
                b->best[i] = t[i + 1] - t[i];
        if (nr != s->records || nd != s->records || sum_r != b->want || sum_d != b->want) {
            fprintf(stderr, "bench_format: read back %zu / %zu records of %zu, or other contents\n",
                    nr, nd, s->records);
            bad = 1;
        }
    }
    unlink(b->path);
    return bad;
}

static void report(const bench *b)
{
    static const char *const label[4] = {"(a) tft_writer", "(b) ZSTD_compressCCtx",
                                         "(c) tft_reader", "(d) ZSTD_decompressDCtx"};
    printf("  %-26s %10s %15s %14s %13s\n", "", "best", "records/s", "raw MB/s", "stored");
    for (int i = 0; i < 4; i++)
        if (b->run[i])
            row(label[i], b->best[i], b->s.records, b->s.len,
                (double)(i % 2 ? b->comp_bytes : b->file_bytes));
    if (b->run[0] && b->run[1])
        printf("  writer / zstd compress   = %.2f   (goal >= 0.80)\n", b->best[1] / b->best[0]);
    if (b->run[2] && b->run[3])
        printf("  reader / zstd decompress = %.2f   (goal >= 0.80)\n", b->best[3] / b->best[2]);
}

/* (e) A dictionary per trace: trained on the first four baseline pieces
 * (cut into 16 KiB samples), then every piece compressed with it. Prints
 * the bytes per record, the dictionary included. */
static void run_dict(bench *b)
{
    enum { DICT_BYTES = 64 * 1024, SAMPLE = 16 * 1024 };
    const stream *s = &b->s;
    size_t train = s->len < 4 * (size_t)CHUNK_BYTES ? s->len : 4 * (size_t)CHUNK_BYTES;
    size_t ns = train / SAMPLE;
    size_t *sizes = malloc((ns + 1) * sizeof(*sizes));
    char *dict = malloc(DICT_BYTES);
    char *out = malloc(ZSTD_compressBound(CHUNK_BYTES));
    if (!sizes || !dict || !out)
        die("allocating the dictionary", ENOMEM);
    for (size_t i = 0; i < ns; i++)
        sizes[i] = SAMPLE;
    double t0 = now();
    size_t dn = ZDICT_trainFromBuffer(dict, DICT_BYTES, s->buf, sizes, (unsigned)ns);
    double t1 = now();
    if (ZDICT_isError(dn)) {
        printf("  (e) dictionary: training failed (%s)\n", ZDICT_getErrorName(dn));
        goto out;
    }
    ZSTD_CDict *cd = ZSTD_createCDict(dict, dn, b->level);
    size_t total = dn;
    double t2 = now();
    for (size_t pos = 0; pos < s->len;) {
        size_t start = pos;
        while (pos < s->len && pos + ((const tft_rec *)(s->buf + pos))->len - start <= CHUNK_BYTES)
            pos += ((const tft_rec *)(s->buf + pos))->len;
        size_t c = ZSTD_compress_usingCDict(b->cctx, out, ZSTD_compressBound(CHUNK_BYTES),
                                            s->buf + start, pos - start, cd);
        if (ZSTD_isError(c))
            die("ZSTD_compress_usingCDict", EIO);
        total += c;
    }
    double t3 = now();
    ZSTD_freeCDict(cd);
    printf("  (e) zstd + %zu B dictionary  %8.3f s %9.1f MB/s %9.1f B/rec (training %.2f s)\n", dn,
           t3 - t2, (double)s->len / (t3 - t2) / 1e6, (double)total / (double)s->records, t1 - t0);
out:
    free(sizes);
    free(dict);
    free(out);
}

/* The BENCH-RESULT lines of the figures (a)..(d) measured. */
static void bench_results(const bench *b)
{
    if (b->run[0]) {
        double bpr = (double)b->file_bytes / (double)b->s.records;
        printf("BENCH-RESULT {\"id\":\"format.bytes_per_tensor_record\",\"what\":\"bytes on disk per "
               "record, FULL statistics stream (tensor + op records), encoding %s\",\"unit\":\"B\","
               "\"figure\":%.1f,\"baseline\":32,\"baseline_what\":\"goal: 32 B per record\","
               "\"metric\":\"ratio\",\"value\":%.3f,\"goal_op\":\"<=\",\"goal\":1.0}\n",
               b->encoding, bpr, bpr / 32.0);
    }
    if (b->run[0] && b->run[1])
        printf("BENCH-RESULT {\"id\":\"format.writer_vs_zstd\",\"what\":\"tft_writer, encoding %s\","
               "\"unit\":\"MB/s\",\"figure\":%.0f,\"baseline\":%.0f,\"baseline_what\":"
               "\"ZSTD_compressCCtx of the same bytes\",\"metric\":\"ratio\",\"value\":%.3f,"
               "\"goal_op\":\">=\",\"goal\":0.8}\n",
               b->encoding, (double)b->s.len / b->best[0] / 1e6, (double)b->s.len / b->best[1] / 1e6,
               b->best[1] / b->best[0]);
    if (b->run[2] && b->run[3])
        printf("BENCH-RESULT {\"id\":\"format.reader_vs_zstd\",\"what\":\"tft_reader, every record, "
               "encoding %s\",\"unit\":\"MB/s\",\"figure\":%.0f,\"baseline\":%.0f,"
               "\"baseline_what\":\"ZSTD_decompressDCtx of the same bytes, records walked\","
               "\"metric\":\"ratio\",\"value\":%.3f,\"goal_op\":\">=\",\"goal\":0.8}\n",
               b->encoding, (double)b->s.len / b->best[2] / 1e6, (double)b->s.len / b->best[3] / 1e6,
               b->best[3] / b->best[2]);
}

static void teardown(bench *b)
{
    ZSTD_freeCCtx(b->cctx);
    ZSTD_freeDCtx(b->dctx);
    free(b->raw);
    free(b->f.buf);
    free(b->f.off);
    free(b->f.size);
    for (size_t i = 0; i < b->s.n_names; i++)
        free((char *)b->s.names[i]);
    free(b->s.names);
    free(b->s.buf);
}

int main(int argc, char **argv)
{
    static bench b;
    parse_args(&b, argc, argv);
    setup(&b);
    printf("bench_format: %zu records, %.1f MB raw (%.1f B/record), %zu strings, zstd level %d, "
           "%u KiB chunks, encoding %s, file in %s, best of %d\n",
           b.s.records, (double)b.s.len / 1e6, (double)b.s.len / (double)b.s.records,
           b.s.n_names, b.level, CHUNK_BYTES >> 10, b.encoding, b.dir, b.reps);
    int bad = measure(&b);
    report(&b);
    if (b.dict)
        run_dict(&b);
    bench_results(&b);
    teardown(&b);
    return bad;
}
