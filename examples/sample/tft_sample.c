/*
 * tft_sample — writes a realistic synthetic trace directory with the public
 * format API (tft_format.h; --crash also with the internal
 * tft_writer_abandon): what a data-parallel GPT-style training run
 * recorded by tftrace would leave, without running one.
 *
 *   tft_sample OUT.trace [--ranks N] [--steps S] [--layers L] [--crash]
 *              [--diverge R:S] [--desync R:S]
 *
 * OUT.trace/manifest.json and OUT.trace/rank-NNNNN.tft, one per rank. Each
 * rank records: process start, parameter init, then per step a step begin,
 * the forward ops and their output tensors under the canonical names of
 * runtime/README.md, "What is recorded" (tokens, emb, L0.qkv, L0.attn.probs, ..., loss), backward
 * gradients, one all-reduce (ENTER and EXIT collective records, the same
 * communicator on every rank, coll_seq 0, 1, 2, ...), grad_norm, the AdamW update, an allocation and its free, a GEMM
 * kernel and a step end; a checkpoint after the middle step; process exit.
 * Parameters, all-reduced gradients and grad_norm are bit-identical across
 * ranks (equal fingerprints); activations differ (each rank has its shard).
 *
 * --diverge R:S gives rank R's L0.qkv other statistics at step S (tfdiff's
 * first divergence and origin: the op L0/attn/matmul); --desync R:S gives
 * rank R's all-reduce of step S another count than its peers' (a desync).
 *
 * --crash simulates a run whose last rank dies in the middle of its last
 * step: that rank file is flushed and abandoned without an index and without
 * an exit record, the other ranks are killed (SIGTERM) while waiting in the
 * all-reduce (an ENTER without its EXIT), and manifest.json is left as written at start (not complete,
 * no exit statuses).
 *
 * Workload: a fixture generator for tests and docs; per rank and step about
 * 16 KiB of records, 4 KiB on disk; 64 KiB chunks, so longer runs span
 * several chunks.
 */
#include "tft_format.h"
#include "tft_writer_internal.h" /* tft_writer_abandon: the crashed rank */

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

enum { BATCH = 4, SEQLEN = 64, DMODEL = 256, HEADS = 4, VOCAB = 260 };

typedef struct sample_cfg {
    const char *out;     /* trace directory to create */
    int ranks, steps, layers;
    int crash;
    int diverge_rank, diverge_step; /* --diverge R:S: L0.qkv of rank R differs at step S (-1: none) */
    int desync_rank, desync_step;   /* --desync R:S: rank R's all-reduce count differs at step S */
    uint8_t run_id[16];
    uint64_t t0_real, t0_mono; /* clocks at "launch" */
    int argc;
    char **argv;
} sample_cfg;

/* One rank's generator state. */
typedef struct gen {
    tft_writer *w;
    const sample_cfg *cfg;
    int rank;
    int pid;
    int64_t step;        /* current step, TFT_STEP_NONE before the first */
    int64_t seq;         /* sequence number of the last op, TFT_SEQ_NONE before the first */
    uint64_t next_id;    /* next tensor id */
    uint64_t ts;         /* synthetic CLOCK_MONOTONIC ns */
    int err;             /* first writer error */
} gen;

