/*
 * gen_corpus.c — writes the seed corpus of the fuzz targets.
 *
 *   fuzz_gen_corpus DIR     writes the seeds into DIR/reader/, DIR/manifest/,
 *                           DIR/check/, DIR/diff/ and DIR/capture/
 *
 * The committed seeds in tests/fuzz/corpus/ came from
 *   cmake --build BUILD --target fuzz_gen_corpus
 *   BUILD/tests/fuzz/fuzz_gen_corpus tests/fuzz/corpus
 * Rerun it when the format or fuzz_sample.h changes. Reader seeds are small
 * rank files from tft_writer (closed, unclosed, torn, damaged, header only)
 * plus inputs for fuzz_reader's mutation modes (see fuzz_reader.c); manifest
 * seeds are valid manifests from tft_manifest_to_json and invalid ones;
 * check, diff and capture seeds are programs of fuzz_trace.h (rank files
 * written through tft_writer) showing what each analysis looks for: a
 * count mismatch, a hang, a blocked receive, a leak, replicated parameters
 * that differ, a non-finite tensor, windows of far-apart collectives,
 * threads, communicators; two ranks that match, differ, gain a tensor;
 * captured gemms and tftrain ops with their inputs.
 * Files named regress-* are inputs that once crashed the library; they are
 * kept by hand (this program does not write them) and replayed by ctest.
 */
#include "tft_format.h"
#include "tft_writer_internal.h" /* tft_writer_abandon: torn files */
#include "fuzz_sample.h"
#include "fuzz_trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failed;

static void put_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "fuzz_gen_corpus: %s: cannot write: %s\n", path, strerror(errno));
        failed = 1;
    }
}

static char *get_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *p = NULL;
    *n = 0;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        p = len >= 0 ? malloc((size_t)len + 1) : NULL;
        if (p && (fseek(f, 0, SEEK_SET) != 0 || fread(p, 1, (size_t)len, f) != (size_t)len)) {
            free(p);
            p = NULL;
        } else if (p) {
            *n = (size_t)len;
        }
    }
    if (f)
        fclose(f);
    if (!p) {
        fprintf(stderr, "fuzz_gen_corpus: %s: cannot read\n", path);
        failed = 1;
    }
    return p;
}

static void rank_file(const char *dir, const char *name, int nsteps, int close_it)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int e = sample_write_rank_file(path, nsteps, close_it);
    if (e) {
        fprintf(stderr, "fuzz_gen_corpus: %s: %s\n", path, strerror(-e));
        failed = 1;
    }
}

/* A closed rank file, then rewritten as name with fn applied to its bytes. */
static void derived_file(const char *dir, const char *name, void (*fn)(char *p, size_t *n))
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    rank_file(dir, name, SAMPLE_STEPS, 1);
    size_t n;
    char *p = get_file(path, &n);
    if (!p)
        return;
    fn(p, &n);
    put_file(dir, name, p, n);
    free(p);
}

static void cut_in_last_chunk(char *p, size_t *n) { (void)p, *n = *n * 2 / 3; }
static void flip_middle(char *p, size_t *n) { p[*n / 2] ^= 0x10; }

static void mode_input(const char *dir, const char *name, const uint8_t *head, size_t nhead,
                       const sample_buf *raw)
{
    sample_buf b = {0};
    sample_buf_put(&b, head, nhead);
    if (raw)
        sample_buf_put(&b, raw->p, raw->len);
    put_file(dir, name, b.p, b.len);
    free(b.p);
}

