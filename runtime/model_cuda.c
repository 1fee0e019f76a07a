/*
 * model_cuda.c — the GPT of model.c on a CUDA device (model_cuda.h).
 *
 * Host C over the CUDA runtime API and the device ops of
 * kernels/ops/tft_ops_cuda.h; the code follows model.c line by line (same
 * activation layout, same op order, same names and inputs of recorded
 * tensors) so a reader can check one against the other.
 */
#include "model_cuda.h"
#include "model_acts.h"
#include "names.h"

#include "tft_types.h" /* TFT_F32, TFT_F16, TFT_BF16 */
#include "tft_cuda_err.h"
#include "tft_ops_cuda.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#define NSTAGE 4 /* pinned batch staging slots in flight */

/* Small device values, one allocation. */
typedef struct dscal {
    double loss_sum;       /* sum of weighted token losses */
    double loss_f64;       /* the loss as a double, for the all-reduce */
    float loss, norm, clip_factor;
    int found_inf;         /* the last gradients held an Inf or NaN */
    tft_loss_scale ls;
} dscal;

/* One pinned staging slot for a batch. */
typedef struct stage {
    int32_t *tokens, *targets;
    float *weight;
    uint8_t *pad;
    cudaEvent_t done;      /* the copies out of it finished */
    int used;
} stage;

struct gpt_cuda {
    gpt_config cfg;
    const gpt_param *pinfo; /* the host model's layout (borrowed) */
    int nparams;
    size_t num_params;
    int B, T, store, scaling;
    cudaStream_t stream;
    tft_cuda_ops *ops;
    float *pblock;          /* params, grads, m, v */
    float *params, *grads, *m, *v;
    float *ablock;          /* activations */
    size_t ablock_floats;
    gpt_acts a;            /* device buffers (model_acts.h); block and mask unused */
    uint8_t *bblock;        /* the batch: tokens, targets, weight, pad, mask */
    size_t bblock_bytes;
    int32_t *tokens, *targets;
    float *weight;
    uint8_t *pad, *mask;
    int have_targets, have_pad;
    void *sblock;           /* dscal, segment tables, per-parameter sums of squares */
    size_t sblock_bytes;
    dscal *s;
    uint64_t *seg_off, *seg_cnt;
    double *seg_sumsq;
    stage st[NSTAGE];
    int next_stage;
    char err[256];
};

/* A message into g->err, returning rc; a CUDA error as one (tft_cuda_err.h). */
#define failf(g, rc, ...) tft_errf((g)->err, sizeof((g)->err), (rc), __VA_ARGS__)
#define cuda_check(g, e, what) tft_cuda_err((g)->err, sizeof((g)->err), (e), (what))

/* An op's result: on failure the ops context's message becomes ours. */
static int op(gpt_cuda *g, int e)
{
    if (e)
        failf(g, e, "%s", tft_cuda_ops_error(g->ops));
    return e;
}

const char *gpt_cuda_error(const gpt_cuda *g)
{
    return g && g->err[0] ? g->err : "no error";
}

/* ---- layout ------------------------------------------------------------- */

/* The largest GEMM operand (elements) a bf16/fp16 run converts. */
static size_t gemm_ws_elems(const gpt_config *c, size_t B, size_t T)
{
    size_t C = (size_t)c->channels, V = (size_t)c->vocab, BT = B * T;
    size_t cand[] = {BT * 4 * C, BT * 3 * C, BT * V, B * (size_t)c->heads * T * T, V * C, 4 * C * C};
    size_t m = 0;
    for (size_t i = 0; i < sizeof(cand) / sizeof(cand[0]); i++)
        m = cand[i] > m ? cand[i] : m;
    return m;
}

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

