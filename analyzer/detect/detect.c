/*
 * detect.c — the scan side of tfdump --check's detectors
 * (detect.h): one series per tensor name with a downsampled history, the
 * rules that are judged record by record (shapes and dtypes, token ids,
 * labels, masks, gradient-norm spikes and growth, update ratios), and the
 * table of every rule (detect_rules_internal.h) that the dispatcher walks
 * for each record, at finish and at merge. The rules judged once the rank
 * is read are detect_rules.c's.
 *
 * Input is untrusted: names are cut to the series' buffer, ndim is checked,
 * statistics may be anything (NaN, negative counts are impossible: u64).
 */
#include "detect_rules_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- thresholds ------------------------------------------------------------ */

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

const char *detect_opts_names(void)
{
    return "vocab, clip, min-steps, loss-drop, loss-rise, spike, growth, growth-steps, update-max, init-std, "
           "absmax-growth, absmax-min, collapse, softmax-max, uniform, uniform-steps, layer-growth, pad-id";
}

const char *detect_severity_name(int severity)
{
    return severity == DETECT_ERROR ? "error" : severity == DETECT_WARNING ? "warning" : "info";
}

/* ---- helpers ---------------------------------------------------------------- */

bool detect_ends(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    if (n == k)
        return !strcmp(name, suffix);
    return n > k && name[n - k - 1] == '.' && !strcmp(name + n - k, suffix);
}

