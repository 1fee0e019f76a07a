/*
 * model.c — GPT forward and backward on the ops of kernels/ops/tft_ops.h.
 * Parameter layout, initialisation and the activation block are here; the
 * training loop, recording and the bug zoo live in tftrain.c.
 */
#include "model_acts.h"
#include "names.h"

#include "tft_types.h" /* TFT_F32 */
#include "tft_ops.h"
#include "tft_stats.h" /* tft_stats_stream: fused statistics */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shapes of a layer's parameters (enum gpt_lparam, the order inside the
 * block after wte, wpe): rows/cols in units of C, cols 0 = a vector. */
static const struct { int rows, cols; } layer_params[GPT_NPARAM_PER_LAYER] = {
    [GPT_LN1W] = {1, 0}, [GPT_LN1B] = {1, 0}, [GPT_QKVW] = {3, 1}, [GPT_QKVB] = {3, 0},
    [GPT_PROJW] = {1, 1}, [GPT_PROJB] = {1, 0}, [GPT_LN2W] = {1, 0}, [GPT_LN2B] = {1, 0},
    [GPT_FCW] = {4, 1}, [GPT_FCB] = {4, 0}, [GPT_FCPW] = {1, 4}, [GPT_FCPB] = {1, 0},
};

static void add_param(gpt_model *m, const char *name, int64_t rows, int64_t cols)
{
    gpt_param *p = &m->params_info[m->nparams++];
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->offset = m->num_params;
    p->count = (size_t)(rows * (cols ? cols : 1));
    p->ndim = cols ? 2 : 1;
    p->shape[0] = rows;
    p->shape[1] = cols;
    m->num_params += p->count;
}

static void layout(gpt_model *m)
{
    const gpt_config *c = &m->cfg;
    int64_t C = c->channels;
    add_param(m, GPT_N_WTE, c->vocab, C);
    add_param(m, GPT_N_WPE, c->max_seq, C);
    for (int l = 0; l < c->layers; l++)
        for (int k = 0; k < GPT_NPARAM_PER_LAYER; k++) {
            char name[32];
            snprintf(name, sizeof(name), "L%d.%s", l, gpt_lparam_suffix[k]);
            int64_t rows = layer_params[k].rows * C;
            int64_t cols = layer_params[k].cols ? layer_params[k].cols * C : 0;
            add_param(m, name, rows, cols);
        }
    add_param(m, GPT_N_LNF_W, C, 0);
    add_param(m, GPT_N_LNF_B, C, 0);
}