static int alloc_batch(gpt_cuda *g)
{
    size_t bt = (size_t)g->B * g->T;
    size_t o_tok = 0, o_tgt = align256(bt * 4), o_w = o_tgt + align256(bt * 4), o_pad = o_w + align256(bt * 4);
    size_t o_mask = o_pad + align256(bt);
    g->bblock_bytes = o_mask + align256(bt * (size_t)g->T);
    int e = cuda_check(g, cudaMalloc((void **)&g->bblock, g->bblock_bytes), "cudaMalloc(batch)");
    if (e)
        return e;
    g->tokens = (int32_t *)(g->bblock + o_tok);
    g->targets = (int32_t *)(g->bblock + o_tgt);
    g->weight = (float *)(g->bblock + o_w);
    g->pad = g->bblock + o_pad;
    g->mask = g->bblock + o_mask;
    for (int i = 0; i < NSTAGE && !e; i++) {
        stage *s = &g->st[i];
        void *p;
        e = cuda_check(g, cudaHostAlloc(&p, bt * 13, cudaHostAllocDefault), "cudaHostAlloc(batch)");
        if (e)
            break;
        s->tokens = p;
        s->targets = s->tokens + bt;
        s->weight = (float *)(s->targets + bt);
        s->pad = (uint8_t *)(s->weight + bt);
        e = cuda_check(g, cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming), "cudaEventCreate");
    }
    return e;
}

static int alloc_scalars(gpt_cuda *g)
{
    size_t np = (size_t)g->nparams;
    size_t o_seg = align256(sizeof(dscal)), o_cnt = o_seg + align256(np * 8), o_sq = o_cnt + align256(np * 8);
    g->sblock_bytes = o_sq + align256(np * 8);
    int e = cuda_check(g, cudaMalloc(&g->sblock, g->sblock_bytes), "cudaMalloc(scalars)");
    if (e)
        return e;
    g->s = g->sblock;
    g->seg_off = (uint64_t *)((char *)g->sblock + o_seg);
    g->seg_cnt = (uint64_t *)((char *)g->sblock + o_cnt);
    g->seg_sumsq = (double *)((char *)g->sblock + o_sq);
    uint64_t *tab = malloc(np * 16);
    if (!tab)
        return failf(g, -ENOMEM, "out of memory");
    for (size_t i = 0; i < np; i++) {
        tab[i] = g->pinfo[i].offset;
        tab[np + i] = g->pinfo[i].count;
    }
    dscal s0;
    memset(&s0, 0, sizeof(s0));
    tft_loss_scale_init(&s0.ls, g->scaling ? TFT_LOSS_SCALE_INIT : 1.0f, TFT_LOSS_SCALE_INTERVAL);
    s0.clip_factor = 1.0f;
    e = cuda_check(g, cudaMemcpy(g->seg_off, tab, np * 8, cudaMemcpyHostToDevice), "cudaMemcpy(segments)");
    if (!e)
        e = cuda_check(g, cudaMemcpy(g->seg_cnt, tab + np, np * 8, cudaMemcpyHostToDevice), "cudaMemcpy(segments)");
    if (!e)
        e = cuda_check(g, cudaMemcpy(g->s, &s0, sizeof(s0), cudaMemcpyHostToDevice), "cudaMemcpy(scalars)");
    free(tab);
    return e;
}