static void reader_seeds(const char *dir)
{
    rank_file(dir, "rank-closed.tft", SAMPLE_STEPS, 1);
    rank_file(dir, "rank-one-chunk.tft", 1, 1);
    rank_file(dir, "rank-unclosed.tft", SAMPLE_STEPS, 0);
    char path[4200];
    tft_writer *w = NULL; /* a recorder that died at once: the header frame only */
    if (snprintf(path, sizeof(path), "%s/rank-header-only.tft", dir) >= (int)sizeof(path) ||
        !(w = tft_writer_open(path, NULL, NULL)))
        failed = 1;
    tft_writer_abandon(w);
    derived_file(dir, "rank-torn.tft", cut_in_last_chunk);
    derived_file(dir, "rank-damaged.tft", flip_middle);

    /* mutation modes of fuzz_reader: first byte & 3 */
    static const uint8_t xor[] = {0x00, 0x90, 0x00, 0x01, 0x00, 0x02, 0x80};
    static const uint8_t trunc[] = {0x01, 0x00, 0x04, 0x20, 0x01, 0x04};
    static const uint8_t reseal_index[] = {0x02, 0x01, 0x28, 0x00, 0x01};
    static const uint8_t reseal_recount[] = {0x02, 0x02, 0x04, 0x01, 0x08};
    mode_input(dir, "mode0-xor.bin", xor, sizeof(xor), NULL);
    mode_input(dir, "mode1-truncate.bin", trunc, sizeof(trunc), NULL);
    mode_input(dir, "mode2-reseal-index.bin", reseal_index, sizeof(reseal_index), NULL);
    mode_input(dir, "mode2-reseal-recount.bin", reseal_recount, sizeof(reseal_recount), NULL);
    /* flags bit 7: sealed in a 1.4 encoding (bits 5-6: columns, shuffle,
     * both), the patches on the encoded bytes */
    static const uint8_t enc_columns[] = {0x02, 0x83, 0x10, 0x00, 0x01, 0x00, 0x02, 0x80};
    static const uint8_t enc_shuffle[] = {0x02, 0xA3, 0x40, 0x01, 0x04};
    static const uint8_t enc_both[] = {0x02, 0xC3, 0x08, 0x00, 0x02, 0x30, 0x00, 0x10};
    static const uint8_t enc_clean[] = {0x02, 0xC3};
    mode_input(dir, "mode2-encoded-columns.bin", enc_columns, sizeof(enc_columns), NULL);
    mode_input(dir, "mode2-encoded-shuffle.bin", enc_shuffle, sizeof(enc_shuffle), NULL);
    mode_input(dir, "mode2-encoded-both.bin", enc_both, sizeof(enc_both), NULL);
    mode_input(dir, "mode2-encoded-clean.bin", enc_clean, sizeof(enc_clean), NULL);
    rank_file(dir, "rank-closed-1.4.tft", SAMPLE_STEPS, 1);
    /* mode 4, a program of writer calls: 0 string (len = 1 + 300*a + b),
     * 1 flush, 2 dropped, else a record (kind byte, then kind's fields) */
    static const uint8_t writer_calls[] = {
        0x04, 0x00,                         /* 64 KiB chunks */
        0x00, 0x00, 0x10, 0x00, 0x01, 0x20, /* two strings */
        0x03, 0x01, 0x00, 0x01, 0x01, 0x02, 0x01, 0x03, 0x00, 0x01, /* op: 2 in, 1 out, 3 attrs */
        0x03, 0x02, 0x00, 0x01, 0x01, 0x08, 0x01,                   /* tensor, ndim 8 */
        0x01,                                                       /* flush */
        0x03, 0x03, 0x00, 0x01, 0x01, 0x00, 0x03, 0x04, 0x00, 0x01, 0x01, /* alloc, free */
        0x03, 0x00, 0x00, 0x01, 0x00, 0x03, 0x08, 0x00, 0x00, 0x00,       /* step, process */
        0x03, 0x09, 0x00, 0x00, 0x00,                                     /* dropped record */
        0x02, 0x05,                                                 /* 5 dropped */
        0x03, 0x05, 0x00, 0x01, 0x01, 0x01, 0x03, 0x06, 0x00, 0x01, 0x01, 0x00, /* coll, kernel */
        0x03, 0x07, 0x00, 0x01, 0x01, 0x00, 0x01, 0x03, 0x0a, 0x02, 0x00, 0x01, 0x01, /* ckpt, unknown */
        0x03, 0x0b, 0x01, 0x00, 0x00, 0x00,                         /* a STRING: refused */
    };
    mode_input(dir, "mode4-writer-calls.bin", writer_calls, sizeof(writer_calls), NULL);
    sample_buf raw;
    if (sample_raw_records(&raw, 2) == 0) {
        static const uint8_t raw_index[] = {0x03, 0x33};  /* index, recount, 512 B pieces */
        static const uint8_t raw_nocount[] = {0x03, 0x04}; /* no index, counts off by one */
        mode_input(dir, "mode3-raw-index.bin", raw_index, sizeof(raw_index), &raw);
        mode_input(dir, "mode3-raw-wrong-count.bin", raw_nocount, sizeof(raw_nocount), &raw);
    } else {
        failed = 1;
    }
    free(raw.p);
}


