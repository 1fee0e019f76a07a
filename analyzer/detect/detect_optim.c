/*
 * detect_optim.c — the optimiser (docs/CHECK.md): a learning rate at its
 * peak from step 0 (no-warmup, at finish), a parameter whose L2 norm moves
 * by more than update_max of itself in one step (update-ratio, record by
 * record, one finding per rank counting the others), and Adam moments that
 * start from zero after a checkpoint RESUME record (ckpt-optim, at finish).
 */
#include "detect_rules_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char CAUSE_WARMUP[] =
    "the learning-rate schedule starts at its peak: no warm-up, which Adam-style optimisers need while their "
    "moments are still empty";
static const char CAUSE_UPDATE[] =
    "a learning rate too high for this parameter (no warm-up, wrong scale), or clipping missing";
static const char CAUSE_CKPT[] =
    "the resume did not restore the optimizer state (Adam moments start from zero), so the first steps after it "
    "are too large";

/* lr at its peak at step 0 (or before). */
void detect_warmup_finish(detect_rank *c)
{
    detect_series *lr = detect_find(c, "lr");
    if (lr && lr->nvals >= 2 && lr->vmax > 0 && lr->first.mean >= 0.999 * lr->vmax && lr->first_step <= 0) {
        /* a schedule that starts at its peak is common and often fine (Hugging
         * Face's default linear decay): a warning only when a parameter jumped
         * (update-ratio, judged record by record before this) */
        bool constant = lr->vmin >= 0.999 * lr->vmax, jumped = c->update_ratio.fi >= 0;
        detect_add(c, "no-warmup", jumped && !constant ? DETECT_WARNING : DETECT_INFO, lr->first_step, lr, NULL,
                   lr->first.mean, lr->vmax, CAUSE_WARMUP, "lr is %.4g at step %lld, its peak over the run%s%s",
                   lr->first.mean, (long long)lr->first_step, constant ? " (constant)" : ", and only decays after it",
                   jumped && !constant ? ", and a parameter jumps (update-ratio)" : "");
    }
}

/* param.*: |L2(t) - L2(t-1)| / L2(t-1), a lower bound of the update's
 * norm over the parameter's; the first parameter past update_max. A
 * parameter whose initial record was all zero or constant is left to
 * init-* (judged at its first record). */
void detect_update_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (s->nrec == 1) {
        const detect_series *x = detect_initial(c, s);
        s->update_ratio.init_flat = x && x->mode >= TFT_STATS_HEALTH &&
                       (x->first.zero == x->first.numel || x->first.min == x->first.max);
    }
    if (!finite || t->ndim < 2 || t->mode < TFT_STATS_FULL || !s->have_prev || !(s->prev_l2 > 0) ||
        s->update_ratio.init_flat)
        return;
    double r = fabs(t->stats.l2 - s->prev_l2) / s->prev_l2;
    if (!(r > c->o.update_max) || s->update_ratio.fired)
        return;
    s->update_ratio.fired = true;
    if (c->update_ratio.fi >= 0) { /* one finding per rank: the first parameter; the others counted */
        c->update_ratio.more++;
        return;
    }
    c->update_ratio.fi = c->nf;
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
    if (c->update_ratio.more)
        detect_note(c, c->update_ratio.fi, "; %llu other parameter(s) later", (unsigned long long)c->update_ratio.more);
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