const char *detect_shape_text(const int64_t *shape, int ndim, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

/* The layer a name belongs to: "L3." at the start, or a ".blocks.3.",
 * ".layers.3.", ".layer.3.", ".h.3." component (PyTorch module paths);
 * *pos and *len locate its digits (layer-growth names the layer below). */
int detect_layer_span(const char *name, size_t *pos, size_t *len)
{
    const char *p = name;
    for (const char *q = name; *q; q++)
        if (*q == '.' && q[1] == 'L' && q[2] >= '0' && q[2] <= '9')
            p = q + 1; /* grad.L0.qkv.w, adam.m.L1.fc.w */
    if (p[0] == 'L' && p[1] >= '0' && p[1] <= '9') {
        char *end;
        long v = strtol(p + 1, &end, 10);
        if (*end == '.' && v < 1000000) {
            *pos = (size_t)(p + 1 - name);
            *len = (size_t)(end - (p + 1));
            return (int)v;
        }
    }
    static const char *const comp[] = {".blocks.", ".layers.", ".layer.", ".h."};
    for (size_t i = 0; i < sizeof(comp) / sizeof(comp[0]); i++) {
        const char *q = strstr(name, comp[i]);
        if (q && q[strlen(comp[i])] >= '0' && q[strlen(comp[i])] <= '9') {
            char *end;
            const char *d = q + strlen(comp[i]);
            long v = strtol(d, &end, 10);
            if ((*end == '.' || !*end) && v < 1000000) {
                *pos = (size_t)(d - name);
                *len = (size_t)(end - d);
                return (int)v;
            }
        }
    }
    return -1;
}

static int parse_layer(const char *name)
{
    size_t pos, len;
    return detect_layer_span(name, &pos, &len);
}

/* An activation: not a parameter, gradient, optimizer state, scalar, data
 * or mask tensor (absmax-growth, layer-growth judge these). */
static bool is_activation(const detect_series *s)
{
    static const char *const skip[] = {"param.", "adam.", "grad.", "grad_norm", "lr", "sgd.", "loss"};
    for (size_t k = 0; k < sizeof(skip) / sizeof(skip[0]); k++)
        if (!strncmp(s->name, skip[k], strlen(skip[k])))
            return false;
    return s->first.numel > 1 && s->mode >= TFT_STATS_FULL && !detect_ends(s->name, "tokens") &&
           !detect_ends(s->name, "targets") && !detect_ends(s->name, "loss_mask") && !detect_ends(s->name, "attn.mask") &&
           !detect_ends(s->name, "attn.probs");
}

void detect_add(detect_rank *c, const char *kind, int sev, int64_t step, const detect_series *s, const char *tensor2,
             double value, double threshold, const char *causes, const char *fmt, ...)
{
    if (c->nf >= DETECT_FIND_MAX) {
        c->more++;
        return;
    }
    detect_finding *f = &c->f[c->nf++];
    *f = (detect_finding){.severity = sev, .rank = c->rank, .step = step, .layer = s ? s->layer : -1,
                       .value = value, .threshold = threshold, .causes = causes};
    snprintf(f->kind, sizeof(f->kind), "%s", kind);
    snprintf(f->tensor, sizeof(f->tensor), "%s", s ? s->name : "");
    snprintf(f->tensor2, sizeof(f->tensor2), "%s", tensor2 ? tensor2 : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->evidence, sizeof(f->evidence), fmt, ap);
    va_end(ap);
}

detect_series *detect_find(detect_rank *c, const char *name)
{
    for (int i = 0; i < c->ns; i++)
        if (!strcmp(c->s[i].name, name))
            return &c->s[i];
    return NULL;
}

/* ---- the rank ---------------------------------------------------------------- */

detect_rank *detect_rank_new(const detect_opts *o, int rank, double clip_from_cmd)
{
    detect_rank *c = calloc(1, sizeof(*c));
    if (!c || !(c->f = calloc(DETECT_FIND_MAX, sizeof(*c->f)))) {
        free(c);
        errno = ENOMEM;
        return NULL;
    }
    c->o = *o;
    c->rank = rank;
    c->clip_cmd = clip_from_cmd;
    c->step = TFT_STEP_NONE;
    c->update_fi = c->spike_fi = c->softmax_fi = c->layer_fi = c->padrows_fi = -1;
    c->resume_tok_step = c->pad_last_step = TFT_STEP_NONE;
    tft_u64map_init(&c->fps, &(tft_u64map_opts){.vsize = sizeof(int64_t), .max_n = DETECT_FP_MAX});
    c->resume_step = TFT_STEP_NONE;
    c->shift_step = c->lm_first = TFT_STEP_NONE;
    tft_u64map_init(&c->idx, &(tft_u64map_opts){.vsize = sizeof(uint32_t), .max_n = DETECT_MAX_SERIES});
    return c;
}

void detect_rank_free(detect_rank *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->ns; i++)
        free(c->s[i].hist);
    free(c->s);
    free(c->f);
    tft_u64map_free(&c->idx);
    tft_u64map_free(&c->fps);
    free(c);
}

/* The series of name id (created at its first record), NULL past the
 * bound or without memory (*e set to -ENOMEM then). */
static detect_series *series_get(detect_rank *c, const tft_reader *r, uint64_t id, int *e)
{
    void *v;
    int k = tft_u64map_insert(&c->idx, id, NULL, NULL, &v);
    if (k == -ENOSPC) {
        c->unfollowed++;
        return NULL;
    }
    if (k < 0) {
        *e = k;
        return NULL;
    }
    if (k == 0)
        return &c->s[*(uint32_t *)v - 1];
    if (c->ns == c->caps) {
        int nc = c->caps ? 2 * c->caps : 64;
        detect_series *ns = realloc(c->s, (size_t)nc * sizeof(*ns));
        if (!ns) {
            tft_u64map_remove(&c->idx, v);
            *e = -ENOMEM;
            return NULL;
        }
        c->s = ns;
        c->caps = nc;
    }
    detect_series *s = &c->s[c->ns];
    *s = (detect_series){.id = id, .last_step = TFT_STEP_NONE, .first_step = TFT_STEP_NONE, .stride = 1,
                      .neg_step = TFT_STEP_NONE, .nonfinite_step = TFT_STEP_NONE, .grow_step = TFT_STEP_NONE, .run_max = -INFINITY,
                      .risk_step = TFT_STEP_NONE, .risk_max_step = TFT_STEP_NONE};
    if (!(s->hist = malloc(DETECT_HIST * sizeof(*s->hist)))) {
        tft_u64map_remove(&c->idx, v);
        *e = -ENOMEM;
        return NULL;
    }
    const char *txt = tft_reader_string(r, id);
    snprintf(s->name, sizeof(s->name), "%s", txt ? txt : "?");
    s->layer = parse_layer(s->name);
    *(uint32_t *)v = (uint32_t)++c->ns;
    return s;
}

