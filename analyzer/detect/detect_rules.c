/*
 * detect_rules.c — the detectors judged once a rank file is read (data,
 * initialisation, loss curve, learning rate, clipping, absmax growth,
 * attention collapse, optimizer state after a resume) and the merge of
 * the ranks' findings (detect.h). Thresholds: detect_opts; their
 * defaults and rationale: docs/CHECK.md.
 */
#include "detect_rules_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char CAUSE_TOKENS[] =
    "the tokenizer and the model disagree on the vocabulary (added special tokens, a wrong vocab size), or ids "
    "were corrupted before the embedding";
static const char CAUSE_SHIFT[] =
    "the labels are not shifted by one position (targets = inputs): the model learns to copy, the loss falls far "
    "below what the data allows";
static const char CAUSE_LM[] =
    "the loss mask covers padding (PAD targets count in the loss), unless these batches really have no padding";
static const char CAUSE_ZERO[] =
    "the parameter was initialised to zeros or a constant (a missing init call, e.g. position embeddings): its "
    "units stay symmetric";
static const char CAUSE_SCALE[] =
    "a wrong init scale for this parameter (a missing 1/sqrt(fan_in), a std meant for another layer)";
static const char CAUSE_FLAT[] =
    "the model is not learning: learning rate far too low or zero, frozen parameters, gradients cut, or labels "
    "unrelated to the inputs";
static const char CAUSE_RISE[] =
    "divergence: a learning rate too high for this phase, no warm-up or clipping, or numerics (overflow, loss "
    "scaling) going wrong";
static const char CAUSE_WARMUP[] =
    "the learning-rate schedule starts at its peak: no warm-up, which Adam-style optimisers need while their "
    "moments are still empty";
static const char CAUSE_CLIP[] =
    "with clipping always active the step size is set by the clip threshold, not the learning rate: the "
    "threshold is low or the gradients large";
static const char CAUSE_GROWTH_ABS[] =
    "values grow until they overflow: a learning rate too high, a missing normalisation or 1/sqrt(d) scale, or a "
    "low-precision dtype without loss scaling";
static const char CAUSE_COLLAPSE[] =
    "attention collapsed to one key per query: scores too large (missing 1/sqrt(d) scale, a learning rate too "
    "high)";
static const char CAUSE_CKPT[] =
    "the resume did not restore the optimizer state (Adam moments start from zero), so the first steps after it "
    "are too large";

/* The vocabulary size: the option, else the first dimension of the token
 * embedding (tftrain's wte, a PyTorch embedding's weight). */
static double vocab_of(detect_rank *c)
{
    if (c->o.vocab > 0)
        return c->o.vocab;
    static const char *const names[] = {"wte", "wte.weight", "embed_tokens.weight", "tok_embeddings.weight",
                                        "word_embeddings.weight", "tok_emb.weight"};
    for (int i = 0; i < c->ns; i++)
        for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
            if (detect_ends(c->s[i].name, names[k]) && c->s[i].first_ndim == 2 && c->s[i].first_shape[0] > 0)
                return (double)c->s[i].first_shape[0];
    return 0;
}

/* The first step with a token id past the vocabulary, and a negative id. */
void detect_tokens_finish(detect_rank *c)
{
    double V = vocab_of(c);
    for (int i = 0; i < c->ns; i++) {
        detect_series *s = &c->s[i];
        if (!(s->cls & DETECT_C_TOKENS))
            continue;
        for (int k = 0; V > 0 && k < s->nmax; k++)
            if (s->max_val[k] >= V) {
                detect_add(c, "token-range", DETECT_ERROR, s->max_step[k], s, NULL, s->max_val[k], V, CAUSE_TOKENS,
                        "%s holds id %.0f at step %lld, past the vocabulary of %.0f ids (0..%.0f)", s->name,
                        s->max_val[k], (long long)s->max_step[k], V, V - 1);
                break;
            }
        if (s->neg_step != TFT_STEP_NONE)
            detect_add(c, "token-range", DETECT_ERROR, s->neg_step, s, NULL, s->neg_val, 0, CAUSE_TOKENS,
                    "%s holds a negative id (%.0f) at step %lld", s->name, s->neg_val, (long long)s->neg_step);
    }
}

