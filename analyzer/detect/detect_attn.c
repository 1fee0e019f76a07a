/*
 * detect_attn.c — attention (docs/CHECK.md), judged once the rank is read:
 * probabilities collapsed to one key per query (attn-collapse), scores not
 * scaled by 1/sqrt(head size) at step 0 (attn-scale), and attention that
 * stays uniform in every layer late in a run (attn-uniform). The masks are
 * detect_mask.c's; softmax inputs near overflow are detect_numerics.c's.
 * collapse and uniform read the downsampled histories.
 */
#include "detect_rules_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char CAUSE_COLLAPSE[] =
    "attention collapsed to one key per query: scores too large (missing 1/sqrt(d) scale, a learning rate too "
    "high)";
static const char CAUSE_UNIFORM[] =
    "attention never learned to select keys: query/key weights frozen or zero, scores scaled down too much (by 1/d "
    "instead of 1/sqrt(d)), or a learning rate far too low";

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
                detect_add(c, "attn-collapse", DETECT_WARNING, s->hist[k].step, s, NULL, q, c->o.collapse,
                           CAUSE_COLLAPSE,
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

/* Sum of 1/(i+1) over i < T, over T: the mean per-row sum of squares of
 * uniform causal attention (row i sees i+1 keys). */
static double uniform_causal(int64_t T)
{
    double h = 0;
    for (int64_t i = 1; i <= T; i++)
        h += 1.0 / (double)i;
    return h / (double)T;
}

/* Every attention layer within (1 + uniform) of uniform over the last half
 * of a run of at least uniform_steps steps: attention never learned to
 * select. At initialisation it is uniform by design, so only late. */
void detect_uniform_finish(detect_rank *c)
{
    const detect_series *first = NULL;
    int n = 0;
    double worst = 0;
    int64_t from = 0, to = 0;
    for (int i = 0; i < c->ns; i++) {
        const detect_series *s = &c->s[i];
        if (!(s->cls & DETECT_C_PROBS) || s->mode < TFT_STATS_FULL || s->first_ndim < 2 || s->nh < 4)
            continue;
        int64_t T = s->first_shape[s->first_ndim - 1];
        if (T < 2 || T > (1 << 24) || s->first.numel % (uint64_t)T || (double)s->nrec < c->o.uniform_steps)
            return; /* a layer too short to judge: no verdict on the others */
        double rows = (double)(s->first.numel / (uint64_t)T), qu = c->mask.causal_seen ? uniform_causal(T) : 1.0 / T;
        int64_t half = s->first_step + (s->hist[s->nh - 1].step - s->first_step) / 2;
        for (int k = 0; k < s->nh; k++) {
            double q = s->hist[k].l2 * s->hist[k].l2 / rows / qu;
            if (s->hist[k].step < half || !s->hist[k].finite)
                continue;
            if (!(q <= 1 + c->o.uniform))
                return;
            worst = q > worst ? q : worst;
        }
        if (!first || (s->layer >= 0 && s->layer < first->layer)) {
            first = s;
            from = half;
            to = s->hist[s->nh - 1].step;
        }
        n++;
    }
    if (!first || !n)
        return;
    detect_add(c, "attn-uniform", DETECT_WARNING, from, first, NULL, worst, 1 + c->o.uniform, CAUSE_UNIFORM,
               "the attention probabilities of all %d layer(s) stay uniform over steps %lld..%lld: the sum of squared "
               "probabilities per query is at most %.3f x that of uniform %s attention",
               n, (long long)from, (long long)to, worst, c->mask.causal_seen ? "causal" : "full");
}