/* The classes of s (DETECT_C_*), from its name and its first record. */
static uint32_t classify(const detect_series *s)
{
    const char *n = s->name;
    return (detect_ends(n, "tokens") || detect_ends(n, "input_ids") ? DETECT_C_TOKENS : 0) |
           (detect_ends(n, "targets") || detect_ends(n, "labels") ? DETECT_C_TARGETS : 0) |
           (detect_ends(n, "loss_mask") ? DETECT_C_LOSS_MASK : 0) |
           (detect_ends(n, "attention_mask") ? DETECT_C_ATTENTION_MASK : 0) |
           (detect_ends(n, "attn.mask") ? DETECT_C_CAUSAL_MASK : 0) |
           (detect_ends(n, "attn.probs") ? DETECT_C_PROBS : 0) | (detect_ends(n, "attn.scores") ? DETECT_C_SCORES : 0) |
           (detect_ends(n, "loss") ? DETECT_C_LOSS : 0) | (detect_ends(n, "grad_norm") ? DETECT_C_GRAD_NORM : 0) |
           (!strncmp(n, "param.", 6) ? DETECT_C_PARAM : 0) | (!strncmp(n, "grad.", 5) && n[5] ? DETECT_C_GRAD : 0) |
           (!strncmp(n, "adam.m.", 7) ? DETECT_C_ADAM_M : 0) | (is_activation(s) ? DETECT_C_ACTIVATION : 0);
}

/* Keeps a point every stride records; a full history drops every other
 * point and doubles the stride, so it spans the whole run. */
static void hist_push(detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (!s->hist || (s->nrec - 1) % s->stride)
        return;
    if (s->nh == DETECT_HIST) {
        for (int i = 0; i < DETECT_HIST / 2; i++)
            s->hist[i] = s->hist[2 * i];
        s->nh = DETECT_HIST / 2;
        s->stride *= 2;
        if ((s->nrec - 1) % s->stride)
            return;
    }
    const tft_stats *st = &t->stats;
    s->hist[s->nh++] = (detect_point){.step = step, .v = st->mean, .l2 = st->l2, .absmax = st->absmax,
                                   .risk = st->over_fp16 + st->under_fp16, .finite = finite};
}

/* Counts record t (the first of s in this step) before the rules read it:
 * the first record's statistics and classes, the step, the first non-finite
 * value, the history, the scalar summary, this step's absmax. */
static void series_count(detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (s->nrec++ == 0) {
        s->first_dtype = t->dtype;
        s->first_ndim = t->ndim;
        s->mode = t->mode;
        memcpy(s->first_shape, t->shape, sizeof(s->first_shape));
        s->first_step = step;
        s->first = t->stats;
        s->vmax = -INFINITY;
        s->vmin = INFINITY;
        s->cls = classify(s);
    }
    s->last_step = step;
    if (!finite && !s->nonfinite_seen) {
        s->nonfinite_seen = true;
        s->nonfinite_step = step;
    }
    hist_push(s, t, step, finite);
    if (finite && t->mode >= TFT_STATS_FULL && t->stats.numel == 1) {
        double v = t->stats.mean;
        s->vmax = v > s->vmax ? v : s->vmax;
        s->vmin = v < s->vmin ? v : s->vmin;
        s->nvals++;
    }
    s->step_absmax = finite && t->mode >= TFT_STATS_FULL ? t->stats.absmax : 0;
}

