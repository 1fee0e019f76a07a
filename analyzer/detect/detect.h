/*
 * detect.h — the detectors of `tfdump --check` that read one trace's
 * tensor statistics over time (docs/CHECK.md): shapes and dtypes, data,
 * initialisation, optimisation, numerics, masks and checkpoints. Private
 * to the analyzer (tfdump, tfdiff); nothing here is installed.
 *
 * Workload: one detect_rank per rank file, fed every record of that file once
 * in file order (dump_check.c's scan pool: one thread per open rank file,
 * so a detect_rank is never shared while it is fed). Memory is bounded per
 * rank: at most DETECT_MAX_SERIES tensor names are followed (one series per
 * name), each with a downsampled history of at most DETECT_HIST points (the
 * stride doubles when it fills), so a trace of 100k steps costs what one
 * of a few hundred does. After the scan, detect_rank_finish runs the per-rank
 * rules and drops the histories; detect_merge compares ranks and sorts.
 * The rules themselves: detect_rules_internal.h and the table in detect.c.
 *
 * Conventions: 0 / -errno returns; constructors return NULL (errno set);
 * nothing prints.
 */
#ifndef TFT_CHECK_DETECT_H
#define TFT_CHECK_DETECT_H

#include "tft_format.h"

#include <cjson/cJSON.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum detect_severity { DETECT_ERROR = 0, DETECT_WARNING = 1, DETECT_INFO = 2 };

#define DETECT_MAX_SERIES 2048 /* tensor names followed per rank; more are counted */
#define DETECT_HIST 64         /* history points per series (downsampled) */
#define DETECT_FIND_MAX 256    /* findings kept per rank */

/* One finding. step is TFT_STEP_NONE when it has none. */
typedef struct detect_finding {
    char kind[24];       /* "shape-change", "token-range", ... (docs/CHECK.md) */
    int severity;        /* enum detect_severity */
    int rank;            /* rank id */
    int64_t step;        /* the first step it shows at */
    char tensor[96];     /* the tensor it names */
    char tensor2[96];    /* a second tensor it compares with, "" none */
    int layer;           /* layer index from the name (L3., .blocks.3.), -1 none */
    double value;        /* the measured number the rule tested */
    double threshold;    /* the threshold it was tested against */
    char evidence[320];  /* the numbers, as a sentence */
    const char *causes;  /* one sentence of likely causes (static) */
} detect_finding;

/* Thresholds (tfdump --threshold NAME=VALUE; defaults and rationale in
 * docs/CHECK.md). DETECT_OPTS_DEFAULT gives the defaults. */
typedef struct detect_opts {
    double vocab;        /* vocabulary size; 0 = wte's first dimension */
    double clip;         /* clipping threshold; 0 = from the recorded tftrain command line */
    double min_steps;    /* steps a curve needs before the loss rules judge it */
    double loss_drop;    /* loss-flat: the last tenth must fall below (1 - this) x the first */
    double loss_rise;    /* loss-rise: smoothed loss this fraction above its best */
    double spike;        /* grad-spike: grad_norm this many times its recent median */
    double growth;       /* grad-growth: grad_norm this many times its first value ... */
    double growth_steps; /* ... after rising at this many steps in a row */
    double update_max;   /* update-ratio: |dL2|/L2 of a parameter above this */
    double init_std;     /* init-scale: std this many times from its peers' median */
    double absmax_growth; /* absmax-growth: absmax this many times its first value ... */
    double absmax_min;   /* ... and at least this large */
    double collapse;     /* attn-collapse: probs' sum of squares per row above this */
    double softmax_max;  /* softmax-overflow: attention scores' absmax above this */
    double uniform;      /* attn-uniform: probs within (1 + this) x uniform ... */
    double uniform_steps; /* ... in every layer, judged on runs of at least this many steps */
    double layer_growth; /* layer-growth: absmax this many times layer 0's at one step (and >= absmax_min) */
    double pad_id;       /* pad-rows: the padding token id; < 0 unknown (masks only) */
    double eval_far;     /* eval-far: a module's first eval output this many times off its training one (RMS) */
} detect_opts;

#define DETECT_OPTS_DEFAULT                                                                          \
    ((detect_opts){.vocab = 0, .clip = 0, .min_steps = 20, .loss_drop = 0.05, .loss_rise = 0.5,      \
                .spike = 10, .growth = 4, .growth_steps = 8, .update_max = 0.25, .init_std = 10,    \
                .absmax_growth = 100, .absmax_min = 1000, .collapse = 0.98, .softmax_max = 88.72,        \
                .uniform = 0.05, .uniform_steps = 200, .layer_growth = 4, .pad_id = -1,   \
                   .eval_far = 10})

/* Sets the threshold NAME (a field above) from "NAME=VALUE". Returns 0,
 * -EINVAL for an unknown name or a value that is not a number >= 0. */
int detect_opts_set(detect_opts *o, const char *arg);

typedef struct detect_rank detect_rank;

/* A rank's detector state. clip_from_cmd: the clip threshold the recorded
 * command line states (0 unknown). NULL with errno on no memory. */
detect_rank *detect_rank_new(const detect_opts *o, int rank, double clip_from_cmd);
/* Feeds one record of the rank file (r: its reader, for string names). */
int detect_rank_record(detect_rank *c, const tft_reader *r, const tft_rec *rec);
/* Records were missing (a damaged chunk was skipped; the caller feeds
 * nothing more of the step it resumed in): no rule compares across the
 * hole — each series starts over from its next record (shape and dtype,
 * the update ratio and growth). Called before the first record of the
 * next whole step. */
void detect_rank_hole(detect_rank *c);
/* Ends the scan: the per-rank rules run; histories are freed. */
int detect_rank_finish(detect_rank *c);
void detect_rank_free(detect_rank *c); /* NULL-safe */

/* Every rank's findings plus the cross-rank ones (shapes of replicated
 * tensors, identical data on several ranks), sorted most severe first,
 * then by step, rank; at most max into out. Returns how many. */
int detect_merge(detect_rank *const *ranks, int n, detect_finding *out, int max);

const char *detect_severity_name(int severity); /* "error", "warning", "info" */

/* detect_trace.c. The detectors over every rank file of t in a pass of
 * their own (a pool of threads, one rank file open each): the merged
 * findings into out (at most max). Returns how many, or a negative errno. */
int detect_trace(tft_trace *t, const detect_opts *o, double clip_cmd, detect_finding *out, int max);
/* detect_opts.c. tftrain's clip threshold from a recorded command line:
 * its --clip (default 1.0), -1 for --clip 0 (off), 0 when the command is
 * not tftrain. */
double detect_clip_of(const tft_manifest *m);
/* detect_finding.c. A finding as the JSON object of docs/CHECK.md (the
 * caller owns it). */
cJSON *detect_finding_json(const detect_finding *x);

#endif
