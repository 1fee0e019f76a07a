/*
 * fuzz_sample.h — the small, valid record stream that the fuzz targets
 * mutate and that gen_corpus writes into the seed corpus.
 *
 * One stream holds every record kind (and one unknown kind), strings
 * registered before and after their first reference, and one id that is
 * never registered. Records go to a sink: the tft_writer (a rank file, one
 * chunk per step through tft_writer_flush) or a plain buffer of raw records
 * with STRING definitions inline (the input of fuzz_reader's "sealed raw
 * chunk" mode).
 *
 * Header-only with static functions: included by fuzz_reader.c and
 * gen_corpus.c, nothing else.
 */
#ifndef TFT_FUZZ_SAMPLE_H
#define TFT_FUZZ_SAMPLE_H

#include "tft_format.h"
#include "tft_writer_internal.h" /* tft_writer_abandon: torn files */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLE_STEPS 4 /* steps (= chunks) of the sample rank file */

/* Where sample records go. string() returns the id of a text (0 on failure);
 * record() takes one record; step_done() ends a step (the writer flushes). */
typedef struct sample_sink {
    uint64_t (*string)(void *ctx, const char *s);
    int (*record)(void *ctx, const tft_rec *rec);
    int (*step_done)(void *ctx);
    void *ctx;
} sample_sink;

static inline void sample_hdr(tft_rec *h, uint16_t kind, uint32_t len, int64_t step, int64_t seq,
                       uint64_t ts)
{
    memset(h, 0, len);
    h->kind = kind;
    h->len = len;
    h->ts = ts;
    h->step = step;
    h->seq = seq;
}

/* One training step: step begin, a gemm op with its tensors, an allocation,
 * a collective, a kernel, an RSS sample, step end. */
