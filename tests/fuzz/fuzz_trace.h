/*
 * fuzz_trace.h — turns a fuzzer input into a trace directory of 1..4 rank
 * files written through tft_writer, so every chunk is checksummed and the
 * fuzzer's bytes reach the analyzers (fuzz_check, fuzz_diff, fuzz_capture)
 * instead of the reader's checksum checks (fuzz_reader has those).
 *
 * The input is a small program (the seeds in corpus/{check,diff,capture}
 * are written by gen_corpus.c with the encoder at the end of this file):
 *
 *   byte 0, the configuration:
 *     bits 0-1  rank files - 1 (1..4)
 *     bit  2    1 MiB chunks (default 64 KiB)
 *     bit  3    the last file is abandoned (torn: no index)
 *     bit  4    every file claims rank 0 (different pids: read as ranks 0..n-1)
 *     bit  5    file 1 is a copy of file 0 (the trace is refused)
 *     bit  6    a manifest.json listing the ranks with exit statuses
 *   then operations until the input ends, each an opcode byte (low nibble:
 *   the operation, high nibble: its variant bits) and its operand bytes;
 *   operand bytes past the end of the input read as 0:
 *     0 select the rank file (u8 % files)       1 flush (seal the chunk)
 *     2 add u8 dropped records                  3 STEP    4 OP
 *     5 TENSOR   6 ALLOC   7 FREE   8 COLLECTIVE   9 KERNEL / CHECKPOINT
 *     10 PROCESS   11 a whole CAPTURE (its parts)   12 THREAD   13 SYNC
 *     14 COMM   15 repeat the last record u8 times (variant: what to count up)
 *   Names are picked from a table of the names the analyses look for
 *   (MPI_*, param.*, tftrain's ops, cblas_sgemm, ...); a pick past the
 *   table is a string id no chunk defines. Tensor ids are 1..32, pointers
 *   0x1000..0x40000, communicators from a table (MPI_COMM_WORLD, a
 *   subcommunicator, their point-to-point spaces, small ids), so records
 *   refer to each other. Records the writer refuses (malformed) are skipped.
 *
 * Header-only with static functions: included by the fuzz targets and
 * gen_corpus.c.
 */
#ifndef TFT_FUZZ_TRACE_H
#define TFT_FUZZ_TRACE_H

#include "tft_format.h"
#include "tft_writer_internal.h" /* tft_writer_abandon: torn files */

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FT_MAX_FILES 4

enum {
    FT_CFG_FILES = 0x03, FT_CFG_BIG = 0x04, FT_CFG_TORN = 0x08, FT_CFG_SAME_RANK = 0x10,
    FT_CFG_COPY = 0x20, FT_CFG_MANIFEST = 0x40,
};
enum {
    FT_SELECT = 0, FT_FLUSH, FT_DROPPED, FT_STEP, FT_OP, FT_TENSOR, FT_ALLOC, FT_FREE, FT_COLL, FT_KERNEL,
    FT_PROCESS, FT_CAPTURE, FT_THREAD, FT_SYNC, FT_COMM, FT_REPEAT,
};

static const char *const ft_names[] = {
    "MPI_Allreduce", "MPI_Bcast", "MPI_Send", "MPI_Recv", "MPI_Irecv", "MPI_Allgather", "ncclAllReduce",
    "MPI_COMM_WORLD", "MPI_Comm_split", "param.w", "param.b", "L0.gelu", "L0.res1", "L0.ln1", "lnf", "L0.qkv",
    "logits", "L0.attn.scores", "L0.attn.probs", "L0.attn.out", "emb", "tokens", "wte", "wpe", "cblas_sgemm",
    "cblas_dgemm", "cblas_sgemm.A", "loss", "grad.w", "site_a", "site_b", "L0/attn",
};
#define FT_NNAMES (sizeof(ft_names) / sizeof(ft_names[0]))

