/*
 * detect_grad.c — gradients (docs/CHECK.md): grad_norm spiking over its
 * recent median (grad-spike) or rising step after step (grad-growth),
 * record by record; grad_norm against the clip threshold (clip-always,
 * clip-never, clip-unknown) once the rank is read; and gradients not
 * zeroed between steps (grad-accum), seen in one trace
 * through a sparse gradient: an embedding's gradient is zero in the rows
 * of the tokens a batch does not use, so its zero count goes up and down
 * with the batches. Accumulated without zeroing, a row once touched stays
 * nonzero: the count can only fall. docs/CHECK.md (grad-accum) says what
 * this cannot see (dense gradients, tied embeddings such as tftrain's).
 *
 * State: four numbers per `grad.*` series for grad-accum, updated record
 * by record; the last 16 values of grad_norm for grad-spike.
 */
#include "detect_rules_internal.h"

#include <stdio.h>
#include <string.h>

static const char CAUSE_SPIKE[] =
    "a bad batch (outliers, corrupt data), a learning rate too high for this phase, or loss scaling going wrong";
static const char CAUSE_GROWTH[] =
    "gradients not zeroed between steps (accumulating), or an optimiser diverging (learning rate too high, no "
    "clipping)";
static const char CAUSE_CLIP[] =
    "with clipping always active the step size is set by the clip threshold, not the learning rate: the "
    "threshold is low or the gradients large";
static const char CAUSE_ACCUM[] =
    "gradients are not zeroed between optimizer steps (a missing optimizer.zero_grad() or model.zero_grad()): "
    "each step applies the sum of every gradient so far";

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
    s->grad_norm.over_clip += thr > 0 && v > thr;
    if (s->grad_norm.nring >= 8) {
        double med = median16(s->grad_norm.ring, s->grad_norm.nring);
        if (med > 0 && v > c->o.spike * med && c->grad_spike.n++ == 0) {
            c->grad_spike.fi = c->nf; /* a note unless it repeats (detect_gradnorm_finish) */
            detect_add(c, "grad-spike", DETECT_INFO, step, s, NULL, v / med, c->o.spike, CAUSE_SPIKE,
                       "%s is %.4g at step %lld, %.1f times the median %.4g of the %d steps before", s->name, v,
                       (long long)step, v / med, med, s->grad_norm.nring);
        }
    }
    s->grad_norm.ring[s->grad_norm.ringpos] = v;
    s->grad_norm.ringpos = (s->grad_norm.ringpos + 1) % 16;
    s->grad_norm.nring += s->grad_norm.nring < 16;
    if (s->have_prev && v > s->prev_v) {
        if (!s->grad_norm.rises++) {
            s->grad_norm.rise_from = s->prev_v;
            s->grad_norm.rise_step = step;
        }
        if (s->grad_norm.rises >= (int)c->o.growth_steps && s->grad_norm.rise_from > 0 &&
            v >= c->o.growth * s->grad_norm.rise_from && !s->grad_norm.growth_fired) {
            detect_add(c, "grad-growth", DETECT_WARNING, s->grad_norm.rise_step, s, NULL, v / s->grad_norm.rise_from,
                       c->o.growth, CAUSE_GROWTH,
                       "%s rose at each of %d steps from step %lld, from %.4g to %.4g (x%.1f)", s->name,
                       s->grad_norm.rises, (long long)s->grad_norm.rise_step, s->grad_norm.rise_from, v,
                       v / s->grad_norm.rise_from);
            s->grad_norm.growth_fired = true;
        }
    } else {
        s->grad_norm.rises = 0;
    }
}

/* One spike is a note, three a warning. */
void detect_gradnorm_finish(detect_rank *c)
{
    if (c->grad_spike.n < 3)
        return;
    detect_finding *f = detect_note(c, c->grad_spike.fi, "; %llu spikes in all", (unsigned long long)c->grad_spike.n);
    if (f)
        f->severity = DETECT_WARNING;
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
    else if (g->grad_norm.over_clip == g->nvals)
        detect_add(c, "clip-always", DETECT_INFO, g->first_step, g, NULL, g->vmin, thr, CAUSE_CLIP,
                   "%s is above the clip threshold %.4g at every one of its %llu steps (smallest %.4g)", g->name, thr,
                   (unsigned long long)g->nvals, g->vmin);
    else if (g->grad_norm.over_clip == 0)
        detect_add(c, "clip-never", DETECT_INFO, g->first_step, g, NULL, g->vmax, thr, "",
                   "%s never reaches the clip threshold %.4g in %llu steps (largest %.4g): clipping never acts",
                   g->name, thr, (unsigned long long)g->nvals, g->vmax);
}

void detect_accum_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (t->mode < TFT_STATS_HEALTH || !finite)
        return;
    uint64_t z = t->stats.zero;
    if (s->nrec == 1) {
        s->grad_accum.first = s->grad_accum.prev = z;
        return;
    }
    if (z > s->grad_accum.prev)
        s->grad_accum.rose = true;
    else if (z < s->grad_accum.prev && !s->grad_accum.falls++)
        s->grad_accum.fall_step = s->last_step;
    s->grad_accum.prev = z;
}

/* The first gradient with zeros at its first step whose zero count never
 * rose over at least min_steps steps and fell at two or more. */
void detect_accum_finish(detect_rank *c)
{
    detect_pick p = {0};
    for (int i = 0; i < c->ns; i++) {
        const detect_series *s = &c->s[i];
        if (!(s->cls & DETECT_C_GRAD) || s->mode < TFT_STATS_HEALTH || !s->grad_accum.first ||
            s->grad_accum.first >= s->first.numel || s->grad_accum.rose || s->grad_accum.falls < 2 ||
            (double)s->nrec < c->o.min_steps)
            continue;
        detect_pick_offer(&p, s, NULL);
    }
    const detect_series *best = p.s;
    if (!best)
        return;
    detect_add(c, "grad-accum", DETECT_WARNING, best->grad_accum.fall_step, best, NULL, (double)best->grad_accum.falls,
               c->o.min_steps, CAUSE_ACCUM,
               "the zero count of %s (a sparse gradient: rows the batch does not use) never rises over its %llu steps "
               "and falls at %llu of them, %llu at step %lld to %llu: rows once touched keep a gradient; %d other "
               "gradient(s) likewise",
               best->name, (unsigned long long)best->nrec, (unsigned long long)best->grad_accum.falls,
               (unsigned long long)best->grad_accum.first, (long long)best->first_step,
               (unsigned long long)best->grad_accum.prev, p.others);
}
