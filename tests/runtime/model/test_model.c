/*
 * test_model.c — the GPT model of tftrain as a whole: a finite-difference
 * gradient check over every parameter tensor, the loss at initialisation
 * near ln(V), determinism, the padding/causal mask variants, and that a
 * few hundred AdamW steps overfit one batch.
 */
#include "model.h"
#include "tft_format.h"
#include "tft_ops.h"
#include "tft_test.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { B = 2, T = 6, V = 11 };

static const gpt_variant golden = {.store_dtype = TFT_F32, .mask_fill = -1e9f, .causal_offset = 0,
                                   .combine_pad_mask = 1, .scale_scores = 1};

typedef struct batch {
    int32_t tokens[B * T], targets[B * T];
    float weight[B * T];
    uint8_t pad[B * T];
    float denom;
} batch;

static void make_batch(batch *bt)
{
    for (int i = 0; i < B * T; i++) {
        bt->tokens[i] = (i * 7 + 3) % V;
        bt->targets[i] = (i * 5 + 1) % V;
        int real = !(i / T == 1 && i % T >= 4); /* row 1 ends with 2 pads */
        bt->pad[i] = (uint8_t)real;
        bt->weight[i] = real ? 1.0f : 0.0f;
    }
    bt->denom = 0;
    for (int i = 0; i < B * T; i++)
        bt->denom += bt->weight[i];
}

static double loss_at(gpt_model *m, const batch *bt)
{
    return gpt_forward(m, &golden, bt->tokens, bt->targets, bt->weight, bt->pad, bt->denom, NULL, NULL);
}

/* Central differences on up to 6 entries of every parameter tensor. */
static void test_gradcheck(void)
{
    gpt_config cfg = {.vocab = V, .max_seq = T, .layers = 2, .channels = 8, .heads = 2};
    gpt_model m;
    CHECK(gpt_init(&m, &cfg, B, T, 42) == 0);
    batch bt;
    make_batch(&bt);
    /* larger weights than the 0.02 init so every path carries gradient */
    for (size_t i = 0; i < m.num_params; i++)
        m.params[i] += 0.3f * sinf((float)i * 1.7f);
    gpt_zero_grad(&m);
    double l0 = loss_at(&m, &bt);
    gpt_backward(&m, &golden, bt.tokens, bt.targets, bt.weight, bt.denom);
    double worst = 0;
    const char *worst_name = "";
    for (int p = 0; p < m.nparams; p++) {
        const gpt_param *pi = &m.params_info[p];
        for (int k = 0; k < 6 && (size_t)k < pi->count; k++) {
            size_t idx = pi->offset + ((size_t)k * 7919u) % pi->count;
            float save = m.params[idx], eps = 1e-2f;
            m.params[idx] = save + eps;
            double lp = loss_at(&m, &bt);
            m.params[idx] = save - eps;
            double lm = loss_at(&m, &bt);
            m.params[idx] = save;
            double num = (lp - lm) / (2.0 * eps), ana = m.grads[idx];
            double err = fabs(num - ana) / fmax(fabs(num) + fabs(ana), 1e-3);
            if (err > worst) {
                worst = err;
                worst_name = pi->name;
            }
        }
    }
    printf("gradcheck: loss %.4f, worst relative error %.3g (%s)\n", l0, worst, worst_name);
    CHECKF(worst < 0.05, "worst relative error %g at %s", worst, worst_name);
    gpt_free(&m);
}

static void test_init_loss_and_determinism(void)
{
    gpt_config cfg = {.vocab = V, .max_seq = T, .layers = 1, .channels = 16, .heads = 4};
    gpt_model a, b;
    CHECK(gpt_init(&a, &cfg, B, T, 7) == 0 && gpt_init(&b, &cfg, B, T, 7) == 0);
    batch bt;
    make_batch(&bt);
    double la = loss_at(&a, &bt), lb = loss_at(&b, &bt);
    CHECKF(fabs(la - log((double)V)) < 0.1, "initial loss %f, ln(V) %f", la, log((double)V));
    CHECK(la == lb && memcmp(gpt_logits(&a), gpt_logits(&b), sizeof(float) * B * T * V) == 0);
    gpt_model c;
    CHECK(gpt_init(&c, &cfg, B, T, 8) == 0);
    CHECK(loss_at(&c, &bt) != la); /* another seed, another model */
    /* the causal mask matters: a future token changes earlier logits only with the bug */
    batch b2 = bt;
    b2.tokens[T - 1] = (b2.tokens[T - 1] + 1) % V;
    float first[V];
    loss_at(&a, &bt);
    memcpy(first, gpt_logits(&a) + (T - 2) * V, sizeof(first));
    loss_at(&a, &b2);
    CHECK(memcmp(first, gpt_logits(&a) + (T - 2) * V, sizeof(first)) == 0);
    gpt_variant leak = golden;
    leak.causal_offset = 1;
    gpt_forward(&a, &leak, bt.tokens, bt.targets, bt.weight, bt.pad, bt.denom, NULL, NULL);
    memcpy(first, gpt_logits(&a) + (T - 2) * V, sizeof(first));
    gpt_forward(&a, &leak, b2.tokens, b2.targets, b2.weight, b2.pad, b2.denom, NULL, NULL);
    CHECK(memcmp(first, gpt_logits(&a) + (T - 2) * V, sizeof(first)) != 0);
    gpt_free(&a);
    gpt_free(&b);
    gpt_free(&c);
}

static void test_overfit(void)
{
    gpt_config cfg = {.vocab = V, .max_seq = T, .layers = 2, .channels = 16, .heads = 2};
    gpt_model m;
    CHECK(gpt_init(&m, &cfg, B, T, 1) == 0);
    batch bt;
    make_batch(&bt);
    double first = 0, last = 0;
    for (int step = 1; step <= 300; step++) {
        gpt_zero_grad(&m);
        last = loss_at(&m, &bt);
        if (step == 1)
            first = last;
        gpt_backward(&m, &golden, bt.tokens, bt.targets, bt.weight, bt.denom);
        op_adamw(m.params, m.grads, m.m, m.v, m.num_params, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.0f, step);
    }
    printf("overfit one batch: loss %.4f -> %.4f\n", first, last);
    CHECKF(last < 0.05 * first, "loss %f -> %f", first, last);
    gpt_free(&m);
}

int main(void)
{
    openblas_set_num_threads(1);
    test_gradcheck();
    test_init_loss_and_determinism();
    test_overfit();
    return TEST_DONE();
}