typedef struct ft_file {
    tft_writer *w;
    int64_t step, seq;
    uint64_t ts;
    _Alignas(8) unsigned char last[TFT_REC_MAX_BYTES]; /* the last record appended */
    bool have_last;
} ft_file;

typedef struct ft_in {
    const uint8_t *p;
    size_t n, pos;
} ft_in;

static inline uint8_t ft_u8(ft_in *in) { return in->pos < in->n ? in->p[in->pos++] : 0; }
static inline bool ft_more(const ft_in *in) { return in->pos < in->n; }

static inline uint64_t ft_name(ft_in *in)
{
    uint8_t b = ft_u8(in);
    if (b == 255)
        return 0;
    if (b < FT_NNAMES)
        return tft_string_id(ft_names[b], strlen(ft_names[b]));
    return 0xdead000000000000ull | b; /* never defined: "#hex" */
}

/* Communicators, and their point-to-point spaces (FORMAT.md 5.7). */
static inline uint64_t ft_comm(uint8_t b)
{
    static const char *const c[] = {"MPI_COMM_WORLD", "MPI_Comm{0,1}#0"};
    switch (b % 8) {
    case 0: return tft_string_id(c[0], strlen(c[0]));
    case 1: return tft_string_id(c[1], strlen(c[1]));
    case 2:
    case 3: {
        char p[40];
        int n = snprintf(p, sizeof(p), "%016llx:p2p", (unsigned long long)ft_comm((uint8_t)(b % 8 - 2)));
        return tft_string_id(p, (size_t)n);
    }
    case 4: return tft_string_id("MPI_COMM_WORLD:p2p", 18);
    default: return (uint64_t)(b % 8) - 4;
    }
}

static inline void ft_hdr(ft_file *f, tft_rec *h, uint16_t kind, uint32_t len)
{
    memset(h, 0, len);
    h->kind = kind;
    h->len = len;
    h->ts = ++f->ts;
    h->step = f->step;
    h->seq = f->seq;
}

static inline int ft_put(ft_file *f, const tft_rec *h)
{
    int e = tft_writer_append(f->w, h);
    if (e == 0) {
        memcpy(f->last, h, h->len);
        f->have_last = true;
    }
    return e == -EINVAL ? 0 : e; /* a malformed record is refused: fine */
}

/* seq - back, TFT_SEQ_NONE staying none (no signed overflow) */
static inline int64_t ft_back(int64_t seq, int back)
{
    return seq == TFT_SEQ_NONE ? seq : (int64_t)((uint64_t)seq - (uint64_t)(int64_t)back);
}

static inline double ft_f64(uint8_t b)
{
    static const double v[] = {1.0, 0.0, 0.5, -2.0};
    return v[b & 3];
}

static inline int64_t ft_bits(double d)
{
    int64_t v;
    memcpy(&v, &d, 8);
    return v;
}

static inline int ft_op(ft_file *f, ft_in *in, unsigned var, unsigned char *buf)
{
    tft_rec_op *op = (tft_rec_op *)buf;
    uint64_t name = ft_name(in), scope = var & 1 ? ft_name(in) : 0;
    uint16_t kind = ft_u8(in) % 6;
    unsigned n_in = ft_u8(in) % 5, n_out = ft_u8(in) % 3, n_attr = var & 2 ? 12 : ft_u8(in) % 4;
    f->seq = f->seq == TFT_SEQ_NONE ? 0 : (int64_t)((uint64_t)f->seq + 1);
    ft_hdr(f, &op->h, TFT_REC_OP, (uint32_t)(sizeof(*op) + 8u * (n_in + n_out + n_attr)));
    op->name = name, op->scope = scope, op->op_kind = kind;
    op->n_in = (uint8_t)n_in, op->n_out = (uint8_t)n_out, op->n_attr = (uint8_t)n_attr;
    for (unsigned k = 0; k < n_in + n_out; k++)
        op->ids[k] = 1 + ft_u8(in) % 32;
    int64_t *a = (int64_t *)(op->ids + n_in + n_out);
    for (unsigned k = 0; k < n_attr; k++) {
        uint8_t b = ft_u8(in);
        if (n_attr == 12) /* a gemm: M N K transA transB dtype layout lda ldb ldc alpha beta */
            a[k] = k < 3 ? b % 9 : k < 5 || k == 6 ? b & 1 : k == 5 ? b & 1 : k < 10 ? b : ft_bits(ft_f64(b));
        else
            a[k] = (int8_t)b;
    }
    return ft_put(f, &op->h);
}

