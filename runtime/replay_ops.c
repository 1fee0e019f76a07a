/*
 * replay_ops.c — the registry of tftrain's replayable ops (replay_ops.h):
 * names resolved through names.h, each computed by the kernel of
 * kernels/ops that the model's forward pass (model.c) uses for it.
 */
#include "replay_ops.h"

#include "names.h"
#include "tft_format.h"
#include "tft_ops.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The layer activations that have a kernel, by gpt_act. */
static const struct {
    int act;
    rt_replay_kind kind;
    const char *pattern;
} layer_ops[] = {
    {GPT_ACT_LN1, RT_REPLAY_LAYERNORM, "L*.ln1"},
    {GPT_ACT_QKV, RT_REPLAY_MATMUL_BIAS, "L*.qkv"},
    {GPT_ACT_SCORES, RT_REPLAY_ATTN_SCORES, "L*.attn.scores"},
    {GPT_ACT_PROBS, RT_REPLAY_SOFTMAX, "L*.attn.probs"},
    {GPT_ACT_OUT, RT_REPLAY_ATTN_VALUES, "L*.attn.out"},
    {GPT_ACT_PROJ, RT_REPLAY_NO_BIAS, "L*.attn.proj"},
    {GPT_ACT_RES1, RT_REPLAY_RESIDUAL, "L*.res1"},
    {GPT_ACT_LN2, RT_REPLAY_LAYERNORM, "L*.ln2"},
    {GPT_ACT_FC, RT_REPLAY_NO_BIAS, "L*.fc"},
    {GPT_ACT_GELU, RT_REPLAY_GELU, "L*.gelu"},
    {GPT_ACT_FCPROJ, RT_REPLAY_NO_BIAS, "L*.fcproj"},
    {GPT_ACT_RES2, RT_REPLAY_RESIDUAL, "L*.res2"},
};

/* The ops outside the layers. */
static const struct {
    const char *name;
    rt_replay_kind kind;
} global_ops[] = {
    {GPT_N_EMB, RT_REPLAY_EMBEDDING},
    {GPT_N_LNF, RT_REPLAY_LAYERNORM},
    {GPT_N_LOGITS, RT_REPLAY_MATMUL},
};

#define N_LAYER_OPS (int)(sizeof(layer_ops) / sizeof(layer_ops[0]))
#define N_GLOBAL_OPS (int)(sizeof(global_ops) / sizeof(global_ops[0]))

/* Recorded inputs each kernel reads. */
static int kind_reads(rt_replay_kind k)
{
    switch (k) {
    case RT_REPLAY_EMBEDDING:
    case RT_REPLAY_LAYERNORM:
    case RT_REPLAY_MATMUL_BIAS:
        return 3;
    case RT_REPLAY_MATMUL:
    case RT_REPLAY_ATTN_VALUES:
    case RT_REPLAY_RESIDUAL:
        return 2;
    case RT_REPLAY_ATTN_SCORES:
    case RT_REPLAY_SOFTMAX:
    case RT_REPLAY_GELU:
        return 1;
    default:
        return 0;
    }
}

int rt_replay_count(void) { return N_GLOBAL_OPS + N_LAYER_OPS; }

rt_replay_entry rt_replay_entry_at(int i)
{
    if (i >= 0 && i < N_GLOBAL_OPS)
        return (rt_replay_entry){global_ops[i].kind, kind_reads(global_ops[i].kind), global_ops[i].name};
    i -= N_GLOBAL_OPS;
    if (i >= 0 && i < N_LAYER_OPS)
        return (rt_replay_entry){layer_ops[i].kind, kind_reads(layer_ops[i].kind), layer_ops[i].pattern};
    return (rt_replay_entry){RT_REPLAY_NONE, 0, NULL};
}