/* ---- programs of fuzz_trace.h ---------------------------------------------- */

#define N(s) ft_ix(s)
#define OPC(cmd, var) ((cmd) | (var) << 4)

static void p_select(ft_prog *g, int f) { ft_bytes(g, 2, FT_SELECT, f); }
static void p_step(ft_prog *g, int end) { ft_bytes(g, 2, OPC(FT_STEP, end ? 1 : 0), 0); }
/* a collective: flags (1 enter, 2 exit, 3 both), comm index, coll_seq, count, type, rank, nranks, name */
static void p_coll(ft_prog *g, int flags, int comm, int q, int count, int type, int root, int rank, int nranks,
                   const char *name, int tag)
{
    ft_bytes(g, 14, OPC(FT_COLL, flags), comm, q, count, type, TFT_F32, type == TFT_COLL_ALLREDUCE ? 1 : 0, root,
             rank, nranks, 0, N(name), tag);
}
/* an op: name, kind, n_in, n_out, ids (n_in + n_out), attrs (n_attr) */
static void p_op(ft_prog *g, const char *name, int kind, int n_in, int n_out, const int *ids, int n_attr,
                 const int *attrs)
{
    ft_bytes(g, 1, OPC(FT_OP, n_attr == 12 ? 2 : 0));
    ft_bytes(g, 4, N(name), kind, n_in, n_out);
    if (n_attr != 12)
        ft_bytes(g, 1, n_attr);
    for (int k = 0; k < n_in + n_out; k++)
        ft_bytes(g, 1, ids[k] - 1);
    for (int k = 0; k < n_attr; k++)
        ft_bytes(g, 1, attrs[k]);
}
/* a tensor: id, name, dtype, mode, dims, fingerprint, nan */
static void p_tensor(ft_prog *g, int id, const char *name, int dtype, int mode, int ndim, const int *dims, int fp,
                     int nan)
{
    ft_bytes(g, 6, OPC(FT_TENSOR, nan ? 1 : 0), id - 1, N(name), dtype, mode, ndim);
    for (int d = 0; d < ndim; d++)
        ft_bytes(g, 1, dims[d]);
    if (nan)
        ft_bytes(g, 2, nan, 0);
    ft_bytes(g, 5, fp, 0xfe, 4, 1, 16);
}
/* a capture: tensor id, name, dtype, role, dims, part size index, seq back, data seed */
static void p_capture(ft_prog *g, int var, int id, const char *name, int dtype, int role, int ndim, const int *dims,
                      int part, int back, int seed)
{
    ft_bytes(g, 6, OPC(FT_CAPTURE, var), id - 1, N(name), dtype, ndim, role);
    for (int d = 0; d < ndim; d++)
        ft_bytes(g, 1, dims[d]);
    if (var & 8)
        ft_bytes(g, 1, 3);
    ft_bytes(g, 3, part, back, seed);
}
static void p_alloc(ft_prog *g, int ptr, int bytes, int shift, const char *site)
{
    ft_bytes(g, 5, FT_ALLOC, ptr, bytes, shift, N(site));
}

static void put_prog(const char *dir, const char *name, ft_prog *g)
{
    put_file(dir, name, g->p, g->len);
    free(g->p);
    *g = (ft_prog){0};
}

