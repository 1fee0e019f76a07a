/*
 * test_replay_ops.c — the registry of replayable ops (runtime/replay_ops.h)
 * against the model itself: a forward pass reports every op with its
 * output and its inputs by name (names.h); each op the registry says it can
 * replay is re-run from those inputs, as they are when the op is reported
 * (what a capture holds), and must give its output bit for bit. Every
 * activation the model reports must be known to the registry (replayable,
 * or a matmul whose bias is not recorded), so a renamed or new tensor fails
 * here instead of silently breaking `tfdump --replay-op`. Then the name
 * parser and the checks on hostile tensors.
 */
#include "model.h"
#include "replay_ops.h"
#include "tft_format.h"
#include "tft_test.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, T = 5, V = 13, L = 2, MAXT = 128 };

typedef struct seen {
    char name[GPT_NAME_MAX];
    const float *data; /* the model's buffer: live, as a capture at the op reads it */
    int ndim;
    int64_t shape[4];
    uint64_t bytes;
} seen;

typedef struct ctx {
    gpt_model *m;
    const int32_t *tokens;
    seen t[MAXT];
    int n;
    int replayed[RT_REPLAY_NO_BIAS + 1]; /* bit-identical replays per kind */
    int no_bias, unknown, failed;
    int unscaled;                        /* the model runs without 1/sqrt(head size): scores replay says so */
} ctx;

/* Input `name` of an op as a capture would hold it. */
static rt_replay_tensor lookup(ctx *c, const char *name)
{
    static const int64_t tok_shape[2] = {B, T};
    if (!strcmp(name, GPT_N_TOKENS))
        return (rt_replay_tensor){.name = name, .dtype = TFT_I32, .ndim = 2, .shape = tok_shape,
                                  .data = c->tokens, .bytes = sizeof(int32_t) * B * T};
    const gpt_param *p = gpt_param_find(c->m, name);
    if (p)
        return (rt_replay_tensor){.name = name, .dtype = TFT_F32, .ndim = p->ndim, .shape = p->shape,
                                  .data = c->m->params + p->offset, .bytes = sizeof(float) * p->count};
    for (int i = c->n - 1; i >= 0; i--)
        if (!strcmp(c->t[i].name, name))
            return (rt_replay_tensor){.name = name, .dtype = TFT_F32, .ndim = c->t[i].ndim, .shape = c->t[i].shape,
                                      .data = c->t[i].data, .bytes = c->t[i].bytes};
    return (rt_replay_tensor){.name = name, .missing = "was not reported before the op"};
}

static void on_op(void *vc, const char *name, const float *data, int ndim, const int64_t *shape,
                  const char *const *inputs, int n_inputs)
{
    ctx *c = vc;
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++)
        numel *= (uint64_t)shape[i];
    rt_replay_tensor out = {.name = name, .dtype = TFT_F32, .ndim = ndim, .shape = shape, .data = data,
                            .bytes = numel * sizeof(float)};
    rt_replay_entry e = rt_replay_find(name);
    if (e.kind == RT_REPLAY_NONE) {
        /* the mask (built, not computed from recorded inputs) and the loss */
        int ok = strstr(name, ".attn.mask") != NULL || !strcmp(name, GPT_N_LOSS);
        CHECKF(ok, "%s: the model reports it, the registry does not know it", name);
        c->unknown += !ok;
    } else if (e.kind == RT_REPLAY_NO_BIAS) {
        c->no_bias++;
    } else {
        CHECKF(e.reads <= n_inputs, "%s: its replay reads %d inputs, the model records %d", name, e.reads, n_inputs);
        rt_replay_tensor in[8];
        int n = n_inputs < 8 ? n_inputs : 8;
        for (int i = 0; i < n; i++)
            in[i] = lookup(c, inputs[i]);
        float *got = calloc(numel + 1, sizeof(float));
        char why[512] = "";
        unsigned how = 0;
        int rc = got ? rt_replay_run(name, &out, in, n, got, &how, why, sizeof(why)) : -1;
        unsigned want = c->unscaled && e.kind == RT_REPLAY_ATTN_SCORES ? RT_REPLAY_UNSCALED : 0;
        int same = rc == 0 && memcmp(got, data, (size_t)out.bytes) == 0 && how == want;
        CHECKF(same, "%s: replay %s (%s)", name, rc ? "failed" : "differs", why);
        if (same)
            c->replayed[e.kind]++;
        else
            c->failed++;
        free(got);
    }
    if (c->n < MAXT) {
        seen *s = &c->t[c->n++];
        snprintf(s->name, sizeof(s->name), "%s", name);
        s->data = data;
        s->ndim = ndim < 4 ? ndim : 4;
        memcpy(s->shape, shape, sizeof(int64_t) * (size_t)s->ndim);
        s->bytes = out.bytes;
    }
}