int gpt_cuda_init(gpt_cuda **out, const gpt_model *host, const gpt_cuda_opts *o, char *err, size_t errlen)
{
    *out = NULL;
    gpt_cuda *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    g->cfg = host->cfg;
    g->pinfo = host->params_info;
    g->nparams = host->nparams;
    g->num_params = host->num_params;
    g->B = o->B;
    g->T = o->T;
    g->store = o->store_dtype;
    g->scaling = o->loss_scaling;
    g->stream = (cudaStream_t)o->stream;
    tft_cuda_ops_opts oo = {.sz = sizeof(oo), .stream = o->stream, .gemm_dtype = o->store_dtype,
                            .gemm_ws_elems = o->store_dtype == TFT_F32 ? 0
                                                                       : gemm_ws_elems(&g->cfg, (size_t)g->B,
                                                                                       (size_t)g->T)};
    int e = tft_cuda_ops_new(&g->ops, &oo, g->err, sizeof(g->err));
    if (!e)
        e = cuda_check(g, cudaMalloc((void **)&g->pblock, g->num_params * 4 * sizeof(float)), "cudaMalloc(params)");
    if (!e) {
        g->params = g->pblock;
        g->grads = g->params + g->num_params;
        g->m = g->grads + g->num_params;
        g->v = g->m + g->num_params;
        g->ablock_floats = gpt_acts_floats(&g->cfg, (size_t)g->B, (size_t)g->T);
        e = cuda_check(g, cudaMalloc((void **)&g->ablock, g->ablock_floats * sizeof(float)), "cudaMalloc(activations)");
    }
    if (!e) {
        gpt_acts_carve(&g->a, g->ablock, &g->cfg, (size_t)g->B, (size_t)g->T);
        e = alloc_batch(g);
    }
    if (!e)
        e = alloc_scalars(g);
    if (!e)
        e = cuda_check(g, cudaMemset(g->ablock, 0, g->ablock_floats * sizeof(float)), "cudaMemset");
    if (!e)
        e = cuda_check(g, cudaMemset(g->grads, 0, g->num_params * sizeof(float)), "cudaMemset");
    if (!e)
        e = gpt_cuda_upload(g, host->params, host->m, host->v);
    if (e) {
        if (err && errlen)
            snprintf(err, errlen, "%s", g->err);
        gpt_cuda_free(g);
        return e;
    }
    *out = g;
    return 0;
}

void gpt_cuda_free(gpt_cuda *g)
{
    if (!g)
        return;
    cudaStreamSynchronize(g->stream);
    tft_cuda_ops_free(g->ops);
    cudaFree(g->pblock);
    cudaFree(g->ablock);
    cudaFree(g->bblock);
    cudaFree(g->sblock);
    for (int i = 0; i < NSTAGE; i++) {
        if (g->st[i].tokens)
            cudaFreeHost(g->st[i].tokens);
        if (g->st[i].done)
            cudaEventDestroy(g->st[i].done);
    }
    (void)cudaGetLastError();
    free(g);
}

int gpt_cuda_allocs(const gpt_cuda *g, const void **ptr, size_t *bytes, const char **site, int max)
{
    const void *p[4] = {g->pblock, g->ablock, g->bblock, g->sblock};
    size_t b[4] = {g->num_params * 4 * sizeof(float), g->ablock_floats * sizeof(float), g->bblock_bytes,
                   g->sblock_bytes};
    const char *s[4] = {"tftrain:cuda:params+grads+adam", "tftrain:cuda:activations", "tftrain:cuda:batch",
                        "tftrain:cuda:scalars"};
    int n = 0;
    for (int i = 0; i < 4 && n < max; i++, n++) {
        ptr[n] = p[i];
        bytes[n] = b[i];
        site[n] = s[i];
    }
    return n;
}

/* ---- transfers ------------------------------------------------------------ */

static int copy_block(gpt_cuda *g, void *dst, const void *src, size_t n, enum cudaMemcpyKind k)
{
    if (!dst || !src)
        return 0;
    return cuda_check(g, cudaMemcpyAsync(dst, src, n * sizeof(float), k, g->stream), "cudaMemcpyAsync");
}

int gpt_cuda_upload(gpt_cuda *g, const float *params, const float *m, const float *v)
{
    int e = copy_block(g, g->params, params, g->num_params, cudaMemcpyHostToDevice);
    if (!e)
        e = copy_block(g, g->m, m, g->num_params, cudaMemcpyHostToDevice);
    if (!e)
        e = copy_block(g, g->v, v, g->num_params, cudaMemcpyHostToDevice);
    return e ? e : cuda_check(g, cudaStreamSynchronize(g->stream), "cudaStreamSynchronize");
}

int gpt_cuda_download(gpt_cuda *g, float *params, float *m, float *v)
{
    int e = copy_block(g, params, g->params, g->num_params, cudaMemcpyDeviceToHost);
    if (!e)
        e = copy_block(g, m, g->m, g->num_params, cudaMemcpyDeviceToHost);
    if (!e)
        e = copy_block(g, v, g->v, g->num_params, cudaMemcpyDeviceToHost);
    return e ? e : cuda_check(g, cudaStreamSynchronize(g->stream), "cudaStreamSynchronize");
}

