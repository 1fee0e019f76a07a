/*
 * test_ops.c — the training runtime's compute ops (kernels/ops/tft_ops.h).
 *
 * Every op with a backward gets a central-difference gradient check on small
 * shapes (B=2, T=5, C=8, NH=2, V=11): the scalar L = sum(out * R) for a
 * fixed random R is accumulated in double, each float32 input is moved by
 * +-1e-3, and analytic and numeric gradients must agree per element within
 *   |a - n| <= 1e-2 * max(1, |n|)
 * (the worst error per check is printed). The attention ops are checked as
 * one chain scores -> masked_fill -> softmax -> values with a causal mask, a
 * padded key and a fully masked (padded) query row. Backward outputs that
 * are "written" are prefilled with NaN; those that accumulate are run twice
 * and must come out doubled. Forward results are checked against naive
 * references and the properties a user would notice (softmax rows sum to 1,
 * an all -inf row is NaN, fp16 overflow and ties-to-even, AdamW steps,
 * bit-identical reruns).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "tft_format.h"
#include "tft_ops.h"
#include "tft_stats.h"
#include "tft_test.h"
#include "tft_test_rng.h"

enum { B = 2, T = 5, C = 8, NH = 2, V = 11, N = B * T };

#define FD_EPS 1e-3f
#define FD_TOL 1e-2

/* ---- helpers ------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* Uniform in [-1, 1), from a fixed xorshift sequence. */
static float frand(void) { return tft_test_rng_sym(&rng_state); }

static float *fill_rand(float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = frand() * scale;
    return x;
}

static float *fill_const(float *x, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        x[i] = v;
    return x;
}

static double dot_d(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* Computes the forward with the current inputs and returns L. */
typedef double (*loss_fn)(void *ctx);

/* Central differences on each of the n floats at x (an input that loss
 * reads) against analytic; prints and returns the worst |a - n|. Ends with
 * one more forward at the original inputs. Also
 * requires some gradient to be non-negligible, so the check has teeth. */
static double grad_check(const char *name, float *x, size_t n, const float *analytic, loss_fn loss, void *ctx)
{
    double worst = 0.0, max_num = 0.0;
    size_t bad = 0, worst_i = 0;
    for (size_t i = 0; i < n; i++) {
        float x0 = x[i];
        float xp = x[i] = x0 + FD_EPS;
        double lp = loss(ctx);
        float xm = x[i] = x0 - FD_EPS;
        double lm = loss(ctx);
        x[i] = x0;
        double num = (lp - lm) / ((double)xp - xm);
        double err = fabs((double)analytic[i] - num);
        if (!(err <= FD_TOL * fmax(1.0, fabs(num))))
            bad++;
        if (!(err <= worst)) {
            worst = err;
            worst_i = i;
        }
        max_num = fmax(max_num, fabs(num));
    }
    loss(ctx); /* leave the outputs as they are at the unperturbed inputs */
    printf("gradcheck %-22s n=%-4zu max|a-n| = %.3g\n", name, n, worst);
    CHECKF(bad == 0, "%s: %zu of %zu gradients off; worst [%zu] analytic %g", name, bad, n, worst_i,
           (double)analytic[worst_i]);
    CHECKF(max_num > 1e-2, "%s: all numeric gradients ~0 (max %g): the check proves nothing", name, max_num);
    return worst;
}

/* After a second backward into the same buffers, g2 must be 2 * g1. */
static void check_doubled(const char *name, const float *g1, const float *g2, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(g2[i] - 2.0f * g1[i]) <= 1e-6f * fmaxf(1.0f, fabsf(2.0f * g1[i]))))
            bad++;
    CHECKF(bad == 0, "%s: %zu of %zu gradients not doubled by a second backward (must accumulate)", name, bad, n);
}

static size_t count_nan(const float *x, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += isnan(x[i]) != 0;
    return k;
}

/* ---- embedding ------------------------------------------------------------ */

struct emb_ctx {
    int32_t tokens[N];
    float wte[V * C], wpe[T * C], out[N * C], R[N * C];
};