static inline int sample_step(const sample_sink *k, int64_t step, int64_t *seq, uint64_t *ts)
{
    _Alignas(8) char buf[512];
    tft_rec *h = (tft_rec *)buf;
    int e = 0;

    tft_rec_step *st = (tft_rec_step *)buf;
    sample_hdr(h, TFT_REC_STEP, sizeof(*st), step, TFT_SEQ_NONE, (*ts)++);
    st->phase = TFT_STEP_BEGIN;
    e |= k->record(k->ctx, h);

    tft_rec_op *op = (tft_rec_op *)buf;
    uint32_t oplen = (uint32_t)(sizeof(*op) + 8u * (2 + 1 + 6));
    sample_hdr(h, TFT_REC_OP, oplen, step, *seq, (*ts)++);
    op->name = k->string(k->ctx, "aten::mm");
    op->scope = k->string(k->ctx, "L0/attn");
    op->op_kind = TFT_OP_GEMM;
    op->n_in = 2, op->n_out = 1, op->n_attr = 6;
    uint64_t tid = (uint64_t)step * 16;
    op->ids[0] = tid + 1, op->ids[1] = tid + 2, op->ids[2] = tid + 3;
    int64_t attrs[6] = {64, 32, 16, 0, 1, TFT_F32};
    memcpy(&op->ids[3], attrs, sizeof(attrs));
    e |= k->record(k->ctx, h);

    static const char *const tnames[] = {"L0.attn.q", "L0.attn.k", "L0.attn.probs", "loss"};
    for (int i = 0; i < 4; i++) {
        tft_rec_tensor *t = (tft_rec_tensor *)buf;
        sample_hdr(h, TFT_REC_TENSOR, sizeof(*t), step, *seq, (*ts)++);
        t->id = tid + 1 + (uint64_t)i;
        t->name = k->string(k->ctx, tnames[i]);
        t->dtype = i == 3 ? TFT_F64 : TFT_BF16;
        t->device_kind = TFT_DEV_CUDA;
        t->device = 0;
        t->mode = (uint8_t)(i == 3 ? TFT_STATS_SHAPE : i == 2 ? TFT_STATS_HEALTH : TFT_STATS_FULL);
        t->ndim = (uint8_t)(i == 3 ? 0 : i == 2 ? TFT_MAX_NDIM : 2);
        for (int d = 0; d < t->ndim; d++)
            t->shape[d] = 2 + d;
        t->stats.numel = 64 * 32;
        t->stats.zero = (uint64_t)i;
        t->stats.nan = i == 2 && step == 2; /* one NaN, as a divergence would show */
        t->stats.fingerprint = 0x9e3779b97f4a7c15ull * (uint64_t)(step * 4 + i + 1);
        t->stats.min = -1.5 - (double)step, t->stats.max = 2.0 + (double)step;
        t->stats.mean = 0.01 * (double)step, t->stats.std = 1.0;
        t->stats.l1 = 1000.0, t->stats.l2 = 45.25, t->stats.absmax = t->stats.max;
        e |= k->record(k->ctx, h);
    }

    /* the probs captured (format 1.1): one part of 40 bytes of 2 x 2 x 5 bf16 */
    tft_rec_capture *cp = (tft_rec_capture *)buf;
    sample_hdr(h, TFT_REC_CAPTURE, (uint32_t)(sizeof(*cp) + 40), step, *seq, (*ts)++);
    cp->tensor = tid + 3;
    cp->total = 40, cp->offset = 0, cp->n = 40;
    cp->role = TFT_CAPTURE_OUTPUT;
    cp->name = k->string(k->ctx, "L0.attn.probs");
    cp->dtype = TFT_BF16, cp->ndim = 3;
    cp->shape[0] = 2, cp->shape[1] = 2, cp->shape[2] = 5;
    for (int i = 0; i < 40; i++)
        cp->data[i] = (uint8_t)(i * 7 + step);
    e |= k->record(k->ctx, h);
    (*seq)++;

    tft_rec_alloc *al = (tft_rec_alloc *)buf;
    sample_hdr(h, TFT_REC_ALLOC, sizeof(*al), step, TFT_SEQ_NONE, (*ts)++);
    al->ptr = 0x7f0000001000ull + (uint64_t)step * 4096;
    al->bytes = 8192;
    al->site = k->string(k->ctx, "site:caching_allocator");
    al->device_kind = TFT_DEV_CUDA;
    e |= k->record(k->ctx, h);

    tft_rec_free *fr = (tft_rec_free *)buf;
    sample_hdr(h, TFT_REC_FREE, sizeof(*fr), step, TFT_SEQ_NONE, (*ts)++);
    fr->ptr = 0x7f0000001000ull + (uint64_t)step * 4096;
    fr->bytes = 8192;
    fr->device_kind = TFT_DEV_CUDA;
    e |= k->record(k->ctx, h);

    tft_rec_collective *c = (tft_rec_collective *)buf;
    sample_hdr(h, TFT_REC_COLLECTIVE, sizeof(*c), step, *seq, (*ts)++);
    c->comm = 0xc0ffee, c->coll_seq = (uint64_t)step, c->count = 1024;
    c->t_enter = *ts, c->t_exit = *ts + 5000;
    c->result = tid + 3;
    /* "ncclAllReduce" is registered only after this reference (step 0) */
    c->name = tft_string_id("ncclAllReduce", strlen("ncclAllReduce"));
    c->type = TFT_COLL_ALLREDUCE, c->dtype = TFT_BF16, c->redop = TFT_REDOP_SUM;
    c->root = -1, c->rank = 0, c->nranks = 2;
    e |= k->record(k->ctx, h);
    k->string(k->ctx, "ncclAllReduce");
    (*seq)++;

    tft_rec_kernel *kr = (tft_rec_kernel *)buf;
    sample_hdr(h, TFT_REC_KERNEL, sizeof(*kr), step, TFT_SEQ_NONE, (*ts)++);
    kr->name = tft_string_id("never_registered", 16);
    kr->start = *ts, kr->end = *ts + 100, kr->stream = 7, kr->corr = (uint64_t)step;
    kr->grid[0] = 128, kr->grid[1] = kr->grid[2] = 1;
    kr->block[0] = 256, kr->block[1] = kr->block[2] = 1;
    kr->kind = TFT_OP_KERNEL;
    e |= k->record(k->ctx, h);

    tft_rec_process *p = (tft_rec_process *)buf;
    sample_hdr(h, TFT_REC_PROCESS, sizeof(*p), step, TFT_SEQ_NONE, (*ts)++);
    p->event = TFT_PROC_RSS, p->pid = 4242, p->rss = 1u << 30;
    e |= k->record(k->ctx, h);

    sample_hdr(h, TFT_REC_STEP, sizeof(*st), step, TFT_SEQ_NONE, (*ts)++);
    st->phase = TFT_STEP_END;
    e |= k->record(k->ctx, h);
    return e ? -EINVAL : 0;
}

/* The whole sample: nsteps steps, then a checkpoint, a dropped record and a
 * record of an unknown kind (readers skip those by length). */
