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
    double l2;
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
    DETECT_C_INPUT = 1 << 13,         /* a model input: tokens, targets, the masks, input.NAME, input[i]
                                         (tftrace --torch), in training mode */
    DETECT_C_BUFFER = 1 << 14,        /* buffer.* (tftrace --torch: a module's buffers) */
};
#define DETECT_C_PAD_MASK (DETECT_C_LOSS_MASK | DETECT_C_ATTENTION_MASK)

/* One tensor name of one rank. Only the first record of the name in each
 * step counts (an op called twice in a step yields two records). The
 * series store keeps the fields up to the rules' state; each rule keeps
 * its own state in a member named after it, zero at the series' first
 * record unless detect_series_get says otherwise. */
typedef struct detect_series {
    uint64_t id;         /* string id of the name (equal across ranks) */
    char name[96];
    int layer;           /* from the name, -1 none */
    uint32_t cls;        /* DETECT_C_* of the name, set at its first record */
    uint8_t mode;        /* the first record's statistics mode (TFT_STATS_*) */
    bool eval;           /* records made by a module in eval mode: a series of its own (detect_series_get) */
    int64_t last_step;   /* step of the last counted record, TFT_STEP_NONE before */
    uint64_t nrec;       /* counted records */
    /* the first record (initialisation, cross-rank comparisons) */
    int64_t first_step;
    tft_stats first;
    uint8_t first_ndim, first_dtype;
    int64_t first_shape[TFT_MAX_NDIM];
    /* downsampled history (freed by detect_series_free_hist) */
    detect_point *hist;
    int nh;
    uint64_t stride;     /* a record is kept when its index % stride == 0 */
    /* the last finite record in full mode (update ratio, growth) */
    double prev_l2, prev_v;
    bool have_prev;
    bool after_hole;     /* records are missing before its next one (detect_rank_hole) */
    bool nonfinite_seen; /* a record with NaN/Inf was seen */
    int64_t nonfinite_step;
    /* finite scalars in full mode (lr, grad_norm): range and count */
    double vmax, vmin;
    uint64_t nvals;
    double step_absmax;  /* the absmax of its record at last_step (full mode, finite), else 0 */

    /* ---- each rule's state ---- */
    struct {                          /* shape-change (detect_shape.c) */
        uint8_t dtype, ndim;          /* the current dtype and shape */
        int64_t shape[TFT_MAX_NDIM];
        int64_t since, until;         /* the first and the last step of them so far */
        bool fired;                   /* changed once (an input: kept for finish; else reported) */
        bool dt;                      /* an input's dtype changed */
        int64_t first, last;          /* an input's first and last change */
        char was[112];                /* an input's first change: "[4,16] i64 for steps 0..5" */
        char now[80];                 /* ... and what it became: "[4,16] i32" */
    } shape_change;
    struct {                          /* token-range (detect_data.c): the first step with an id above */
        double run_max;               /* each running max, and < 0 */
        int nmax;
        int64_t max_step[24];
        double max_val[24];
        int64_t neg_step;
        double neg_val;
    } token_range;
    struct {                          /* grad_norm (detect_grad.c) */
        double ring[16];              /* grad-spike: the last finite values */
        int nring, ringpos;
        int rises;                    /* grad-growth: rises in a row */
        double rise_from;             /* ... the value before the first of them */
        int64_t rise_step;            /* ... the step of the first of them */
        bool growth_fired;            /* grad-growth has reported */
        uint64_t over_clip;           /* clip-*: records above the clip threshold */
    } grad_norm;
    struct {                          /* update-ratio (detect_optim.c) */
        bool fired;                   /* this parameter passed the ratio */
        bool init_flat;               /* its initial record was all zero or constant */
    } update_ratio;
    struct {                          /* absmax-growth (detect_numerics.c) */
        int64_t step;                 /* the first finite record past the thresholds, TFT_STEP_NONE */
        double val;                   /* ... its absmax */
    } absmax_growth;
    struct {                          /* precision-risk (detect_numerics.c) */
        int64_t step;                 /* the first step with values past fp16's range, TFT_STEP_NONE */
        uint64_t first, max;          /* ... the count then, the largest count before a non-finite value */
        int64_t max_step;
    } precision_risk;
    struct {                          /* layer-growth (detect_numerics.c) */
        int base;                     /* index + 1 of the layer-0 series of the same name; 0 unknown, -1 none */
    } layer_growth;
    struct {                          /* the parameter rules (detect_params.c), param.* only */
        bool seen;                    /* a record was judged */
        bool initial;                 /* its first record is the value training starts from (before any
                                         optimizer step of the rank: tftrace --torch's first forward) */
        bool frozen0, frozen;         /* its first, its last record carried NO_GRAD (requires_grad off) */
        uint64_t fp;                  /* the last record's fingerprint */
        uint64_t changes;             /* records whose fingerprint differs from the one before */
        uint64_t after_step;          /* records after an optimizer step (lr seen before them) */
        int64_t change_step;          /* the first step it changed, TFT_STEP_NONE */
        int64_t frozen_step;          /* the first step it changed while NO_GRAD, TFT_STEP_NONE */
        bool nonzero, zeroed;         /* a record held a nonzero value; param-zeroed has reported */
        int grad;                     /* index + 1 of the series grad.P, 0 none */
        bool grad_nonzero;            /* grad.P held a nonzero value */
        double grad_rms;              /* grad.P's largest RMS (full mode) */
    } param;
    struct {                          /* grad-accum (detect_grad.c): the zero count over the steps */
        uint64_t first, prev, falls;
        bool rose;
        int64_t fall_step;            /* the first step it fell */
    } grad_accum;
} detect_series;

