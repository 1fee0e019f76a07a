/*
 * model_acts.h — the layout of the GPT's activations and backward scratch,
 * shared by the CPU model (model.c, host memory) and the CUDA backend
 * (model_cuda.c, device memory): one float block carved into the buffers
 * below, so both backends size and address them the same way.
 */
#ifndef TFT_MODEL_ACTS_H
#define TFT_MODEL_ACTS_H

#include "model.h"

#include <stddef.h>
#include <stdint.h>

struct gpt_acts {
    float *block;                       /* the one allocation (CPU; the CUDA backend owns its own) */
    uint8_t *mask;                      /* (B,T,T), CPU only */
    float *maskf;                       /* (B,T,T) the mask as floats, for recording */
    float *encoded;                     /* (B,T,C) */
    float *ln1, *ln1_mean, *ln1_rstd;   /* (L,B,T,C), (L,B,T), (L,B,T) */
    float *qkv;                         /* (L,B,T,3C) */
    float *scores, *att;                /* (L,B,NH,T,T) pre- and post-softmax */
    float *atty, *attproj, *res1;       /* (L,B,T,C) */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fc, *gelu;                   /* (L,B,T,4C) */
    float *fcproj, *res2;               /* (L,B,T,C) */
    float *lnf, *lnf_mean, *lnf_rstd;   /* (B,T,C), (B,T), (B,T) */
    float *logits, *probs;              /* (B,T,V) */
    float *losses;                      /* (B,T) */
    /* backward scratch */
    float *dres, *dtmp, *dln;           /* (B,T,C) */
    float *dqkv;                        /* (B,T,3C) */
    float *dbig, *dbig2;                /* (B,T,4C) */
    float *dscores, *dprobs;            /* (B,NH,T,T) */
    float *dlogits;                     /* (B,T,V) */
};

/* Layer l's slice of the per-layer activations, for its forward pass on
 * either backend: (B,T,C) buffers, qkv (B,T,3C), fc and gelu (B,T,4C),
 * scores and att (B,NH,T,T). */
typedef struct gpt_layer_acts {
    float *ln1, *qkv, *scores, *att, *atty, *attproj, *res1, *ln2, *fc, *gelu, *fcproj, *res2;
} gpt_layer_acts;

static inline gpt_layer_acts gpt_layer_acts_at(const gpt_acts *a, int B, int T, int C, int NH, int l)
{
    size_t BTC = (size_t)(B * T) * C, att = (size_t)B * NH * T * T;
    return (gpt_layer_acts){.ln1 = a->ln1 + l * BTC, .qkv = a->qkv + l * BTC * 3, .scores = a->scores + l * att,
                            .att = a->att + l * att, .atty = a->atty + l * BTC, .attproj = a->attproj + l * BTC,
                            .res1 = a->res1 + l * BTC, .ln2 = a->ln2 + l * BTC, .fc = a->fc + l * BTC * 4,
                            .gelu = a->gelu + l * BTC * 4, .fcproj = a->fcproj + l * BTC, .res2 = a->res2 + l * BTC};
}

/* Floats of the block for batch B x sequence T. */
size_t gpt_acts_floats(const gpt_config *c, size_t B, size_t T);
/* Points a's buffers into p (gpt_acts_floats(c, B, T) floats); block and
 * mask are left as they are. */
void gpt_acts_carve(gpt_acts *a, float *p, const gpt_config *c, size_t B, size_t T);

#endif