/* Targets equal to tokens in at least half of the steps with both. */
void detect_shift_finish(detect_rank *c)
{
    if (c->shift_steps && 2 * c->shift_steps >= c->data_steps)
        detect_add(c, "label-shift", DETECT_ERROR, c->shift_step, detect_find(c, "targets"), "tokens",
                (double)c->shift_steps, (double)c->data_steps, CAUSE_SHIFT,
                "targets are bit-identical to tokens (same fingerprint) at %llu of %llu steps, from step %lld",
                (unsigned long long)c->shift_steps, (unsigned long long)c->data_steps, (long long)c->shift_step);
}

/* A loss_mask with no zero at any of at least min_steps steps. */
void detect_lossmask_finish(detect_rank *c)
{
    if (c->lm_steps >= c->o.min_steps && c->lm_full == c->lm_steps)
        detect_add(c, "loss-mask-full", DETECT_WARNING, c->lm_first, detect_find(c, "loss_mask"), NULL, 0,
                (double)c->lm_steps, CAUSE_LM, "loss_mask has no zero at any of its %llu steps: no target is ever "
                "left out of the loss", (unsigned long long)c->lm_steps);
}

/* The initial value of parameter P: the record named P (tftrain records
 * every parameter before the first forward), NULL when the trace has none. */