/* After the rules: the values the next record is compared with. */
static void series_keep(detect_series *s, const tft_rec_tensor *t, bool finite)
{
    if (finite && t->mode >= TFT_STATS_FULL) {
        s->prev_l2 = t->stats.l2;
        s->prev_v = t->stats.mean;
        s->have_prev = true;
    }
}

/* ---- the rules judged record by record ------------------------------------ */

static const char CAUSE_SHAPE[] =
    "a short last batch, a truncation or padding length that depends on the batch, or a cast left in one path";
static const char CAUSE_MASK_FUTURE[] =
    "the causal mask is off by one (j <= i + 1) or missing: each position sees the token it must predict";
static const char CAUSE_MASK_PAD[] =
    "the padding mask is not combined with the causal mask: real tokens attend to padding";
static const char CAUSE_SPIKE[] =
    "a bad batch (outliers, corrupt data), a learning rate too high for this phase, or loss scaling going wrong";
static const char CAUSE_GROWTH[] =
    "gradients not zeroed between steps (accumulating), or an optimiser diverging (learning rate too high, no "
    "clipping)";
static const char CAUSE_UPDATE[] =
    "a learning rate too high for this parameter (no warm-up, wrong scale), or clipping missing";

/* Shape and dtype against the series' current ones (its first record's at
 * the first). */
void detect_shape_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    bool changed = s->nrec > 1 && (s->dtype != t->dtype || s->ndim != t->ndim ||
                                   memcmp(s->shape, t->shape, (size_t)t->ndim * sizeof(int64_t)));
    if (changed && !s->shape_fired) {
        char a[96], b[96];
        detect_shape_text(s->shape, s->ndim, a, sizeof(a));
        detect_shape_text(t->shape, t->ndim, b, sizeof(b));
        bool dt = s->dtype != t->dtype;
        detect_add(c, dt ? "dtype-change" : "shape-change", DETECT_ERROR, step, s, NULL, 0, 0, CAUSE_SHAPE,
                "%s was %s %s for steps %lld..%lld and %s %s at step %lld", s->name, a, tft_dtype_name(s->dtype),
                (long long)s->since, (long long)s->until, b, tft_dtype_name(t->dtype), (long long)step);
        s->shape_fired = true;
    }
    if (changed || s->nrec == 1) {
        s->dtype = t->dtype;
        s->ndim = t->ndim;
        memcpy(s->shape, t->shape, sizeof(s->shape));
        s->since = step;
    }
    s->until = step;
}

/* Token ids: each new running maximum (the vocabulary is known only at
 * the end: detect_tokens_finish compares), and the first negative id. */
void detect_tokens_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (t->mode < TFT_STATS_HEALTH || t->stats.numel == t->stats.nan + t->stats.pinf + t->stats.ninf)
        return;
    if (t->stats.max > s->run_max) {
        s->run_max = t->stats.max;
        if (s->nmax < (int)(sizeof(s->max_step) / sizeof(s->max_step[0]))) {
            s->max_step[s->nmax] = step;
            s->max_val[s->nmax++] = t->stats.max;
        } else { /* keep the last slot at the latest maximum */
            s->max_step[s->nmax - 1] = step;
            s->max_val[s->nmax - 1] = t->stats.max;
        }
    }
    if (t->stats.min < 0 && s->neg_step == TFT_STEP_NONE) {
        s->neg_step = step;
        s->neg_val = t->stats.min;
    }
}

void detect_shift_step(detect_rank *c)
{
    c->have_tokens = false;
}

/* This step's tokens (kept for targets) and targets equal to them (labels
 * not shifted). */