static uint64_t now_ns(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t str_id(gen *g, const char *s)
{
    return s ? tft_writer_string(g->w, s, strlen(s)) : 0;
}

/* Fills the common header and appends; remembers the first error. */
static void put(gen *g, tft_rec *h, uint16_t kind, size_t len)
{
    h->kind = kind;
    h->len = (uint32_t)len;
    h->ts = g->ts;
    h->step = g->step;
    h->seq = g->seq;
    g->ts += 1500 + (uint64_t)(g->rank * 37 % 400);
    int e = tft_writer_append(g->w, h);
    if (e && !g->err)
        g->err = e;
}

/* ---- synthetic tensors ------------------------------------------------------ */

/* What a tensor looks like; the statistics are derived from it. */
typedef struct tspec {
    const char *name;
    int dtype;           /* enum tft_dtype */
    int mode;            /* enum tft_stats_mode */
    int ndim;
    int64_t shape[4];
    double mean, std;    /* distribution of the values */
    double lo, hi;       /* value range clamp (lo < hi), else unbounded */
    double zero_frac;    /* fraction of exact zeros */
    int shared;          /* identical on every rank (parameters, reduced grads) */
} tspec;

/* Uniform [0,1) from a 64-bit hash. */
static double unit(uint64_t h) { return (double)(h >> 11) * 0x1.0p-53; }

static void make_stats(const gen *g, const tspec *t, tft_stats *s)
{
    char key[160];
    snprintf(key, sizeof(key), "%s/%lld/%d", t->name, (long long)g->step, t->shared ? -1 : g->rank);
    if (g->rank == g->cfg->diverge_rank && g->step == g->cfg->diverge_step && !strcmp(t->name, "L0.qkv"))
        strcat(key, "/diverged"); /* other statistics and fingerprint: the op L0/attn/matmul diverges */
    uint64_t h = tft_string_id(key, strlen(key));
    uint64_t numel = 1;
    for (int i = 0; i < t->ndim; i++)
        numel *= (uint64_t)t->shape[i];
    double mean = t->mean + 0.05 * (fabs(t->mean) + t->std) * (unit(h) - 0.5);
    double std = t->std * (0.95 + 0.1 * unit(h * 0x9E3779B97F4A7C15ull));
    double mn = mean - 3.8 * std, mx = mean + 3.8 * std;
    if (t->lo < t->hi) {
        mn = mn < t->lo ? t->lo : mn;
        mx = mx > t->hi ? t->hi : mx;
    }
    *s = (tft_stats){.numel = numel, .min = mn, .max = mx};
    if (t->mode == TFT_STATS_SHAPE)
        return;
    s->zero = (uint64_t)((double)numel * t->zero_frac);
    s->fingerprint = tft_string_id(key, strlen(key)) ^ 0x5851F42D4C957F2Dull;
    if (t->mode == TFT_STATS_HEALTH)
        return;
    s->mean = mean;
    s->std = std;
    s->l1 = (double)numel * (fabs(mean) + 0.8 * std);
    s->l2 = sqrt((double)numel * (std * std + mean * mean));
    s->absmax = fabs(mn) > fabs(mx) ? fabs(mn) : fabs(mx);
    if (t->dtype == TFT_F32 && std > 0)
        s->under_fp16 = numel / 4096;
}

/* Appends a tensor record for the current op; returns its id. */
static uint64_t tensor(gen *g, const tspec *t)
{
    tft_rec_tensor r;
    memset(&r, 0, sizeof(r));
    r.id = g->next_id++;
    r.name = str_id(g, t->name);
    r.dtype = (uint8_t)t->dtype;
    r.device_kind = TFT_DEV_CPU;
    r.device = -1;
    r.mode = (uint8_t)t->mode;
    r.ndim = (uint8_t)t->ndim;
    memcpy(r.shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    make_stats(g, t, &r.stats);
    put(g, &r.h, TFT_REC_TENSOR, sizeof(r));
    return r.id;
}

/* Appends an op record as the next op of the rank (seq + 1). The ids are n_in
 * inputs, n_out outputs, n_attr attributes, in that order. */
static void op(gen *g, const char *name, const char *scope, int kind, const uint64_t *ids, int n_in,
               int n_out, int n_attr)
{
    uint64_t buf[(sizeof(tft_rec_op) + 8 * 64) / 8];
    tft_rec_op *o = (tft_rec_op *)buf;
    int n = n_in + n_out + n_attr;
    if (n > 64)
        n = n_attr = 64 - n_in - n_out;
    memset(o, 0, sizeof(*o));
    o->name = str_id(g, name);
    o->scope = str_id(g, scope);
    o->op_kind = (uint16_t)kind;
    o->n_in = (uint8_t)n_in;
    o->n_out = (uint8_t)n_out;
    o->n_attr = (uint8_t)n_attr;
    memcpy(o->ids, ids, sizeof(uint64_t) * (size_t)n);
    g->seq = g->seq == TFT_SEQ_NONE ? 0 : g->seq + 1;
    put(g, &o->h, TFT_REC_OP, sizeof(*o) + 8u * (size_t)n);
}

/* One op with inputs `in` producing tensor t; gemm ops get their M,N,K
 * attributes. Returns the output tensor id. */
static uint64_t fwd(gen *g, const char *name, const char *scope, int kind, const uint64_t *in, int n_in,
                    const tspec *t)
{
    uint64_t ids[16];
    int n = 0;
    for (int i = 0; i < n_in; i++)
        ids[n++] = in[i];
    uint64_t out = g->next_id;
    ids[n++] = out;
    if (kind == TFT_OP_GEMM) {
        int64_t m = t->shape[0] * (t->ndim > 2 ? t->shape[1] : 1), nn = t->shape[t->ndim - 1];
        int64_t attrs[6] = {m, nn, DMODEL, 0, 1, TFT_F32};
        memcpy(ids + n, attrs, sizeof(attrs));
    }
    op(g, name, scope, kind, ids, n_in, 1, kind == TFT_OP_GEMM ? 6 : 0);
    tensor(g, t);
    return out;
}

#define ACT(nm, c, m, s) (&(tspec){nm, TFT_F32, TFT_STATS_FULL, 3, {BATCH, SEQLEN, c}, m, s, 0, 0, 0, 0})

/* ---- the model ---------------------------------------------------------------- */

typedef struct params {
    uint64_t wte, wpe;   /* tensor ids of the embeddings */
} params;

/* One pre-LN transformer block; returns the id of L{i}.res2. `stop_after`
 * ends the block early (crash simulation): 0 = run it all. */
static uint64_t block(gen *g, int i, uint64_t x, int stop_after)
{
    char nm[64], sa[24], sm[24];
    snprintf(sa, sizeof(sa), "L%d/attn", i);
    snprintf(sm, sizeof(sm), "L%d/mlp", i);
#define NM(s) (snprintf(nm, sizeof(nm), "L%d." s, i), nm)
    uint64_t ln1 = fwd(g, "layernorm", sa, TFT_OP_RUNTIME, &x, 1, ACT(NM("ln1"), DMODEL, 0.0, 1.0));
    uint64_t qkv = fwd(g, "matmul", sa, TFT_OP_GEMM, &ln1, 1, ACT(NM("qkv"), 3 * DMODEL, 0.0, 0.6));
    if (stop_after == 2)
        return qkv;
    uint64_t mask = fwd(g, "causal_mask", sa, TFT_OP_RUNTIME, NULL, 0,
                        &(tspec){NM("attn.mask"), TFT_BOOL, TFT_STATS_SHAPE, 2, {SEQLEN, SEQLEN}, 0.5, 0.5, 0, 1, 0, 1});
    uint64_t in2[2] = {qkv, mask};
    uint64_t sc = fwd(g, "attn_scores", sa, TFT_OP_RUNTIME, in2, 2,
                      &(tspec){NM("attn.scores"), TFT_F32, TFT_STATS_FULL, 4, {BATCH, HEADS, SEQLEN, SEQLEN},
                               0.0, 1.0, -1e9, 30.0, 0, 0});
    uint64_t pr = fwd(g, "softmax", sa, TFT_OP_RUNTIME, &sc, 1,
                      &(tspec){NM("attn.probs"), TFT_F32, TFT_STATS_FULL, 4, {BATCH, HEADS, SEQLEN, SEQLEN},
                               1.0 / SEQLEN, 0.05, 0.0, 1.0, 0.49, 0});
    uint64_t in3[2] = {pr, qkv};
    uint64_t ao = fwd(g, "attn_apply", sa, TFT_OP_RUNTIME, in3, 2, ACT(NM("attn.out"), DMODEL, 0.0, 0.4));
    uint64_t pj = fwd(g, "matmul", sa, TFT_OP_GEMM, &ao, 1, ACT(NM("attn.proj"), DMODEL, 0.0, 0.3));
    uint64_t in4[2] = {x, pj};
    uint64_t r1 = fwd(g, "add", sa, TFT_OP_RUNTIME, in4, 2, ACT(NM("res1"), DMODEL, 0.0, 1.1));
    uint64_t ln2 = fwd(g, "layernorm", sm, TFT_OP_RUNTIME, &r1, 1, ACT(NM("ln2"), DMODEL, 0.0, 1.0));
    uint64_t fc = fwd(g, "matmul", sm, TFT_OP_GEMM, &ln2, 1, ACT(NM("fc"), 4 * DMODEL, 0.0, 0.8));
    uint64_t ge = fwd(g, "gelu", sm, TFT_OP_RUNTIME, &fc, 1,
                      &(tspec){NM("gelu"), TFT_F32, TFT_STATS_FULL, 3, {BATCH, SEQLEN, 4 * DMODEL},
                               0.25, 0.5, -0.17, 1e9, 0.0, 0});
    uint64_t fp = fwd(g, "matmul", sm, TFT_OP_GEMM, &ge, 1, ACT(NM("fcproj"), DMODEL, 0.0, 0.3));
    uint64_t in5[2] = {r1, fp};
    return fwd(g, "add", sm, TFT_OP_RUNTIME, in5, 2, ACT(NM("res2"), DMODEL, 0.0, 1.2));
#undef NM
}

/* Data loading, embeddings, the blocks, the head and the loss. Returns the
 * loss tensor id, or 0 when stopped early by `crash`. */
static uint64_t forward(gen *g, const params *p, int crash)
{
    tspec tok = {"tokens", TFT_I32, TFT_STATS_HEALTH, 2, {BATCH, SEQLEN}, 100.0, 60.0, 0, VOCAB - 1, 0.02, 0};
    uint64_t tokens = fwd(g, "load_batch", "data", TFT_OP_RUNTIME, NULL, 0, &tok);
    tok.name = "targets";
    tensor(g, &tok);
    uint64_t in[3] = {tokens, p->wte, p->wpe};
    uint64_t x = fwd(g, "embedding", "embed", TFT_OP_RUNTIME, in, 3, ACT("emb", DMODEL, 0.0, 0.03));
    for (int i = 0; i < g->cfg->layers; i++) {
        x = block(g, i, x, crash && i == g->cfg->layers / 2 ? 2 : 0);
        if (crash && i == g->cfg->layers / 2)
            return 0;
    }
    uint64_t lnf = fwd(g, "layernorm", "head", TFT_OP_RUNTIME, &x, 1, ACT("lnf", DMODEL, 0.0, 1.0));
    uint64_t lg = fwd(g, "matmul", "head", TFT_OP_GEMM, &lnf, 1, ACT("logits", VOCAB, 0.0, 2.0));
    double loss = 0.4 + 5.2 * exp(-0.12 * (double)g->step) + 0.01 * g->rank;
    uint64_t in2[2] = {lg, tokens};
    return fwd(g, "cross_entropy", "loss", TFT_OP_RUNTIME, in2, 2,
               &(tspec){"loss", TFT_F32, TFT_STATS_FULL, 0, {0}, loss, 0.0, 0, 0, 0, 0});
}

/* ---- backward, all-reduce, optimizer ------------------------------------------ */

/* One op with several outputs; out_ids receives their ids. */
static void op_outs(gen *g, const char *name, const char *scope, int kind, const uint64_t *in, int n_in,
                    const tspec *outs, int n_out, uint64_t *out_ids)
{
    uint64_t ids[32];
    int n = 0;
    for (int i = 0; i < n_in && n < 16; i++)
        ids[n++] = in[i];
    n_in = n;
    for (int i = 0; i < n_out && n < 32; i++)
        ids[n++] = out_ids[i] = g->next_id + (uint64_t)i;
    op(g, name, scope, kind, ids, n_in, n - n_in, 0);
    for (int i = 0; i < n - n_in; i++)
        tensor(g, &outs[i]);
}

/* One collective record: ENTER as the rank enters MPI_Allreduce (no exit
 * time, no result yet), EXIT when it returns. */
static void collective(gen *g, uint16_t phase, uint64_t t_enter, uint64_t result, uint64_t count)
{
    tft_rec_collective c;
    memset(&c, 0, sizeof(c));
    c.h.flags = phase;
    c.comm = 0xC0FFEE0000000001ull; /* MPI_COMM_WORLD's id, equal on every rank */
    c.coll_seq = (uint64_t)g->step;
    c.count = count;
    c.t_enter = t_enter;
    if (phase == TFT_COLL_FLAG_EXIT) {
        c.t_exit = c.t_enter + 350000u + (uint64_t)(g->cfg->ranks - 1 - g->rank) * 20000u;
        c.result = result;
        g->ts = c.t_exit;
    }
    c.name = str_id(g, "MPI_Allreduce");
    c.type = TFT_COLL_ALLREDUCE;
    c.dtype = TFT_F32;
    c.redop = TFT_REDOP_SUM;
    c.root = -1;
    c.rank = g->rank;
    c.nranks = g->cfg->ranks;
    put(g, &c.h, TFT_REC_COLLECTIVE, sizeof(c));
}

/* Gradients and their all-reduce. Returns the id of the reduced gradients
 * (grad.flat), or 0 when `hang`: the rank enters the all-reduce and a peer
 * never does, so it never returns. */
static uint64_t backward(gen *g, uint64_t loss, int hang)
{
    int L = g->cfg->layers, n = 0;
    tspec grads[2 + 2 * 16];
    static char names[2 * 16][32];
    grads[n++] = (tspec){"grad.wte", TFT_F32, TFT_STATS_FULL, 2, {VOCAB, DMODEL}, 0.0, 1e-3, 0, 0, 0.1, 0};
    grads[n++] = (tspec){"grad.wpe", TFT_F32, TFT_STATS_FULL, 2, {SEQLEN, DMODEL}, 0.0, 5e-4, 0, 0, 0, 0};
    for (int i = 0; i < L && i < 16; i++) {
        snprintf(names[2 * i], sizeof(names[0]), "grad.L%d.qkv.w", i);
        snprintf(names[2 * i + 1], sizeof(names[0]), "grad.L%d.fc.w", i);
        grads[n++] = (tspec){names[2 * i], TFT_F32, TFT_STATS_FULL, 2, {DMODEL, 3 * DMODEL}, 0.0, 2e-3, 0, 0, 0, 0};
        grads[n++] = (tspec){names[2 * i + 1], TFT_F32, TFT_STATS_FULL, 2, {DMODEL, 4 * DMODEL}, 0.0, 2e-3, 0, 0, 0, 0};
    }
    uint64_t ids[2 + 2 * 16 + 1];
    op_outs(g, "backward", "backward", TFT_OP_RUNTIME, &loss, 1, grads, n, ids);

    uint64_t count = (uint64_t)(VOCAB + SEQLEN) * DMODEL + (uint64_t)L * 7 * DMODEL * DMODEL;
    if (g->rank == g->cfg->desync_rank && g->step == g->cfg->desync_step)
        count += 1; /* a count mismatch across ranks: a desync */
    uint64_t flat = ids[n] = g->next_id;
    op(g, "allreduce", "ddp", TFT_OP_COLLECTIVE, ids, n, 1, 0);
    g->ts += (uint64_t)g->rank * 20000u; /* stragglers enter later */
    uint64_t t_enter = g->ts;
    collective(g, TFT_COLL_FLAG_ENTER, t_enter, 0, count);
    if (hang)
        return 0;
    collective(g, TFT_COLL_FLAG_EXIT, t_enter, flat, count);
    tensor(g, &(tspec){"grad.flat", TFT_F32, TFT_STATS_FULL, 1, {(int64_t)count}, 0.0, 1e-3, 0, 0, 0.02, 1});
    return flat;
}

/* Gradient clipping and the AdamW update of the embeddings. */
static void update(gen *g, params *p, uint64_t flat)
{
    double gn = 2.0 * exp(-0.05 * (double)g->step) + 0.3;
    fwd(g, "clip_grad_norm", "optim", TFT_OP_RUNTIME, &flat, 1,
        &(tspec){"grad_norm", TFT_F32, TFT_STATS_FULL, 0, {0}, gn, 0.0, 0, 0, 0, 1});
    double lr = 3e-4 * ((double)g->step + 1) / ((double)g->step + 10);
    tspec upd[3] = {
        {"lr", TFT_F32, TFT_STATS_FULL, 0, {0}, lr, 0.0, 0, 0, 0, 1},
        {"param.wte", TFT_F32, TFT_STATS_FULL, 2, {VOCAB, DMODEL}, 0.0, 0.02, 0, 0, 0, 1},
        {"param.wpe", TFT_F32, TFT_STATS_FULL, 2, {SEQLEN, DMODEL}, 0.0, 0.01, 0, 0, 0, 1},
    };
    uint64_t in[3] = {flat, p->wte, p->wpe}, out[3];
    op_outs(g, "adamw", "optim", TFT_OP_RUNTIME, in, 3, upd, 3, out);
    p->wte = out[1];
    p->wpe = out[2];
}

/* ---- other record kinds --------------------------------------------------------- */

static void step_mark(gen *g, int phase)
{
    tft_rec_step s;
    memset(&s, 0, sizeof(s));
    s.phase = (uint32_t)phase;
    put(g, &s.h, TFT_REC_STEP, sizeof(s));
}

static void alloc_free(gen *g, int is_alloc, uint64_t ptr, uint64_t bytes, const char *site)
{
    if (is_alloc) {
        tft_rec_alloc a;
        memset(&a, 0, sizeof(a));
        a.ptr = ptr;
        a.bytes = bytes;
        a.site = str_id(g, site);
        a.device = -1;
        put(g, &a.h, TFT_REC_ALLOC, sizeof(a));
    } else {
        tft_rec_free f;
        memset(&f, 0, sizeof(f));
        f.ptr = ptr;
        f.bytes = bytes;
        f.device = -1;
        put(g, &f.h, TFT_REC_FREE, sizeof(f));
    }
}

static void kernel(gen *g)
{
    tft_rec_kernel k;
    memset(&k, 0, sizeof(k));
    k.name = str_id(g, "sgemm_128x64_nn");
    k.start = g->ts;
    k.end = g->ts + 42000;
    k.stream = 0x7;
    k.corr = (uint64_t)g->step * 1000u + (uint64_t)g->seq;
    k.grid[0] = VOCAB / 64 + 1;
    k.grid[1] = BATCH * SEQLEN / 128;
    k.grid[2] = 1;
    k.block[0] = 256;
    k.block[1] = k.block[2] = 1;
    k.device = 0;
    k.kind = TFT_OP_KERNEL;
    put(g, &k.h, TFT_REC_KERNEL, sizeof(k));
}

static void checkpoint(gen *g)
{
    char path[64], recipe[96];
    snprintf(path, sizeof(path), "ckpt/step-%06lld.bin", (long long)g->step);
    snprintf(recipe, sizeof(recipe), "--resume %s", path);
    tft_rec_checkpoint c;
    memset(&c, 0, sizeof(c));
    c.path = str_id(g, path);
    c.recipe = str_id(g, recipe);
    c.action = TFT_CKPT_SAVE;
    put(g, &c.h, TFT_REC_CHECKPOINT, sizeof(c));
}

static void process(gen *g, int event, int code, int sig, uint64_t rss)
{
    tft_rec_process p;
    memset(&p, 0, sizeof(p));
    p.event = (uint32_t)event;
    p.pid = g->pid;
    p.exit_code = code;
    p.signal = sig;
    p.rss = rss;
    put(g, &p.h, TFT_REC_PROCESS, sizeof(p));
}

/* ---- one rank ----------------------------------------------------------------------- */

static uint64_t act_ptr(const gen *g) { return 0x7f3a00000000ull + ((uint64_t)g->rank << 28) + ((uint64_t)g->step << 20); }
static const uint64_t ACT_BYTES = (uint64_t)BATCH * SEQLEN * DMODEL * 4 * 24;

/* One training step. `crash`: stop in the middle (this rank dies) or, for
 * the others, hang in the all-reduce; returns 0 when the step completed. */
static int train_step(gen *g, params *p, int crash, int is_crash_rank)
{
    step_mark(g, TFT_STEP_BEGIN);
    alloc_free(g, 1, act_ptr(g), ACT_BYTES, "activations");
    uint64_t loss = forward(g, p, crash && is_crash_rank);
    if (!loss)
        return 1;
    kernel(g);
    uint64_t flat = backward(g, loss, crash); /* a peer died: stuck in the all-reduce */
    if (!flat)
        return 1;
    update(g, p, flat);
    alloc_free(g, 0, act_ptr(g), ACT_BYTES, NULL);
    if (g->step == g->cfg->steps / 2)
        checkpoint(g);
    process(g, TFT_PROC_RSS, 0, 0, 900ull << 20);
    step_mark(g, TFT_STEP_END);
    return 0;
}

static void rank_name(char *buf, size_t n, const sample_cfg *c, int rank)
{
    snprintf(buf, n, "%s/rank-%05d.tft", c->out, rank);
}

static tft_writer *rank_open(const sample_cfg *c, int rank, int pid)
{
    tft_file_info info = {.rank = rank, .world_size = c->ranks, .pid = pid,
                          .start_realtime_ns = c->t0_real, .start_monotonic_ns = c->t0_mono};
    memcpy(info.run_id, c->run_id, sizeof(info.run_id));
    if (gethostname(info.host, sizeof(info.host) - 1) < 0)
        snprintf(info.host, sizeof(info.host), "localhost");
    char path[4096];
    rank_name(path, sizeof(path), c, rank);
    tft_writer_opts wo = TFT_WRITER_OPTS(.zstd_level = 3, .chunk_bytes = 64 * 1024, .sync = 0);
    tft_writer *w = tft_writer_open(path, &info, &wo);
    if (!w)
        fprintf(stderr, "tft_sample: %s: cannot create: %s\n", path, strerror(errno));
    return w;
}

static const uint64_t PARAMS_PTR = 0x7f1000000000ull;
static const uint64_t PARAMS_BYTES = (uint64_t)(VOCAB + SEQLEN) * DMODEL * 4;

static void init_params(gen *g, params *p)
{
    process(g, TFT_PROC_START, 0, 0, 120ull << 20);
    alloc_free(g, 1, PARAMS_PTR + ((uint64_t)g->rank << 32), PARAMS_BYTES, "params");
    tspec init[2] = {
        {"wte", TFT_F32, TFT_STATS_FULL, 2, {VOCAB, DMODEL}, 0.0, 0.02, 0, 0, 0, 1},
        {"wpe", TFT_F32, TFT_STATS_FULL, 2, {SEQLEN, DMODEL}, 0.0, 0.01, 0, 0, 0, 1},
    };
    uint64_t out[2];
    op_outs(g, "init_params", "init", TFT_OP_RUNTIME, NULL, 0, init, 2, out);
    p->wte = out[0];
    p->wpe = out[1];
}

/* The crashed rank: what it flushed survives, the rest dies with it. */
static int crash_rank(gen *g)
{
    int e = tft_writer_flush(g->w);
    process(g, TFT_PROC_RSS, 0, 0, 950ull << 20); /* never reaches the file */
    tft_writer_abandon(g->w);
    return e ? e : g->err;
}

/* Writes rank `rank`'s file. Returns 0 or a negative errno. */
static int write_rank(const sample_cfg *c, int rank)
{
    gen g = {.cfg = c, .rank = rank, .pid = (int)getpid() + 1 + rank, .step = TFT_STEP_NONE,
             .seq = TFT_SEQ_NONE, .next_id = 1, .ts = c->t0_mono + 5000000u + (uint64_t)rank * 7919u};
    if (!(g.w = rank_open(c, rank, g.pid)))
        return -errno;
    params p;
    init_params(&g, &p);
    int is_crash_rank = c->crash && rank == c->ranks - 1;
    for (int s = 0; s < c->steps; s++) {
        g.step = s;
        if (train_step(&g, &p, c->crash && s == c->steps - 1, is_crash_rank))
            break;
    }
    g.step = TFT_STEP_NONE;
    if (is_crash_rank)
        return crash_rank(&g);
    if (c->crash) {
        process(&g, TFT_PROC_EXIT, 0, SIGTERM, 0); /* killed by the launcher */
    } else {
        alloc_free(&g, 0, PARAMS_PTR + ((uint64_t)rank << 32), PARAMS_BYTES, NULL);
        process(&g, TFT_PROC_EXIT, 0, 0, 0);
    }
    int e = tft_writer_close(g.w);
    return e ? e : g.err;
}

/* ---- manifest and main ------------------------------------------------------------- */

static int write_manifest(const sample_cfg *c, int final)
{
    static char options[] = "{\"stats\":\"full\",\"generator\":\"tft_sample\"}";
    tft_manifest m;
    memset(&m, 0, sizeof(m));
    for (int i = 0; i < 16; i++)
        snprintf(m.run_id + 2 * i, 3, "%02x", c->run_id[i]);
    if (gethostname(m.host, sizeof(m.host) - 1) < 0)
        snprintf(m.host, sizeof(m.host), "localhost");
    if (!getcwd(m.cwd, sizeof(m.cwd)))
        m.cwd[0] = '\0';
    m.argv = c->argv;
    m.argc = c->argc;
    m.start_ns = c->t0_real;
    m.end_ns = final ? now_ns(CLOCK_REALTIME) : 0;
    m.world_size = c->ranks;
    m.complete = final;
    m.exit_status = final ? 0 : -1;
    m.options_json = options;
    m.nranks = c->ranks;
    m.ranks = calloc((size_t)c->ranks, sizeof(*m.ranks));
    if (!m.ranks)
        return -ENOMEM;
    for (int r = 0; r < c->ranks; r++) {
        m.ranks[r] = (tft_manifest_rank){.rank = r, .pid = (int)getpid() + 1 + r, .exited = final};
        snprintf(m.ranks[r].file, sizeof(m.ranks[r].file), "rank-%05d.tft", r);
    }
    int e = tft_manifest_write(c->out, &m);
    free(m.ranks);
    return e;
}

static void usage(FILE *f)
{
    fputs("Usage: tft_sample OUT.trace [--ranks N] [--steps S] [--layers L] [--crash]\n"
          "                 [--diverge R:S] [--desync R:S]\n"
          "Writes a synthetic trace of a data-parallel GPT-style training run.\n"
          "  --ranks N    ranks, one rank file each (default 2, 1..1024)\n"
          "  --steps S    training steps (default 4, 1..100000)\n"
          "  --layers L   transformer blocks (default 2, 1..16)\n"
          "  --crash      the last rank dies mid-step: its file is left unclosed,\n"
          "               the other ranks are killed, the manifest stays unfinished\n"
          "  --diverge R:S  rank R's L0.qkv differs at step S (a divergence for tfdiff)\n"
          "  --desync R:S   rank R's all-reduce at step S has another count (a desync)\n"
          "Exit status: 0 written, 1 write error, 2 usage error.\n",
          f);
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* "R:S": a rank and a step. */
static int parse_pair(const char *s, int *rank, int *step)
{
    char buf[64];
    snprintf(buf, sizeof(buf), "%s", s);
    char *colon = strchr(buf, ':');
    if (!colon)
        return -1;
    *colon = '\0';
    return parse_int(buf, 0, 1023, rank) | parse_int(colon + 1, 0, 100000, step);
}

static int parse_args(int argc, char **argv, sample_cfg *c)
{
    static const struct option lo[] = {
        {"ranks", required_argument, NULL, 'r'}, {"steps", required_argument, NULL, 's'},
        {"layers", required_argument, NULL, 'l'}, {"crash", no_argument, NULL, 'c'},
        {"diverge", required_argument, NULL, 'd'}, {"desync", required_argument, NULL, 'y'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    static char *orig[256]; /* the command as typed: getopt_long permutes argv */
    int n = argc < 255 ? argc : 255;
    memcpy(orig, argv, sizeof(char *) * (size_t)n);
    *c = (sample_cfg){.ranks = 2, .steps = 4, .layers = 2, .diverge_rank = -1, .diverge_step = -1,
                      .desync_rank = -1, .desync_step = -1, .argc = n, .argv = orig};
    int ch, bad = 0;
    while ((ch = getopt_long(argc, argv, "r:s:l:ch", lo, NULL)) != -1) {
        switch (ch) {
        case 'r': bad |= parse_int(optarg, 1, 1024, &c->ranks); break;
        case 's': bad |= parse_int(optarg, 1, 100000, &c->steps); break;
        case 'l': bad |= parse_int(optarg, 1, 16, &c->layers); break;
        case 'c': c->crash = 1; break;
        case 'd': bad |= parse_pair(optarg, &c->diverge_rank, &c->diverge_step); break;
        case 'y': bad |= parse_pair(optarg, &c->desync_rank, &c->desync_step); break;
        case 'h': usage(stdout); exit(0);
        default: bad = 1; break;
        }
    }
    if (bad || optind != argc - 1) {
        usage(stderr);
        return -1;
    }
    c->out = argv[optind];
    return 0;
}

/* Creates the directory, or clears the files a previous run left in it. */
static int prepare_dir(const sample_cfg *c)
{
    if (mkdir(c->out, 0755) == 0)
        return 0;
    struct stat sb;
    if (errno != EEXIST || stat(c->out, &sb) < 0 || !S_ISDIR(sb.st_mode))
        return -(errno == EEXIST ? ENOTDIR : errno);
    char path[4096];
    snprintf(path, sizeof(path), "%s/manifest.json", c->out);
    unlink(path);
    for (int r = 0; r < 1024; r++) {
        rank_name(path, sizeof(path), c, r);
        unlink(path);
    }
    return 0;
}

int main(int argc, char **argv)
{
    sample_cfg c;
    if (parse_args(argc, argv, &c) < 0)
        return 2;
    if (getrandom(c.run_id, sizeof(c.run_id), 0) != (ssize_t)sizeof(c.run_id)) {
        uint64_t a = now_ns(CLOCK_REALTIME) ^ (uint64_t)getpid(), b = tft_string_id((char *)&a, sizeof(a));
        memcpy(c.run_id, &a, 8);
        memcpy(c.run_id + 8, &b, 8);
    }
    c.t0_real = now_ns(CLOCK_REALTIME);
    c.t0_mono = now_ns(CLOCK_MONOTONIC);
    int e = prepare_dir(&c);
    if (!e)
        e = write_manifest(&c, 0);
    for (int r = 0; r < c.ranks && !e; r++)
        e = write_rank(&c, r);
    if (!e && !c.crash)
        e = write_manifest(&c, 1);
    if (e) {
        fprintf(stderr, "tft_sample: %s: %s\n", c.out, strerror(-e));
        return 1;
    }
    return 0;
}