static void check_seeds(const char *dir)
{
    ft_prog g = {0};
    /* two ranks disagree on an all-reduce's count, then one hangs */
    ft_bytes(&g, 1, 1);
    for (int f = 0; f < 2; f++) {
        p_select(&g, f);
        p_step(&g, 0);
        p_coll(&g, 3, 0, 0, f ? 4 : 8, TFT_COLL_ALLREDUCE, -1, f, 2, "MPI_Allreduce", -1);
        p_coll(&g, f ? 1 : 3, 0, 1, 8, TFT_COLL_ALLREDUCE, -1, f, 2, "MPI_Allreduce", -1);
        p_step(&g, 1);
    }
    put_prog(dir, "desync-count-hang.bin", &g);
    /* three ranks: two enter a broadcast, the third never does */
    ft_bytes(&g, 1, 2);
    for (int f = 0; f < 2; f++) {
        p_select(&g, f);
        p_coll(&g, 1, 0, 0, 16, TFT_COLL_BCAST, 0, f, 3, "MPI_Bcast", -1);
    }
    p_select(&g, 2);
    ft_bytes(&g, 5, FT_PROCESS, 0, 0, 0, 1);
    put_prog(dir, "desync-missing.bin", &g);
    /* a receive never completed: the peer sent another tag and waits in an all-reduce */
    ft_bytes(&g, 1, 1);
    p_select(&g, 0);
    p_coll(&g, 1, 4, 0, 256, TFT_COLL_RECV, 1, 0, 2, "MPI_Recv", 1);
    p_select(&g, 1);
    p_coll(&g, 3, 4, 0, 256, TFT_COLL_SEND, 0, 1, 2, "MPI_Send", 7);
    p_coll(&g, 1, 0, 0, 1, TFT_COLL_ALLREDUCE, -1, 1, 2, "MPI_Allreduce", -1);
    put_prog(dir, "desync-p2p.bin", &g);
    /* communicators: listed members, an intercommunicator, far-apart sequence numbers repeated */
    ft_bytes(&g, 1, 3);
    for (int f = 0; f < 4; f++) {
        p_select(&g, f);
        ft_bytes(&g, 10, OPC(FT_COMM, 1), 1, N("MPI_Comm_split"), 0, f % 2, 2, 0, f & 2, (f & 2) + 1, 0);
        ft_bytes(&g, 10, OPC(FT_COMM, 2), 5, N("MPI_Comm_split"), 0, f, 4, 0, 4, 0, 1);
        ft_bytes(&g, 4, 2, 3, 0, 0);
        p_coll(&g, 1 + (f == 3 ? 0 : 2), 1, 0, 8, TFT_COLL_ALLGATHER, -1, f % 2, 2, "MPI_Allgather", -1);
        ft_bytes(&g, 15, OPC(FT_COLL, 5), 5, 1, 12, 8, TFT_COLL_ALLREDUCE, TFT_F32, 1, 0xff, f, 4, 0, N("MPI_Allreduce"),
                 0xff, 0);
        ft_bytes(&g, 2, OPC(FT_REPEAT, 2), 40);
    }
    put_prog(dir, "desync-comms-windows.bin", &g);
    /* replicated parameters that differ on one rank; a non-finite activation */
    ft_bytes(&g, 1, 1);
    for (int f = 0; f < 2; f++) {
        static const int dims[] = {4, 4};
        p_select(&g, f);
        p_step(&g, 0);
        p_tensor(&g, 1, "param.w", TFT_F32, TFT_STATS_FULL, 2, dims, 7, 0);
        p_tensor(&g, 2, "param.b", TFT_F32, TFT_STATS_HEALTH, 1, dims, f ? 9 : 8, 0);
        p_tensor(&g, 3, "L0.gelu", TFT_F32, TFT_STATS_FULL, 2, dims, 3, f);
        p_step(&g, 1);
    }
    put_prog(dir, "params-nonfinite.bin", &g);
    /* a leak: a site growing every step, freed elsewhere; a torn last file, a manifest */
    ft_bytes(&g, 1, FT_CFG_TORN | FT_CFG_MANIFEST | 1);
    for (int f = 0; f < 2; f++) {
        p_select(&g, f);
        for (int s = 0; s < 6; s++) {
            p_step(&g, 0);
            p_alloc(&g, s, 1, 20, "site_a");
            p_alloc(&g, 40, 8, 10, "site_b");
            ft_bytes(&g, 2, FT_FREE, 40);
            p_step(&g, 1);
        }
        ft_bytes(&g, 5, FT_PROCESS, 1, 0, f ? 9 : 0, 0);
    }
    put_prog(dir, "leak-torn-manifest.bin", &g);
    /* without steps: allocations of one site, repeated (the per-allocation rule) */
    ft_bytes(&g, 1, FT_CFG_BIG);
    p_alloc(&g, 0, 4, 20, "site_a");
    ft_bytes(&g, 7, FT_OP, N("emb"), 0, 0, 1, 0, 5);
    ft_bytes(&g, 2, OPC(FT_REPEAT, 1), 10);
    p_alloc(&g, 1, 4, 20, "site_a");
    ft_bytes(&g, 2, OPC(FT_REPEAT, 4), 60);
    put_prog(dir, "leak-stepless.bin", &g);
    /* threads and watermarks; every file claiming rank 0; a copy (refused) */
    ft_bytes(&g, 1, FT_CFG_SAME_RANK | 1);
    for (int f = 0; f < 2; f++) {
        static const int dims[] = {2};
        p_select(&g, f);
        p_step(&g, 0);
        ft_bytes(&g, 5, FT_THREAD, 0, 1, 1, N("main"));
        p_tensor(&g, 4, "L0.res1", TFT_F32, TFT_STATS_FULL, 1, dims, 1, 0);
        ft_bytes(&g, 5, FT_THREAD, 0, 2, 2, 255);
        p_tensor(&g, 5, "L0.ln1", TFT_F32, TFT_STATS_FULL, 1, dims, 2, 0);
        ft_bytes(&g, 2, FT_SYNC, 1);
        p_step(&g, 1);
    }
    put_prog(dir, "threads-same-rank.bin", &g);
    ft_bytes(&g, 1, FT_CFG_COPY | 1);
    ft_bytes(&g, 5, FT_PROCESS, 0, 0, 0, 1);
    put_prog(dir, "copy-refused.bin", &g);
}

