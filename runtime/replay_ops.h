/*
 * replay_ops.h — which of tftrain's recorded ops can be re-run on the CPU
 * from their captured tensors, and how: the registry `tfdump --replay-op`
 * links (docs/CAPTURE.md, "Replaying one op").
 *
 * An op is told by its recorded name, resolved through the canonical names
 * (names.h): "emb", "lnf", "logits" and the layer activations "L{l}.SUFFIX"
 * of gpt_act_suffix. Each entry says which kernel of kernels/ops computes it
 * and which of the op's recorded inputs (in the order names.h records them)
 * it reads, so a tensor renamed in the model renames its replay too, and a
 * change to an op's recorded inputs fails the registry's test
 * (tests/runtime/model/test_replay_ops.c) instead of silently breaking
 * replay.
 *
 * The registry trusts nothing in the tensors it is given: dtypes, element
 * counts and every product of dimensions are checked (they come from a
 * trace file) before a kernel runs.
 */
#ifndef TFT_REPLAY_OPS_H
#define TFT_REPLAY_OPS_H

#include <stddef.h>
#include <stdint.h>

/* A tensor of the op as the trace holds it. data NULL: not usable, and
 * missing says why ("was not captured (...)", "(NAME) is incomplete in the
 * trace"); the registry puts that reason in its message. */
typedef struct rt_replay_tensor {
    const char *name;     /* recorded name, for messages */
    int dtype;            /* enum tft_dtype */
    int ndim;
    const int64_t *shape; /* ndim entries */
    const void *data;     /* dense, row-major; NULL: see missing */
    uint64_t bytes;       /* of data */
    const char *missing;  /* why data is NULL */
} rt_replay_tensor;

/* The kernels an op can be replayed with. */
typedef enum rt_replay_kind {
    RT_REPLAY_NONE = 0,     /* not replayable */
    RT_REPLAY_EMBEDDING,    /* tokens, wte, wpe */
    RT_REPLAY_LAYERNORM,    /* x, w, b */
    RT_REPLAY_MATMUL_BIAS,  /* x, w, b */
    RT_REPLAY_MATMUL,       /* x, w (no bias) */
    RT_REPLAY_ATTN_SCORES,  /* qkv */
    RT_REPLAY_SOFTMAX,      /* the masked scores (the mask is recorded as a second input, unused) */
    RT_REPLAY_ATTN_VALUES,  /* probs, qkv */
    RT_REPLAY_GELU,         /* x */
    RT_REPLAY_RESIDUAL,     /* a, b */
    RT_REPLAY_NO_BIAS,      /* a matmul whose bias is not among its recorded inputs: not replayable */
} rt_replay_kind;

/* What rt_replay_find knows of an op name. */
typedef struct rt_replay_entry {
    rt_replay_kind kind;
    int reads;            /* recorded inputs the kernel reads (the first `reads`) */
    const char *pattern;  /* the names it covers, "L*.ln1" or "emb", for messages and docs */
} rt_replay_entry;

/* The entry for a recorded op name; kind RT_REPLAY_NONE (and reads 0) for
 * a name tftrain does not record or that has no CPU reference. */
rt_replay_entry rt_replay_find(const char *name);

/* Every replayable pattern, comma-separated ("emb, L*.ln1, ..."), for
 * messages. A static string. */
const char *rt_replay_list(void);

/* Number of entries and entry i (0 <= i < n) of the registry, for tests
 * and docs. */
int rt_replay_count(void);
rt_replay_entry rt_replay_entry_at(int i);

/* Flags rt_replay_run sets in *how. */
enum {
    RT_REPLAY_UNSCALED = 1, /* the attention scores matched only without 1/sqrt(head size) */
};

/* Re-runs op `name` into got (out->bytes bytes, f32) from in[0..n_in-1]
 * (the op's recorded inputs, in order). out describes the captured output
 * (its data is read only to tell the missing-scale bug: *how gets
 * RT_REPLAY_UNSCALED when the scores match only unscaled). Returns 0, or
 * -1 with the reason in why (whylen bytes) when the op cannot be replayed
 * from these tensors. */
int rt_replay_run(const char *name, const rt_replay_tensor *out, const rt_replay_tensor *in, int n_in, float *got,
                  unsigned *how, char *why, size_t whylen);

#endif
