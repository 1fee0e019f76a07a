/*
 * detect_internal.h — the detectors' model of a rank (detect_rank): its
 * series, one per tensor name (detect_series), each rule's state, and its
 * findings; and the two stores the rules call, the series store
 * (detect_series.c) and the finding store (detect_finding.c). The stores
 * call nothing above them; the rules (detect_rules_internal.h) call only
 * the stores. Not installed.
 */
#ifndef TFT_CHECK_DETECT_INTERNAL_H
#define TFT_CHECK_DETECT_INTERNAL_H

#include "detect.h"
#include "tft_u64map.h"

/* One downsampled point of a series (its first record in a step). */
typedef struct detect_point {
    int64_t step;
    double v;        /* mean (the value itself for a scalar) */
    double l2, absmax;
    uint64_t risk;   /* over_fp16 + under_fp16 */
    bool finite;     /* no NaN or Inf */
} detect_point;

/* What a name is (detect_series.cls), decided at the series' first record:
 * from the name (a suffix matches the whole name or its last dotted
 * components, detect_ends; a prefix its start) and, for an activation, from
 * that record too. The rule table (detect.c) passes a record to the rules
 * that match one of its classes. */
enum {
    DETECT_C_TOKENS = 1 << 0,         /* tokens, input_ids */
    DETECT_C_TARGETS = 1 << 1,        /* targets, labels */
    DETECT_C_LOSS_MASK = 1 << 2,      /* loss_mask */
    DETECT_C_ATTENTION_MASK = 1 << 3, /* attention_mask (a padding mask [..., T]) */
    DETECT_C_CAUSAL_MASK = 1 << 4,    /* attn.mask (a 0/1 mask [..., T, T]) */
    DETECT_C_PROBS = 1 << 5,          /* attn.probs */
    DETECT_C_SCORES = 1 << 6,         /* attn.scores */
    DETECT_C_LOSS = 1 << 7,           /* loss */
    DETECT_C_GRAD_NORM = 1 << 8,      /* grad_norm */
    DETECT_C_PARAM = 1 << 9,          /* param.* */
    DETECT_C_GRAD = 1 << 10,          /* grad.* */
    DETECT_C_ADAM_M = 1 << 11,        /* adam.m.* */
    DETECT_C_ACTIVATION = 1 << 12,    /* not a parameter, gradient, optimizer state, scalar, data or mask
                                         tensor, recorded in full mode (absmax-growth, layer-growth) */
};
#define DETECT_C_PAD_MASK (DETECT_C_LOSS_MASK | DETECT_C_ATTENTION_MASK)

/* One tensor name of one rank. Only the first record of the name in each
 * step counts (an op called twice in a step yields two records). */
typedef struct detect_series {
    uint64_t id;         /* string id of the name (equal across ranks) */
    char name[96];
    int layer;           /* from the name, -1 none */
    uint32_t cls;        /* DETECT_C_* of the name, set at its first record */
    uint8_t dtype, ndim, mode;
    int64_t shape[TFT_MAX_NDIM]; /* the current shape and dtype */
    int64_t last_step;   /* step of the last counted record, TFT_STEP_NONE before */
    int64_t since;       /* first step of the current shape and dtype */
    int64_t until;       /* ... and the last step of them so far */
    uint64_t nrec;       /* counted records */
    /* the first record (initialisation, cross-rank comparisons) */
    int64_t first_step;
    tft_stats first;
    uint8_t first_ndim, first_dtype;
    int64_t first_shape[TFT_MAX_NDIM];
    /* downsampled history (freed by detect_rank_finish) */
    detect_point *hist;
    int nh;
    uint64_t stride;     /* a record is kept when its index % stride == 0 */
    /* the last record's finite L2 (update ratio, growth) */
    double prev_l2, prev_v;
    bool have_prev;
    int rises;           /* grad-growth: rises in a row */
    double rise_from;    /* ... the value before the first of them */
    int64_t rise_step;   /* ... the step of the first of them */
    double ring[16];     /* grad-spike: the last finite values */
    int nring, ringpos;
    bool growth_fired;   /* grad-growth has reported */
    bool fired;          /* the series' online rule has reported */
    bool shape_fired;    /* shape-change has reported */
    bool init_flat;      /* param.*: its initial record was all zero or constant */
    bool nonfinite_seen; /* a record with NaN/Inf was seen */
    int64_t nonfinite_step;
    int64_t grow_step;   /* absmax-growth: the first finite record past the thresholds */
    double grow_val;     /* ... its absmax */
    /* tokens: the first step with an id above each running max, and < 0 */
    double run_max;
    int nmax;
    int64_t max_step[24];
    double max_val[24];
    int64_t neg_step;
    double neg_val;
    /* lr and grad_norm summaries */
    double vmax, vmin;
    uint64_t over_clip;  /* grad_norm records above the clip threshold */
    uint64_t nvals;
    /* numerics (detect_numerics.c) */
    double step_absmax;  /* the absmax of its record at last_step (full mode, finite), else 0 */
    int64_t risk_step;   /* precision-risk: the first step with values past fp16's range, TFT_STEP_NONE */
    uint64_t risk_first, risk_max; /* ... the count then, the largest count before a non-finite value */
    int64_t risk_max_step;
    int base;            /* layer-growth: index + 1 of the layer-0 series of the same name; 0 unknown, -1 none */
    /* gradients not zeroed (detect_accum.c): the zero count over the steps */
    uint64_t z_first, z_prev, z_falls;
    bool z_rose;
    int64_t z_fall_step; /* the first step it fell */
} detect_series;