static double emb_loss(void *p)
{
    struct emb_ctx *k = p;
    op_embedding_fwd(k->out, k->tokens, k->wte, k->wpe, B, T, C);
    return dot_d(k->out, k->R, N * C);
}

static void test_embedding(void)
{
    static struct emb_ctx k;
    static float dwte[V * C], dwpe[T * C], g1[V * C];
    for (int i = 0; i < N; i++)
        k.tokens[i] = (i * 7) % V % 6; /* repeats, so a row gets several adds */
    fill_rand(k.wte, V * C, 1.0f);
    fill_rand(k.wpe, T * C, 1.0f);
    fill_rand(k.R, N * C, 1.0f);

    emb_loss(&k);
    size_t bad = 0;
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++)
            bad += k.out[i * C + c] != k.wte[k.tokens[i] * C + c] + k.wpe[(i % T) * C + c];
    CHECKF(bad == 0, "embedding fwd: %zu wrong values", bad);

    op_embedding_bwd(dwte, dwpe, k.R, k.tokens, B, T, C);
    grad_check("embedding.wte", k.wte, V * C, dwte, emb_loss, &k);
    grad_check("embedding.wpe", k.wpe, T * C, dwpe, emb_loss, &k);
    memcpy(g1, dwte, sizeof dwte);
    static float p1[T * C];
    memcpy(p1, dwpe, sizeof dwpe);
    op_embedding_bwd(dwte, dwpe, k.R, k.tokens, B, T, C);
    check_doubled("embedding.dwte", g1, dwte, V * C);
    check_doubled("embedding.dwpe", p1, dwpe, T * C);
}

/* ---- layernorm ------------------------------------------------------------ */

struct ln_ctx {
    float inp[N * C], w[C], b[C], out[N * C], mean[N], rstd[N], R[N * C];
};

static double ln_loss(void *p)
{
    struct ln_ctx *k = p;
    op_layernorm_fwd(k->out, k->mean, k->rstd, k->inp, k->w, k->b, N, C);
    return dot_d(k->out, k->R, N * C);
}

/* With w = 1, b = 0 each row comes out with mean ~0 and variance ~1, and
 * the saved mean/rstd match a double reference. */
static void test_layernorm_fwd(void)
{
    static struct ln_ctx k;
    for (int i = 0; i < N * C; i++)
        k.inp[i] = 5.0f + 3.0f * frand();
    fill_const(k.w, C, 1.0f);
    fill_const(k.b, C, 0.0f);
    ln_loss(&k);
    double worst_mean = 0, worst_var = 0, worst_stat = 0;
    for (int n = 0; n < N; n++) {
        double m = 0, v = 0, rm = 0, rv = 0;
        for (int c = 0; c < C; c++)
            m += k.out[n * C + c] / (double)C, rm += k.inp[n * C + c] / (double)C;
        for (int c = 0; c < C; c++) {
            v += pow(k.out[n * C + c] - m, 2) / C;
            rv += pow(k.inp[n * C + c] - rm, 2) / C;
        }
        worst_mean = fmax(worst_mean, fabs(m));
        worst_var = fmax(worst_var, fabs(v - 1.0));
        worst_stat = fmax(worst_stat, fabs(k.mean[n] - rm) + fabs(k.rstd[n] - 1.0 / sqrt(rv + 1e-5)));
    }
    CHECKF(worst_mean < 1e-6, "layernorm: row mean %g, want ~0", worst_mean);
    CHECKF(worst_var < 1e-4, "layernorm: row variance off by %g, want ~1", worst_var);
    CHECKF(worst_stat < 1e-5, "layernorm: saved mean/rstd off by %g", worst_stat);
}