static inline int ft_tensor(ft_file *f, ft_in *in, unsigned var, unsigned char *buf)
{
    tft_rec_tensor *t = (tft_rec_tensor *)buf;
    ft_hdr(f, &t->h, TFT_REC_TENSOR, sizeof(*t));
    t->h.flags = var & 8 ? TFT_TENSOR_HAS_DATA : 0;
    t->id = 1 + ft_u8(in) % 32;
    t->name = ft_name(in);
    t->dtype = ft_u8(in) % 14;
    t->mode = ft_u8(in) % 4;
    t->ndim = ft_u8(in) % 10;
    t->stats.numel = 1;
    for (int d = 0; d < TFT_MAX_NDIM && d < t->ndim; d++) {
        uint8_t b = ft_u8(in);
        t->shape[d] = var & 4 ? (int64_t)1 << (b % 63) : b % 17;
        t->stats.numel *= (uint64_t)t->shape[d];
    }
    if (var & 1) {
        t->stats.nan = ft_u8(in);
        t->stats.pinf = ft_u8(in) & 1;
    }
    t->stats.fingerprint = ft_u8(in);
    t->stats.min = (int8_t)ft_u8(in);
    t->stats.max = t->stats.min + ft_u8(in);
    t->stats.mean = (int8_t)ft_u8(in) / 8.0;
    t->stats.std = ft_u8(in) / 16.0;
    t->stats.l1 = t->stats.l2 = t->stats.absmax = t->stats.max;
    if (var & 2)
        t->h.seq = ft_back(f->seq, (int8_t)ft_u8(in));
    return ft_put(f, &t->h);
}

static inline int ft_coll(ft_file *f, ft_in *in, unsigned var, unsigned char *buf)
{
    tft_rec_collective *c = (tft_rec_collective *)buf;
    ft_hdr(f, &c->h, TFT_REC_COLLECTIVE, var & 8 ? TFT_REC_COLLECTIVE_MIN_BYTES : sizeof(*c));
    c->h.flags = (uint16_t)(var & 3);
    c->comm = ft_comm(ft_u8(in));
    uint8_t q = ft_u8(in);
    c->coll_seq = var & 4 ? (uint64_t)q << (ft_u8(in) % 64) : q % 16;
    c->count = ft_u8(in);
    c->type = ft_u8(in) % 12;
    c->dtype = ft_u8(in) % 4;
    c->redop = ft_u8(in) % 7;
    c->root = (int8_t)ft_u8(in);
    c->rank = ft_u8(in) % 8;
    c->nranks = ft_u8(in) % 9;
    c->result = ft_u8(in) % 33;
    c->name = ft_name(in);
    c->t_enter = f->ts;
    c->t_exit = c->h.flags & TFT_COLL_FLAG_EXIT ? f->ts + 10 : 0;
    if (!(var & 8))
        c->tag = (int8_t)ft_u8(in);
    return ft_put(f, &c->h);
}

/* A whole capture: every part of one tensor's bytes (a pattern drawn from
 * a seed byte); variant 1 shuffled parts, 2 the middle part left out, 4 the
 * first part twice, 8 a wrong total. Operands: tensor, name, dtype, ndim,
 * role, the dims, [the extra total], part size, seq back, data seed. */