rt_replay_entry rt_replay_find(const char *name)
{
    rt_replay_entry none = {RT_REPLAY_NONE, 0, NULL};
    if (!name)
        return none;
    for (int i = 0; i < N_GLOBAL_OPS; i++)
        if (!strcmp(name, global_ops[i].name))
            return rt_replay_entry_at(i);
    /* "L{l}.SUFFIX", l a decimal layer index */
    if (name[0] != 'L' || name[1] < '0' || name[1] > '9')
        return none;
    const char *p = name + 1;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p != '.')
        return none;
    for (int i = 0; i < N_LAYER_OPS; i++)
        if (!strcmp(p + 1, gpt_act_suffix[layer_ops[i].act]))
            return rt_replay_entry_at(N_GLOBAL_OPS + i);
    return none;
}

const char *rt_replay_list(void)
{
    static char list[512];
    if (list[0])
        return list;
    size_t k = 0;
    for (int i = 0; i < rt_replay_count(); i++) {
        rt_replay_entry e = rt_replay_entry_at(i);
        if (e.kind == RT_REPLAY_NO_BIAS)
            continue;
        int n = snprintf(list + k, sizeof(list) - k, "%s%s", k ? ", " : "", e.pattern);
        if (n < 0 || (size_t)n >= sizeof(list) - k)
            break;
        k += (size_t)n;
    }
    return list;
}

/* ---- running one ---------------------------------------------------------------- */

typedef struct run {
    const char *name;
    const rt_replay_tensor *out, *in;
    int n_in;
    char *why;
    size_t whylen;
} run;

static int fail(run *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, r->whylen, fmt, ap);
    va_end(ap);
    return -1;
}

/* *out = a * b (* c) when every factor is >= 0 and the product fits: the
 * dimensions come from the file, and an overflowed product would let a
 * small buffer pass for a large one. */
static bool mul2(int64_t a, int64_t b, int64_t *out)
{
    return a >= 0 && b >= 0 && !__builtin_mul_overflow(a, b, out);
}

static bool mul3(int64_t a, int64_t b, int64_t c, int64_t *out)
{
    int64_t ab;
    return mul2(a, b, &ab) && mul2(ab, c, out);
}

static bool fits_int(int64_t v) { return v >= 0 && v <= INT32_MAX; }

static uint64_t numel(const rt_replay_tensor *t) { return t->bytes / (tft_dtype_size(t->dtype) ?: 1); }

/* The product of all dimensions but the last, -1 when it overflows. */
static int64_t rows_of(const rt_replay_tensor *t)
{
    int64_t r = 1;
    for (int i = 0; i + 1 < t->ndim; i++)
        if (!mul2(r, t->shape[i], &r))
            return -1;
    return r;
}

static int64_t last_dim(const rt_replay_tensor *t) { return t->ndim ? t->shape[t->ndim - 1] : 1; }

/* Input k, usable, of dtype and element count; else sets why. */
static const void *input(run *r, int k, int dtype, uint64_t n)
{
    if (k >= r->n_in) {
        fail(r, "the op lists %d input%s, its replay needs input %d too (tftrain does not list a bias among the "
                "inputs of every op)", r->n_in, r->n_in == 1 ? "" : "s", k);
        return NULL;
    }
    const rt_replay_tensor *t = &r->in[k];
    if (!t->data) {
        if (t->name)
            fail(r, "input %d (%s) %s", k, t->name, t->missing ? t->missing : "is not usable");
        else
            fail(r, "input %d %s", k, t->missing ? t->missing : "is not usable");
        return NULL;
    }
    size_t esz = tft_dtype_size(dtype);
    if (t->dtype != dtype || !esz || n > UINT64_MAX / esz || t->bytes != n * esz) {
        fail(r, "input %d (%s) is %s with %" PRIu64 " bytes, expected %s with %" PRIu64 " elements", k,
             t->name ? t->name : "?", tft_dtype_name(t->dtype), t->bytes, tft_dtype_name(dtype), n);
        return NULL;
    }
    return t->data;
}

static const rt_replay_tensor *in_desc(const run *r, int k) { return k < r->n_in ? &r->in[k] : NULL; }