static void test_layernorm_bwd(void)
{
    static struct ln_ctx k;
    static float dinp[N * C], dw[C], db[C], g1[N * C], w1[C], b1[C];
    fill_rand(k.inp, N * C, 2.0f);
    for (int c = 0; c < C; c++)
        k.w[c] = 1.0f + 0.5f * frand(), k.b[c] = frand();
    fill_rand(k.R, N * C, 1.0f);
    ln_loss(&k);
    op_layernorm_bwd(dinp, dw, db, k.R, k.inp, k.w, k.mean, k.rstd, N, C);
    grad_check("layernorm.inp", k.inp, N * C, dinp, ln_loss, &k);
    grad_check("layernorm.w", k.w, C, dw, ln_loss, &k);
    grad_check("layernorm.b", k.b, C, db, ln_loss, &k);
    memcpy(g1, dinp, sizeof g1), memcpy(w1, dw, sizeof w1), memcpy(b1, db, sizeof b1);
    ln_loss(&k);
    op_layernorm_bwd(dinp, dw, db, k.R, k.inp, k.w, k.mean, k.rstd, N, C);
    check_doubled("layernorm.dinp", g1, dinp, N * C);
    check_doubled("layernorm.dw", w1, dw, C);
    check_doubled("layernorm.db", b1, db, C);
}

/* ---- matmul --------------------------------------------------------------- */

enum { MC = 8, OC = 11 };

struct mm_ctx {
    float inp[N * MC], w[OC * MC], bias[OC], out[N * OC], R[N * OC];
};

static double mm_loss(void *p)
{
    struct mm_ctx *k = p;
    op_matmul_fwd(k->out, k->inp, k->w, k->bias, N, MC, OC);
    return dot_d(k->out, k->R, N * OC);
}

/* Against a triple loop, with and without bias, on an odd shape; out is
 * prefilled with NaN (it must be overwritten, not accumulated). */
static void test_matmul_fwd(void)
{
    enum { n = 7, c = 13, oc = 5 };
    float inp[n * c], w[oc * c], bias[oc], out[n * oc];
    fill_rand(inp, n * c, 1.0f), fill_rand(w, oc * c, 1.0f), fill_rand(bias, oc, 1.0f);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        fill_const(out, n * oc, NAN);
        op_matmul_fwd(out, inp, w, with_bias ? bias : NULL, n, c, oc);
        double worst = 0;
        for (int i = 0; i < n; i++)
            for (int o = 0; o < oc; o++) {
                double ref = with_bias ? bias[o] : 0.0;
                for (int j = 0; j < c; j++)
                    ref += (double)inp[i * c + j] * w[o * c + j];
                worst = fmax(worst, fabs(out[i * oc + o] - ref));
                if (isnan(out[i * oc + o]))
                    worst = INFINITY;
            }
        CHECKF(worst < 1e-5, "matmul fwd (bias %d): max error %g vs triple loop", with_bias, worst);
    }
    fill_const(out, oc, NAN);
    op_matmul_fwd(out, inp, w, bias, 1, 0, oc); /* C == 0: just the bias */
    CHECK(memcmp(out, bias, sizeof bias) == 0);
}

static void test_matmul_bwd(void)
{
    static struct mm_ctx k;
    static float dinp[N * MC], dw[OC * MC], db[OC], g1[N * MC], w1[OC * MC], b1[OC];
    fill_rand(k.inp, N * MC, 1.0f), fill_rand(k.w, OC * MC, 1.0f), fill_rand(k.bias, OC, 1.0f);
    fill_rand(k.R, N * OC, 1.0f);
    op_matmul_bwd(dinp, dw, db, k.R, k.inp, k.w, N, MC, OC);
    grad_check("matmul.inp", k.inp, N * MC, dinp, mm_loss, &k);
    grad_check("matmul.w", k.w, OC * MC, dw, mm_loss, &k);
    grad_check("matmul.bias", k.bias, OC, db, mm_loss, &k);
    memcpy(g1, dinp, sizeof g1), memcpy(w1, dw, sizeof w1), memcpy(b1, db, sizeof b1);
    op_matmul_bwd(dinp, dw, db, k.R, k.inp, k.w, N, MC, OC);
    check_doubled("matmul.dinp", g1, dinp, N * MC);
    check_doubled("matmul.dw", w1, dw, OC * MC);
    check_doubled("matmul.dbias", b1, db, OC);
    op_matmul_bwd(dinp, dw, NULL, k.R, k.inp, k.w, N, MC, OC); /* dbias may be NULL */
    check_doubled("matmul.dbias untouched", b1, db, OC);
    CHECK(fabsf(dinp[0] - 3.0f * g1[0]) <= 1e-5f * fmaxf(1.0f, fabsf(g1[0])));
}