float *gpt_cuda_params(gpt_cuda *g) { return g->params; }
float *gpt_cuda_grads(gpt_cuda *g) { return g->grads; }
float *gpt_cuda_m(gpt_cuda *g) { return g->m; }
float *gpt_cuda_v(gpt_cuda *g) { return g->v; }
const float *gpt_cuda_loss_dev(const gpt_cuda *g) { return &g->s->loss; }
const float *gpt_cuda_norm_dev(const gpt_cuda *g) { return &g->s->norm; }
double *gpt_cuda_loss_f64_dev(gpt_cuda *g) { return &g->s->loss_f64; }

int gpt_cuda_set_batch(gpt_cuda *g, const int32_t *tokens, const int32_t *targets, const float *weight,
                       const uint8_t *pad)
{
    size_t bt = (size_t)g->B * g->T;
    stage *s = &g->st[g->next_stage];
    g->next_stage = (g->next_stage + 1) % NSTAGE;
    int e = s->used ? cuda_check(g, cudaEventSynchronize(s->done), "cudaEventSynchronize") : 0;
    if (e)
        return e;
    memcpy(s->tokens, tokens, bt * 4);
    e = cuda_check(g, cudaMemcpyAsync(g->tokens, s->tokens, bt * 4, cudaMemcpyHostToDevice, g->stream), "batch");
    g->have_targets = targets && weight;
    if (!e && g->have_targets) {
        memcpy(s->targets, targets, bt * 4);
        memcpy(s->weight, weight, bt * 4);
        e = cuda_check(g, cudaMemcpyAsync(g->targets, s->targets, bt * 4, cudaMemcpyHostToDevice, g->stream),
                       "batch");
        if (!e)
            e = cuda_check(g, cudaMemcpyAsync(g->weight, s->weight, bt * 4, cudaMemcpyHostToDevice, g->stream),
                           "batch");
    }
    g->have_pad = pad != NULL;
    if (!e && pad) {
        memcpy(s->pad, pad, bt);
        e = cuda_check(g, cudaMemcpyAsync(g->pad, s->pad, bt, cudaMemcpyHostToDevice, g->stream), "batch");
    }
    if (!e)
        e = cuda_check(g, cudaEventRecord(s->done, g->stream), "cudaEventRecord");
    s->used = 1;
    return e;
}

/* ---- forward -------------------------------------------------------------- */

/* Parameter k of layer l (or a global one by index) in a device block. */
static float *lp(const gpt_cuda *g, float *base, int l, int k)
{
    return base + g->pinfo[2 + l * GPT_NPARAM_PER_LAYER + k].offset;
}
static float *gp(const gpt_cuda *g, float *base, int idx) { return base + g->pinfo[idx].offset; }

typedef struct fwd_ctx {
    gpt_cuda_record_fn rec;
    void *ctx;
} fwd_ctx;

/* model.c's emit: round to the storage dtype, then report. */
static int emit(gpt_cuda *g, const fwd_ctx *f, const char *name, float *x, size_t n, int ndim,
                const int64_t *shape, const char *const *in, int nin)
{
    int e = op(g, opd_round_storage(g->ops, x, n, g->store));
    if (!e && f->rec)
        f->rec(f->ctx, name, x, ndim, shape, in, nin);
    return e;
}

