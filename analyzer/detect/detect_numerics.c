/*
 * detect_numerics.c — the numerics detectors of tfdump --check
 * (docs/CHECK.md): activations whose absmax grows far past their first
 * value (absmax-growth), precision risk (values past fp16's range
 * appearing before the first non-finite value), softmax inputs near the
 * overflow point (softmax-overflow) and growth across layers at one step
 * (layer-growth).
 *
 * Workload: the record hooks run for every counted tensor record (its
 * first record in a step); they keep O(1) state per series and look names
 * up only once per series (the layer-0 sibling) or once per rank (the
 * evidence of a finding). A warning of theirs becomes an error at finish
 * when a non-finite value follows it.
 */
#include "detect_rules_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char CAUSE_GROWTH_ABS[] =
    "values grow until they overflow: a learning rate too high, a missing normalisation or 1/sqrt(d) scale, or a "
    "low-precision dtype without loss scaling";
static const char CAUSE_RISK[] =
    "values grow past what fp16 can hold: a learning rate too high, a missing normalisation or 1/sqrt(d) scale, "
    "or no loss scaling; in fp16 or under autocast these overflow to Inf";
static const char CAUSE_SOFTMAX[] =
    "attention scores too large for the softmax: a missing or wrong 1/sqrt(d) scale, query/key weights growing "
    "(learning rate too high, no weight decay); exp() of them overflows unless the row maximum is subtracted, and "
    "the probabilities are one-hot";
static const char CAUSE_LAYER[] =
    "one block amplifies the residual stream: a missing or misplaced normalisation, a residual branch not scaled, "
    "or a learning rate too high for the deeper layers";

/* The name of s with its layer number replaced by layer, into buf ("" when
 * it does not fit). */
static const char *layer_name(const detect_series *s, int layer, char *buf, size_t n)
{
    size_t pos, len;
    buf[0] = 0;
    if (detect_layer_span(s->name, &pos, &len) < 0)
        return buf;
    int k = snprintf(buf, n, "%.*s%d%s", (int)pos, s->name, layer, s->name + pos + len);
    if (k < 0 || (size_t)k >= n)
        buf[0] = 0;
    return buf;
}

/* The record rules below judge finite records in full mode before the
 * rank's first non-finite value. */
static bool judged(const detect_rank *c, const tft_rec_tensor *t, bool finite)
{
    return finite && t->mode >= TFT_STATS_FULL && !c->nonfinite_any;
}

/* absmax-growth, online (downsampling would lose the steps before an
 * overflow): an activation's first finite record past both thresholds,
 * before any non-finite value of its own. */
void detect_absmax_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (finite && t->mode >= TFT_STATS_FULL && !s->nonfinite_seen && s->absmax_growth.step == TFT_STEP_NONE &&
        s->first.absmax > 0 && t->stats.absmax > c->o.absmax_growth * s->first.absmax &&
        t->stats.absmax >= c->o.absmax_min) {
        s->absmax_growth.step = step;
        s->absmax_growth.val = t->stats.absmax;
    }
}

/* Values past fp16's largest finite value in an f32/f64 tensor, judged
 * before the rank's first non-finite value: the first step of each series
 * and the largest count (f16 tensors cannot hold them: they are Inf). */
void detect_risk_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (!judged(c, t, finite) || (t->dtype != TFT_F32 && t->dtype != TFT_F64))
        return;
    uint64_t n = t->stats.over_fp16;
    if (!n)
        return;
    if (s->precision_risk.step == TFT_STEP_NONE) {
        s->precision_risk.step = step;
        s->precision_risk.first = n;
    }
    if (n > s->precision_risk.max) {
        s->precision_risk.max = n;
        s->precision_risk.max_step = step;
    }
}

/* Attention scores past softmax_max (ln of f32's largest value). */
void detect_softmax_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (!judged(c, t, finite) || c->softmax.fi >= 0 || !(c->o.softmax_max > 0) ||
        !(t->stats.absmax > c->o.softmax_max))
        return;
    c->softmax.fi = c->nf;
    detect_add(c, "softmax-overflow", DETECT_WARNING, step, s, NULL, t->stats.absmax, c->o.softmax_max, CAUSE_SOFTMAX,
               "the absmax of %s is %.4g at step %lld (%.4g at step %lld), past %.4g: exp() of it overflows f32 "
               "(fp16 already past 11.09) unless the row maximum is subtracted",
               s->name, t->stats.absmax, (long long)step, s->first.absmax, (long long)s->first_step, c->o.softmax_max);
}

/* The layer-0 series of s's name, NULL none (looked up once per series). */
static const detect_series *base_of(detect_rank *c, detect_series *s)
{
    if (!s->layer_growth.base) {
        char nm[104];
        const detect_series *b = layer_name(s, 0, nm, sizeof(nm))[0] ? detect_find(c, nm) : NULL;
        s->layer_growth.base = b ? (int)(b - c->s) + 1 : -1;
    }
    return s->layer_growth.base > 0 ? &c->s[s->layer_growth.base - 1] : NULL;
}

/* At one step, the absmax of activation s (layer L) is layer_growth times
 * layer 0's and at least absmax_min: the finding names the layer with the
 * largest jump over the one below, with the chain 0..L as evidence. */