/* Parameter k of layer l (or a global one by index). */
static float *lp(const gpt_model *m, float *base, int l, int k)
{
    return base + m->params_info[2 + l * GPT_NPARAM_PER_LAYER + k].offset;
}
static float *gp(const gpt_model *m, float *base, int idx) { return base + m->params_info[idx].offset; }

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float rng_normal(uint64_t *s)
{
    double u1 = ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (double)(rng_next(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

static void init_params(gpt_model *m, uint64_t seed)
{
    uint64_t s = seed ^ 0x5eed5eed5eedull;
    float proj_std = 0.02f / sqrtf(2.0f * (float)m->cfg.layers);
    for (int i = 0; i < m->nparams; i++) {
        gpt_param *p = &m->params_info[i];
        float *x = m->params + p->offset;
        const char *dot = strrchr(p->name, '.');
        int is_ln_w = dot && !strcmp(dot, ".w") && strstr(p->name, "ln");
        int is_bias = dot && !strcmp(dot, ".b");
        float std = (strstr(p->name, "attn.proj.w") || strstr(p->name, "fcproj.w")) ? proj_std : 0.02f;
        for (size_t j = 0; j < p->count; j++)
            x[j] = is_ln_w ? 1.0f : is_bias ? 0.0f : std * rng_normal(&s);
    }
}

size_t gpt_acts_floats(const gpt_config *c, size_t B, size_t T)
{
    size_t L = (size_t)c->layers, C = (size_t)c->channels, NH = (size_t)c->heads, V = (size_t)c->vocab;
    size_t BT = B * T, att = B * NH * T * T;
    return BT * C + L * (BT * C * 3 + BT * 2 + BT * 3 * C + 2 * att + BT * C * 3 + BT * 2 + BT * 8 * C +
                         BT * C * 2) /* per layer */
           + BT * C + 2 * BT + 2 * BT * V + BT                    /* lnf, logits, probs, losses */
           + 3 * BT * C + BT * 3 * C + 2 * BT * 4 * C + 2 * att + BT * V /* backward scratch */
           + B * T * T;                                           /* maskf */
}

void gpt_acts_carve(gpt_acts *a, float *p, const gpt_config *c, size_t B, size_t T)
{
    size_t L = (size_t)c->layers, C = (size_t)c->channels, NH = (size_t)c->heads, V = (size_t)c->vocab;
    size_t BT = B * T, att = B * NH * T * T;
#define CARVE(field, n) (a->field = p, p += (n))
    CARVE(encoded, BT * C);
    CARVE(ln1, L * BT * C), CARVE(ln1_mean, L * BT), CARVE(ln1_rstd, L * BT);
    CARVE(qkv, L * BT * 3 * C);
    CARVE(scores, L * att), CARVE(att, L * att);
    CARVE(atty, L * BT * C), CARVE(attproj, L * BT * C), CARVE(res1, L * BT * C);
    CARVE(ln2, L * BT * C), CARVE(ln2_mean, L * BT), CARVE(ln2_rstd, L * BT);
    CARVE(fc, L * BT * 4 * C), CARVE(gelu, L * BT * 4 * C);
    CARVE(fcproj, L * BT * C), CARVE(res2, L * BT * C);
    CARVE(lnf, BT * C), CARVE(lnf_mean, BT), CARVE(lnf_rstd, BT);
    CARVE(logits, BT * V), CARVE(probs, BT * V), CARVE(losses, BT);
    CARVE(dres, BT * C), CARVE(dtmp, BT * C), CARVE(dln, BT * C);
    CARVE(dqkv, BT * 3 * C), CARVE(dbig, BT * 4 * C), CARVE(dbig2, BT * 4 * C);
    CARVE(dscores, att), CARVE(dprobs, att), CARVE(dlogits, BT * V);
    CARVE(maskf, B * T * T);
#undef CARVE
}

static int acts_alloc(gpt_model *m)
{
    const gpt_config *c = &m->cfg;
    gpt_acts *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->block = calloc(gpt_acts_floats(c, (size_t)m->B, (size_t)m->T), sizeof(float));
    a->mask = calloc((size_t)m->B * (size_t)m->T * (size_t)m->T, 1);
    if (!a->block || !a->mask) {
        free(a->block);
        free(a->mask);
        free(a);
        return -ENOMEM;
    }
    gpt_acts_carve(a, a->block, c, (size_t)m->B, (size_t)m->T);
    m->acts = a;
    return 0;
}

int gpt_init(gpt_model *m, const gpt_config *cfg, int B, int T, uint64_t seed)
{
    memset(m, 0, sizeof(*m));
    m->fused_mode = -1;
    if (cfg->vocab < 2 || cfg->layers < 1 || cfg->channels < 1 || cfg->heads < 1 ||
        cfg->channels % cfg->heads || cfg->max_seq < 1 || B < 1 || T < 1 || T > cfg->max_seq)
        return -EINVAL;
    m->cfg = *cfg;
    m->B = B;
    m->T = T;
    m->params_info = calloc((size_t)(4 + cfg->layers * GPT_NPARAM_PER_LAYER), sizeof(gpt_param));
    if (!m->params_info)
        return -ENOMEM;
    layout(m);
    m->params = calloc(m->num_params * 4, sizeof(float)); /* params, grads, m, v */
    if (!m->params || acts_alloc(m) < 0) {
        gpt_free(m);
        return -ENOMEM;
    }
    m->grads = m->params + m->num_params;
    m->m = m->grads + m->num_params;
    m->v = m->m + m->num_params;
    init_params(m, seed);
    return 0;
}

void gpt_free(gpt_model *m)
{
    if (m->acts) {
        free(m->acts->block);
        free(m->acts->mask);
        free(m->acts);
    }
    free(m->params);
    free(m->params_info);
    free(m->fused_stream);
    memset(m, 0, sizeof(*m));
}

const gpt_param *gpt_param_find(const gpt_model *m, const char *name)
{
    for (int i = 0; i < m->nparams; i++)
        if (!strcmp(m->params_info[i].name, name))
            return &m->params_info[i];
    return NULL;
}

const float *gpt_logits(const gpt_model *m) { return m->acts->logits; }

void gpt_zero_grad(gpt_model *m) { memset(m->grads, 0, m->num_params * sizeof(float)); }

void gpt_perturb_params(gpt_model *m)
{
    for (size_t i = 0; i < m->num_params; i++) {
        uint32_t u;
        memcpy(&u, &m->params[i], sizeof(u));
        u ^= 1u;
        memcpy(&m->params[i], &u, sizeof(u));
    }
}

/* mask[b,i,j] = 1 when query i may attend key j: causal (j <= i + offset),
 * and, when combined, both positions are real tokens. */
static void build_mask(uint8_t *mask, const uint8_t *pad, const gpt_variant *v, int B, int T)
{
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                int ok = j <= i + v->causal_offset;
                if (v->combine_pad_mask && pad)
                    ok = ok && pad[b * T + i] && pad[b * T + j];
                mask[((size_t)b * T + i) * T + j] = (uint8_t)ok;
            }
}

typedef struct fwd_ctx {
    gpt_record_fn rec;
    void *ctx;
    int store;
    int fmode;               /* fused statistics' mode, -1 off (gpt_set_fused_stats) */
    gpt_record_stats_fn frec;
    tft_stats_stream *fs;
} fwd_ctx;

int gpt_set_fused_stats(gpt_model *m, int mode, gpt_record_stats_fn rec_stats)
{
    m->fused_mode = -1;
    if (mode < 0 || !rec_stats)
        return 0;
    if (!m->fused_stream && !(m->fused_stream = malloc(sizeof(*m->fused_stream))))
        return -ENOMEM;
    m->fused_mode = mode;
    m->fused_rec = rec_stats;
    return 0;
}

/* Fused statistics of an output written a piece at a time: fz_begin (0:
 * not fused, compute and emit as usual), fz_piece after each piece is
 * written (rounds it to the storage dtype, as emit does for the whole),
 * fz_emit at the end. */
#define FZ_PIECE 2048 /* floats: one statistics block */
static int fz_begin(const fwd_ctx *f, size_t n)
{
    return f->fmode >= 0 && tft_stats_stream_begin(f->fs, TFT_F32, n, f->fmode) == 0;
}

static void fz_piece(const fwd_ctx *f, float *x, size_t n)
{
    op_round_storage(x, n, f->store);
    tft_stats_stream_update(f->fs, x, n);
}

static void fz_emit(const fwd_ctx *f, const char *name, const float *x, int ndim, const int64_t *shape,
                    const char *const *in, int nin)
{
    tft_stats st;
    if (tft_stats_stream_finish(f->fs, x, &st) == 0)
        f->frec(f->ctx, name, &st, f->fmode, ndim, shape, in, nin);
    else
        f->rec(f->ctx, name, x, ndim, shape, in, nin);
}

/* Rounds an activation to the storage dtype, then reports it. */
static void emit(const fwd_ctx *f, const char *name, float *x, size_t n, int ndim, const int64_t *shape,
                 const char *const *in, int nin)
{
    op_round_storage(x, n, f->store);
    if (f->rec)
        f->rec(f->ctx, name, x, ndim, shape, in, nin);
}

static void layer_forward(gpt_model *m, const gpt_variant *var, const fwd_ctx *f, int l, const float *in)
{
    gpt_acts *a = m->acts;
    int B = m->B, T = m->T, C = m->cfg.channels, NH = m->cfg.heads, N = B * T;
    size_t BTC = (size_t)N * C, att = (size_t)B * NH * T * T;
    int64_t s3[3] = {B, T, C}, s3q[3] = {B, T, 3 * C}, s3f[3] = {B, T, 4 * C}, s4[4] = {B, NH, T, T};
    gpt_layer_names ln;
    gpt_layer_names_init(&ln, l);
    gpt_layer_acts la = gpt_layer_acts_at(a, B, T, C, NH, l);
    float *ln1 = la.ln1, *qkv = la.qkv, *sc = la.scores, *pr = la.att, *atty = la.atty, *proj = la.attproj;
    float *res1 = la.res1, *ln2 = la.ln2, *fc = la.fc, *gl = la.gelu, *fcp = la.fcproj, *res2 = la.res2;
    float *P = m->params;
#define EMIT(k, ptr, n, nd, shp) emit(f, ln.act[k], ptr, n, nd, shp, ln.inputs[k], ln.n_inputs[k])
#define FZ_EMIT(k, ptr, nd, shp) fz_emit(f, ln.act[k], ptr, nd, shp, ln.inputs[k], ln.n_inputs[k])

    op_layernorm_fwd(ln1, a->ln1_mean + l * N, a->ln1_rstd + l * N, in, lp(m, P, l, GPT_LN1W), lp(m, P, l, GPT_LN1B),
                     N, C);
    EMIT(GPT_ACT_LN1, ln1, BTC, 3, s3);
    op_matmul_fwd(qkv, ln1, lp(m, P, l, GPT_QKVW), lp(m, P, l, GPT_QKVB), N, C, 3 * C);
    EMIT(GPT_ACT_QKV, qkv, BTC * 3, 3, s3q);
    float scale = var->scale_scores ? 1.0f / sqrtf((float)(C / NH)) : 1.0f;
    size_t per_b = (size_t)NH * T * T;
    if (fz_begin(f, att)) { /* a batch row's scores (all heads) at a time, then their statistics */
        for (int b = 0; b < B; b++) {
            op_attn_scores_fwd(sc + b * per_b, qkv + (size_t)b * T * 3 * C, 1, T, C, NH, scale);
            fz_piece(f, sc + b * per_b, per_b);
        }
        FZ_EMIT(GPT_ACT_SCORES, sc, 4, s4);
    } else {
        op_attn_scores_fwd(sc, qkv, B, T, C, NH, scale);
        EMIT(GPT_ACT_SCORES, sc, att, 4, s4);
    }
    /* masked softmax: the fill is stored in the activation dtype (so -1e9
     * becomes -inf in fp16), and a fully masked row of -inf gives NaN */
    op_masked_fill(sc, a->mask, var->mask_fill, B, NH, T);
    op_round_storage(sc, att, f->store);
    if (fz_begin(f, att)) { /* rows of about FZ_PIECE floats */
        int rows = B * NH * T, rp = T < FZ_PIECE ? FZ_PIECE / T : 1;
        for (int r0 = 0; r0 < rows; r0 += rp) {
            int nr = rows - r0 < rp ? rows - r0 : rp;
            op_softmax_fwd(pr + (size_t)r0 * T, sc + (size_t)r0 * T, nr, T);
            fz_piece(f, pr + (size_t)r0 * T, (size_t)nr * T);
        }
        FZ_EMIT(GPT_ACT_PROBS, pr, 4, s4);
    } else {
        op_softmax_fwd(pr, sc, B * NH * T, T);
        EMIT(GPT_ACT_PROBS, pr, att, 4, s4);
    }
    op_attn_values_fwd(atty, pr, qkv, B, T, C, NH);
    EMIT(GPT_ACT_OUT, atty, BTC, 3, s3);
    op_matmul_fwd(proj, atty, lp(m, P, l, GPT_PROJW), lp(m, P, l, GPT_PROJB), N, C, C);
    EMIT(GPT_ACT_PROJ, proj, BTC, 3, s3);
    op_residual_fwd(res1, in, proj, BTC);
    EMIT(GPT_ACT_RES1, res1, BTC, 3, s3);
    op_layernorm_fwd(ln2, a->ln2_mean + l * N, a->ln2_rstd + l * N, res1, lp(m, P, l, GPT_LN2W),
                     lp(m, P, l, GPT_LN2B), N, C);
    EMIT(GPT_ACT_LN2, ln2, BTC, 3, s3);
    op_matmul_fwd(fc, ln2, lp(m, P, l, GPT_FCW), lp(m, P, l, GPT_FCB), N, C, 4 * C);
    EMIT(GPT_ACT_FC, fc, BTC * 4, 3, s3f);
    if (fz_begin(f, BTC * 4)) {
        for (size_t i = 0; i < BTC * 4; i += FZ_PIECE) {
            size_t k = BTC * 4 - i < FZ_PIECE ? BTC * 4 - i : FZ_PIECE;
            op_gelu_fwd(gl + i, fc + i, k);
            fz_piece(f, gl + i, k);
        }
        FZ_EMIT(GPT_ACT_GELU, gl, 3, s3f);
    } else {
        op_gelu_fwd(gl, fc, BTC * 4);
        EMIT(GPT_ACT_GELU, gl, BTC * 4, 3, s3f);
    }
    op_matmul_fwd(fcp, gl, lp(m, P, l, GPT_FCPW), lp(m, P, l, GPT_FCPB), N, 4 * C, C);
    EMIT(GPT_ACT_FCPROJ, fcp, BTC, 3, s3);
    op_residual_fwd(res2, res1, fcp, BTC);
    EMIT(GPT_ACT_RES2, res2, BTC, 3, s3);
#undef EMIT
#undef FZ_EMIT
}

float gpt_forward(gpt_model *m, const gpt_variant *var, const int32_t *tokens, const int32_t *targets,
                  const float *weight, const uint8_t *mask_pad, float denom, gpt_record_fn rec, void *ctx)
{
    gpt_acts *a = m->acts;
    int B = m->B, T = m->T, C = m->cfg.channels, V = m->cfg.vocab, L = m->cfg.layers, N = B * T;
    size_t BTC = (size_t)N * C;
    fwd_ctx f = {rec, ctx, var->store_dtype, -1, NULL, NULL};
    if (rec && m->fused_mode >= 0 && m->fused_stream) {
        f.fmode = m->fused_mode;
        f.frec = m->fused_rec;
        f.fs = m->fused_stream;
    }
    int64_t s3[3] = {B, T, C}, sm[3] = {B, T, T}, sl[3] = {B, T, V}, s1[1] = {1};
    float *P = m->params;

    op_embedding_fwd(a->encoded, tokens, gp(m, P, 0), gp(m, P, 1), B, T, C);
    emit(&f, GPT_N_EMB, a->encoded, BTC, 3, s3, (const char *[]){GPT_N_TOKENS, GPT_N_WTE, GPT_N_WPE}, 3);
    build_mask(a->mask, mask_pad, var, B, T);
    for (size_t i = 0; i < (size_t)B * T * T; i++)
        a->maskf[i] = a->mask[i];
    for (int l = 0; l < L; l++) {
        if (rec) { /* the same mask for every layer, recorded under each layer's name */
            char nm[GPT_NAME_MAX];
            gpt_act_name(nm, sizeof(nm), l, GPT_ACT_MASK);
            rec(ctx, nm, a->maskf, 3, sm, (const char *[]){GPT_N_TOKENS}, 1);
        }
        layer_forward(m, var, &f, l, l ? a->res2 + (size_t)(l - 1) * BTC : a->encoded);
    }
    char last[GPT_NAME_MAX];
    gpt_act_name(last, sizeof(last), L - 1, GPT_ACT_RES2);
    op_layernorm_fwd(a->lnf, a->lnf_mean, a->lnf_rstd, a->res2 + (size_t)(L - 1) * BTC,
                     gp(m, P, m->nparams - 2), gp(m, P, m->nparams - 1), N, C);
    emit(&f, GPT_N_LNF, a->lnf, BTC, 3, s3, (const char *[]){last, GPT_N_LNF_W, GPT_N_LNF_B}, 3);
    op_matmul_fwd(a->logits, a->lnf, gp(m, P, 0), NULL, N, C, V);
    emit(&f, GPT_N_LOGITS, a->logits, (size_t)N * V, 3, sl, (const char *[]){GPT_N_LNF, GPT_N_WTE}, 2);
    if (!targets)
        return NAN;
    m->last_loss_sum = op_crossentropy_fwd(a->losses, a->probs, a->logits, targets, weight, N, V);
    float loss = (float)(m->last_loss_sum / (double)denom);
    if (rec)
        rec(ctx, GPT_N_LOSS, &loss, 1, s1, (const char *[]){GPT_N_LOGITS, GPT_N_TARGETS, GPT_N_LOSS_MASK}, 3);
    return loss;
}

static void layer_backward(gpt_model *m, const gpt_variant *var, int l, const float *in)
{
    gpt_acts *a = m->acts;
    int B = m->B, T = m->T, C = m->cfg.channels, NH = m->cfg.heads, N = B * T;
    size_t BTC = (size_t)N * C, att = (size_t)B * NH * T * T;
    float *P = m->params, *G = m->grads;
    /* res2 = res1 + fcproj: dres is d(res2) and passes to both */
    memset(a->dbig, 0, BTC * 4 * sizeof(float));
    op_matmul_bwd(a->dbig, lp(m, G, l, GPT_FCPW), lp(m, G, l, GPT_FCPB), a->dres, a->gelu + l * BTC * 4,
                  lp(m, P, l, GPT_FCPW), N, 4 * C, C);
    memset(a->dbig2, 0, BTC * 4 * sizeof(float));
    op_gelu_bwd(a->dbig2, a->fc + l * BTC * 4, a->dbig, BTC * 4);
    memset(a->dln, 0, BTC * sizeof(float));
    op_matmul_bwd(a->dln, lp(m, G, l, GPT_FCW), lp(m, G, l, GPT_FCB), a->dbig2, a->ln2 + l * BTC,
                  lp(m, P, l, GPT_FCW), N, C, 4 * C);
    op_layernorm_bwd(a->dres, lp(m, G, l, GPT_LN2W), lp(m, G, l, GPT_LN2B), a->dln, a->res1 + l * BTC,
                     lp(m, P, l, GPT_LN2W), a->ln2_mean + l * N, a->ln2_rstd + l * N, N, C);
    /* dres is now d(res1) = d(in) + d(attproj) */
    memset(a->dtmp, 0, BTC * sizeof(float));
    op_matmul_bwd(a->dtmp, lp(m, G, l, GPT_PROJW), lp(m, G, l, GPT_PROJB), a->dres, a->atty + l * BTC,
                  lp(m, P, l, GPT_PROJW), N, C, C);
    memset(a->dqkv, 0, BTC * 3 * sizeof(float));
    op_attn_values_bwd(a->dprobs, a->dqkv, a->dtmp, a->att + l * att, a->qkv + l * BTC * 3, B, T, C, NH);
    op_softmax_bwd(a->dscores, a->dprobs, a->att + l * att, B * NH * T, T);
    op_masked_fill_bwd(a->dscores, a->mask, B, NH, T);
    float scale = var->scale_scores ? 1.0f / sqrtf((float)(C / NH)) : 1.0f;
    op_attn_scores_bwd(a->dqkv, a->dscores, a->qkv + l * BTC * 3, B, T, C, NH, scale);
    memset(a->dln, 0, BTC * sizeof(float));
    op_matmul_bwd(a->dln, lp(m, G, l, GPT_QKVW), lp(m, G, l, GPT_QKVB), a->dqkv, a->ln1 + l * BTC,
                  lp(m, P, l, GPT_QKVW), N, C, 3 * C);
    op_layernorm_bwd(a->dres, lp(m, G, l, GPT_LN1W), lp(m, G, l, GPT_LN1B), a->dln, in, lp(m, P, l, GPT_LN1W),
                     a->ln1_mean + l * N, a->ln1_rstd + l * N, N, C);
}

void gpt_backward(gpt_model *m, const gpt_variant *var, const int32_t *tokens, const int32_t *targets,
                  const float *weight, float denom)
{
    gpt_acts *a = m->acts;
    int B = m->B, T = m->T, C = m->cfg.channels, V = m->cfg.vocab, L = m->cfg.layers, N = B * T;
    size_t BTC = (size_t)N * C;
    float *P = m->params, *G = m->grads;
    op_crossentropy_bwd(a->dlogits, a->probs, targets, weight, 1.0f / denom, N, V);
    memset(a->dln, 0, BTC * sizeof(float));
    op_matmul_bwd(a->dln, gp(m, G, 0), NULL, a->dlogits, a->lnf, gp(m, P, 0), N, C, V);
    memset(a->dres, 0, BTC * sizeof(float));
    op_layernorm_bwd(a->dres, gp(m, G, m->nparams - 2), gp(m, G, m->nparams - 1), a->dln,
                     a->res2 + (size_t)(L - 1) * BTC, gp(m, P, m->nparams - 2), a->lnf_mean, a->lnf_rstd, N, C);
    for (int l = L - 1; l >= 0; l--)
        layer_backward(m, var, l, l ? a->res2 + (size_t)(l - 1) * BTC : a->encoded);
    op_embedding_bwd(gp(m, G, 0), gp(m, G, 1), a->dres, tokens, B, T, C);
}