static int layer_forward(gpt_cuda *g, const gpt_variant *var, const fwd_ctx *f, int l, const float *in)
{
    gpt_acts *a = &g->a;
    tft_cuda_ops *x = g->ops;
    int B = g->B, T = g->T, C = g->cfg.channels, NH = g->cfg.heads, N = B * T;
    size_t BTC = (size_t)N * C, att = (size_t)B * NH * T * T;
    int64_t s3[3] = {B, T, C}, s3q[3] = {B, T, 3 * C}, s3f[3] = {B, T, 4 * C}, s4[4] = {B, NH, T, T};
    gpt_layer_names ln;
    gpt_layer_names_init(&ln, l);
    gpt_layer_acts la = gpt_layer_acts_at(a, B, T, C, NH, l);
    float *ln1 = la.ln1, *qkv = la.qkv, *sc = la.scores, *pr = la.att, *atty = la.atty, *proj = la.attproj;
    float *res1 = la.res1, *ln2 = la.ln2, *fc = la.fc, *gl = la.gelu, *fcp = la.fcproj, *res2 = la.res2;
    float *P = g->params;
    float scale = var->scale_scores ? 1.0f / sqrtf((float)(C / NH)) : 1.0f;
    int e;

#define STEP(call) \
    if ((e = op(g, (call))) != 0) \
        return e
#define EMIT(k, ptr, n, nd, shp)                                                               \
    if ((e = emit(g, f, ln.act[k], ptr, n, nd, shp, ln.inputs[k], ln.n_inputs[k])) != 0) \
        return e
    STEP(opd_layernorm_fwd(x, ln1, a->ln1_mean + l * N, a->ln1_rstd + l * N, in, lp(g, P, l, GPT_LN1W),
                           lp(g, P, l, GPT_LN1B), N, C));
    EMIT(GPT_ACT_LN1, ln1, BTC, 3, s3);
    STEP(opd_matmul_fwd(x, qkv, ln1, lp(g, P, l, GPT_QKVW), lp(g, P, l, GPT_QKVB), N, C, 3 * C));
    EMIT(GPT_ACT_QKV, qkv, BTC * 3, 3, s3q);
    STEP(opd_attn_scores_fwd(x, sc, qkv, B, T, C, NH, scale));
    EMIT(GPT_ACT_SCORES, sc, att, 4, s4);
    /* masked softmax: the fill stored in the activation dtype (-1e9 is -inf
     * in fp16), a fully masked row of -inf gives NaN */
    if (f->rec) /* the scores are recorded before the fill changes them */
        f->rec(f->ctx, NULL, NULL, 0, NULL, NULL, 0);
    STEP(opd_masked_fill(x, sc, g->mask, var->mask_fill, B, NH, T));
    STEP(opd_round_storage(x, sc, att, g->store));
    STEP(opd_softmax_fwd(x, pr, sc, B * NH * T, T));
    EMIT(GPT_ACT_PROBS, pr, att, 4, s4);
    STEP(opd_attn_values_fwd(x, atty, pr, qkv, B, T, C, NH));
    EMIT(GPT_ACT_OUT, atty, BTC, 3, s3);
    STEP(opd_matmul_fwd(x, proj, atty, lp(g, P, l, GPT_PROJW), lp(g, P, l, GPT_PROJB), N, C, C));
    EMIT(GPT_ACT_PROJ, proj, BTC, 3, s3);
    STEP(opd_residual_fwd(x, res1, in, proj, BTC));
    EMIT(GPT_ACT_RES1, res1, BTC, 3, s3);
    STEP(opd_layernorm_fwd(x, ln2, a->ln2_mean + l * N, a->ln2_rstd + l * N, res1, lp(g, P, l, GPT_LN2W),
                           lp(g, P, l, GPT_LN2B), N, C));
    EMIT(GPT_ACT_LN2, ln2, BTC, 3, s3);
    STEP(opd_matmul_fwd(x, fc, ln2, lp(g, P, l, GPT_FCW), lp(g, P, l, GPT_FCB), N, C, 4 * C));
    EMIT(GPT_ACT_FC, fc, BTC * 4, 3, s3f);
    STEP(opd_gelu_fwd(x, gl, fc, BTC * 4));
    EMIT(GPT_ACT_GELU, gl, BTC * 4, 3, s3f);
    STEP(opd_matmul_fwd(x, fcp, gl, lp(g, P, l, GPT_FCPW), lp(g, P, l, GPT_FCPB), N, 4 * C, C));
    EMIT(GPT_ACT_FCPROJ, fcp, BTC, 3, s3);
    STEP(opd_residual_fwd(x, res2, res1, fcp, BTC));
    EMIT(GPT_ACT_RES2, res2, BTC, 3, s3);
#undef EMIT
    return 0;
}