static int run_attention(run *r, bool scores, float *got, uint64_t n, unsigned *how)
{
    const rt_replay_tensor *out = r->out, *q = in_desc(r, scores ? 0 : 1), *p0 = in_desc(r, 0);
    if (!q || !q->shape || q->ndim != 3 || out->ndim != (scores ? 4 : 3))
        return fail(r, "op %s: its qkv input was not captured", r->name);
    int64_t B = q->shape[0], T = q->shape[1], C3 = q->shape[2];
    int64_t NH = scores ? out->shape[1] : (p0 && p0->shape && p0->ndim == 4 ? p0->shape[1] : 0);
    int64_t BTC3, BNTT, BTC;
    /* what the kernels read and write: qkv [B, T, C3], scores/probs
     * [B, NH, T, T], the output [B, T, C3/3]; the output buffer is the
     * captured output's size, so its element count must be theirs */
    if (C3 % 3 || NH <= 0 || (C3 / 3) % NH || !mul3(B, T, C3, &BTC3) || !fits_int(BTC3) || !fits_int(NH) ||
        !mul3(B, NH, T, &BNTT) || !mul2(BNTT, T, &BNTT) || !mul3(B, T, C3 / 3, &BTC) ||
        (uint64_t)(scores ? BNTT : BTC) != n)
        return fail(r, "op %s: shapes do not fit attention", r->name);
    const float *qkv = input(r, scores ? 0 : 1, TFT_F32, (uint64_t)BTC3);
    if (!qkv)
        return -1;
    if (!scores) {
        const float *pr = input(r, 0, TFT_F32, (uint64_t)BNTT);
        if (!pr)
            return -1;
        op_attn_values_fwd(got, pr, qkv, (int)B, (int)T, (int)(C3 / 3), (int)NH);
        return 0;
    }
    float scale = 1.0f / sqrtf((float)(C3 / 3 / NH));
    op_attn_scores_fwd(got, qkv, (int)B, (int)T, (int)(C3 / 3), (int)NH, scale);
    if (out->data && memcmp(got, out->data, (size_t)out->bytes) != 0) { /* the missing-scale bug? */
        float *alt = malloc((size_t)out->bytes + 1);
        if (alt) {
            op_attn_scores_fwd(alt, qkv, (int)B, (int)T, (int)(C3 / 3), (int)NH, 1.0f);
            if (memcmp(alt, out->data, (size_t)out->bytes) == 0) {
                memcpy(got, alt, (size_t)out->bytes);
                *how |= RT_REPLAY_UNSCALED;
            }
            free(alt);
        }
    }
    return 0;
}

static int run_embedding(run *r, float *got, uint64_t n, int64_t C)
{
    const rt_replay_tensor *tok = in_desc(r, 0), *wte = in_desc(r, 1), *wpe = in_desc(r, 2);
    if (!tok || !tok->shape || tok->ndim != 2 || !wte || !wpe || r->out->ndim != 3)
        return fail(r, "op %s: tokens, wte and wpe must all be captured", r->name);
    int64_t B = tok->shape[0], T = tok->shape[1], V = (int64_t)(numel(wte) / (uint64_t)(C ? C : 1)), BT, TC, BTC;
    if (!fits_int(B) || !fits_int(T) || !mul2(B, T, &BT) || !mul2(T, C, &TC) || !mul3(B, T, C, &BTC))
        return fail(r, "op %s: shapes do not fit", r->name);
    const int32_t *tk = input(r, 0, TFT_I32, (uint64_t)BT);
    const float *e = tk ? input(r, 1, TFT_F32, numel(wte)) : NULL;
    const float *p = e ? input(r, 2, TFT_F32, numel(wpe)) : NULL;
    if (!p)
        return -1;
    if (numel(wpe) < (uint64_t)TC || (uint64_t)BTC != n)
        return fail(r, "op %s: shapes do not fit", r->name);
    for (int64_t i = 0; i < BT; i++)
        if (tk[i] < 0 || tk[i] >= V)
            return fail(r, "op %s: token %d out of the vocabulary (%" PRId64 ")", r->name, tk[i], V);
    op_embedding_fwd(got, tk, e, p, (int)B, (int)T, (int)C);
    return 0;
}