void detect_shift_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (t->mode < TFT_STATS_HEALTH)
        return;
    if (s->cls & DETECT_C_TOKENS) {
        c->have_tokens = true;
        c->tokens_fp = t->stats.fingerprint;
        c->tokens_numel = t->stats.numel;
    } else if (c->have_tokens) {
        c->data_steps++;
        if (t->stats.fingerprint == c->tokens_fp && t->stats.numel == c->tokens_numel && t->stats.numel > 1) {
            if (!c->shift_steps++)
                c->shift_step = c->step;
        }
    }
}

void detect_lossmask_step(detect_rank *c)
{
    c->have_lm = c->lm_zero = false;
}

/* This step's loss_mask: whether the batch has padding (mask-padding reads
 * it), and the steps with no zero. */
void detect_lossmask_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (t->mode < TFT_STATS_HEALTH)
        return;
    c->have_lm = true;
    c->lm_zero = t->stats.zero > 0;
    c->lm_zeros = t->stats.zero;
    c->lm_steps++;
    c->lm_full += !c->lm_zero && t->stats.numel > 0;
    if (c->lm_first == TFT_STEP_NONE)
        c->lm_first = c->step;
}

/* The attention mask (a 0/1 tensor [..., T, T]): a causal mask allows at
 * most T(T+1)/2 pairs per matrix; exactly that many while the batch has
 * padding (a loss_mask zero this step) means padding is not masked. */
void detect_mask_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (t->ndim < 2 || t->mode < TFT_STATS_HEALTH || t->shape[t->ndim - 1] != t->shape[t->ndim - 2] ||
        t->stats.min < 0 || t->stats.max > 1 || t->shape[t->ndim - 1] <= 1)
        return;
    uint64_t T = (uint64_t)t->shape[t->ndim - 1];
    if (T > (1u << 20) || t->stats.numel % (T * T))
        return;
    c->causal_seen = true;
    uint64_t lead = t->stats.numel / (T * T), ones = t->stats.numel - t->stats.zero;
    uint64_t bound = lead * (T * (T + 1) / 2);
    if (ones > bound && !c->mask_done) {
        detect_add(c, "mask-future", DETECT_ERROR, step, s, NULL, (double)ones, (double)bound, CAUSE_MASK_FUTURE,
                "%s allows %llu query-key pairs, more than a causal mask can (%llu = %llu x %llu*%llu/2): some "
                "position sees a later one",
                s->name, (unsigned long long)ones, (unsigned long long)bound, (unsigned long long)lead,
                (unsigned long long)T, (unsigned long long)(T + 1));
        c->mask_done = true;
    }
    /* a row whose T tokens are all real still has a PAD target when its
     * document ends at T: more zeros than rows means padded tokens */
    if (ones == bound && c->have_lm && c->lm_zeros > lead && !c->pad_done) {
        detect_add(c, "mask-padding", DETECT_ERROR, step, s, "loss_mask", (double)ones, (double)bound, CAUSE_MASK_PAD,
                "%s allows exactly the %llu pairs of a plain causal mask while this step's batch has padding "
                "(loss_mask has more zeros than rows)",
                s->name, (unsigned long long)ones);
        c->pad_done = true;
    }
}

/* Attention probabilities under a causal mask: the first query position
 * sees one key only, so some probability is exactly 1; none is when that
 * position sees a later one too. */
void detect_probs_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (!c->causal_seen || c->probs_done || t->mode < TFT_STATS_HEALTH || t->stats.nan || t->stats.pinf ||
        !(t->stats.max > 0) || t->stats.max >= 0.999)
        return;
    detect_add(c, "mask-future", DETECT_ERROR, step, s, NULL, t->stats.max, 1.0, CAUSE_MASK_FUTURE,
            "the largest attention probability in %s is %.4g, below 1: under a causal mask the first position "
            "attends to itself only (probability 1), so it sees a later position too",
            s->name, t->stats.max);
    c->probs_done = true;
}

