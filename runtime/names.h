/*
 * names.h — tftrain's canonical tensor names, in one place: what the model
 * (both backends: model.c, model_cuda.c), the training loop (train.c,
 * train_cuda.c) and the op-replay registry record and look up. Tests and
 * docs rely on them (runtime/README.md, "What it records"): a name changed
 * here changes for every part at once.
 *
 * Per layer l: the activations "L{l}.ln1", "L{l}.qkv", ... (gpt_act) and
 * the parameters "L{l}.ln1.w", ... (gpt_lparam, in the order of the
 * parameter block, model.c), plus the inputs each activation is recorded
 * with (the tensors it is computed from, by name).
 */
#ifndef TFT_NAMES_H
#define TFT_NAMES_H

#include <stddef.h>

/* Tensors outside the layers. */
#define GPT_N_TOKENS "tokens"
#define GPT_N_TARGETS "targets"
#define GPT_N_LOSS_MASK "loss_mask"
#define GPT_N_WTE "wte"
#define GPT_N_WPE "wpe"
#define GPT_N_EMB "emb"
#define GPT_N_LNF "lnf"
#define GPT_N_LNF_W "lnf.w"
#define GPT_N_LNF_B "lnf.b"
#define GPT_N_LOGITS "logits"
#define GPT_N_LOSS "loss"
#define GPT_N_GRAD_NORM "grad_norm"
#define GPT_N_LR "lr"
/* Per-parameter tensors: PREFIX + the parameter's name ("grad.L0.qkv.w"). */
#define GPT_P_GRAD "grad."
#define GPT_P_ADAM_M "adam.m."
#define GPT_P_ADAM_V "adam.v."
#define GPT_P_PARAM "param." /* a parameter after the update */

/* The activations of a layer, in the order the forward pass makes them. */
enum gpt_act {
    GPT_ACT_LN1, GPT_ACT_QKV, GPT_ACT_MASK, GPT_ACT_SCORES, GPT_ACT_PROBS, GPT_ACT_OUT, GPT_ACT_PROJ,
    GPT_ACT_RES1, GPT_ACT_LN2, GPT_ACT_FC, GPT_ACT_GELU, GPT_ACT_FCPROJ, GPT_ACT_RES2,
    GPT_NACT
};
/* "ln1", "qkv", "attn.mask", ... */
extern const char *const gpt_act_suffix[GPT_NACT];

/* The parameters of a layer, in the order of the parameter block. */
enum gpt_lparam {
    GPT_LN1W, GPT_LN1B, GPT_QKVW, GPT_QKVB, GPT_PROJW, GPT_PROJB, GPT_LN2W, GPT_LN2B,
    GPT_FCW, GPT_FCB, GPT_FCPW, GPT_FCPB,
    GPT_NPARAM_PER_LAYER
};
/* "ln1.w", "ln1.b", "qkv.w", ... */
extern const char *const gpt_lparam_suffix[GPT_NPARAM_PER_LAYER];

#define GPT_NAME_MAX 48

/* The names of one layer's tensors and the inputs each activation is
 * recorded with. inputs point into the struct (or at the global names):
 * copy the struct and they still point into the original. */
typedef struct gpt_layer_names {
    char act[GPT_NACT][GPT_NAME_MAX];               /* "L3.qkv" */
    char param[GPT_NPARAM_PER_LAYER][GPT_NAME_MAX]; /* "L3.qkv.w" */
    char in[GPT_NAME_MAX];                          /* the layer's input: "emb" or "L2.res2" */
    const char *inputs[GPT_NACT][3];
    int n_inputs[GPT_NACT];
} gpt_layer_names;

/* Fills n for layer l (>= 0). */
void gpt_layer_names_init(gpt_layer_names *n, int l);

/* Writes "L{l}.SUFFIX" of activation act into buf (n bytes); l = -1 and
 * GPT_ACT_RES2 is the first layer's input, GPT_N_EMB. */
void gpt_act_name(char *buf, size_t n, int l, int act);

/* A per-parameter tensor the training loop records, PREFIX + the
 * parameter's name, and its inputs: grad.P (loss), adam.m.P (grad.P, lr),
 * adam.v.P (grad.P), param.P (grad.P, P); the parameter itself (prefix "",
 * at initialisation) has none. */
typedef struct gpt_param_names {
    char name[64];
    char grad[64];          /* "grad.P", an input of the others */
    const char *inputs[2];  /* point into the struct, at param, or at the global names */
    int n_inputs;
} gpt_param_names;

/* Fills n for prefix (one of GPT_P_*, or "") and parameter name param
 * (kept: inputs may point at it). */
void gpt_param_names_init(gpt_param_names *n, const char *prefix, const char *param);

#endif