int gpt_cuda_forward(gpt_cuda *g, const gpt_variant *var, float denom, gpt_cuda_record_fn rec, void *ctx)
{
    gpt_acts *a = &g->a;
    tft_cuda_ops *x = g->ops;
    int B = g->B, T = g->T, C = g->cfg.channels, V = g->cfg.vocab, L = g->cfg.layers, N = B * T;
    size_t BTC = (size_t)N * C;
    fwd_ctx f = {rec, ctx};
    int64_t s3[3] = {B, T, C}, sm[3] = {B, T, T}, sl[3] = {B, T, V}, s1[1] = {1};
    float *P = g->params;
    int e;

    STEP(opd_embedding_fwd(x, a->encoded, g->tokens, gp(g, P, 0), gp(g, P, 1), B, T, C));
    if ((e = emit(g, &f, GPT_N_EMB, a->encoded, BTC, 3, s3, (const char *[]){GPT_N_TOKENS, GPT_N_WTE, GPT_N_WPE},
                  3)) != 0)
        return e;
    STEP(opd_build_mask(x, g->mask, a->maskf, g->have_pad ? g->pad : NULL, B, T, var->causal_offset,
                        var->combine_pad_mask));
    for (int l = 0; l < L; l++) {
        if (rec) { /* the same mask for every layer, recorded under each layer's name */
            char nm[GPT_NAME_MAX];
            gpt_act_name(nm, sizeof(nm), l, GPT_ACT_MASK);
            rec(ctx, nm, a->maskf, 3, sm, (const char *[]){GPT_N_TOKENS}, 1);
        }
        if ((e = layer_forward(g, var, &f, l, l ? a->res2 + (size_t)(l - 1) * BTC : a->encoded)) != 0)
            return e;
    }
    char last[GPT_NAME_MAX];
    gpt_act_name(last, sizeof(last), L - 1, GPT_ACT_RES2);
    STEP(opd_layernorm_fwd(x, a->lnf, a->lnf_mean, a->lnf_rstd, a->res2 + (size_t)(L - 1) * BTC,
                           gp(g, P, g->nparams - 2), gp(g, P, g->nparams - 1), N, C));
    if ((e = emit(g, &f, GPT_N_LNF, a->lnf, BTC, 3, s3, (const char *[]){last, GPT_N_LNF_W, GPT_N_LNF_B}, 3)) != 0)
        return e;
    STEP(opd_matmul_fwd(x, a->logits, a->lnf, gp(g, P, 0), NULL, N, C, V));
    if ((e = emit(g, &f, GPT_N_LOGITS, a->logits, (size_t)N * V, 3, sl, (const char *[]){GPT_N_LNF, GPT_N_WTE}, 2)) !=
        0)
        return e;
    if (!g->have_targets)
        return 0;
    STEP(opd_crossentropy_fwd(x, a->losses, a->probs, a->logits, g->targets, g->weight, N, V, &g->s->loss_sum,
                              denom, &g->s->loss));
    if (rec)
        rec(ctx, GPT_N_LOSS, &g->s->loss, 1, s1, (const char *[]){GPT_N_LOGITS, GPT_N_TARGETS, GPT_N_LOSS_MASK}, 3);
    return 0;
}

/* ---- backward ------------------------------------------------------------- */