static double median16(const double *v, int n)
{
    double a[16];
    memcpy(a, v, (size_t)n * sizeof(double));
    for (int i = 1; i < n; i++) /* insertion sort: n <= 16 */
        for (int j = i; j > 0 && a[j - 1] > a[j]; j--) {
            double x = a[j];
            a[j] = a[j - 1];
            a[j - 1] = x;
        }
    return n % 2 ? a[n / 2] : 0.5 * (a[n / 2 - 1] + a[n / 2]);
}

/* grad_norm (a finite scalar in full mode): a value spike times the median
 * of the last 16; and a run of growth_steps rises in a row that multiplies
 * it by growth. */
void detect_gradnorm_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (!finite || t->mode < TFT_STATS_FULL || t->stats.numel != 1)
        return;
    double v = t->stats.mean;
    double thr = c->o.clip > 0 ? c->o.clip : c->clip_cmd;
    s->over_clip += thr > 0 && v > thr;
    if (s->nring >= 8) {
        double med = median16(s->ring, s->nring);
        if (med > 0 && v > c->o.spike * med && c->spikes++ == 0) {
            c->spike_fi = c->nf; /* a note unless it repeats (detect_gradnorm_finish) */
            detect_add(c, "grad-spike", DETECT_INFO, step, s, NULL, v / med, c->o.spike, CAUSE_SPIKE,
                    "%s is %.4g at step %lld, %.1f times the median %.4g of the %d steps before", s->name, v,
                    (long long)step, v / med, med, s->nring);
        }
    }
    s->ring[s->ringpos] = v;
    s->ringpos = (s->ringpos + 1) % 16;
    s->nring += s->nring < 16;
    if (s->have_prev && v > s->prev_v) {
        if (!s->rises++) {
            s->rise_from = s->prev_v;
            s->rise_step = step;
        }
        if (s->rises >= (int)c->o.growth_steps && s->rise_from > 0 && v >= c->o.growth * s->rise_from &&
            !s->growth_fired) {
            detect_add(c, "grad-growth", DETECT_WARNING, s->rise_step, s, NULL, v / s->rise_from, c->o.growth,
                    CAUSE_GROWTH, "%s rose at each of %d steps from step %lld, from %.4g to %.4g (x%.1f)", s->name,
                    s->rises, (long long)s->rise_step, s->rise_from, v, v / s->rise_from);
            s->growth_fired = true;
        }
    } else {
        s->rises = 0;
    }
}

/* One spike is a note, three a warning. */
void detect_gradnorm_finish(detect_rank *c)
{
    if (c->spike_fi >= 0 && c->spike_fi < c->nf && c->spikes >= 3) {
        detect_finding *f = &c->f[c->spike_fi];
        size_t k = strlen(f->evidence);
        f->severity = DETECT_WARNING;
        snprintf(f->evidence + k, sizeof(f->evidence) - k, "; %llu spikes in all", (unsigned long long)c->spikes);
    }
}

/* param.*: |L2(t) - L2(t-1)| / L2(t-1), a lower bound of the update's
 * norm over the parameter's; the first parameter past update_max. A
 * parameter whose initial record was all zero or constant is left to
 * init-* (judged at its first record). */
void detect_update_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (s->nrec == 1) {
        const detect_series *x = detect_find(c, s->name + 6);
        s->init_flat = x && x->mode >= TFT_STATS_HEALTH &&
                       (x->first.zero == x->first.numel || x->first.min == x->first.max);
    }
    if (!finite || t->ndim < 2 || t->mode < TFT_STATS_FULL || !s->have_prev || !(s->prev_l2 > 0) || s->init_flat)
        return;
    double r = fabs(t->stats.l2 - s->prev_l2) / s->prev_l2;
    if (!(r > c->o.update_max) || s->fired)
        return;
    s->fired = true;
    if (c->update_fi >= 0) { /* one finding per rank: the first parameter; the others counted */
        c->update_more++;
        return;
    }
    c->update_fi = c->nf;
    {
        detect_add(c, "update-ratio", DETECT_WARNING, step, s, NULL, r, c->o.update_max, CAUSE_UPDATE,
                "the L2 norm of %s moved from %.4g to %.4g at step %lld: the update is at least %.3g of the "
                "parameter's norm (usual: about 1e-3)",
                s->name, s->prev_l2, t->stats.l2, (long long)step, r);
    }
}