static inline int sample_stream(const sample_sink *k, int nsteps)
{
    _Alignas(8) char buf[256];
    tft_rec *h = (tft_rec *)buf;
    int64_t seq = 0;
    uint64_t ts = 1000000;
    int e = 0;
    for (int64_t s = 0; s < nsteps && !e; s++) {
        e = sample_step(k, s, &seq, &ts);
        if (!e && k->step_done)
            e = k->step_done(k->ctx);
    }
    tft_rec_checkpoint *ck = (tft_rec_checkpoint *)buf;
    sample_hdr(h, TFT_REC_CHECKPOINT, sizeof(*ck), nsteps - 1, TFT_SEQ_NONE, ts++);
    ck->path = k->string(k->ctx, "ckpt/step-3");
    ck->recipe = k->string(k->ctx, "--resume ckpt/step-3");
    ck->action = TFT_CKPT_SAVE;
    e |= k->record(k->ctx, h);

    tft_rec_dropped *d = (tft_rec_dropped *)buf;
    sample_hdr(h, TFT_REC_DROPPED, sizeof(*d), TFT_STEP_NONE, TFT_SEQ_NONE, ts++);
    d->count = 3, d->reason = TFT_DROP_RING_FULL;
    e |= k->record(k->ctx, h);

    sample_hdr(h, 200, 48, TFT_STEP_NONE, TFT_SEQ_NONE, ts++); /* unknown kind */
    e |= k->record(k->ctx, h);
    return e ? -EINVAL : 0;
}

/* ---- sink: the writer ------------------------------------------------------- */

static inline uint64_t sample_w_string(void *ctx, const char *s)
{
    return tft_writer_string(ctx, s, strlen(s));
}
static inline int sample_w_record(void *ctx, const tft_rec *rec) { return tft_writer_append(ctx, rec); }
static inline int sample_w_step(void *ctx) { return tft_writer_flush(ctx); }

/* Writes a sample rank file of nsteps steps (one chunk each). close_it = 0
 * abandons the writer after the last flush, as a crashed recorder would:
 * complete chunks, no index. Returns 0 or a negative errno. */
/* tft_writer_open that follows a link: the fuzzers write through
 * /proc/self/fd/N of a memfd, which tft_writer_open refuses (ELOOP). */
static inline tft_writer *sample_writer_open(const char *path, const tft_file_info *info,
                                             const tft_writer_opts *opts)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    return fd < 0 ? NULL : tft_writer_fdopen(fd, info, opts);
}

static inline int sample_write_rank_file(const char *path, int nsteps, int close_it)
{
    tft_file_info info = {.rank = 0, .world_size = 2, .pid = 4242,
                          .start_realtime_ns = 1700000000000000000ull,
                          .start_monotonic_ns = 1000000};
    memcpy(info.run_id, "0123456789abcdef", 16);
    strcpy(info.host, "fuzzhost");
    tft_writer *w = sample_writer_open(path, &info, &TFT_WRITER_OPTS(.sync = 0));
    if (!w)
        return -errno;
    tft_writer_add_dropped(w, 3);
    sample_sink k = {sample_w_string, sample_w_record, sample_w_step, w};
    int e = sample_stream(&k, nsteps);
    if (!close_it) {
        if (!e)
            e = tft_writer_flush(w);
        tft_writer_abandon(w);
        return e;
    }
    int ce = tft_writer_close(w);
    return e ? e : ce;
}

/* ---- sink: a buffer of raw records -------------------------------------------- */

typedef struct sample_buf {
    char *p;
    size_t len, cap;
    int err;
} sample_buf;

static inline void sample_buf_put(sample_buf *b, const void *src, size_t n)
{
    if (b->len + n > b->cap) {
        size_t ncap = b->cap ? b->cap * 2 : 4096;
        while (ncap < b->len + n)
            ncap *= 2;
        char *np = realloc(b->p, ncap);
        if (!np) {
            b->err = -ENOMEM;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

/* Emits a STRING definition inline on every registration. */
static inline uint64_t sample_b_string(void *ctx, const char *s)
{
    _Alignas(8) char buf[128];
    size_t n = strlen(s);
    uint32_t len = (uint32_t)((sizeof(tft_rec_string) + n + 7u) & ~(size_t)7u);
    if (len > sizeof(buf))
        return 0;
    tft_rec_string *r = (tft_rec_string *)buf;
    sample_hdr(&r->h, TFT_REC_STRING, len, TFT_STEP_NONE, TFT_SEQ_NONE, 0);
    r->id = tft_string_id(s, n);
    r->n = (uint32_t)n;
    memcpy(r->text, s, n);
    sample_buf_put(ctx, buf, len);
    return r->id;
}

static inline int sample_b_record(void *ctx, const tft_rec *rec)
{
    sample_buf_put(ctx, rec, rec->len);
    return 0;
}

/* Fills *b (caller frees b->p) with the raw records of an nsteps sample. */
static inline int sample_raw_records(sample_buf *b, int nsteps)
{
    memset(b, 0, sizeof(*b));
    sample_sink k = {sample_b_string, sample_b_record, NULL, b};
    int e = sample_stream(&k, nsteps);
    return e ? e : b->err;
}

#endif