/* One step of a small model: an op, its output tensor, on the current file. */
static void diff_step(ft_prog *g, int fp, int extra)
{
    static const int dims[] = {4, 8}, ids[] = {1, 2, 3};
    p_step(g, 0);
    p_op(g, "L0.qkv", TFT_OP_RUNTIME, 2, 1, ids, 0, NULL);
    p_tensor(g, 3, "L0.qkv", TFT_F32, TFT_STATS_FULL, 2, dims, fp, 0);
    p_op(g, "L0.gelu", TFT_OP_RUNTIME, 1, 1, (const int[]){3, 4}, 0, NULL);
    p_tensor(g, 4, "L0.gelu", TFT_F32, TFT_STATS_FULL, 2, dims, fp + 1, 0);
    if (extra)
        p_tensor(g, 5, "loss", TFT_F64, TFT_STATS_SHAPE, 0, dims, 0, 0);
    p_step(g, 1);
}

static void diff_seeds(const char *dir)
{
    ft_prog g = {0};
    ft_bytes(&g, 1, 1);
    for (int f = 0; f < 2; f++) {
        p_select(&g, f);
        for (int s = 0; s < 3; s++)
            diff_step(&g, 10 + s, 0);
    }
    ft_bytes(&g, 1, 0);
    put_prog(dir, "match.bin", &g);
    ft_bytes(&g, 1, 1);
    for (int f = 0; f < 2; f++) {
        p_select(&g, f);
        for (int s = 0; s < 3; s++)
            diff_step(&g, 10 + s + (f && s == 1), f && s == 2);
    }
    ft_bytes(&g, 1, 0x01);
    put_prog(dir, "value-extra.bin", &g);
    /* no steps: ops by sequence number; BAD leaks; captures for --tensors */
    ft_bytes(&g, 1, 1);
    for (int f = 0; f < 2; f++) {
        static const int dims[] = {2, 3};
        p_select(&g, f);
        p_op(&g, "cblas_sgemm", TFT_OP_GEMM, 0, 1, (const int[]){6}, 0, NULL);
        p_tensor(&g, 6, "cblas_sgemm", TFT_F32, TFT_STATS_HEALTH, 2, dims, 5 + f, 0);
        p_capture(&g, 0, 6, "cblas_sgemm", TFT_F32, TFT_CAPTURE_OUTPUT, 2, dims, 1, 0, 3 + f);
        ft_bytes(&g, 2, OPC(FT_REPEAT, 1), 5);
        for (int k = 0; k < 4 * f + 1; k++)
            p_alloc(&g, k, 2, 20, "site_b");
    }
    ft_bytes(&g, 1, 0x30);
    put_prog(dir, "stepless-leak-tensors.bin", &g);
    /* threads: two threads' tensors of a step interleaved differently */
    ft_bytes(&g, 1, 1);
    for (int f = 0; f < 2; f++) {
        static const int dims[] = {3};
        p_select(&g, f);
        p_step(&g, 0);
        for (int k = 0; k < 2; k++) {
            int th = f ? 1 - k : k;
            ft_bytes(&g, 5, FT_THREAD, 0, th, th, 255);
            p_tensor(&g, 7 + th, th ? "grad.w" : "param.w", TFT_F32, TFT_STATS_FULL, 1, dims, th, 0);
        }
        ft_bytes(&g, 2, FT_SYNC, 2);
        p_step(&g, 1);
    }
    ft_bytes(&g, 1, 0x08);
    put_prog(dir, "threads.bin", &g);
}