void detect_layer_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (!judged(c, t, finite) || c->layer_growth.fi >= 0 || s->layer < 1 || !(c->o.layer_growth > 0) ||
        s->step_absmax < c->o.absmax_min)
        return;
    const detect_series *b = base_of(c, s);
    if (!b || b->last_step != step || !(b->step_absmax > 0) || s->step_absmax < c->o.layer_growth * b->step_absmax)
        return;
    char ev[200] = "", nm[104];
    size_t k = 0;
    double prev = 0, jump = 0;
    const detect_series *start = s;
    for (int l = 0; l <= s->layer && l < 256; l++) {
        const detect_series *x = detect_find(c, layer_name(s, l, nm, sizeof(nm)));
        if (!x || x->last_step != step || !(x->step_absmax > 0))
            continue;
        if (prev > 0 && x->step_absmax / prev > jump) {
            jump = x->step_absmax / prev;
            start = x;
        }
        prev = x->step_absmax;
        if (k < sizeof(ev))
            k += (size_t)snprintf(ev + k, sizeof(ev) - k, "%s%d: %.4g", k ? ", " : "", l, x->step_absmax);
    }
    double r = s->step_absmax / b->step_absmax;
    c->layer_growth.fi = c->nf;
    detect_add(c, "layer-growth", DETECT_WARNING, step, start, s->name, r, c->o.layer_growth, CAUSE_LAYER,
               "at step %lld the absmax of %s grows across layers (%s), x%.3g from layer 0; the largest jump (x%.3g) "
               "is into layer %d",
               (long long)step, s->name, ev, r, jump, start->layer);
}

/* ---- when the rank is read ------------------------------------------------- */

/* "; the first non-finite value follows at step S in NAME" into buf (at
 * least 160 bytes), "" when nf is NULL. */
static const char *nonfinite_tail(const detect_series *nf, char *buf, size_t n)
{
    buf[0] = 0;
    if (nf)
        snprintf(buf, n, "; the first non-finite value follows at step %lld in %s", (long long)nf->nonfinite_step,
                 nf->name);
    return buf;
}

/* A warning of the record rules becomes an error when a non-finite value
 * follows it, which the evidence then names. */
static void escalate(detect_rank *c, int fi, const detect_series *nf)
{
    char tail[160];
    detect_finding *f = nf ? detect_note(c, fi, "%s", nonfinite_tail(nf, tail, sizeof(tail))) : NULL;
    if (f)
        f->severity = DETECT_ERROR;
}

/* absmax-growth: a grew earlier than b, or at the same step in a lower
 * layer (no layer counts as the highest). */
static bool grew_before(const detect_series *a, const detect_series *b)
{
    int la = a->layer < 0 ? INT32_MAX : a->layer, lb = b->layer < 0 ? INT32_MAX : b->layer;
    return a->absmax_growth.step < b->absmax_growth.step ||
           (a->absmax_growth.step == b->absmax_growth.step && la < lb);
}

/* Activations whose absmax grows absmax_growth times over their first
 * value, before any non-finite value of theirs: the earliest (then the
 * lowest layer) is reported, with how many others do. */
void detect_absmax_finish(detect_rank *c)
{
    detect_pick p = {0};
    for (int i = 0; i < c->ns; i++) {
        const detect_series *s = &c->s[i];
        if ((s->cls & DETECT_C_ACTIVATION) && s->absmax_growth.step != TFT_STEP_NONE && s->first.absmax)
            detect_pick_offer(&p, s, grew_before);
    }
    const detect_series *best = p.s, *nf = detect_first_nonfinite(c);
    if (!best)
        return;
    char tail[160], lay[40] = "";
    nonfinite_tail(nf, tail, sizeof(tail));
    if (best->layer >= 0)
        snprintf(lay, sizeof(lay), " (layer %d is where it starts)", best->layer);
    double r = best->absmax_growth.val / best->first.absmax;
    detect_add(c, "absmax-growth", nf ? DETECT_ERROR : DETECT_WARNING, best->absmax_growth.step, best, NULL, r,
               c->o.absmax_growth, CAUSE_GROWTH_ABS,
               "the absmax of %s grew from %.4g at step %lld to %.4g at step %lld (x%.3g)%s%s; %d "
               "other tensor(s) grew as much later or in a higher layer",
               best->name, best->first.absmax, (long long)best->first_step, best->absmax_growth.val,
               (long long)best->absmax_growth.step, r, lay, tail, p.others);
}

static bool risk_before(const detect_series *a, const detect_series *b)
{
    return a->precision_risk.step < b->precision_risk.step;
}

/* The earliest series with values past fp16's range (then the first
 * created: forward order), with how many others have some. */
void detect_risk_finish(detect_rank *c)
{
    detect_pick p = {0};
    for (int i = 0; i < c->ns; i++)
        if (c->s[i].precision_risk.step != TFT_STEP_NONE)
            detect_pick_offer(&p, &c->s[i], risk_before);
    const detect_series *best = p.s, *nf = detect_first_nonfinite(c);
    if (!best)
        return;
    char tail[160];
    nonfinite_tail(nf, tail, sizeof(tail));
    detect_add(c, "precision-risk", nf ? DETECT_ERROR : DETECT_INFO, best->precision_risk.step, best, NULL,
               (double)best->precision_risk.first, 65504, nf ? CAUSE_RISK : "",
               "%llu value(s) of %s are past fp16's largest value 65504 at step %lld, %llu at step %lld%s; %d other "
               "tensor(s) have such values from that step or later%s",
               (unsigned long long)best->precision_risk.first, best->name, (long long)best->precision_risk.step,
               (unsigned long long)best->precision_risk.max, (long long)best->precision_risk.max_step, tail, p.others,
               nf ? "" : " (fine in f32; not castable to fp16)");
}

/* softmax-overflow and layer-growth are errors when a non-finite value
 * follows. */
void detect_softmax_finish(detect_rank *c)
{
    escalate(c, c->softmax.fi, detect_first_nonfinite(c));
}

void detect_layer_finish(detect_rank *c)
{
    escalate(c, c->layer_growth.fi, detect_first_nonfinite(c));
}