static const detect_series *initial_of(detect_rank *c, const detect_series *param)
{
    const detect_series *x = detect_find(c, param->name + 6);
    return x && x->first_step <= param->first_step ? x : NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void detect_init_finish(detect_rank *c)
{
    double *stds = malloc((size_t)(c->ns + 1) * sizeof(double));
    int n = 0;
    for (int i = 0; i < c->ns; i++) {
        const detect_series *p = &c->s[i], *x;
        if (!(p->cls & DETECT_C_PARAM) || !(x = initial_of(c, p)) || x->first_ndim < 2 ||
            x->first.numel < 2 || x->mode < TFT_STATS_HEALTH)
            continue;
        const tft_stats *st = &x->first;
        if (st->zero == st->numel) {
            detect_add(c, "init-zero", DETECT_ERROR, x->first_step, x, NULL, 0, 0, CAUSE_ZERO,
                    "%s is all zeros at step %lld (%llu elements)", x->name, (long long)x->first_step,
                    (unsigned long long)st->numel);
        } else if (st->min == st->max && !st->nan && !st->pinf && !st->ninf) {
            detect_add(c, "init-constant", DETECT_ERROR, x->first_step, x, NULL, st->min, 0, CAUSE_ZERO,
                    "every element of %s is %.6g at step %lld", x->name, st->min, (long long)x->first_step);
        } else if (x->mode >= TFT_STATS_FULL && st->std > 0 && stds) {
            stds[n++] = st->std;
        }
    }
    if (n >= 3) {
        qsort(stds, (size_t)n, sizeof(double), cmp_double);
        double med = stds[n / 2], k = c->o.init_std;
        for (int i = 0; k > 0 && i < c->ns; i++) {
            const detect_series *p = &c->s[i], *x;
            if (!(p->cls & DETECT_C_PARAM) || !(x = initial_of(c, p)) || x->first_ndim < 2 ||
                x->mode < TFT_STATS_FULL || !(x->first.std > 0))
                continue;
            double r = x->first.std / med;
            if (r > k || r < 1 / k)
                detect_add(c, "init-scale", DETECT_WARNING, x->first_step, x, NULL, r, k, CAUSE_SCALE,
                        "%s starts with std %.4g, %.3g times the median %.4g of the %d other matrices' stds",
                        x->name, x->first.std, r, med, n);
        }
    }
    free(stds);
}

/* Mean of the finite history points [a, b), NAN when none. */
static double hist_mean(const detect_series *s, int a, int b)
{
    double sum = 0;
    int k = 0;
    for (int i = a; i < b; i++)
        if (s->hist[i].finite) {
            sum += s->hist[i].v;
            k++;
        }
    return k ? sum / k : NAN;
}

static void loss_judge(detect_rank *c, detect_series *s)
{
    if (s->nrec < c->o.min_steps || s->nh < 10 || s->first.numel != 1)
        return;
    int w = s->nh / 10 > 1 ? s->nh / 10 : 1;
    double a = hist_mean(s, 0, w), b = hist_mean(s, s->nh - w, s->nh);
    if (a > 0 && b >= a * (1 - c->o.loss_drop))
        detect_add(c, "loss-flat", DETECT_WARNING, s->hist[0].step, s, NULL, b / a, 1 - c->o.loss_drop, CAUSE_FLAT,
                "%s averages %.4g over steps %lld..%lld and still %.4g over steps %lld..%lld: it does not fall",
                s->name, a, (long long)s->hist[0].step, (long long)s->hist[w - 1].step, b,
                (long long)s->hist[s->nh - w].step, (long long)s->hist[s->nh - 1].step);
    /* divergence: the smoothed curve (means of w points) against its best
     * so far; a run that recovers later still diverged */
    double best = INFINITY;
    int ib = -1;
    for (int i = 0; i + w <= s->nh; i++) {
        double m = hist_mean(s, i, i + w);
        if (m < best) {
            best = m;
            ib = i;
        }
        if (!(best > 0) || !(m > best * (1 + c->o.loss_rise)))
            continue;
        int on = i;
        for (int k = ib + 1; k < i; k++)
            if (hist_mean(s, k, k + w) > best * (1 + c->o.loss_rise / 2)) {
                on = k;
                break;
            }
        detect_add(c, "loss-rise", DETECT_ERROR, s->hist[on + w - 1].step, s, NULL, m / best, 1 + c->o.loss_rise,
                CAUSE_RISE,
                "%s fell to %.4g (mean of steps %lld..%lld), then rose from about step %lld to %.4g (mean of steps "
                "%lld..%lld, x%.2f)",
                s->name, best, (long long)s->hist[ib].step, (long long)s->hist[ib + w - 1].step,
                (long long)s->hist[on + w - 1].step, m, (long long)s->hist[i].step, (long long)s->hist[i + w - 1].step,
                m / best);
        return;
    }
}

/* Every series named loss (the whole name or its last component). */
void detect_loss_finish(detect_rank *c)
{
    for (int i = 0; i < c->ns; i++)
        if (c->s[i].cls & DETECT_C_LOSS)
            loss_judge(c, &c->s[i]);
}

/* lr at its peak at step 0 (or before). */
void detect_warmup_finish(detect_rank *c)
{
    detect_series *lr = detect_find(c, "lr");
    if (lr && lr->nvals >= 2 && lr->vmax > 0 && lr->first.mean >= 0.999 * lr->vmax && lr->first_step <= 0) {
        bool constant = lr->vmin >= 0.999 * lr->vmax;
        detect_add(c, "no-warmup", constant ? DETECT_INFO : DETECT_WARNING, lr->first_step, lr, NULL, lr->first.mean,
                lr->vmax, CAUSE_WARMUP, "lr is %.4g at step %lld, its peak over the run%s", lr->first.mean,
                (long long)lr->first_step, constant ? " (constant)" : ", and only decays after it");
    }
}

/* grad_norm against the clip threshold over at least min_steps values. */
void detect_clip_finish(detect_rank *c)
{
    detect_series *g = detect_find(c, "grad_norm");
    if (!g || g->nvals < c->o.min_steps)
        return;
    double thr = c->o.clip > 0 ? c->o.clip : c->clip_cmd;
    if (thr < 0)
        detect_add(c, "clip-never", DETECT_INFO, g->first_step, g, NULL, g->vmax, 0, "",
                "clipping is off in the recorded command (--clip 0); %s reaches %.4g", g->name, g->vmax);
    else if (!(thr > 0))
        detect_add(c, "clip-unknown", DETECT_INFO, TFT_STEP_NONE, g, NULL, 0, 0, "",
                "the clipping threshold is not recorded: give --threshold clip=X to judge clipping");
    else if (g->over_clip == g->nvals)
        detect_add(c, "clip-always", DETECT_INFO, g->first_step, g, NULL, g->vmin, thr, CAUSE_CLIP,
                "%s is above the clip threshold %.4g at every one of its %llu steps (smallest %.4g)", g->name, thr,
                (unsigned long long)g->nvals, g->vmin);
    else if (g->over_clip == 0)
        detect_add(c, "clip-never", DETECT_INFO, g->first_step, g, NULL, g->vmax, thr, "",
                "%s never reaches the clip threshold %.4g in %llu steps (largest %.4g): clipping never acts",
                g->name, thr, (unsigned long long)g->nvals, g->vmax);
}

/* Activations whose absmax grows absmax_growth times over their first
 * value, before any non-finite value of theirs: the earliest (then the
 * lowest layer) is reported, with how many others do. */
void detect_absmax_finish(detect_rank *c)
{
    const detect_series *best = NULL, *nf = NULL;
    int others = 0;
    for (int i = 0; i < c->ns; i++) {
        const detect_series *s = &c->s[i];
        if (s->nonfinite_seen && (!nf || s->nonfinite_step < nf->nonfinite_step))
            nf = s;
        if (!(s->cls & DETECT_C_ACTIVATION) || s->grow_step == TFT_STEP_NONE || !s->first.absmax)
            continue;
        if (best && (s->grow_step > best->grow_step ||
                     (s->grow_step == best->grow_step && (s->layer < 0 ? INT32_MAX : s->layer) >=
                                                             (best->layer < 0 ? INT32_MAX : best->layer)))) {
            others++;
        } else {
            others += best != NULL;
            best = s;
        }
    }
    if (!best)
        return;
    char tail[160] = "", lay[40] = "";
    if (nf)
        snprintf(tail, sizeof(tail), "; the first non-finite value follows at step %lld in %s",
                 (long long)nf->nonfinite_step, nf->name);
    if (best->layer >= 0)
        snprintf(lay, sizeof(lay), " (layer %d is where it starts)", best->layer);
    double r = best->grow_val / best->first.absmax;
    detect_add(c, "absmax-growth", nf ? DETECT_ERROR : DETECT_WARNING, best->grow_step, best, NULL, r, c->o.absmax_growth,
            CAUSE_GROWTH_ABS, "the absmax of %s grew from %.4g at step %lld to %.4g at step %lld (x%.3g)%s%s; %d "
            "other tensor(s) grew as much later or in a higher layer",
            best->name, best->first.absmax, (long long)best->first_step, best->grow_val, (long long)best->grow_step,
            r, lay, tail, others);
}

/* Attention probabilities: the sum of squares per query row is 1 for a
 * one-hot row and 1/n for a uniform one over n keys. */
void detect_collapse_finish(detect_rank *c)
{
    for (int i = 0; i < c->ns; i++) {
        const detect_series *s = &c->s[i];
        if (!(s->cls & DETECT_C_PROBS) || s->mode < TFT_STATS_FULL || s->first_ndim < 2)
            continue;
        int64_t T = s->first_shape[s->first_ndim - 1];
        if (T < 2 || s->first.numel % (uint64_t)T)
            continue;
        double rows = (double)(s->first.numel / (uint64_t)T);
        for (int k = 1; k < s->nh; k++) {
            double q = s->hist[k].l2 * s->hist[k].l2 / rows;
            if (s->hist[k].finite && q > c->o.collapse) {
                detect_add(c, "attn-collapse", DETECT_WARNING, s->hist[k].step, s, NULL, q, c->o.collapse, CAUSE_COLLAPSE,
                        "%s: the mean sum of squared probabilities per query is %.3f at step %lld (1 = one key "
                        "only; %.3f at step %lld)",
                        s->name, q, (long long)s->hist[k].step, s->hist[0].l2 * s->hist[0].l2 / rows,
                        (long long)s->hist[0].step);
                break;
            }
        }
    }
}

/* At initialisation q and k are independent: a score q.k/sqrt(hs) has
 * std about std(qkv)^2, sqrt(hs) times that without the scale. The
 * ratio is judged against hs^(1/4), halfway between on a log scale. */
void detect_attnscale_finish(detect_rank *c)
{
    for (int i = 0; i < c->ns; i++) {
        const detect_series *s = &c->s[i];
        size_t n = strlen(s->name);
        if (!(s->cls & DETECT_C_SCORES) || s->first_step != 0 || s->mode < TFT_STATS_FULL ||
            s->first_ndim != 4 || n >= 96)
            continue;
        char qn[104];
        snprintf(qn, sizeof(qn), "%.*sqkv", (int)(n - strlen("attn.scores")), s->name);
        const detect_series *q = detect_find(c, qn);
        if (!q || q->first_step != 0 || q->mode < TFT_STATS_FULL || q->first_ndim < 1 || !(q->first.std > 0))
            continue;
        int64_t H = s->first_shape[1], C3 = q->first_shape[q->first_ndim - 1];
        if (H < 1 || C3 % (3 * H))
            continue;
        double hs = (double)(C3 / (3 * H)), r = s->first.std / (q->first.std * q->first.std);
        if (hs >= 4 && r > pow(hs, 0.25))
            detect_add(c, "attn-scale", DETECT_ERROR, 0, s, q->name, r, pow(hs, 0.25),
                    "the attention scores are not scaled by 1/sqrt(head size): softmax saturates early, training is "
                    "unstable",
                    "at step 0 the std of %s is %.3g x the square of %s's (%.3g): about 1 when scaled by "
                    "1/sqrt(%g), sqrt(%g) = %.3g without",
                    s->name, r, q->name, q->first.std, hs, hs, sqrt(hs));
    }
}

/* After a resume: Adam's first moment after one step from zero is
 * (1 - beta1) x the (clipped) gradient, the same ratio of norms for every
 * parameter; restored moments give ratios that differ. */
void detect_ckpt_finish(detect_rank *c)
{
    if (c->resume_step == TFT_STEP_NONE)
        return;
    double lo = INFINITY, hi = 0;
    int n = 0;
    const detect_series *first = NULL;
    for (int i = 0; i < c->ns; i++) {
        const detect_series *m = &c->s[i];
        if (!(m->cls & DETECT_C_ADAM_M) || m->mode < TFT_STATS_FULL || m->first_step < c->resume_step)
            continue;
        char gname[104];
        snprintf(gname, sizeof(gname), "grad.%s", m->name + 7);
        const detect_series *g = detect_find(c, gname);
        if (!g || g->first_step != m->first_step || !(g->first.l2 > 0))
            continue;
        double r = m->first.l2 / g->first.l2;
        lo = r < lo ? r : lo;
        hi = r > hi ? r : hi;
        first = first ? first : m;
        n++;
    }
    if (n >= 2 && lo > 0 && hi <= lo * 1.001 && hi < 0.5)
        detect_add(c, "ckpt-optim", DETECT_ERROR, first->first_step, first, NULL, lo, 0, CAUSE_CKPT,
                "at step %lld, the first after the resume, the norm of every adam.m.* is %.4f x its gradient's (%d "
                "parameters, within 0.1%%): the moments started from zero",
                (long long)first->first_step, lo, n);
}

/* ---- across ranks ----------------------------------------------------------- */

static bool replicated(const char *name)
{
    return !strncmp(name, "param.", 6) || detect_ends(name, "tokens") || detect_ends(name, "targets") ||
           !strcmp(name, "lr") || !strcmp(name, "grad_norm");
}

/* Replicated tensors that start with another shape or dtype than on rank
 * 0 (shape-ranks), tokens bit-identical to rank 0's at the same first step
 * (data-shard): at most one of each per rank. */
void detect_ranks_merge(detect_rank *const *ranks, int n)
{
    if (n < 2 || !ranks[0])
        return;
    detect_rank *c0 = ranks[0];
    for (int r = 1; r < n; r++) {
        detect_rank *c = ranks[r];
        bool shape_done = false, shard_done = false;
        for (int i = 0; i < c->ns; i++) {
            const detect_series *s = &c->s[i];
            const uint32_t *ix = tft_u64map_find(&c0->idx, s->id, NULL, NULL);
            if (!ix || !replicated(s->name))
                continue;
            const detect_series *z = &c0->s[*ix - 1];
            bool same = z->first_ndim == s->first_ndim && z->first_dtype == s->first_dtype &&
                        !memcmp(z->first_shape, s->first_shape, (size_t)s->first_ndim * sizeof(int64_t));
            if (!same && !shape_done) {
                char a[96], b[96];
                detect_add(c, "shape-ranks", DETECT_ERROR, s->first_step, s, NULL, 0, 0,
                        "ranks run different configurations or data pipelines (a rank-dependent shape or dtype)",
                        "%s is %s %s on rank %d and %s %s on rank %d", s->name,
                        detect_shape_text(z->first_shape, z->first_ndim, a, sizeof(a)), tft_dtype_name(z->first_dtype),
                        c0->rank, detect_shape_text(s->first_shape, s->first_ndim, b, sizeof(b)),
                        tft_dtype_name(s->first_dtype), c->rank);
                shape_done = true;
            }
            if ((s->cls & DETECT_C_TOKENS) && !shard_done &&
                s->mode >= TFT_STATS_HEALTH && z->first_step == s->first_step &&
                z->first.fingerprint == s->first.fingerprint && s->first.numel > 1) {
                detect_add(c, "data-shard", DETECT_WARNING, s->first_step, s, NULL, 0, 0,
                        "every rank reads the same shard: the sampler is not split by rank (rank or world size "
                        "not passed)",
                        "%s at step %lld is bit-identical on rank %d and rank %d", s->name, (long long)s->first_step,
                        c0->rank, c->rank);
                shard_done = true;
            }
        }
    }
}