/* The count of the other parameters past the ratio. */
void detect_update_finish(detect_rank *c)
{
    if (c->update_fi >= 0 && c->update_fi < c->nf && c->update_more) {
        detect_finding *f = &c->f[c->update_fi];
        size_t k = strlen(f->evidence);
        snprintf(f->evidence + k, sizeof(f->evidence) - k, "; %llu other parameter(s) later",
                 (unsigned long long)c->update_more);
    }
}

/* absmax-growth, online (downsampling would lose the steps before an
 * overflow): an activation's first finite record past both thresholds,
 * before any non-finite value of its own. */
void detect_absmax_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (finite && t->mode >= TFT_STATS_FULL && !s->nonfinite_seen && s->grow_step == TFT_STEP_NONE &&
        s->first.absmax > 0 && t->stats.absmax > c->o.absmax_growth * s->first.absmax &&
        t->stats.absmax >= c->o.absmax_min) {
        s->grow_step = step;
        s->grow_val = t->stats.absmax;
    }
}

/* ---- the table and the dispatcher ------------------------------------------ */

/* Every rule, in the order the dispatcher calls them. That order is the
 * order findings are added (record by record, then at finish, then at
 * merge), which the output keeps where the sort (severity, step, rank,
 * layer) ties; a new rule goes where its findings should come. */
static const detect_rule rules[] = {
    /* shape-change, dtype-change */
    {.match = DETECT_ANY, .record = detect_shape_record},
    /* shape-ranks, data-shard */
    {.merge = detect_ranks_merge},
    /* token-range */
    {.match = DETECT_C_TOKENS, .record = detect_tokens_record, .finish = detect_tokens_finish},
    /* label-shift */
    {.match = DETECT_C_TOKENS | DETECT_C_TARGETS, .step = detect_shift_step, .record = detect_shift_record,
     .finish = detect_shift_finish},
    /* loss-mask-full (and this step's padding, for mask-padding) */
    {.match = DETECT_C_LOSS_MASK, .step = detect_lossmask_step, .record = detect_lossmask_record,
     .finish = detect_lossmask_finish},
    /* pad-rows */
    {.match = DETECT_C_TOKENS | DETECT_C_PAD_MASK, .record = detect_padrows_record, .finish = detect_padrows_finish},
    /* data-repeat, ckpt-data */
    {.match = DETECT_C_TOKENS, .record = detect_repeat_record, .merge = detect_repeat_merge},
    /* mask-future, mask-padding */
    {.match = DETECT_C_CAUSAL_MASK, .record = detect_mask_record},
    /* mask-future, from the probabilities */
    {.match = DETECT_C_PROBS, .record = detect_probs_record},
    /* init-zero, init-constant, init-scale */
    {.finish = detect_init_finish},
    /* loss-flat, loss-rise */
    {.finish = detect_loss_finish},
    /* no-warmup */
    {.finish = detect_warmup_finish},
    /* grad-spike, grad-growth */
    {.match = DETECT_C_GRAD_NORM, .record = detect_gradnorm_record, .finish = detect_gradnorm_finish},
    /* clip-always, clip-never, clip-unknown */
    {.finish = detect_clip_finish},
    /* update-ratio */
    {.match = DETECT_C_PARAM, .record = detect_update_record, .finish = detect_update_finish},
    /* absmax-growth */
    {.match = DETECT_C_ACTIVATION, .record = detect_absmax_record, .finish = detect_absmax_finish},
    /* attn-collapse */
    {.finish = detect_collapse_finish},
    /* attn-scale */
    {.finish = detect_attnscale_finish},
    /* ckpt-optim */
    {.finish = detect_ckpt_finish},
    /* precision-risk */
    {.match = DETECT_ANY, .record = detect_risk_record, .finish = detect_risk_finish},
    /* softmax-overflow */
    {.match = DETECT_C_SCORES, .record = detect_softmax_record, .finish = detect_softmax_finish},
    /* layer-growth */
    {.match = DETECT_C_ACTIVATION, .record = detect_layer_record, .finish = detect_layer_finish},
    /* attn-uniform */
    {.finish = detect_uniform_finish},
    /* grad-accum */
    {.match = DETECT_C_GRAD, .record = detect_accum_record, .finish = detect_accum_finish},
};
#define NRULES (sizeof(rules) / sizeof(rules[0]))

