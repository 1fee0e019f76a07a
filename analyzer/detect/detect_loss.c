/*
 * detect_loss.c — the loss curve (docs/CHECK.md), judged once the rank is
 * read from the downsampled history of every series named loss: a curve
 * that does not fall (loss-flat) or that rises well above its best
 * (loss-rise).
 */
#include "detect_rules_internal.h"

#include <math.h>

static const char CAUSE_FLAT[] =
    "the model is not learning: learning rate far too low or zero, frozen parameters, gradients cut, or labels "
    "unrelated to the inputs";
static const char CAUSE_RISE[] =
    "divergence: a learning rate too high for this phase, no warm-up or clipping, or numerics (overflow, loss "
    "scaling) going wrong";

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
        /* ... and gives back a tenth of what it had gained: near zero, a
         * loss that doubles from 0.01 to 0.02 after falling from 2.3 is
         * noise, not divergence */
        if (a > best && m - best < 0.1 * (a - best))
            continue;
        /* a short curve (windows of one or two points: noise) must end there */
        if (w < 3 && !(b > best * (1 + c->o.loss_rise)))
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
                   (long long)s->hist[on + w - 1].step, m, (long long)s->hist[i].step,
                   (long long)s->hist[i + w - 1].step, m / best);
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