/* ---- attention chain ------------------------------------------------------ */

enum { TT = B * NH * T * T, QKV = B * T * 3 * C };

struct attn_ctx {
    float qkv[QKV], scores[TT], probs[TT], out[N * C], R[N * C];
    uint8_t mask[B * T * T];
    float fill, scale;
};

/* Batch 0: causal. Batch 1: causal, and position T-1 is padding: no query
 * attends to it and its own query row is fully masked. */
static void attn_make_mask(uint8_t *mask)
{
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++)
                mask[(b * T + i) * T + j] = j <= i && !(b == 1 && (i == T - 1 || j == T - 1));
}

static void attn_forward(struct attn_ctx *k)
{
    op_attn_scores_fwd(k->scores, k->qkv, B, T, C, NH, k->scale);
    op_masked_fill(k->scores, k->mask, k->fill, B, NH, T);
    op_softmax_fwd(k->probs, k->scores, B * NH * T, T);
    op_attn_values_fwd(k->out, k->probs, k->qkv, B, T, C, NH);
}

static double attn_loss(void *p)
{
    struct attn_ctx *k = p;
    attn_forward(k);
    return dot_d(k->out, k->R, N * C);
}

/* dout = R; dprobs and dscores are prefilled with NaN since they are
 * written, not accumulated; dqkv accumulates. */
static void attn_backward(struct attn_ctx *k, float *dqkv, float *dprobs, float *dscores)
{
    fill_const(dprobs, TT, NAN);
    fill_const(dscores, TT, NAN);
    op_attn_values_bwd(dprobs, dqkv, k->R, k->probs, k->qkv, B, T, C, NH);
    op_softmax_bwd(dscores, dprobs, k->probs, B * NH * T, T);
    op_masked_fill_bwd(dscores, k->mask, B, NH, T);
    op_attn_scores_bwd(dqkv, dscores, k->qkv, B, T, C, NH, k->scale);
}

static void attn_init(struct attn_ctx *k, float fill)
{
    fill_rand(k->qkv, QKV, 1.5f);
    fill_rand(k->R, N * C, 1.0f);
    attn_make_mask(k->mask);
    k->fill = fill;
    k->scale = 1.0f / sqrtf((float)(C / NH));
}

/* scores and out against loops; masked probs are 0; the fully masked row is
 * NaN with fill -inf and uniform with fill -65504. */
static void test_attention_fwd(void)
{
    static struct attn_ctx k;
    enum { hs = C / NH };
    attn_init(&k, -INFINITY);
    attn_forward(&k);
    double ws = 0, wo = 0;
    size_t masked_nonzero = 0, nan_rows = 0, nan_elsewhere = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const float *q = k.qkv + (b * T + i) * 3 * C + h * hs;
                const float *p = k.probs + ((b * NH + h) * T + i) * T;
                size_t nan_here = count_nan(p, T);
                int full = b == 1 && i == T - 1;
                nan_rows += full && nan_here == T;
                nan_elsewhere += !full && nan_here;
                for (int j = 0; j < T; j++) {
                    const float *kk = k.qkv + (b * T + j) * 3 * C + C + h * hs;
                    double s = 0;
                    for (int d = 0; d < hs; d++)
                        s += (double)q[d] * kk[d];
                    float got = k.scores[((b * NH + h) * T + i) * T + j];
                    if (k.mask[(b * T + i) * T + j])
                        ws = fmax(ws, fabs(got - s * k.scale));
                    else
                        masked_nonzero += !full && p[j] != 0.0f;
                }
                if (full)
                    continue;
                for (int d = 0; d < hs; d++) {
                    double o = 0;
                    for (int j = 0; j < T; j++)
                        o += (double)p[j] * k.qkv[(b * T + j) * 3 * C + 2 * C + h * hs + d];
                    wo = fmax(wo, fabs(k.out[(b * T + i) * C + h * hs + d] - o));
                }
            }
    CHECKF(ws < 1e-5, "attn scores: max error %g vs loop", ws);
    CHECKF(wo < 1e-5, "attn values: max error %g vs loop", wo);
    CHECKF(masked_nonzero == 0, "attn: %zu masked positions with nonzero prob", masked_nonzero);
    CHECKF(nan_rows == NH, "attn: %zu of %d fully masked rows NaN with fill -inf", nan_rows, NH);
    CHECKF(nan_elsewhere == 0, "attn: %zu partly masked rows have NaN", nan_elsewhere);

    k.fill = -65504.0f;
    attn_forward(&k);
    const float *p = k.probs + ((1 * NH + 1) * T + T - 1) * T;
    size_t uniform = 0;
    for (int j = 0; j < T; j++)
        uniform += p[j] == (float)(1.0 / T);
    CHECKF(uniform == T, "attn: fully masked row with fill -65504 not uniform (%g ...)", (double)p[0]);
}