static inline int ft_capture(ft_file *f, ft_in *in, unsigned var, unsigned char *buf)
{
    tft_rec_capture *c = (tft_rec_capture *)buf;
    uint64_t tensor = 1 + ft_u8(in) % 32, name = ft_name(in);
    uint8_t dtype = ft_u8(in) % 13, ndim = ft_u8(in) % 5;
    uint32_t role = ft_u8(in) % 3;
    int64_t shape[TFT_MAX_NDIM] = {0};
    uint64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        shape[d] = ft_u8(in) % 9;
        numel *= (uint64_t)shape[d];
    }
    size_t esz = tft_dtype_size(dtype);
    uint64_t total = numel * (esz ? esz : 1) + (var & 8 ? ft_u8(in) : 0);
    size_t part = 8 + (size_t)(ft_u8(in) % 64) * 8;
    int64_t seq = ft_back(f->seq, ft_u8(in) % 2);
    uint8_t seed = ft_u8(in);
    size_t parts = total ? (size_t)((total + part - 1) / part) : 1;
    int e = 0;
    for (size_t k = 0; k < parts && !e; k++) {
        if ((var & 2) && parts > 2 && k == parts / 2)
            continue;
        for (int rep = 0; rep < ((var & 4) && k == 0 ? 2 : 1) && !e; rep++) {
            uint64_t off = (uint64_t)k * part, n = total - off < part ? total - off : part;
            ft_hdr(f, &c->h, TFT_REC_CAPTURE, (uint32_t)((sizeof(*c) + n + 7) & ~(uint64_t)7));
            c->h.seq = seq;
            c->h.flags = var & 1 ? TFT_CAPTURE_SHUFFLED : 0;
            c->tensor = tensor, c->total = total, c->offset = off, c->n = (uint32_t)n, c->role = role;
            c->name = name, c->dtype = dtype, c->ndim = ndim;
            memcpy(c->shape, shape, sizeof(c->shape));
            for (uint64_t i = 0; i < n; i++) {
                uint64_t x = off + i;
                c->data[i] = (uint8_t)(seed * 131u + x * 37u + (x >> 3) * seed);
            }
            e = ft_put(f, &c->h);
        }
    }
    return e;
}

static inline int ft_comm_rec(ft_file *f, ft_in *in, unsigned var, unsigned char *buf)
{
    tft_rec_comm *c = (tft_rec_comm *)buf;
    uint64_t comm = ft_comm(ft_u8(in)), name = ft_name(in), parent = ft_comm(ft_u8(in));
    int32_t rank = ft_u8(in) % 8, size = ft_u8(in) % 9;
    uint32_t order = ft_u8(in) % 2, n = var & 1 ? (uint32_t)size : ft_u8(in) % 5;
    ft_hdr(f, &c->h, TFT_REC_COMM, (uint32_t)((sizeof(*c) + 4u * n + 7) & ~7u));
    c->h.flags = var & 2 ? TFT_COMM_FLAG_INTER : 0;
    c->comm = comm, c->name = name, c->parent = parent;
    c->rank = rank, c->size = size, c->order = order, c->n_members = n;
    for (uint32_t k = 0; k < n; k++)
        c->members[k] = ft_u8(in) % 8;
    return ft_put(f, &c->h);
}

/* Repeats the file's last record n times, counting up (variant bits)
 * 1 its seq, 2 a collective's coll_seq, 4 an allocation's pointer, 8 its step. */