static int layer_backward(gpt_cuda *g, const gpt_variant *var, int l, const float *in)
{
    gpt_acts *a = &g->a;
    tft_cuda_ops *x = g->ops;
    int B = g->B, T = g->T, C = g->cfg.channels, NH = g->cfg.heads, N = B * T;
    size_t BTC = (size_t)N * C, att = (size_t)B * NH * T * T;
    float *P = g->params, *G = g->grads;
    int e;
    /* res2 = res1 + fcproj: dres is d(res2) and passes to both */
    STEP(opd_zero(x, a->dbig, BTC * 4 * sizeof(float)));
    STEP(opd_matmul_bwd(x, a->dbig, lp(g, G, l, GPT_FCPW), lp(g, G, l, GPT_FCPB), a->dres, a->gelu + l * BTC * 4,
                        lp(g, P, l, GPT_FCPW), N, 4 * C, C));
    STEP(opd_zero(x, a->dbig2, BTC * 4 * sizeof(float)));
    STEP(opd_gelu_bwd(x, a->dbig2, a->fc + l * BTC * 4, a->dbig, BTC * 4));
    STEP(opd_zero(x, a->dln, BTC * sizeof(float)));
    STEP(opd_matmul_bwd(x, a->dln, lp(g, G, l, GPT_FCW), lp(g, G, l, GPT_FCB), a->dbig2, a->ln2 + l * BTC,
                        lp(g, P, l, GPT_FCW), N, C, 4 * C));
    STEP(opd_layernorm_bwd(x, a->dres, lp(g, G, l, GPT_LN2W), lp(g, G, l, GPT_LN2B), a->dln, a->res1 + l * BTC,
                           lp(g, P, l, GPT_LN2W), a->ln2_mean + l * N, a->ln2_rstd + l * N, N, C));
    /* dres is now d(res1) = d(in) + d(attproj) */
    STEP(opd_zero(x, a->dtmp, BTC * sizeof(float)));
    STEP(opd_matmul_bwd(x, a->dtmp, lp(g, G, l, GPT_PROJW), lp(g, G, l, GPT_PROJB), a->dres, a->atty + l * BTC,
                        lp(g, P, l, GPT_PROJW), N, C, C));
    STEP(opd_zero(x, a->dqkv, BTC * 3 * sizeof(float)));
    STEP(opd_attn_values_bwd(x, a->dprobs, a->dqkv, a->dtmp, a->att + l * att, a->qkv + l * BTC * 3, B, T, C,
                             NH));
    STEP(opd_softmax_bwd(x, a->dscores, a->dprobs, a->att + l * att, B * NH * T, T));
    STEP(opd_masked_fill_bwd(x, a->dscores, g->mask, B, NH, T));
    float scale = var->scale_scores ? 1.0f / sqrtf((float)(C / NH)) : 1.0f;
    STEP(opd_attn_scores_bwd(x, a->dqkv, a->dscores, a->qkv + l * BTC * 3, B, T, C, NH, scale));
    STEP(opd_zero(x, a->dln, BTC * sizeof(float)));
    STEP(opd_matmul_bwd(x, a->dln, lp(g, G, l, GPT_QKVW), lp(g, G, l, GPT_QKVB), a->dqkv, a->ln1 + l * BTC,
                        lp(g, P, l, GPT_QKVW), N, C, 3 * C));
    STEP(opd_layernorm_bwd(x, a->dres, lp(g, G, l, GPT_LN1W), lp(g, G, l, GPT_LN1B), a->dln, in,
                           lp(g, P, l, GPT_LN1W), a->ln1_mean + l * N, a->ln1_rstd + l * N, N, C));
    return 0;
}

int gpt_cuda_backward(gpt_cuda *g, const gpt_variant *var, float denom)
{
    gpt_acts *a = &g->a;
    tft_cuda_ops *x = g->ops;
    int B = g->B, T = g->T, C = g->cfg.channels, V = g->cfg.vocab, L = g->cfg.layers, N = B * T;
    size_t BTC = (size_t)N * C;
    float *P = g->params, *G = g->grads;
    int e;
    if (!g->have_targets)
        return failf(g, -EINVAL, "backward without targets");
    STEP(opd_crossentropy_bwd(x, a->dlogits, a->probs, g->targets, g->weight, 1.0f / denom,
                              g->scaling ? &g->s->ls.scale : NULL, N, V));
    STEP(opd_zero(x, a->dln, BTC * sizeof(float)));
    STEP(opd_matmul_bwd(x, a->dln, gp(g, G, 0), NULL, a->dlogits, a->lnf, gp(g, P, 0), N, C, V));
    STEP(opd_zero(x, a->dres, BTC * sizeof(float)));
    STEP(opd_layernorm_bwd(x, a->dres, gp(g, G, g->nparams - 2), gp(g, G, g->nparams - 1), a->dln,
                           a->res2 + (size_t)(L - 1) * BTC, gp(g, P, g->nparams - 2), a->lnf_mean, a->lnf_rstd,
                           N, C));
    for (int l = L - 1; l >= 0; l--)
        if ((e = layer_backward(g, var, l, l ? a->res2 + (size_t)(l - 1) * BTC : a->encoded)) != 0)
            return e;
    STEP(opd_embedding_bwd(x, gp(g, G, 0), gp(g, G, 1), a->dres, g->tokens, B, T, C, V));
    return 0;
}