/* One tensor record: a new step first (the rules' step hooks), then, for
 * the first record of its name in the step, the series store counts it and
 * the rules that match the name judge it. */
static int on_tensor(detect_rank *c, const tft_reader *r, const tft_rec_tensor *t)
{
    int64_t step = t->h.step;
    if (step == TFT_STEP_NONE || t->ndim > TFT_MAX_NDIM)
        return 0;
    if (step != c->step) {
        c->step = step;
        for (size_t i = 0; i < NRULES; i++)
            if (rules[i].step)
                rules[i].step(c);
    }
    int e = 0;
    detect_series *s = series_get(c, r, t->name, &e);
    if (!s || s->last_step == step)
        return e;
    bool finite = !t->stats.nan && !t->stats.pinf && !t->stats.ninf;
    series_count(s, t, step, finite);
    for (size_t i = 0; i < NRULES; i++)
        if (rules[i].record && (rules[i].match == DETECT_ANY || (s->cls & rules[i].match)))
            rules[i].record(c, s, t, step, finite);
    c->nonfinite_any |= !finite;
    series_keep(s, t, finite);
    return 0;
}

int detect_rank_record(detect_rank *c, const tft_reader *r, const tft_rec *rec)
{
    if (rec->kind == TFT_REC_TENSOR && rec->len >= sizeof(tft_rec_tensor))
        return on_tensor(c, r, (const tft_rec_tensor *)rec);
    if (rec->kind == TFT_REC_CHECKPOINT && rec->len >= sizeof(tft_rec_checkpoint) &&
        ((const tft_rec_checkpoint *)rec)->action == TFT_CKPT_RESUME && c->resume_step == TFT_STEP_NONE)
        c->resume_step = rec->step;
    return 0;
}

int detect_rank_finish(detect_rank *c)
{
    for (size_t i = 0; i < NRULES; i++)
        if (rules[i].finish)
            rules[i].finish(c);
    for (int i = 0; i < c->ns; i++) {
        free(c->s[i].hist);
        c->s[i].hist = NULL;
    }
    return 0;
}

static int cmp_finding(const void *a, const void *b)
{
    const detect_finding *x = a, *y = b;
    if (x->severity != y->severity)
        return x->severity - y->severity;
    int64_t sx = x->step == TFT_STEP_NONE ? INT64_MAX : x->step, sy = y->step == TFT_STEP_NONE ? INT64_MAX : y->step;
    if (sx != sy)
        return sx < sy ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank - y->rank;
    return (x->layer < 0 ? 1 << 30 : x->layer) - (y->layer < 0 ? 1 << 30 : y->layer);
}

int detect_merge(detect_rank *const *ranks, int n, detect_finding *out, int max)
{
    for (size_t i = 0; i < NRULES; i++)
        if (rules[i].merge)
            rules[i].merge(ranks, n);
    int k = 0;
    for (int r = 0; r < n; r++)
        for (int i = 0; ranks[r] && i < ranks[r]->nf && k < max; i++)
            out[k++] = ranks[r]->f[i];
    qsort(out, (size_t)k, sizeof(*out), cmp_finding);
    return k;
}