static void capture_seeds(const char *dir)
{
    ft_prog g = {0};
    /* cblas_sgemm 2x3 @ 3x2, beta 0: A, B captured as inputs, C as output */
    static const int gemm_attr[] = {2, 2, 3, 0, 0, 0, 0, 3, 2, 2, 0, 1};
    ft_bytes(&g, 1, 0);
    p_op(&g, "cblas_sgemm", TFT_OP_GEMM, 2, 1, (const int[]){1, 2, 3}, 12, gemm_attr);
    p_capture(&g, 0, 1, "cblas_sgemm.A", TFT_F32, TFT_CAPTURE_INPUT, 2, (const int[]){2, 3}, 1, 0, 1);
    p_capture(&g, 0, 2, "cblas_sgemm.A", TFT_F32, TFT_CAPTURE_INPUT, 2, (const int[]){3, 2}, 1, 0, 2);
    p_capture(&g, 0, 3, "cblas_sgemm", TFT_F32, TFT_CAPTURE_OUTPUT, 2, (const int[]){2, 2}, 1, 0, 3);
    put_prog(dir, "gemm.bin", &g);
    /* tftrain ops: gelu, a residual, a layer norm, softmax */
    ft_bytes(&g, 1, 0);
    p_op(&g, "L0.gelu", TFT_OP_RUNTIME, 1, 1, (const int[]){1, 2}, 0, NULL);
    p_capture(&g, 0, 1, "L0.qkv", TFT_F32, TFT_CAPTURE_INPUT, 2, (const int[]){2, 3}, 0, 0, 5);
    p_capture(&g, 1, 2, "L0.gelu", TFT_F32, TFT_CAPTURE_OUTPUT, 2, (const int[]){2, 3}, 0, 0, 6);
    p_op(&g, "L0.ln1", TFT_OP_RUNTIME, 3, 1, (const int[]){2, 4, 5, 6}, 0, NULL);
    p_capture(&g, 0, 2, "L0.gelu", TFT_F32, TFT_CAPTURE_INPUT, 2, (const int[]){2, 3}, 0, 0, 6);
    p_capture(&g, 0, 4, "wte", TFT_F32, TFT_CAPTURE_INPUT, 1, (const int[]){3}, 0, 0, 7);
    p_capture(&g, 0, 5, "wpe", TFT_F32, TFT_CAPTURE_INPUT, 1, (const int[]){3}, 0, 0, 8);
    p_capture(&g, 0, 6, "L0.ln1", TFT_F32, TFT_CAPTURE_OUTPUT, 2, (const int[]){2, 3}, 0, 0, 9);
    p_op(&g, "L0.attn.probs", TFT_OP_RUNTIME, 1, 1, (const int[]){7, 8}, 0, NULL);
    p_capture(&g, 0, 7, "L0.attn.scores", TFT_F32, TFT_CAPTURE_INPUT, 2, (const int[]){2, 2}, 0, 0, 1);
    p_capture(&g, 0, 8, "L0.attn.probs", TFT_F32, TFT_CAPTURE_OUTPUT, 2, (const int[]){2, 2}, 0, 0, 2);
    put_prog(dir, "runtime-ops.bin", &g);
    /* attention scores from a qkv [1, 2, 6] (2 heads), and the embedding */
    ft_bytes(&g, 1, 0);
    p_op(&g, "L0.attn.scores", TFT_OP_RUNTIME, 1, 1, (const int[]){1, 2}, 0, NULL);
    p_capture(&g, 0, 1, "L0.qkv", TFT_F32, TFT_CAPTURE_INPUT, 3, (const int[]){1, 2, 6}, 2, 0, 4);
    p_capture(&g, 0, 2, "L0.attn.scores", TFT_F32, TFT_CAPTURE_OUTPUT, 4, (const int[]){1, 2, 2, 2}, 2, 0, 4);
    p_op(&g, "emb", TFT_OP_RUNTIME, 3, 1, (const int[]){3, 4, 5, 6}, 0, NULL);
    p_capture(&g, 0, 3, "tokens", TFT_I32, TFT_CAPTURE_INPUT, 2, (const int[]){1, 2}, 0, 0, 0);
    p_capture(&g, 0, 4, "wte", TFT_F32, TFT_CAPTURE_INPUT, 2, (const int[]){4, 3}, 0, 0, 1);
    p_capture(&g, 0, 5, "wpe", TFT_F32, TFT_CAPTURE_INPUT, 2, (const int[]){2, 3}, 0, 0, 2);
    p_capture(&g, 0, 6, "emb", TFT_F32, TFT_CAPTURE_OUTPUT, 3, (const int[]){1, 2, 3}, 0, 0, 3);
    put_prog(dir, "attention-embedding.bin", &g);
    /* parts shuffled, one lost, one repeated, a wrong total; bf16 and bool */
    ft_bytes(&g, 1, 1);
    p_capture(&g, 1, 9, "L0.attn.out", TFT_BF16, TFT_CAPTURE_OUTPUT, 3, (const int[]){4, 8, 8}, 2, 0, 9);
    p_capture(&g, 2, 10, "L0.attn.out", TFT_F32, TFT_CAPTURE_OUTPUT, 2, (const int[]){8, 8}, 0, 0, 9);
    p_capture(&g, 4, 11, "logits", TFT_F16, TFT_CAPTURE_PRIOR, 1, (const int[]){8}, 0, 0, 9);
    p_select(&g, 1);
    p_capture(&g, 8, 12, "tokens", TFT_BOOL, TFT_CAPTURE_OUTPUT, 1, (const int[]){5}, 0, 0, 9);
    put_prog(dir, "parts-odd.bin", &g);
}