int gpt_cuda_zero_grad(gpt_cuda *g)
{
    return op(g, opd_zero(g->ops, g->grads, g->num_params * sizeof(float)));
}

/* ---- optimizer ------------------------------------------------------------ */

int gpt_cuda_unscale_grads(gpt_cuda *g)
{
    if (!g->scaling)
        return 0;
    return op(g, opd_scale_dev(g->ops, g->grads, g->num_params, &g->s->ls.scale, 1));
}

int gpt_cuda_grad_norm(gpt_cuda *g, int reverse, float clip)
{
    int e;
    STEP(opd_sum_squares_segments(g->ops, g->grads, g->seg_off, g->seg_cnt, g->nparams, g->seg_sumsq));
    STEP(opd_global_norm(g->ops, g->seg_sumsq, g->nparams, reverse, clip, &g->s->norm, &g->s->clip_factor,
                         &g->s->found_inf));
    return 0;
}

int gpt_cuda_clip(gpt_cuda *g)
{
    return op(g, opd_scale_dev(g->ops, g->grads, g->num_params, &g->s->clip_factor, 0));
}

int gpt_cuda_adamw(gpt_cuda *g, float lr, float beta1, float beta2, float eps, float weight_decay, int t)
{
    int e;
    STEP(opd_adamw(g->ops, g->params, g->grads, g->m, g->v, g->num_params, lr, beta1, beta2, eps, weight_decay,
                   t, g->scaling ? &g->s->found_inf : NULL));
    if (g->scaling)
        STEP(opd_loss_scale_update(g->ops, &g->s->ls, &g->s->found_inf));
    return 0;
}

int gpt_cuda_sgd(gpt_cuda *g, float lr)
{
    int e;
    STEP(opd_sgd_momentum(g->ops, g->params, g->grads, g->m, g->num_params, lr,
                          g->scaling ? &g->s->found_inf : NULL));
    if (g->scaling)
        STEP(opd_loss_scale_update(g->ops, &g->s->ls, &g->s->found_inf));
    return 0;
}
#undef STEP

int gpt_cuda_scale(gpt_cuda *g, float *x, size_t n, float s)
{
    return op(g, opd_scale(g->ops, x, n, s));
}

int gpt_cuda_loss_to_f64(gpt_cuda *g)
{
    return op(g, opd_f32_to_f64(g->ops, &g->s->loss, &g->s->loss_f64, 1));
}

int gpt_cuda_read(gpt_cuda *g, double *loss_f64, float *norm, float *loss_scale)
{
    dscal s;
    int e = cuda_check(g, cudaMemcpyAsync(&s, g->s, sizeof(s), cudaMemcpyDeviceToHost, g->stream), "read");
    if (!e)
        e = cuda_check(g, cudaStreamSynchronize(g->stream), "cudaStreamSynchronize");
    if (e)
        return e;
    if (loss_f64)
        *loss_f64 = s.loss_f64;
    if (norm)
        *norm = s.norm;
    if (loss_scale)
        *loss_scale = s.ls.scale;
    return 0;
}

int gpt_cuda_logits(gpt_cuda *g, float *out)
{
    size_t n = (size_t)g->B * g->T * g->cfg.vocab;
    int e = cuda_check(g, cudaMemcpyAsync(out, g->a.logits, n * sizeof(float), cudaMemcpyDeviceToHost, g->stream),
                       "logits");
    return e ? e : cuda_check(g, cudaStreamSynchronize(g->stream), "cudaStreamSynchronize");
}
