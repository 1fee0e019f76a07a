/*
 * detect_params.c — what the optimizer did to the parameters
 * (docs/CHECK.md), from the param.* records (their fingerprints, their
 * NO_GRAD flag: requires_grad off) and the gradients grad.P recorded before
 * each optimizer step (tftrace --torch):
 *   opt-noop       the optimizer stepped and updated none of its parameters;
 *   opt-partial    parameters that receive gradients yet never change;
 *   no-grad        parameters that require grad and never get a gradient
 *                  while others do (an error when most of them);
 *   frozen-update  a parameter recorded frozen that changes anyway;
 *   frozen-trains  frozen at its first record, then unfrozen and updated;
 *   param-zeroed   a parameter that held values and is all zeros at a step;
 *   init-repeat    a parameter written by init functions several times
 *                  before the first forward (init.count.P records).
 * Judged record by record (changes, zeros) and at finish (the counts).
 */
#include "detect_rules_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char CAUSE_NOOP[] =
    "the optimizer holds the wrong parameters (a frozen part, an empty or stale parameter list, a model built "
    "after the optimizer) or its learning rate is zero";
static const char CAUSE_PARTIAL[] =
    "these parameters are in a group whose learning rate is zero, or another optimizer than the one that steps "
    "holds them";
static const char CAUSE_NOGRAD[] =
    "the graph is cut before them (a detach(), .data, a no_grad block or a numpy round trip in the forward), or "
    "they are not used by the loss";
static const char CAUSE_FROZEN[] =
    "requires_grad is off but something still writes the parameter: weight decay or momentum of an optimizer "
    "that holds it, an in-place op, a reload";
static const char CAUSE_UNFROZEN[] =
    "a stage meant to stay frozen was unfrozen (a train() override or a loop that sets requires_grad back on); "
    "if gradual unfreezing is meant, ignore";
static const char CAUSE_ZEROED[] =
    "the values were lost in a copy (a faulty device or peer transfer, copy_ from an uninitialised or zeroed "
    "tensor, a state-dict load with wrong keys)";
static const char CAUSE_REINIT[] =
    "the init method runs per submodule and again over the whole model (apply() called twice, post_init in "
    "each submodule), or after loading weights";

/* The parameter named by gradient grad.X: param.X, NULL none. */
static detect_series *param_of(detect_rank *c, const detect_series *g)
{
    char n[sizeof(g->name) + 8];
    snprintf(n, sizeof(n), "param.%s", g->name + 5);
    return detect_find(c, n);
}

/* Every record of a parameter, not only its first in the step (the
 * dispatcher calls it for the others too: a forward's record of a changed
 * requires_grad and the optimizer's output can share a step). */
void detect_param_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    (void)finite;
    bool healthy = t->mode >= TFT_STATS_HEALTH;
    bool nograd = (t->h.flags & TFT_TENSOR_NO_GRAD) != 0;
    /* after this step's lr record: an output of the optimizer's step (its
     * pre-hook records lr); before it, a forward's record (the first one, or
     * requires_grad changed) */
    bool update = c->lr_step == step;
    if (!s->param.seen) {
        s->param.seen = true;
        s->param.initial = !c->optim_seen;
        s->param.frozen0 = s->param.frozen = nograd;
        if (!s->param.initial && healthy && t->ndim >= 2 && t->stats.numel > 1 && t->stats.zero == t->stats.numel &&
            !detect_zero_is_choice(s->name)) {
            s->param.zeroed = true; /* a model made or loaded during training, with nothing in it */
            if (c->zeroed.fi >= 0) {
                c->zeroed.more++;
            } else {
                c->zeroed.fi = c->nf;
                detect_add(c, "param-zeroed", DETECT_ERROR, step, s, NULL, (double)t->stats.numel, 0, CAUSE_ZEROED,
                           "%s is all zeros (%llu elements) at its first record, step %lld, after training began",
                           s->name, (unsigned long long)t->stats.numel, (long long)step);
            }
        }
    } else if (healthy && t->stats.fingerprint != s->param.fp) {
        s->param.changes++;
        if (s->param.change_step == TFT_STEP_NONE)
            s->param.change_step = step;
        if (s->param.frozen && s->param.frozen_step == TFT_STEP_NONE)
            s->param.frozen_step = step;
    }
    if (!update)
        s->param.frozen = nograd; /* a state record: the first forward, or requires_grad changed */
    s->param.after_step += update;
    s->param.fp = t->stats.fingerprint;
    if (!healthy || t->stats.numel < 2)
        return;
    if (t->stats.zero < t->stats.numel) {
        s->param.nonzero = true;
    } else if (s->param.nonzero && !s->param.zeroed) {
        s->param.zeroed = true;
        if (c->zeroed.fi >= 0) {
            c->zeroed.more++;
            return;
        }
        c->zeroed.fi = c->nf;
        detect_add(c, "param-zeroed", DETECT_ERROR, step, s, NULL, (double)t->stats.numel, 0, CAUSE_ZEROED,
                   "%s held nonzero values and is all zeros (%llu elements) at step %lld", s->name,
                   (unsigned long long)t->stats.numel, (long long)step);
    }
}