static void manifest_seeds(const char *dir)
{
    static char *cmd[] = {"torchrun", "--nproc-per-node=2", "train.py", "--lr=3e-4"};
    tft_manifest_rank ranks[2] = {
        {.rank = 0, .pid = 4242, .file = "rank-00000.tft", .exited = 1, .exit_code = 0},
        {.rank = 1, .pid = 4243, .file = "rank-00001.tft", .exited = 1, .signal = 9},
    };
    tft_manifest m = {
        .major = 1, .minor = 0, .run_id = "0123456789abcdef0123456789abcdef",
        .tool_version = "0.1.0", .host = "node07", .cwd = "/home/u/run",
        .argv = cmd, .argc = 4, .start_ns = 1700000000123456789ull,
        .end_ns = 1700000100123456789ull, .world_size = 2, .complete = 1, .exit_status = 137,
        .options_json = "{\"stats\":\"full\",\"every\":1,\"ring_mb\":64,\"ops\":[\"gemm\",\"nccl\"]}",
        .ranks = ranks, .nranks = 2,
    };
    char *j = tft_manifest_to_json(&m);
    if (!j) {
        failed = 1;
        return;
    }
    put_file(dir, "complete.json", j, strlen(j));
    put_file(dir, "truncated.json", j, strlen(j) / 2);
    free(j);

    ranks[0].exited = ranks[1].exited = 0;
    m.complete = 0, m.end_ns = 0, m.exit_status = -1, m.options_json = NULL;
    if (!(j = tft_manifest_to_json(&m))) {
        failed = 1;
        return;
    }
    put_file(dir, "running.json", j, strlen(j));
    free(j);

    static const struct { const char *name, *text; } fixed[] = {
        {"minimal.json", "{\"format\":\"tftrace\",\"format_version\":\"1.0\",\"ranks\":[]}"},
        {"newer-major.json", "{\"format\":\"tftrace\",\"format_version\":\"2.0\",\"ranks\":[]}"},
        {"missing-ranks.json", "{\"format\":\"tftrace\",\"format_version\":\"1.0\"}"},
        {"unsafe-file.json",
         "{\"format\":\"tftrace\",\"format_version\":\"1.0\",\"ranks\":[{\"file\":\"../x\"}]}"},
        {"wrong-types.json",
         "{\"format\":\"tftrace\",\"format_version\":\"1.x\",\"command\":\"x\",\"world_size\":\"2\","
         "\"start_ns\":12,\"ranks\":[1,{\"file\":\"a\",\"exit\":{\"code\":\"3\"}}]}"},
        {"escapes.json",
         "{\"format\":\"tftrace\",\"format_version\":\"1.0\",\"host\":\"h\\u00e9\\n\","
         "\"command\":[\"a\\u0000b\",\"\\\"q\\\"\"],\"ranks\":[{\"file\":\"r\\u0000/x\",\"rank\":-1}]}"},
        {"not-json.txt", "format=tftrace\n"},
        /* numbers outside int / uint64 (once undefined casts in get_int / get_ns) */
        {"world-size-1e10.json",
         "{\"format\":\"tftrace\",\"format_version\":\"1.0\",\"world_size\":1e10,\"ranks\":[]}"},
        {"start-ns-1e20.json",
         "{\"format\":\"tftrace\",\"format_version\":\"1.0\",\"start_ns\":1e20,\"ranks\":[]}"},
        /* a rank's MPI clock estimate, its anchor (1.6) out of range */
        {"clock.json",
         "{\"format\":\"tftrace\",\"format_version\":\"1.6\",\"ranks\":[{\"file\":\"rank-00001.tft\",\"rank\":1,"
         "\"clock\":{\"offset_ns\":\"-3000000000\",\"error_ns\":\"12\",\"ref_rank\":0,"
         "\"real_minus_mono_ns\":\"-99999999999999999999\"}}]}"},
    };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        put_file(dir, fixed[i].name, fixed[i].text, strlen(fixed[i].text));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_gen_corpus DIR  (writes DIR/{reader,manifest,check,diff,capture})\n");
        return 2;
    }
    static const char *const sub[] = {"reader", "manifest", "check", "diff", "capture"};
    static void (*const gen[])(const char *) = {reader_seeds, manifest_seeds, check_seeds, diff_seeds, capture_seeds};
    mkdir(argv[1], 0755);
    for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
        char d[4096];
        snprintf(d, sizeof(d), "%s/%s", argv[1], sub[i]);
        if (mkdir(d, 0755) < 0 && errno != EEXIST) {
            fprintf(stderr, "fuzz_gen_corpus: cannot create %s: %s\n", d, strerror(errno));
            return 1;
        }
        gen[i](d);
    }
    return failed;
}