struct detect_rank {
    detect_opts o;
    int rank;
    double clip_cmd;
    tft_u64map idx;      /* name id -> series index + 1 (uint32) */
    detect_series *s;
    int ns, caps;
    uint64_t unfollowed; /* records of names past DETECT_MAX_SERIES */
    detect_finding *f;
    int nf;
    uint64_t more;       /* findings past DETECT_FIND_MAX */
    /* this step's data tensors (label shift, padding) */
    int64_t step;
    uint64_t tokens_fp, tokens_numel;
    bool have_tokens, lm_zero, have_lm;
    uint64_t lm_zeros;   /* this step's loss_mask zeros */
    uint64_t shift_steps, data_steps; /* steps with targets == tokens; with both */
    int64_t shift_step;
    uint64_t lm_steps, lm_full;      /* steps with a loss_mask; of them with no zero */
    int64_t lm_first;
    bool mask_done, pad_done, probs_done; /* online mask rules reported */
    int update_fi;       /* the update-ratio finding, -1 none */
    int spike_fi;        /* the grad-spike finding, -1 none */
    uint64_t spikes;     /* grad_norm spikes: one is a note, three a warning */
    uint64_t update_more; /* parameters past the ratio after the first */
    bool causal_seen;    /* a square mask tensor was recorded */
    int64_t resume_step; /* a checkpoint RESUME record's step, TFT_STEP_NONE none */
    /* numerics (detect_numerics.c) */
    bool nonfinite_any;  /* a record with NaN/Inf was seen: growth is judged before it only */
    int softmax_fi;      /* the softmax-overflow finding, -1 none (error when a non-finite follows) */
    int layer_fi;        /* the layer-growth finding, -1 none (likewise) */
    int64_t layer_step;  /* ... its step */
    /* data (detect_data.c) */
    tft_u64map fps;      /* tokens fingerprint (mixed with numel) -> first step (int64), at most DETECT_FP_MAX */
    int padrows_fi;      /* the pad-rows finding, -1 none */
    uint64_t pad_steps;  /* steps with rows proved all padding */
    int64_t pad_last_step; /* ... the last of them */
    uint64_t repeats;    /* batches repeating an earlier step's */
    bool ckpt_data_done; /* ckpt-data has reported */
    int64_t resume_tok_step; /* the first tokens step at or after the resume, TFT_STEP_NONE */
    uint64_t resume_fp;  /* ... its fingerprint */
    int tok_si;          /* ... its series index */
};

/* A finding of rank c (evidence printf-style). Drops it past DETECT_FIND_MAX. */
void detect_add(detect_rank *c, const char *kind, int sev, int64_t step, const detect_series *s, const char *tensor2,
             double value, double threshold, const char *causes, const char *fmt, ...)
    __attribute__((format(printf, 10, 11)));
/* "[16,32]" into buf. */
const char *detect_shape_text(const int64_t *shape, int ndim, char *buf, size_t n);
/* The series named exactly name, NULL none. */
detect_series *detect_find(detect_rank *c, const char *name);
/* Whether name ends with suffix (a whole dotted component or the name). */
bool detect_ends(const char *name, const char *suffix);

/* The layer index of name, -1 none; *pos and *len: where its digits are. */
int detect_layer_span(const char *name, size_t *pos, size_t *len);

/* The series of name id (created at its first record), NULL past the
 * bound or without memory (*e set to -ENOMEM then). */
detect_series *detect_series_get(detect_rank *c, const tft_reader *r, uint64_t id, int *e);
/* Counts record t (the first of s in this step) before the rules read it:
 * the first record's statistics and classes, the step, the first non-finite
 * value, the history, the scalar summary, this step's absmax. */
void detect_series_count(detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
/* After the rules: the values the next record is compared with. */
void detect_series_keep(detect_series *s, const tft_rec_tensor *t, bool finite);
/* Frees every series' history (the rules have read them). */
void detect_series_free_hist(detect_rank *c);

/* Every rank's findings (at most max) into out, sorted most severe first,
 * then by step, rank, layer. Returns how many. */
int detect_findings_gather(detect_rank *const *ranks, int n, detect_finding *out, int max);

/* detect_data.c */
#define DETECT_FP_MAX 16384 /* batches remembered per rank */

#endif
