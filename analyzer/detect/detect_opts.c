/*
 * detect_opts.c — the detectors' thresholds (detect.h): --threshold
 * NAME=VALUE into a detect_opts, and the clip threshold a recorded tftrain
 * command line states. The names are docs/CHECK.md's "Thresholds".
 */
#include "detect.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    size_t off;
} opt_fields[] = {
    {"vocab", offsetof(detect_opts, vocab)},
    {"clip", offsetof(detect_opts, clip)},
    {"min-steps", offsetof(detect_opts, min_steps)},
    {"loss-drop", offsetof(detect_opts, loss_drop)},
    {"loss-rise", offsetof(detect_opts, loss_rise)},
    {"spike", offsetof(detect_opts, spike)},
    {"growth", offsetof(detect_opts, growth)},
    {"growth-steps", offsetof(detect_opts, growth_steps)},
    {"update-max", offsetof(detect_opts, update_max)},
    {"init-std", offsetof(detect_opts, init_std)},
    {"absmax-growth", offsetof(detect_opts, absmax_growth)},
    {"absmax-min", offsetof(detect_opts, absmax_min)},
    {"collapse", offsetof(detect_opts, collapse)},
    {"softmax-max", offsetof(detect_opts, softmax_max)},
    {"uniform", offsetof(detect_opts, uniform)},
    {"uniform-steps", offsetof(detect_opts, uniform_steps)},
    {"layer-growth", offsetof(detect_opts, layer_growth)},
    {"pad-id", offsetof(detect_opts, pad_id)},
    {"eval-far", offsetof(detect_opts, eval_far)},
};

int detect_opts_set(detect_opts *o, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq)
        return -EINVAL;
    char *end;
    errno = 0;
    double v = strtod(eq + 1, &end);
    if (errno || end == eq + 1 || *end || !(v >= 0) || isinf(v))
        return -EINVAL;
    for (size_t i = 0; i < sizeof(opt_fields) / sizeof(opt_fields[0]); i++)
        if (strlen(opt_fields[i].name) == (size_t)(eq - arg) && !strncmp(arg, opt_fields[i].name, (size_t)(eq - arg))) {
            *(double *)((char *)o + opt_fields[i].off) = v;
            return 0;
        }
    return -EINVAL;
}

double detect_clip_of(const tft_manifest *m)
{
    if (!m || !m->argv)
        return 0;
    for (int i = 0; i < m->argc; i++) {
        const char *a = m->argv[i], *base = a ? strrchr(a, '/') : NULL;
        if (!a || strcmp(base ? base + 1 : a, "tftrain"))
            continue;
        double clip = 1.0;
        for (int k = i + 1; k < m->argc; k++) {
            const char *v = NULL;
            if (m->argv[k] && !strcmp(m->argv[k], "--clip") && k + 1 < m->argc)
                v = m->argv[k + 1];
            else if (m->argv[k] && !strncmp(m->argv[k], "--clip=", 7))
                v = m->argv[k] + 7;
            char *end;
            double x = v ? strtod(v, &end) : 0;
            if (v && end != v && x >= 0)
                clip = x;
        }
        return clip > 0 ? clip : -1;
    }
    return 0;
}