static void test_attention_bwd(void)
{
    static struct attn_ctx k;
    static float dqkv[QKV], g1[QKV], dprobs[TT], dscores[TT], dq2[QKV], out1[N * C];
    enum { hs = C / NH };
    attn_init(&k, -65504.0f);
    attn_forward(&k);
    attn_backward(&k, dqkv, dprobs, dscores);
    grad_check("attention chain.qkv", k.qkv, QKV, dqkv, attn_loss, &k);
    size_t pad_grad = 0;
    const float *pad = dqkv + (1 * T + T - 1) * 3 * C; /* q and k of the padding position */
    for (int c = 0; c < 2 * C; c++)
        pad_grad += pad[c] != 0.0f;
    CHECKF(pad_grad == 0, "attn: %zu nonzero q/k gradients at the padding position", pad_grad);

    memcpy(g1, dqkv, sizeof g1);
    attn_forward(&k);
    attn_backward(&k, dqkv, dprobs, dscores);
    check_doubled("attention.dqkv", g1, dqkv, QKV);

    /* bit-identical rerun */
    memcpy(out1, k.out, sizeof out1);
    attn_forward(&k);
    memset(dq2, 0, sizeof dq2);
    attn_backward(&k, dq2, dprobs, dscores);
    CHECK(memcmp(out1, k.out, sizeof out1) == 0);
    CHECK(memcmp(dq2, g1, sizeof dq2) == 0);
}

/* ---- softmax -------------------------------------------------------------- */

enum { SR = 6, SN = 7 };

struct sm_ctx {
    float s[SR * SN], p[SR * SN], R[SR * SN];
};

static double sm_loss(void *p)
{
    struct sm_ctx *k = p;
    op_softmax_fwd(k->p, k->s, SR, SN);
    return dot_d(k->p, k->R, SR * SN);
}

static void test_softmax_fwd(void)
{
    float s[4 * 3] = {1, 2, 3, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 0.5f, -INFINITY, 1000, 1001, -1000};
    float p[4 * 3], q[4 * 3];
    op_softmax_fwd(p, s, 4, 3);
    double e = exp(1) + exp(2) + exp(3);
    CHECK(fabs(p[0] - exp(1) / e) < 1e-7 && fabs(p[2] - exp(3) / e) < 1e-7);
    CHECKF(count_nan(p + 3, 3) == 3, "softmax: an all -inf row must be NaN, got %g %g %g", p[3], p[4], p[5]);
    CHECK(p[6] == 0.0f && p[7] == 1.0f && p[8] == 0.0f);
    CHECKF(fabs(p[9] - 1 / (1 + exp(1))) < 1e-6 && p[11] == 0.0f, "softmax unstable for large inputs: %g", p[9]);
    memcpy(q, s, sizeof q);
    op_softmax_fwd(q, q, 4, 3); /* in place */
    CHECK(memcmp(p, q, sizeof q) == 0);

    static struct sm_ctx k;
    fill_rand(k.s, SR * SN, 4.0f);
    sm_loss(&k);
    double worst = 0;
    for (int r = 0; r < SR; r++) {
        double sum = 0;
        for (int j = 0; j < SN; j++)
            sum += k.p[r * SN + j];
        worst = fmax(worst, fabs(sum - 1.0));
    }
    CHECKF(worst < 1e-6, "softmax: rows sum to 1 +- %g", worst);
}

