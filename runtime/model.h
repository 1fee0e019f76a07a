/*
 * model.h — the GPT-2-style model of tftrain: token + learned position
 * embeddings, L pre-LayerNorm blocks (causal multi-head self-attention with
 * padding mask, GELU MLP), final LayerNorm, LM head tied to wte,
 * cross-entropy with per-position weights.
 *
 * All parameters live in one allocation (and their gradients, AdamW moments
 * in three more); activations in one more, sized for (B, T) at init.
 * Forward and backward are written with the ops of kernels/ops/tft_ops.h.
 * Recording through tft.h is done by the caller through the hooks below, so
 * the model compiles and tests without the tracer.
 */
#ifndef TFT_MODEL_H
#define TFT_MODEL_H

#include "names.h" /* GPT_NPARAM_PER_LAYER, the canonical tensor names */

#include <stddef.h>
#include <stdint.h>

struct tft_stats;        /* tft_types.h */
struct tft_stats_stream; /* tft_stats.h */

typedef struct gpt_config {
    int vocab;      /* V */
    int max_seq;    /* maximum T (wpe rows) */
    int layers;     /* L */
    int channels;   /* C */
    int heads;      /* NH, divides C */
} gpt_config;

/* One named parameter tensor inside the parameter block. */
typedef struct gpt_param {
    char name[32];          /* "wte", "L0.qkv.w", ... (names.h) */
    size_t offset, count;   /* in floats, within params/grads/m/v */
    int ndim;
    int64_t shape[2];
} gpt_param;

/* Knobs the bug zoo and the dtype emulation turn. */
typedef struct gpt_variant {
    int store_dtype;        /* tft_dtype of emulated activation storage (TFT_F32 = none) */
    float mask_fill;        /* value written where attention is masked */
    int causal_offset;      /* 0: t sees <= t; 1: t also sees t+1 (bug) */
    int combine_pad_mask;   /* 1: padding mask combined with causal (golden) */
    int scale_scores;       /* 1: scores scaled by 1/sqrt(hs) (golden) */
} gpt_variant;

typedef struct gpt_acts gpt_acts;

/* Callback with the statistics (enum tft_stats_mode mode) of an output the
 * model computed itself instead of its data (gpt_set_fused_stats). */
typedef void (*gpt_record_stats_fn)(void *ctx, const char *name, const struct tft_stats *st, int mode, int ndim,
                                    const int64_t *shape, const char *const *inputs, int n_inputs);

typedef struct gpt_model {
    gpt_config cfg;
    gpt_param *params_info; /* nparams entries */
    int nparams;
    size_t num_params;      /* floats */
    float *params, *grads, *m, *v;
    int B, T;               /* activation sizes */
    gpt_acts *acts;         /* forward activations and backward scratch */
    double last_loss_sum;   /* sum of weighted token losses of the last forward */
    int fused_mode;         /* gpt_set_fused_stats: tft_stats_mode, or -1 (off) */
    gpt_record_stats_fn fused_rec;
    struct tft_stats_stream *fused_stream; /* allocated by gpt_set_fused_stats */
} gpt_model;

/* Callback the model calls after each op with its output (for recording).
 * name: canonical tensor name ("L0.qkv", names.h); data: float32 host buffer. */
typedef void (*gpt_record_fn)(void *ctx, const char *name, const float *data, int ndim,
                              const int64_t *shape, const char *const *inputs, int n_inputs);

/* Fused statistics: with mode >= 0 (a tft_stats_mode), the forward computes
 * the statistics of its largest element- and row-wise outputs (per layer
 * attn.scores, attn.probs, gelu) itself, a piece of 2048 floats at a time
 * right after writing it (tft_stats_stream: the same statistics, bit for
 * bit, as tft_stats_compute of the whole), and reports them to rec_stats
 * instead of calling the record callback with the data; the outputs are
 * the same values either way. mode -1 turns it off (the default). Returns
 * 0, or -ENOMEM (then off). */
int gpt_set_fused_stats(gpt_model *m, int mode, gpt_record_stats_fn rec_stats);

/* Allocates parameters (initialised from seed: N(0, 0.02), LN w=1 b=0, biases 0;
 * residual projections scaled by 1/sqrt(2L)) and activations for (B, T).
 * Returns 0, -EINVAL for a bad config, -ENOMEM. */
int gpt_init(gpt_model *m, const gpt_config *cfg, int B, int T, uint64_t seed);
void gpt_free(gpt_model *m);
const gpt_param *gpt_param_find(const gpt_model *m, const char *name);

/* Forward over tokens (B,T) -> logits, and when targets != NULL the loss:
 * sum of per-position losses * weight, divided by denom. Returns the loss
 * (NaN when targets is NULL). mask_pad (B,T): 1 = real token, used for the
 * attention padding mask. rec may be NULL. */
float gpt_forward(gpt_model *m, const gpt_variant *var, const int32_t *tokens, const int32_t *targets,
                  const float *weight, const uint8_t *mask_pad, float denom, gpt_record_fn rec, void *ctx);
/* Backward of the last forward: grads += d(loss)/d(params). */
void gpt_backward(gpt_model *m, const gpt_variant *var, const int32_t *tokens, const int32_t *targets,
                  const float *weight, float denom);
/* Logits of the last forward, (B,T,V). */
const float *gpt_logits(const gpt_model *m);
void gpt_zero_grad(gpt_model *m);
/* Flips the least significant mantissa bit of every parameter value (each
 * moves by one unit in the last place, a relative 2^-23 or less, 0 becomes
 * the smallest subnormal): the same bits whatever the rank, so replicas
 * that were equal stay equal. A run from there differs from the unflipped
 * one by round-off only (tftrace --perturb, runtime/README.md). */
void gpt_perturb_params(gpt_model *m);

#endif