/* grad.X of a parameter: whether the parameter got a nonzero gradient. */
void detect_pgrad_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    (void)step;
    (void)finite;
    /* its parameter: looked up again over its first records (a model whose
     * first forward comes after another's optimizer steps has its param.X
     * recorded only after its first gradient) */
    if (!s->param.grad && s->nrec <= 8) {
        detect_series *p = param_of(c, s);
        s->param.grad = p ? (int)(p - c->s) + 1 : 0;
        if (p)
            p->param.grad = (int)(s - c->s) + 1;
    }
    if (!s->param.grad || t->mode < TFT_STATS_HEALTH)
        return;
    detect_series *p = &c->s[s->param.grad - 1];
    if (t->stats.zero < t->stats.numel || t->stats.nan)
        p->param.grad_nonzero = true;
    double rms = t->stats.numel ? t->stats.l2 / sqrt((double)t->stats.numel) : 0;
    if (t->mode >= TFT_STATS_FULL && rms > p->param.grad_rms)
        p->param.grad_rms = rms;
}

/* A list of up to three names of the parameters that qualify, "a, b, c
 * and N more". */
static void name_list(detect_rank *c, bool (*which)(const detect_rank *, const detect_series *), char *buf, size_t n)
{
    size_t k = 0;
    int shown = 0, more = 0;
    buf[0] = 0;
    for (int i = 0; i < c->ns; i++) {
        const detect_series *p = &c->s[i];
        if (!(p->cls & DETECT_C_PARAM) || p->eval || !which(c, p))
            continue;
        if (shown < 3 && k < n) {
            k += (size_t)snprintf(buf + k, n - k, "%s%s", shown ? ", " : "", p->name + 6);
            shown++;
        } else {
            more++;
        }
    }
    if (more && k < n)
        snprintf(buf + k, n - k, " and %d more", more);
}

static bool in_optimizer(const detect_rank *c, const detect_series *p)
{
    (void)c;
    return p->param.after_step > 0;
}
static bool unchanged(const detect_rank *c, const detect_series *p)
{
    return in_optimizer(c, p) && !p->param.changes;
}
static bool starved(const detect_rank *c, const detect_series *p) /* requires grad, in the optimizer, never a nonzero gradient */
{
    return in_optimizer(c, p) && !p->param.frozen && !p->param.frozen0 && !p->param.grad_nonzero;
}
/* Unchanged while its gradient was large enough to move it: lr times the
 * largest gradient RMS at least 1e-5 of the parameter's RMS (about a
 * hundred float32 ulps: an SGD step that size changes the bits; a conv bias
 * before a BatchNorm gets gradients near 1e-9 and legitimately stays). */
static bool stuck_with_grad(const detect_rank *c, const detect_series *p)
{
    double prms = p->first.numel ? p->first.l2 / sqrt((double)p->first.numel) : 0;
    return unchanged(c, p) && p->param.grad_nonzero && !(c->lr.max * p->param.grad_rms < 1e-5 * prms);
}
static bool frozen_changed(const detect_rank *c, const detect_series *p)
{
    (void)c;
    return p->param.frozen_step != TFT_STEP_NONE;
}
static bool unfrozen_trained(const detect_rank *c, const detect_series *p)
{
    (void)c;
    return p->param.frozen0 && !p->param.frozen && p->param.frozen_step == TFT_STEP_NONE &&
           p->param.change_step != TFT_STEP_NONE;
}

