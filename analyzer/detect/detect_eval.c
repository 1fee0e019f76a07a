/*
 * detect_eval.c — records made in eval mode (tftrace --torch's TENSOR flag
 * EVAL; docs/CHECK.md), which the series store keeps apart from training
 * ones:
 *   eval-nondet  two eval forwards of one step with bit-identical inputs
 *                give different outputs: randomness left on in eval;
 *   eval-far     a module evaluated before its first training forward gives
 *                an output orders of magnitude off its first training output
 *                (RMS ratio past eval-far).
 * eval-nondet reads every eval record (not only a name's first in its step):
 * the inputs of a root's forward (input.* / input[i]) come first and mix into
 * one key with the step, and the forward's last record (the root's output)
 * is its result.
 */
#include "detect_rules_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char CAUSE_NONDET[] =
    "randomness active in eval mode: dropout applied with training=True (F.dropout without self.training), a "
    "sampling layer, or a module left in train mode";
static const char CAUSE_FAR[] =
    "eval uses state training never set: BatchNorm running statistics not yet updated (eval before any training "
    "step) or inputs normalised differently in the eval path";

static bool is_input(const char *name)
{
    return !strncmp(name, "input.", 6) || !strncmp(name, "input[", 6);
}

/* The forward that ended: its output for its inputs, against an earlier
 * forward with the same inputs in the same step. */
static void eval_close(detect_rank *c)
{
    uint64_t key = c->evalfp.in_fp, out = c->evalfp.out_fp;
    c->evalfp.in_fp = c->evalfp.out_fp = 0;
    if (!key || !out || c->evalfp.fired)
        return;
    void *v;
    int k = tft_u64map_insert(&c->evalfp.seen, key, NULL, NULL, &v);
    if (k == 1) {
        *(uint64_t *)v = out;
        c->evalfp.nseen++;
        return;
    }
    if (k != 0 || *(uint64_t *)v == out)
        return;
    c->evalfp.fired = true;
    const detect_series *s = c->evalfp.out_si ? &c->s[c->evalfp.out_si - 1] : NULL;
    detect_add(c, "eval-nondet", DETECT_ERROR, c->evalfp.step, s, NULL, 0, 0, CAUSE_NONDET,
               "in eval mode, two forwards at step %lld with bit-identical inputs give different outputs (their last "
               "output, %s)",
               (long long)c->evalfp.step, s ? s->name : "the last output");
}

void detect_eval_trained(detect_rank *c)
{
    /* evals on either side of training compare different models: a program
     * that updates its parameters without an optimizer (the word language
     * model's p.data.add_) marks no step, so its evals share one */
    if (c->evalfp.out_fp)
        eval_close(c);
    if (c->evalfp.nseen) {
        tft_u64map_clear(&c->evalfp.seen);
        c->evalfp.nseen = 0;
    }
}

void detect_eval_any(detect_rank *c, detect_series *s, const tft_rec_tensor *t)
{
    if (!s || t->mode < TFT_STATS_HEALTH)
        return;
    if (is_input(s->name)) {
        if (c->evalfp.out_fp)
            eval_close(c);
        uint64_t h = c->evalfp.in_fp ? c->evalfp.in_fp : 0x9E3779B97F4A7C15ull ^ (uint64_t)c->step * 0xff51afd7ed558ccdull;
        c->evalfp.in_fp = (h ^ t->stats.fingerprint ^ s->id) * 0xc4ceb9fe1a85ec53ull | 1;
        c->evalfp.step = c->step;
        return;
    }
    if (c->evalfp.in_fp) {
        c->evalfp.out_fp = t->stats.fingerprint | 1;
        c->evalfp.out_si = (int)(s - c->s) + 1;
    }
}

static double rms(const tft_stats *st)
{
    return st->numel ? st->l2 / sqrt((double)st->numel) : 0;
}

/* The RMS of training series tr at the last history point at or before
 * step (the first point after it when none), from its L2 over the element
 * count of its first record; 0 none. */
static double rms_near(const detect_series *tr, int64_t step)
{
    if (!tr->hist || !tr->nh || !tr->first.numel)
        return 0;
    int k = 0;
    for (int i = 0; i < tr->nh && tr->hist[i].step <= step; i++)
        k = i;
    return tr->hist[k].finite ? tr->hist[k].l2 / sqrt((double)tr->first.numel) : 0;
}

void detect_eval_finish(detect_rank *c)
{
    if (c->evalfp.out_fp)
        eval_close(c);
    for (int i = 0; i < c->ns; i++) {
        const detect_series *e = &c->s[i];
        if (!e->eval || e->mode < TFT_STATS_FULL || is_input(e->name) || e->first.numel < 2)
            continue;
        const uint32_t *ix = tft_u64map_find(&c->idx, e->id, NULL, NULL);
        if (!ix)
            continue;
        const detect_series *tr = &c->s[*ix - 1];
        /* an evaluation before the module's first training forward (series
         * are made in the order their first records came): one after
         * training began may differ legitimately (BatchNorm's running
         * statistics of a short run) */
        if (tr < e)
            continue;
        double a = rms(&e->first), b = rms_near(tr, e->first_step), k = c->o.eval_far;
        if (tr->mode < TFT_STATS_FULL || !(a > 0) || !(b > 0) || !(k > 0) || (a / b <= k && b / a <= k))
            continue;
        detect_add(c, "eval-far", DETECT_WARNING, e->first_step, e, NULL, a / b, k, CAUSE_FAR,
                   "%s's first eval output (step %lld) has an RMS of %.4g against %.4g for its training output "
                   "nearest that step: x%.3g",
                   e->name, (long long)e->first_step, a, b, a / b);
        return; /* the first module the forward reaches */
    }
}