static inline int ft_repeat(ft_file *f, ft_in *in, unsigned var)
{
    unsigned n = ft_u8(in);
    if (!f->have_last)
        return 0;
    _Alignas(8) unsigned char rec[TFT_REC_MAX_BYTES];
    tft_rec *h = (tft_rec *)rec;
    memcpy(rec, f->last, ((tft_rec *)f->last)->len);
    int e = 0;
    for (unsigned k = 0; k < n && !e; k++) {
        h->ts = ++f->ts;
        if (var & 1)
            h->seq = h->seq == TFT_SEQ_NONE ? 0 : (int64_t)((uint64_t)h->seq + 1);
        if (var & 8)
            h->step = h->step == TFT_STEP_NONE ? 0 : (int64_t)((uint64_t)h->step + 1);
        if ((var & 2) && h->kind == TFT_REC_COLLECTIVE)
            ((tft_rec_collective *)h)->coll_seq++;
        if ((var & 4) && h->kind == TFT_REC_ALLOC)
            ((tft_rec_alloc *)h)->ptr += 0x1000;
        if ((var & 4) && h->kind == TFT_REC_FREE)
            ((tft_rec_free *)h)->ptr += 0x1000;
        e = tft_writer_append(f->w, h);
    }
    if (var & 1)
        f->seq = h->seq;
    if (var & 8)
        f->step = h->step;
    return e == -EINVAL ? 0 : e;
}

/* One operation of the program on file f. Returns 0 or a writer error. */
static inline int ft_one(ft_file *f, ft_in *in, uint8_t opb)
{
    _Alignas(8) unsigned char buf[TFT_REC_MAX_BYTES];
    tft_rec *h = (tft_rec *)buf;
    unsigned var = opb >> 4;
    switch (opb & 15) {
    case FT_FLUSH: return tft_writer_flush(f->w);
    case FT_DROPPED: tft_writer_add_dropped(f->w, ft_u8(in)); return 0;
    case FT_STEP: {
        tft_rec_step *s = (tft_rec_step *)buf;
        uint8_t b = ft_u8(in);
        if (!(var & 1))
            f->step = var & 2 ? (int8_t)b : f->step == TFT_STEP_NONE ? 0 : (int64_t)((uint64_t)f->step + 1);
        ft_hdr(f, h, TFT_REC_STEP, sizeof(*s));
        s->phase = var & 1;
        return ft_put(f, h);
    }
    case FT_OP: return ft_op(f, in, var, buf);
    case FT_TENSOR: return ft_tensor(f, in, var, buf);
    case FT_ALLOC: {
        tft_rec_alloc *a = (tft_rec_alloc *)buf;
        ft_hdr(f, h, TFT_REC_ALLOC, sizeof(*a));
        a->ptr = 0x1000ull * (1 + ft_u8(in) % 64);
        uint8_t b = ft_u8(in);
        a->bytes = (uint64_t)b << (ft_u8(in) % 40);
        a->site = ft_name(in);
        a->device_kind = var & 1;
        return ft_put(f, h);
    }
    case FT_FREE: {
        tft_rec_free *x = (tft_rec_free *)buf;
        ft_hdr(f, h, TFT_REC_FREE, sizeof(*x));
        x->ptr = 0x1000ull * (1 + ft_u8(in) % 64);
        x->device_kind = var & 1;
        if (var & 2)
            x->h.ts -= ft_u8(in); /* an older FREE: another thread's, drained late */
        return ft_put(f, h);
    }
    case FT_COLL: return ft_coll(f, in, var, buf);
    case FT_KERNEL:
        if (var & 1) {
            tft_rec_checkpoint *c = (tft_rec_checkpoint *)buf;
            ft_hdr(f, h, TFT_REC_CHECKPOINT, sizeof(*c));
            c->path = ft_name(in), c->recipe = ft_name(in), c->action = ft_u8(in) & 1;
        } else {
            tft_rec_kernel *k = (tft_rec_kernel *)buf;
            ft_hdr(f, h, TFT_REC_KERNEL, sizeof(*k));
            k->name = ft_name(in), k->start = f->ts, k->end = f->ts + ft_u8(in), k->kind = 3 + (var & 2) / 2;
        }
        return ft_put(f, h);
    case FT_PROCESS: {
        tft_rec_process *p = (tft_rec_process *)buf;
        ft_hdr(f, h, TFT_REC_PROCESS, sizeof(*p));
        p->event = ft_u8(in) % 4, p->exit_code = (int8_t)ft_u8(in), p->signal = ft_u8(in) % 16;
        p->rss = (uint64_t)ft_u8(in) << 20;
        return ft_put(f, h);
    }
    case FT_CAPTURE: return ft_capture(f, in, var, buf);
    case FT_THREAD: {
        tft_rec_thread *t = (tft_rec_thread *)buf;
        ft_hdr(f, h, TFT_REC_THREAD, sizeof(*t));
        t->event = ft_u8(in) & 1, t->tid = 100 + ft_u8(in) % 4, t->index = ft_u8(in) % 4, t->name = ft_name(in);
        return ft_put(f, h);
    }
    case FT_SYNC:
        if (var & 2) { /* a CLOCK record (1.6): a realtime step, an NTP state, any bounds */
            tft_rec_clock *c = (tft_rec_clock *)buf;
            ft_hdr(f, h, TFT_REC_CLOCK, sizeof(*c));
            c->realtime_ns = 1700000000000000000ull + f->ts + ((uint64_t)(int8_t)ft_u8(in) << (ft_u8(in) % 40));
            c->ntp = ft_u8(in) % 4, c->window_ns = ft_u8(in);
            c->maxerror_ns = (uint64_t)ft_u8(in) << (ft_u8(in) % 64), c->esterror_ns = ft_u8(in);
            h->step = TFT_STEP_NONE;
            return ft_put(f, h);
        }
        ft_hdr(f, h, TFT_REC_SYNC, sizeof(tft_rec_sync));
        h->step = (int64_t)((uint64_t)(f->step == TFT_STEP_NONE ? 0 : f->step) + (uint64_t)(int64_t)(int8_t)ft_u8(in));
        return ft_put(f, h);
    case FT_COMM: return ft_comm_rec(f, in, var, buf);
    case FT_REPEAT: return ft_repeat(f, in, var);
    default: return 0;
    }
}