static void test_against_model(void)
{
    gpt_config cfg = {.vocab = V, .max_seq = T, .layers = L, .channels = 8, .heads = 2};
    gpt_model m;
    CHECK(gpt_init(&m, &cfg, B, T, 3) == 0);
    int32_t tokens[B * T], targets[B * T];
    float weight[B * T];
    uint8_t pad[B * T];
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (i * 5 + 2) % V;
        targets[i] = (i * 3 + 1) % V;
        pad[i] = 1;
        weight[i] = 1;
    }
    gpt_variant var = {.store_dtype = TFT_F32, .mask_fill = -1e9f, .combine_pad_mask = 1, .scale_scores = 1};
    ctx *c = calloc(1, sizeof(*c));
    CHECK(c != NULL);
    if (!c)
        return;
    c->m = &m;
    c->tokens = tokens;
    gpt_forward(&m, &var, tokens, targets, weight, pad, (float)(B * T), on_op, c);
    /* every kind the registry has was exercised and matched */
    for (int i = 0; i < rt_replay_count(); i++) {
        rt_replay_entry e = rt_replay_entry_at(i);
        if (e.kind != RT_REPLAY_NO_BIAS)
            CHECKF(c->replayed[e.kind] > 0, "%s: never replayed against the model", e.pattern);
    }
    CHECKF(c->no_bias == 3 * L, "matmuls without a recorded bias: %d, want %d", c->no_bias, 3 * L);
    CHECK(c->unknown == 0 && c->failed == 0);
    /* the unscaled-scores bug (bug zoo: no-scale) is told apart */
    var.scale_scores = 0;
    memset(c->replayed, 0, sizeof(c->replayed));
    c->n = 0;
    c->unscaled = 1;
    gpt_forward(&m, &var, tokens, targets, weight, pad, (float)(B * T), on_op, c);
    CHECK(c->replayed[RT_REPLAY_ATTN_SCORES] == L && c->failed == 0);
    free(c);
    gpt_free(&m);
}

static void test_names(void)
{
    CHECK(rt_replay_find("emb").kind == RT_REPLAY_EMBEDDING);
    CHECK(rt_replay_find("lnf").kind == RT_REPLAY_LAYERNORM);
    CHECK(rt_replay_find("logits").kind == RT_REPLAY_MATMUL);
    CHECK(rt_replay_find("L0.ln1").kind == RT_REPLAY_LAYERNORM);
    CHECK(rt_replay_find("L11.attn.probs").kind == RT_REPLAY_SOFTMAX);
    CHECK(rt_replay_find("L3.fc").kind == RT_REPLAY_NO_BIAS);
    static const char *const none[] = {"", "L", "L.ln1", "Lx.ln1", "L1ln1", "L1.ln3", "L1.ln1.w", "l1.ln1",
                                       "cblas_sgemm", "grad.L0.ln1", "L0.attn.mask", "loss"};
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
        CHECKF(rt_replay_find(none[i]).kind == RT_REPLAY_NONE, "'%s'", none[i]);
    CHECK(rt_replay_find(NULL).kind == RT_REPLAY_NONE);
    const char *list = rt_replay_list();
    CHECK(strstr(list, "emb") && strstr(list, "L*.gelu") && strstr(list, "L*.attn.out"));
    CHECK(!strstr(list, "L*.fc,") && !strstr(list, "L*.fcproj"));
}

/* Tensors whose sizes, dtypes or presence do not fit: a reason, no kernel. */
static void test_hostile(void)
{
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, w[4] = {1, 1, 1, 1}, b[4] = {0}, got[8];
    int64_t s24[2] = {2, 4}, s4[1] = {4}, huge[3] = {INT64_MAX / 2, 4, 4};
    rt_replay_tensor out = {.name = "L0.ln1", .dtype = TFT_F32, .ndim = 2, .shape = s24, .data = x,
                            .bytes = sizeof(x)};
    rt_replay_tensor in[3] = {
        {.name = "emb", .dtype = TFT_F32, .ndim = 2, .shape = s24, .data = x, .bytes = sizeof(x)},
        {.name = "L0.ln1.w", .dtype = TFT_F32, .ndim = 1, .shape = s4, .data = w, .bytes = sizeof(w)},
        {.name = "L0.ln1.b", .dtype = TFT_F32, .ndim = 1, .shape = s4, .data = b, .bytes = sizeof(b)},
    };
    char why[512];
    unsigned how;
    CHECK(rt_replay_run("L0.ln1", &out, in, 3, got, &how, why, sizeof(why)) == 0);
    CHECKF(rt_replay_run("L0.ln1", &out, in, 2, got, &how, why, sizeof(why)) < 0 && strstr(why, "lists 2 inputs"),
           "%s", why);
    rt_replay_tensor gone = in[1];
    gone.data = NULL;
    gone.missing = "is incomplete in the trace";
    rt_replay_tensor in2[3] = {in[0], gone, in[2]};
    CHECKF(rt_replay_run("L0.ln1", &out, in2, 3, got, &how, why, sizeof(why)) < 0 &&
               strstr(why, "input 1 (L0.ln1.w) is incomplete in the trace"), "%s", why);
    in2[1] = in[1];
    in2[1].dtype = TFT_F16;
    CHECKF(rt_replay_run("L0.ln1", &out, in2, 3, got, &how, why, sizeof(why)) < 0 && strstr(why, "expected f32"),
           "%s", why);
    rt_replay_tensor big = out;
    big.shape = huge;
    big.ndim = 3;
    CHECKF(rt_replay_run("L0.gelu", &big, in, 1, got, &how, why, sizeof(why)) < 0 && strstr(why, "too large"), "%s",
           why);
    rt_replay_tensor i32 = out;
    i32.dtype = TFT_I32;
    CHECKF(rt_replay_run("L0.gelu", &i32, in, 1, got, &how, why, sizeof(why)) < 0 && strstr(why, "output dtype"),
           "%s", why);
    CHECKF(rt_replay_run("L0.attn.scores", &out, in, 1, got, &how, why, sizeof(why)) < 0 && strstr(why, "qkv"),
           "%s", why);
    CHECKF(rt_replay_run("L0.fc", &out, in, 2, got, &how, why, sizeof(why)) < 0 && strstr(why, "bias"), "%s", why);
    CHECKF(rt_replay_run("mystery", &out, in, 1, got, &how, why, sizeof(why)) < 0 &&
               strstr(why, "no CPU reference") && strstr(why, "L*.res2"), "%s", why);
}

int main(void)
{
    openblas_set_num_threads(1);
    test_against_model();
    test_names();
    test_hostile();
    return TEST_DONE();
}
