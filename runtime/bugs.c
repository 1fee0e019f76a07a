/*
 * bugs.c — names of the bug zoo and the NAME[@STEP] parser.
 */
#include "train.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int needs_step; /* 1: @STEP required; 0: @STEP optional (default 0) */
} bugs[BUG_COUNT] = {
    [BUG_NONE] = {"none", 0},
    [BUG_LABEL_SHIFT] = {"label-shift", 0},
    [BUG_POS_ZERO] = {"pos-zero", 0},
    [BUG_CAUSAL_OFFBYONE] = {"causal-offbyone", 0},
    [BUG_PAD_MASK] = {"pad-mask", 0},
    [BUG_LOSS_PAD] = {"loss-pad", 0},
    [BUG_NO_SCALE] = {"no-scale", 0},
    [BUG_FP16_MASK] = {"fp16-mask", 0},
    [BUG_NO_WARMUP] = {"no-warmup", 0},
    [BUG_GRAD_ACCUM] = {"grad-accum", 0},
    [BUG_NO_CLIP] = {"no-clip", 0},
    [BUG_TOKEN_OOB] = {"token-oob", 1},
    [BUG_SHORT_BATCH] = {"short-batch", 1},
    [BUG_CKPT_OPTIM] = {"ckpt-optim", 0},
    [BUG_CKPT_DATA] = {"ckpt-data", 0},
    [BUG_DP_MEAN] = {"dp-mean", 0},
    [BUG_DP_SHARD] = {"dp-shard", 0},
    [BUG_DP_SKIP] = {"dp-skip", 1},
    [BUG_DP_NOSYNC] = {"dp-nosync", 0},
    [BUG_LEAK] = {"leak", 1},
    [BUG_NONDET] = {"nondet", 0},
};

const char *bug_name(int kind)
{
    return kind >= 0 && kind < BUG_COUNT ? bugs[kind].name : "?";
}

void bug_list(char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (int k = 1; k < BUG_COUNT && n < cap; k++)
        n += (size_t)snprintf(out + n, cap - n, "%s%s%s", k > 1 ? ", " : "", bugs[k].name,
                              bugs[k].needs_step ? "@STEP" : "");
}

int bug_parse(const char *s, bug *out, char *err, size_t errlen)
{
    char name[64];
    const char *at = strchr(s, '@');
    size_t len = at ? (size_t)(at - s) : strlen(s);
    out->kind = BUG_NONE;
    out->step = 0;
    if (len >= sizeof(name))
        len = sizeof(name) - 1;
    memcpy(name, s, len);
    name[len] = '\0';
    for (int k = 1; k < BUG_COUNT; k++) {
        if (strcmp(name, bugs[k].name) != 0)
            continue;
        if (at) {
            char *end;
            long long st = strtoll(at + 1, &end, 10);
            if (end == at + 1 || *end || st < 0) {
                snprintf(err, errlen, "--bug %s: '%s' is not a step number", name, at + 1);
                return -EINVAL;
            }
            out->step = st;
        } else if (bugs[k].needs_step) {
            snprintf(err, errlen, "--bug %s needs a step: --bug %s@STEP", name, name);
            return -EINVAL;
        }
        out->kind = k;
        return 0;
    }
    snprintf(err, errlen, "--bug: unknown bug '%s' (see tftrain --help)", name);
    return -EINVAL;
}