static inline void ft_path(char *buf, size_t n, const char *dir, int i)
{
    snprintf(buf, n, "%s/rank-%05d.tft", dir, i);
}

/* Removes what ft_build may have written in dir. */
static inline void ft_clean(const char *dir)
{
    char p[4096];
    for (int i = 0; i < FT_MAX_FILES; i++) {
        ft_path(p, sizeof(p), dir, i);
        unlink(p);
    }
    snprintf(p, sizeof(p), "%s/manifest.json", dir);
    unlink(p);
}

/* Removes what ft_build may have written in dir, then dir (when empty). */
static inline void ft_remove(const char *dir)
{
    ft_clean(dir);
    rmdir(dir);
}

/* Writes the trace of program data[0, n) into dir (an existing, empty
 * directory). Returns the number of rank files, or -1 when a file could
 * not be written. */
static inline int ft_build(const char *dir, const uint8_t *data, size_t n)
{
    ft_in in = {data, n, 0};
    uint8_t cfg = ft_u8(&in);
    int nf = (cfg & FT_CFG_FILES) + 1, e = 0;
    static ft_file files[FT_MAX_FILES]; /* 64 KiB each: not on the stack */
    char path[4096];
    for (int i = 0; i < nf; i++) {
        ft_file *f = &files[i];
        memset(f, 0, offsetof(ft_file, last));
        f->have_last = false;
        f->step = TFT_STEP_NONE;
        f->seq = TFT_SEQ_NONE;
        f->ts = 1000;
        tft_file_info fi = {.rank = cfg & FT_CFG_SAME_RANK ? 0 : i, .world_size = nf, .pid = 100 + i,
                            .start_realtime_ns = 1700000000000000000ull, .start_monotonic_ns = 1000};
        memcpy(fi.run_id, "fuzz-run-id-0001", 16);
        snprintf(fi.host, sizeof(fi.host), "fuzzhost");
        tft_writer_opts wo = TFT_WRITER_OPTS(.chunk_bytes = cfg & FT_CFG_BIG ? 0 : 65536, .sync = 0);
        ft_path(path, sizeof(path), dir, i);
        if (!(f->w = tft_writer_open(path, &fi, &wo))) {
            for (int k = 0; k < i; k++)
                tft_writer_abandon(files[k].w);
            return -1;
        }
        for (size_t k = 0; k < FT_NNAMES; k++) /* definitions come with the chunks that use them */
            tft_writer_string(f->w, ft_names[k], strlen(ft_names[k]));
    }
    int cur = 0;
    while (ft_more(&in) && !e) {
        uint8_t op = ft_u8(&in);
        if ((op & 15) == FT_SELECT)
            cur = ft_u8(&in) % nf;
        else
            e = ft_one(&files[cur], &in, op);
    }
    for (int i = 0; i < nf; i++) {
        if ((cfg & FT_CFG_TORN) && i == nf - 1) {
            tft_writer_flush(files[i].w);
            tft_writer_abandon(files[i].w);
        } else if (tft_writer_close(files[i].w) && !e) {
            e = -EIO;
        }
        files[i].w = NULL;
    }
    if (e)
        return -1;
    if ((cfg & FT_CFG_COPY) && nf > 1) { /* file 1 := a copy of file 0 */
        char p0[4096];
        ft_path(p0, sizeof(p0), dir, 0);
        ft_path(path, sizeof(path), dir, 1);
        FILE *a = fopen(p0, "rb"), *b = fopen(path, "wb");
        char chunk[65536];
        size_t got;
        while (a && b && (got = fread(chunk, 1, sizeof(chunk), a)) > 0)
            fwrite(chunk, 1, got, b);
        if (a)
            fclose(a);
        if (b)
            fclose(b);
    }
    if (cfg & FT_CFG_MANIFEST) {
        tft_manifest_rank ranks[FT_MAX_FILES];
        for (int i = 0; i < nf; i++) {
            ranks[i] = (tft_manifest_rank){.rank = i, .pid = 100 + i, .exited = i != 1, .exit_code = i,
                                           .signal = i == 2 ? 9 : 0};
            snprintf(ranks[i].file, sizeof(ranks[i].file), "rank-%05d.tft", i);
        }
        static char *cmd[] = {"train", "--steps", "3"};
        tft_manifest m = {.major = 1, .minor = 2, .run_id = "667a7a2d72756e2d69642d3030303100",
                          .argv = cmd, .argc = 3, .world_size = nf + (cfg >> 7), .complete = 1,
                          .exit_status = 137, .ranks = ranks, .nranks = nf};
        snprintf(m.host, sizeof(m.host), "fuzzhost");
        tft_manifest_write(dir, &m);
    }
    return nf;
}

/* ---- the encoder gen_corpus.c writes seeds with ------------------------------ */

typedef struct ft_prog {
    uint8_t *p;
    size_t len, cap;
} ft_prog;

static inline void ft_emit(ft_prog *g, const uint8_t *b, size_t n)
{
    if (g->len + n > g->cap) {
        size_t ncap = g->cap ? g->cap * 2 : 256;
        while (ncap < g->len + n)
            ncap *= 2;
        uint8_t *np = realloc(g->p, ncap);
        if (!np)
            abort();
        g->p = np;
        g->cap = ncap;
    }
    memcpy(g->p + g->len, b, n);
    g->len += n;
}

/* ft_ops(g, n, b0, b1, ...): n bytes. */
static inline void ft_bytes(ft_prog *g, int n, ...)
{
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        uint8_t b = (uint8_t)va_arg(ap, int);
        ft_emit(g, &b, 1);
    }
    va_end(ap);
}

/* Index of a name in ft_names (for seeds), 254 (an undefined id) if absent. */
static inline int ft_ix(const char *name)
{
    for (size_t k = 0; k < FT_NNAMES; k++)
        if (!strcmp(ft_names[k], name))
            return (int)k;
    return 254;
}

#endif
