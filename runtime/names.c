/*
 * names.c — tftrain's canonical tensor names (names.h).
 */
#include "names.h"

#include <stdio.h>
#include <string.h>

const char *const gpt_act_suffix[GPT_NACT] = {
    "ln1", "qkv", "attn.mask", "attn.scores", "attn.probs", "attn.out", "attn.proj",
    "res1", "ln2", "fc", "gelu", "fcproj", "res2",
};

const char *const gpt_lparam_suffix[GPT_NPARAM_PER_LAYER] = {
    "ln1.w", "ln1.b", "qkv.w", "qkv.b", "attn.proj.w", "attn.proj.b",
    "ln2.w", "ln2.b", "fc.w", "fc.b", "fcproj.w", "fcproj.b",
};

void gpt_act_name(char *buf, size_t n, int l, int act)
{
    if (l < 0 && act == GPT_ACT_RES2)
        snprintf(buf, n, "%s", GPT_N_EMB);
    else
        snprintf(buf, n, "L%d.%s", l, gpt_act_suffix[act]);
}

/* Activation act is recorded with the inputs a, b, c (NULL: fewer). */
static void inputs(gpt_layer_names *n, int act, const char *a, const char *b, const char *c)
{
    n->inputs[act][0] = a;
    n->inputs[act][1] = b;
    n->inputs[act][2] = c;
    n->n_inputs[act] = c ? 3 : b ? 2 : 1;
}

void gpt_layer_names_init(gpt_layer_names *n, int l)
{
    for (int k = 0; k < GPT_NACT; k++)
        gpt_act_name(n->act[k], sizeof(n->act[k]), l, k);
    for (int k = 0; k < GPT_NPARAM_PER_LAYER; k++)
        snprintf(n->param[k], sizeof(n->param[k]), "L%d.%s", l, gpt_lparam_suffix[k]);
    gpt_act_name(n->in, sizeof(n->in), l - 1, GPT_ACT_RES2);
    const char(*a)[GPT_NAME_MAX] = n->act, (*p)[GPT_NAME_MAX] = n->param;
    inputs(n, GPT_ACT_LN1, n->in, p[GPT_LN1W], p[GPT_LN1B]);
    inputs(n, GPT_ACT_QKV, a[GPT_ACT_LN1], p[GPT_QKVW], p[GPT_QKVB]);
    inputs(n, GPT_ACT_MASK, GPT_N_TOKENS, NULL, NULL);
    inputs(n, GPT_ACT_SCORES, a[GPT_ACT_QKV], NULL, NULL);
    inputs(n, GPT_ACT_PROBS, a[GPT_ACT_SCORES], a[GPT_ACT_MASK], NULL);
    inputs(n, GPT_ACT_OUT, a[GPT_ACT_PROBS], a[GPT_ACT_QKV], NULL);
    inputs(n, GPT_ACT_PROJ, a[GPT_ACT_OUT], p[GPT_PROJW], NULL);
    inputs(n, GPT_ACT_RES1, n->in, a[GPT_ACT_PROJ], NULL);
    inputs(n, GPT_ACT_LN2, a[GPT_ACT_RES1], p[GPT_LN2W], p[GPT_LN2B]);
    inputs(n, GPT_ACT_FC, a[GPT_ACT_LN2], p[GPT_FCW], NULL);
    inputs(n, GPT_ACT_GELU, a[GPT_ACT_FC], NULL, NULL);
    inputs(n, GPT_ACT_FCPROJ, a[GPT_ACT_GELU], p[GPT_FCPW], NULL);
    inputs(n, GPT_ACT_RES2, a[GPT_ACT_RES1], a[GPT_ACT_FCPROJ], NULL);
}

void gpt_param_names_init(gpt_param_names *n, const char *prefix, const char *param)
{
    snprintf(n->name, sizeof(n->name), "%s%s", prefix, param);
    snprintf(n->grad, sizeof(n->grad), "%s%s", GPT_P_GRAD, param);
    n->inputs[0] = n->inputs[1] = NULL;
    n->n_inputs = 0;
    if (!strcmp(prefix, GPT_P_GRAD)) {
        n->inputs[0] = GPT_N_LOSS;
        n->n_inputs = 1;
    } else if (!strcmp(prefix, GPT_P_ADAM_M)) {
        n->inputs[0] = n->grad;
        n->inputs[1] = GPT_N_LR;
        n->n_inputs = 2;
    } else if (!strcmp(prefix, GPT_P_ADAM_V)) {
        n->inputs[0] = n->grad;
        n->n_inputs = 1;
    } else if (!strcmp(prefix, GPT_P_PARAM)) {
        n->inputs[0] = n->grad;
        n->inputs[1] = param;
        n->n_inputs = 2;
    }
}
