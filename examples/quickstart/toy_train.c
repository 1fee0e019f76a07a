/*
 * toy_train.c — a tiny instrumented training loop for the quick start:
 * linear regression y = W x by SGD, every op recorded through tft.h.
 *
 *   toy_train [--steps N] [--bug lr@S]     (lr@S: the learning rate is
 *                                           200x too large from step S on,
 *                                           so the loss blows up)
 *
 * Shapes: x (B,D), W (D,1), pred (B,1). Deterministic: same flags, same trace.
 */
#include "tft.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 64, D = 32 };

typedef struct model {
    float w[D], grad[D], x[B * D], y[B], pred[B];
} model;

static uint32_t rng = 12345;
static float frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / (float)(1u << 24) - 0.5f;
}

static void make_batch(model *m, const float *w_true)
{
    for (int b = 0; b < B; b++) {
        float s = 0;
        for (int d = 0; d < D; d++) {
            m->x[b * D + d] = frand();
            s += m->x[b * D + d] * w_true[d];
        }
        m->y[b] = s;
    }
    int64_t sx[2] = {B, D};
    tft_tensor("x", TFT_F32, m->x, 2, sx);
}

/* One SGD step; returns the loss. */
static float train_step(model *m, float lr)
{
    uint64_t ids[2] = {tft_last_tensor_id(), 0};
    tft_op_begin("matmul", TFT_OP_RUNTIME, 1, ids);
    for (int b = 0; b < B; b++) {
        float s = 0;
        for (int d = 0; d < D; d++)
            s += m->x[b * D + d] * m->w[d];
        m->pred[b] = s;
    }
    int64_t sp[2] = {B, 1};
    tft_tensor("pred", TFT_F32, m->pred, 2, sp);
    tft_op_end();
    float loss = 0;
    memset(m->grad, 0, sizeof(m->grad));
    for (int b = 0; b < B; b++) {
        float e = m->pred[b] - m->y[b];
        loss += e * e / B;
        for (int d = 0; d < D; d++)
            m->grad[d] += 2 * e * m->x[b * D + d] / B;
    }
    int64_t s1 = 1, sd = D;
    tft_tensor("loss", TFT_F32, &loss, 1, &s1);
    tft_tensor("grad.W", TFT_F32, m->grad, 1, &sd);
    tft_tensor("lr", TFT_F32, &lr, 1, &s1);
    for (int d = 0; d < D; d++)
        m->w[d] -= lr * m->grad[d];
    tft_tensor("param.W", TFT_F32, m->w, 1, &sd);
    return loss;
}

int main(int argc, char **argv)
{
    int steps = 50, bug_at = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bug") && i + 1 < argc && !strncmp(argv[i + 1], "lr@", 3))
            bug_at = atoi(argv[++i] + 3);
        else {
            fprintf(stderr, "usage: toy_train [--steps N] [--bug lr@STEP]\n");
            return 2;
        }
    }
    model *m = calloc(1, sizeof(*m));
    float w_true[D];
    for (int d = 0; d < D; d++)
        w_true[d] = frand();
    tft_alloc(m, sizeof(*m), "toy_train:model");
    float loss = 0;
    for (int step = 0; step < steps; step++) {
        tft_step_begin(step);
        make_batch(m, w_true);
        float lr = 0.1f * (bug_at >= 0 && step >= bug_at ? 200.0f : 1.0f);
        loss = train_step(m, lr);
        tft_step_end(step);
        if (step % 10 == 0 || step == steps - 1)
            printf("step %3d  loss %.6f\n", step, loss);
    }
    tft_free(m);
    free(m);
    return isfinite(loss) ? 0 : 1;
}