static void test_softmax_bwd(void)
{
    static struct sm_ctx k;
    static float ds[SR * SN], ds2[SR * SN];
    fill_rand(k.s, SR * SN, 3.0f);
    fill_rand(k.R, SR * SN, 1.0f);
    sm_loss(&k);
    fill_const(ds, SR * SN, NAN);
    op_softmax_bwd(ds, k.R, k.p, SR, SN);
    grad_check("softmax.scores", k.s, SR * SN, ds, sm_loss, &k);
    memcpy(ds2, k.R, sizeof ds2);
    op_softmax_bwd(ds2, ds2, k.p, SR, SN); /* in place over dprobs */
    CHECK(memcmp(ds, ds2, sizeof ds) == 0);
}

/* ---- GELU ----------------------------------------------------------------- */

enum { GN = 64 };

struct gelu_ctx {
    float x[GN], y[GN], R[GN];
};

static double gelu_loss(void *p)
{
    struct gelu_ctx *k = p;
    op_gelu_fwd(k->y, k->x, GN);
    return dot_d(k->y, k->R, GN);
}

static double gelu_ref(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static void test_gelu(void)
{
    static struct gelu_ctx k;
    static float dx[GN], g1[GN];
    float big[4] = {0.0f, 100.0f, -100.0f, 3e4f}, yb[4], db[4] = {0};
    fill_rand(k.x, GN, 4.0f);
    fill_rand(k.R, GN, 1.0f);
    gelu_loss(&k);
    double worst = 0;
    for (int i = 0; i < GN; i++)
        worst = fmax(worst, fabs(k.y[i] - gelu_ref(k.x[i])) / fmax(1.0, fabs(gelu_ref(k.x[i]))));
    CHECKF(worst < 1e-6, "gelu fwd: max rel error %g vs tanh formula", worst);
    op_gelu_fwd(yb, big, 4);
    CHECK(yb[0] == 0.0f && yb[1] == 100.0f && yb[2] == 0.0f && yb[3] == 3e4f);
    float ones[4] = {1, 1, 1, 1};
    op_gelu_bwd(db, big, ones, 4);
    CHECKF(db[0] == 0.5f && db[1] == 1.0f && db[2] == 0.0f && db[3] == 1.0f, "gelu': %g %g %g %g", db[0], db[1],
           db[2], db[3]);

    op_gelu_bwd(dx, k.x, k.R, GN);
    grad_check("gelu.inp", k.x, GN, dx, gelu_loss, &k);
    memcpy(g1, dx, sizeof g1);
    op_gelu_bwd(dx, k.x, k.R, GN);
    check_doubled("gelu.dinp", g1, dx, GN);
}

/* ---- cross-entropy -------------------------------------------------------- */

struct ce_ctx {
    float logits[N * V], probs[N * V], losses[N], weight[N];
    int32_t targets[N];
    float scale;
};

static double ce_loss(void *p)
{
    struct ce_ctx *k = p;
    return k->scale * op_crossentropy_fwd(k->losses, k->probs, k->logits, k->targets, k->weight, N, V);
}

/* Rows 2 and 7 are padding (weight 0, targets 256 and -1, out of range),
 * row 4 has weight 0.5, row 0 has logits near 100. */
static void ce_init(struct ce_ctx *k)
{
    fill_rand(k->logits, N * V, 3.0f);
    for (int j = 0; j < V; j++)
        k->logits[j] += 100.0f;
    for (int i = 0; i < N; i++) {
        k->targets[i] = (i * 5 + 3) % V;
        k->weight[i] = 1.0f;
    }
    k->weight[2] = k->weight[7] = 0.0f;
    k->targets[2] = 256;
    k->targets[7] = -1;
    k->weight[4] = 0.5f;
    k->scale = 0.37f;
}

static void test_crossentropy_fwd(void)
{
    static struct ce_ctx k;
    ce_init(&k);
    double total = op_crossentropy_fwd(k.losses, k.probs, k.logits, k.targets, k.weight, N, V);
    double worst = 0, sum = 0, psum_err = 0;
    for (int i = 0; i < N; i++) {
        const float *l = k.logits + i * V;
        double mx = -INFINITY, se = 0, ps = 0;
        for (int j = 0; j < V; j++)
            mx = fmax(mx, l[j]);
        for (int j = 0; j < V; j++)
            se += exp(l[j] - mx), ps += k.probs[i * V + j];
        double ref = k.weight[i] == 0 ? 0 : (log(se) - (l[k.targets[i]] - mx)) * k.weight[i];
        worst = fmax(worst, fabs(k.losses[i] - ref));
        psum_err = fmax(psum_err, fabs(ps - 1.0));
        sum += k.losses[i];
    }
    CHECKF(worst < 1e-5, "crossentropy: loss max error %g vs double log-softmax", worst);
    CHECKF(psum_err < 1e-6, "crossentropy: probs rows sum to 1 +- %g", psum_err);
    CHECK(k.losses[2] == 0.0f && k.losses[7] == 0.0f && !signbit(k.losses[2]));
    CHECKF(total == sum, "crossentropy: returned %.17g, sum of losses %.17g", total, sum);
}

static void test_crossentropy_bwd(void)
{
    static struct ce_ctx k;
    static float dl[N * V], dl2[N * V];
    ce_init(&k);
    ce_loss(&k);
    fill_const(dl, N * V, NAN);
    op_crossentropy_bwd(dl, k.probs, k.targets, k.weight, k.scale, N, V);
    grad_check("crossentropy.logits", k.logits, N * V, dl, ce_loss, &k);
    size_t pad_nonzero = 0;
    for (int j = 0; j < V; j++)
        pad_nonzero += dl[2 * V + j] != 0.0f || dl[7 * V + j] != 0.0f;
    CHECKF(pad_nonzero == 0, "crossentropy: %zu nonzero gradients in weight-0 rows", pad_nonzero);
    op_crossentropy_bwd(dl2, k.probs, k.targets, k.weight, k.scale, N, V);
    op_crossentropy_bwd(dl2, k.probs, k.targets, k.weight, k.scale, N, V);
    CHECKF(memcmp(dl, dl2, sizeof dl) == 0, "crossentropy bwd must write dlogits, not accumulate");
}

/* ---- AdamW, norms, scale, residual ---------------------------------------- */

/* Five steps against the update rule evaluated in double. */
static void test_adamw(void)
{
    enum { n = 16, steps = 5 };
    float p[n], m[n] = {0}, v[n] = {0}, g[n];
    double pr[n], mr[n] = {0}, vr[n] = {0};
    const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
    fill_rand(p, n, 1.0f);
    for (int i = 0; i < n; i++)
        pr[i] = p[i];
    double worst = 0;
    for (int t = 1; t <= steps; t++) {
        fill_rand(g, n, 1.0f);
        g[0] = 0.0f; /* only weight decay moves it */
        op_adamw(p, g, m, v, n, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, t);
        for (int i = 0; i < n; i++) {
            mr[i] = b1 * mr[i] + (1 - b1) * g[i];
            vr[i] = b2 * vr[i] + (1 - b2) * (double)g[i] * g[i];
            double mh = mr[i] / (1 - pow(b1, t)), vh = vr[i] / (1 - pow(b2, t));
            pr[i] -= lr * (mh / (sqrt(vh) + eps) + wd * pr[i]);
            worst = fmax(worst, fabs(p[i] - pr[i]) + fabs(m[i] - mr[i]) + fabs(v[i] - vr[i]));
        }
    }
    printf("adamw: %d steps, max |param - ref| = %.3g\n", steps, worst);
    CHECKF(worst < 1e-6, "adamw: max error %g vs double reference", worst);
}

static void test_norms(void)
{
    enum { n = 100003 };
    static float x[n];
    float x34[2] = {3.0f, 4.0f};
    CHECK(op_sumsq(x34, 2) == 5.0);
    CHECK(op_sum_squares(x34, 2) == 25.0);
    fill_rand(x, n, 10.0f);
    double a = op_sumsq(x, n), b = op_sumsq(x, n);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    long double ref = 0;
    for (size_t i = 0; i < n; i++)
        ref += (long double)x[i] * x[i];
    CHECKF(fabs(a - sqrt((double)ref)) <= 1e-12 * a, "sumsq %.17g vs %.17g", a, sqrt((double)ref));
    CHECK(a == sqrt(op_sum_squares(x, n)));
    x[17] = NAN;
    CHECK(isnan(op_sumsq(x, n)));

    op_scale(x34, 2, 0.5f);
    CHECK(x34[0] == 1.5f && x34[1] == 2.0f);
    float r[3], ra[3] = {1, 2, 3}, rb[3] = {0.5f, -2, 1e-8f};
    op_residual_fwd(r, ra, rb, 3);
    CHECK(r[0] == 1.5f && r[1] == 0.0f && r[2] == 3.0f);
}

/* ---- storage rounding ----------------------------------------------------- */

static void test_round_storage(void)
{
    float h[] = {65520.0f, 65519.0f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, -65520.0f, 0x1p-25f, NAN, 1e-8f};
    op_round_storage(h, 8, TFT_F16);
    CHECKF(isinf(h[0]) && h[0] > 0, "fp16: 65520 must overflow to +inf, got %g", h[0]);
    CHECK(h[1] == 65504.0f);
    CHECKF(h[2] == 1.0f && h[3] == 1.0f + 0x1p-9f, "fp16 ties to even: %a %a", h[2], h[3]);
    CHECK(isinf(h[4]) && h[4] < 0);
    CHECK(h[5] == 0.0f && isnan(h[6]) && h[7] == 0x1p-24f * roundf(1e-8f / 0x1p-24f));

    float bf[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 3.4028234e38f, 1.00390625f * 2, NAN};
    op_round_storage(bf, 5, TFT_BF16);
    CHECKF(bf[0] == 1.0f && bf[1] == 1.0f + 0x1p-6f, "bf16 ties to even: %a %a", bf[0], bf[1]);
    CHECKF(isinf(bf[2]), "bf16: FLT_MAX must round to inf, got %g", bf[2]);
    CHECK(bf[3] == 2.0f && isnan(bf[4]));

    /* chunked bulk path == scalar conversions, beyond one stack buffer */
    enum { n = 5000 };
    static float x[n], y[n], z[n];
    for (int i = 0; i < n; i++)
        x[i] = frand() * powf(2.0f, (float)(i % 40 - 24));
    memcpy(y, x, sizeof x), memcpy(z, x, sizeof x);
    op_round_storage(y, n, TFT_F16);
    op_round_storage(z, n, TFT_BF16);
    size_t bad = 0;
    for (int i = 0; i < n; i++)
        bad += y[i] != tft_f16_to_f32(tft_f32_to_f16(x[i])) || z[i] != tft_bf16_to_f32(tft_f32_to_bf16(x[i]));
    CHECKF(bad == 0, "round_storage: %zu values differ from the scalar converters", bad);
    memcpy(y, x, sizeof x);
    op_round_storage(y, n, TFT_F32);
    CHECK(memcmp(x, y, sizeof x) == 0);
}

int main(void)
{
    openblas_set_num_threads(1);
    test_embedding();
    test_layernorm_fwd();
    test_layernorm_bwd();
    test_matmul_fwd();
    test_matmul_bwd();
    test_attention_fwd();
    test_attention_bwd();
    test_softmax_fwd();
    test_softmax_bwd();
    test_gelu();
    test_crossentropy_fwd();
    test_crossentropy_bwd();
    test_adamw();
    test_norms();
    test_round_storage();
    return TEST_DONE();
}