int rt_replay_run(const char *name, const rt_replay_tensor *out, const rt_replay_tensor *in, int n_in, float *got,
                  unsigned *how, char *why, size_t whylen)
{
    run r = {.name = name, .out = out, .in = in, .n_in = n_in < 0 ? 0 : n_in, .why = why, .whylen = whylen};
    *how = 0;
    rt_replay_entry e = rt_replay_find(name);
    if (e.kind == RT_REPLAY_NONE)
        return fail(&r, "no CPU reference is known for it (replayable: cblas gemms; tftrain's %s)", rt_replay_list());
    if (e.kind == RT_REPLAY_NO_BIAS)
        return fail(&r, "a matmul whose bias is not among the op's recorded inputs (tftrain lists only its input "
                        "and weight)");
    if (out->dtype != TFT_F32)
        return fail(&r, "op %s: output dtype %s (tftrain ops are f32)", name, tft_dtype_name(out->dtype));
    uint64_t n = numel(out);
    int64_t N = rows_of(out), C = last_dim(out);
    if (!fits_int(N) || !fits_int(C))
        return fail(&r, "op %s: dimensions too large", name);
    switch (e.kind) {
    case RT_REPLAY_GELU: {
        const float *x = input(&r, 0, TFT_F32, n);
        if (!x)
            return -1;
        op_gelu_fwd(got, x, n);
        return 0;
    }
    case RT_REPLAY_RESIDUAL: {
        const float *a = input(&r, 0, TFT_F32, n), *b = a ? input(&r, 1, TFT_F32, n) : NULL;
        if (!b)
            return -1;
        op_residual_fwd(got, a, b, n);
        return 0;
    }
    case RT_REPLAY_LAYERNORM: {
        const float *x = input(&r, 0, TFT_F32, n), *w = x ? input(&r, 1, TFT_F32, (uint64_t)C) : NULL;
        const float *b = w ? input(&r, 2, TFT_F32, (uint64_t)C) : NULL;
        float *stats = b ? malloc(2 * sizeof(float) * (size_t)N + 1) : NULL;
        if (!stats)
            return b ? fail(&r, "out of memory") : -1;
        op_layernorm_fwd(got, stats, stats + N, x, w, b, (int)N, (int)C);
        free(stats);
        return 0;
    }
    case RT_REPLAY_SOFTMAX: {
        /* its input holds the scores after the in-place masking, as softmax read them */
        const float *s = input(&r, 0, TFT_F32, n);
        if (!s)
            return -1;
        op_softmax_fwd(got, s, (int)N, (int)C);
        return 0;
    }
    case RT_REPLAY_MATMUL:
    case RT_REPLAY_MATMUL_BIAS: {
        const rt_replay_tensor *xi = in_desc(&r, 0);
        int64_t IC = xi && xi->shape ? last_dim(xi) : 0, NIC, CIC;
        if (!fits_int(IC) || !mul2(N, IC, &NIC) || !mul2(C, IC, &CIC))
            return fail(&r, "op %s: dimensions too large", name);
        const float *x = input(&r, 0, TFT_F32, (uint64_t)NIC);
        const float *w = x ? input(&r, 1, TFT_F32, (uint64_t)CIC) : NULL;
        const float *b = NULL;
        if (w && e.kind == RT_REPLAY_MATMUL_BIAS && !(b = input(&r, 2, TFT_F32, (uint64_t)C)))
            return -1;
        if (!w)
            return -1;
        op_matmul_fwd(got, x, w, b, (int)N, (int)IC, (int)C);
        return 0;
    }
    case RT_REPLAY_ATTN_SCORES:
    case RT_REPLAY_ATTN_VALUES:
        return run_attention(&r, e.kind == RT_REPLAY_ATTN_SCORES, got, n, how);
    case RT_REPLAY_EMBEDDING:
        return run_embedding(&r, got, n, C);
    default:
        return fail(&r, "op %s: no kernel", name);
    }
}