void detect_params_finish(detect_rank *c)
{
    if (c->zeroed.fi >= 0 && c->zeroed.more)
        detect_note(c, c->zeroed.fi, "; %llu other parameters are all zeros too", (unsigned long long)c->zeroed.more);
    int k = 0, changed = 0, nograd = 0, withgrad = 0, stuck = 0, fz = 0, unfz = 0;
    uint64_t updates = 0;
    const detect_series *first_fz = NULL, *first_unfz = NULL, *any = NULL;
    for (int i = 0; i < c->ns; i++) {
        const detect_series *p = &c->s[i];
        if (!(p->cls & DETECT_C_PARAM) || p->eval)
            continue;
        if (frozen_changed(c, p) && !fz++)
            first_fz = p;
        if (unfrozen_trained(c, p) && !unfz++)
            first_unfz = p;
        if (!in_optimizer(c, p))
            continue;
        any = any ? any : p;
        k++;
        changed += p->param.changes > 0;
        nograd += starved(c, p);
        withgrad += p->param.grad_nonzero;
        stuck += stuck_with_grad(c, p);
        updates = p->param.after_step > updates ? p->param.after_step : updates;
    }
    char names[200];
    if (k && !changed && updates >= 2) {
        name_list(c, unchanged, names, sizeof(names));
        detect_add(c, "opt-noop", DETECT_ERROR, any->first_step, any, NULL, 0, (double)k, CAUSE_NOOP,
                   "the optimizer stepped %llu times and updated 0 of its %d parameters (%s): each keeps its "
                   "fingerprint",
                   (unsigned long long)updates, k, names);
    } else if (stuck && updates >= 2) {
        name_list(c, stuck_with_grad, names, sizeof(names));
        detect_add(c, "opt-partial", DETECT_WARNING, any->first_step, NULL, NULL, (double)stuck, (double)k,
                   CAUSE_PARTIAL,
                   "%d of the optimizer's %d parameters receive gradients but never change over %llu steps (%s); "
                   "%d do change",
                   stuck, k, (unsigned long long)updates, names, changed);
    }
    if (nograd && withgrad) {
        bool most = 4 * nograd >= k; /* a quarter or more: the graph is cut (a few unused heads are a note) */
        name_list(c, starved, names, sizeof(names));
        detect_add(c, "no-grad", most ? DETECT_ERROR : DETECT_INFO, any->first_step, NULL, NULL, (double)nograd,
                   (double)k, CAUSE_NOGRAD,
                   "%d of the optimizer's %d parameters require grad but never receive a nonzero gradient (%s), while %d "
                   "do",
                   nograd, k, names, withgrad);
    }
    if (fz) {
        int fi = c->nf;
        detect_add(c, "frozen-update", DETECT_ERROR, first_fz->param.frozen_step, first_fz, NULL, (double)fz, 0,
                   CAUSE_FROZEN, "%s is frozen (requires_grad off) yet changes at step %lld", first_fz->name,
                   (long long)first_fz->param.frozen_step);
        if (fz > 1)
            detect_note(c, fi, "; %d other frozen parameters change too", fz - 1);
    }
    if (unfz) {
        int fi = c->nf;
        detect_add(c, "frozen-trains", DETECT_WARNING, first_unfz->param.change_step, first_unfz, NULL, (double)unfz,
                   0, CAUSE_UNFROZEN,
                   "%s was frozen at its first record (step %lld), then requires_grad was turned on and it is "
                   "updated from step %lld",
                   first_unfz->name, (long long)first_unfz->first_step, (long long)first_unfz->param.change_step);
        if (unfz > 1)
            detect_note(c, fi, "; %d other parameters likewise", unfz - 1);
    }
}

/* init.count.P: how often the program's init calls wrote P before the
 * first forward (recorded only when more than once). */
void detect_reinit_finish(detect_rank *c)
{
    const detect_series *first = NULL;
    int n = 0;
    double most = 0;
    for (int i = 0; i < c->ns; i++) {
        const detect_series *s = &c->s[i];
        if (!s->eval && !strncmp(s->name, "init.count.", 11) && s->first.numel == 1 && s->first.mean >= 2) {
            if (!n++)
                first = s;
            if (s->first.mean > most) {
                most = s->first.mean;
                first = s;
            }
        }
    }
    if (!first)
        return;
    int fi = c->nf;
    /* twice is common by design (Hugging Face's _init_weights reached from
     * two paths, a scaled re-init of some projections): a note; three
     * times and more (an init per submodule and again per model) a warning */
    detect_add(c, "init-repeat", most >= 3 ? DETECT_WARNING : DETECT_INFO, first->first_step, first, NULL,
               first->first.mean, 1, CAUSE_REINIT,
               "%s was written by init functions %.0f times before the first forward", first->name + 11,
               first->first.mean);
    if (n > 1)
        detect_note(c, fi, "; %d other parameters were initialised more than once", n - 1);
}