#define DETECT_FP_MAX 16384 /* batches a rank remembers (data-repeat, ckpt-data) */

/* A rank's detectors. The dispatcher and the stores keep the fields up to
 * the rules' state; each rule keeps its own in a member named after it,
 * zero at detect_rank_new unless it says otherwise. */
struct detect_rank {
    detect_opts o;
    int rank;
    double clip_cmd;
    tft_u64map idx;      /* name id -> series index + 1 (uint32) */
    detect_series *s;
    int ns, caps;
    detect_finding *f;   /* DETECT_FIND_MAX of them */
    int nf;
    int64_t step;        /* the step of the last tensor record, TFT_STEP_NONE before */
    int64_t resume_step; /* a checkpoint RESUME record's step, TFT_STEP_NONE none */
    bool nonfinite_any;  /* a record with NaN/Inf was seen (set after that record's rules) */

    /* ---- each rule's state ---- */
    struct {                          /* label-shift (detect_data.c) */
        bool have_tokens;             /* this step's tokens: */
        uint64_t tokens_fp, tokens_numel;
        uint64_t labels_fp;           /* this step's labels (Hugging Face's name; label-preshift) */
        uint64_t steps, data_steps;   /* steps with targets == tokens; with both */
        int64_t first;                /* the first step with targets == tokens */
    } label_shift;
    struct {                          /* loss-mask-full (detect_data.c) */
        bool have;                    /* this step has a loss_mask ... */
        uint64_t zeros;               /* ... with this many zeros (mask-padding reads both) */
        uint64_t steps, full;         /* steps with a loss_mask; of them with no zero */
        int64_t first;                /* the first of them */
    } loss_mask;
    struct {                          /* pad-rows (detect_data.c) */
        int fi;                       /* its finding, -1 none */
        uint64_t steps;               /* steps with rows proved all padding */
        int64_t last_step;            /* ... the last of them */
    } pad_rows;
    struct {                          /* data-repeat and ckpt-data (detect_data.c) */
        tft_u64map fps;               /* tokens fingerprint (mixed with numel) -> first step (int64),
                                         at most DETECT_FP_MAX */
        uint64_t n;                   /* batches repeating an earlier step's */
        bool ckpt_done;               /* ckpt-data has reported */
        int64_t resume_tok_step;      /* the first tokens step at or after the resume, TFT_STEP_NONE */
        uint64_t resume_fp;           /* ... its fingerprint */
        int tok_si;                   /* ... its series index */
    } repeat;
    struct {                          /* mask-future and mask-padding (detect_mask.c) */
        bool causal_seen;             /* a square mask tensor was recorded (attn-uniform reads it) */
        bool future_done, pad_done, probs_done; /* reported */
    } mask;
    struct {                          /* grad-spike (detect_grad.c) */
        int fi;                       /* its finding, -1 none */
        uint64_t n;                   /* spikes: one is a note, three a warning */
    } grad_spike;
    struct {                          /* update-ratio (detect_optim.c) */
        int fi;                       /* its finding, -1 none */
        uint64_t more;                /* parameters past the ratio after the first */
    } update_ratio;
    struct {                          /* softmax-overflow (detect_numerics.c) */
        int fi;                       /* its finding, -1 none (error when a non-finite follows) */
    } softmax;
    struct {                          /* layer-growth (detect_numerics.c) */
        int fi;                       /* its finding, -1 none (likewise) */
    } layer_growth;
    struct {                          /* shape-change (detect_shape.c): inputs that vary, what they explain */
        int64_t data_step;            /* the last step a model input changed shape, TFT_STEP_NONE */
        int64_t eval_step;            /* ... an eval forward's input, TFT_STEP_NONE */
        int vary;                     /* index + 1 of the first input whose shape varied, 0 none */
        int dim;                      /* ... the dimension that varied first, -1 several */
        int64_t lo, hi;               /* ... its smallest and largest size */
        uint64_t steps;               /* steps at which an input changed shape */
        uint64_t explained;           /* other tensors' changes at those steps (not reported) */
        int fi;                       /* the finding on other tensors, -1 none */
        uint64_t more;                /* ... tensors past its first */
    } shapes;
    struct {                          /* the run's end (detect_run.c) */
        bool raised;                  /* an EXCEPTION record */
        int64_t step;                 /* ... its step */
        char type[64], where[96], message[200];
        int pid;                      /* the rank's process (its first PROCESS start record), 0 unknown */
        bool exited;                  /* its PROCESS exit record */
        int code, sig;
        int64_t last_step;            /* the last step of any tensor record */
    } end;
    struct {                          /* param-zeroed (detect_params.c): one finding per rank */
        int fi;                       /* -1 none */
        uint64_t more;
    } zeroed;
    int64_t lr_step;                  /* the step of the last lr record (param.* after it are updates) */
    bool optim_seen;                  /* an optimizer step began (an lr record): later param.* are updates */
    struct {                          /* clip-scaled (detect_run.c): this step's sums */
        int64_t step;
        double g2;                    /* sum of the squared L2 of the parameters' gradients */
        int ng;
        double gnorm, scale;          /* grad_norm and amp.scale, NAN unknown */
        bool fired;
    } clipscale;
    struct {                          /* lr-restart (detect_run.c) */
        double max, low;              /* the largest lr so far, the lowest after it */
        int64_t low_step;
        bool fired;
    } lr;
    struct {                          /* data-stuck (detect_data.c): the first input record of each step */
        uint64_t fp;
        int64_t step, from;           /* its step, the first step of the run of equal batches */
        int si;                       /* its series */
        bool fired;
        int fi;                       /* the finding, -1 none */
        int64_t run_from, run_end;    /* the run it reports */
    } stuck;
    struct {                          /* eval-nondet (detect_eval.c): one eval forward at a time */
        uint64_t in_fp;               /* the inputs of the current eval forward, mixed; 0 none */
        uint64_t out_fp;              /* its last output */
        int out_si;
        tft_u64map seen;              /* inputs -> output fingerprint, since the last training forward */
        uint64_t nseen;               /* entries in seen */
        int64_t step;
        bool fired;
    } evalfp;
};

/* ---- the finding store (detect_finding.c) ---- */

/* A finding of rank c (evidence printf-style). Drops it past DETECT_FIND_MAX. */
void detect_add(detect_rank *c, const char *kind, int sev, int64_t step, const detect_series *s, const char *tensor2,
                double value, double threshold, const char *causes, const char *fmt, ...)
    __attribute__((format(printf, 10, 11)));
/* Appends to the evidence of finding fi of rank c (printf-style, cut to
 * its buffer). Returns the finding, NULL when fi is not one (-1: the rule
 * added none; DETECT_FIND_MAX reached). */
detect_finding *detect_note(detect_rank *c, int fi, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Every rank's findings (at most max) into out, sorted most severe first,
 * then by step, rank, layer. Returns how many. */
int detect_findings_gather(detect_rank *const *ranks, int n, detect_finding *out, int max);

/* ---- the series store (detect_series.c) ---- */

/* The series of name id (created at its first record), NULL past the
 * bound or without memory (*e set to -ENOMEM then). */
detect_series *detect_series_get(detect_rank *c, const tft_reader *r, uint64_t id, bool eval, int *e);
#define DETECT_EVAL_KEY 0x5bd1e9955bd1e995ull /* mixed into an eval-mode series' key */
/* Counts record t (the first of s in this step) before the rules read it:
 * the first record's statistics and classes, the step, the first non-finite
 * value, the history, the scalar summary, this step's absmax. */
void detect_series_count(detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
/* After the rules: the values the next record is compared with. */
void detect_series_keep(detect_series *s, const tft_rec_tensor *t, bool finite);
/* Frees every series' history (the rules have read them). */
void detect_series_free_hist(detect_rank *c);

/* The series named exactly name (of training-mode records), NULL none. */
detect_series *detect_find(detect_rank *c, const char *name);
/* Whether an all-zero start is a choice for this parameter: a PyTorch
 * embedding table (emb, wpe, pos, token in its name: a position embedding,
 * a class token), where zeros are a note. */
bool detect_zero_is_choice(const char *name);
/* The record a parameter param.P starts from: tftrain's P recorded before
 * the first step, else param.P's own first record when it came before any
 * optimizer step (tftrace --torch's first forward); NULL none. */
const detect_series *detect_initial(detect_rank *c, const detect_series *param);
/* The series with the rank's first non-finite value (the earliest step,
 * then the first created), NULL none. */
const detect_series *detect_first_nonfinite(const detect_rank *c);

/* The one series a rule reports among several that qualify (the finding
 * names it and counts the others): offer each in creation order. */
typedef struct detect_pick {
    const detect_series *s; /* the pick so far, NULL none */
    int others;             /* the candidates not picked */
} detect_pick;
/* Offers s: it becomes the pick when there is none yet or when before(s,
 * pick) holds (NULL: the first offered stays); the one not kept is counted
 * in others. */
void detect_pick_offer(detect_pick *p, const detect_series *s,
                       bool (*before)(const detect_series *a, const detect_series *b));

/* Whether name ends with suffix (a whole dotted component or the name). */
bool detect_ends(const char *name, const char *suffix);
/* The layer index of name, -1 none; *pos and *len: where its digits are. */
int detect_layer_span(const char *name, size_t *pos, size_t *len);
/* "[16,32]" into buf. */
const char *detect_shape_text(const int64_t *shape, int ndim, char *buf, size_t n);

#endif
