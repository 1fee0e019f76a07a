/*
 * detect_run.c — the run as a whole (docs/CHECK.md):
 *   crash          the rank raised an uncaught exception (an EXCEPTION
 *                  record: its text), was killed by a signal or exited with
 *                  a non-zero status (its PROCESS exit record);
 *   clip-scaled    gradients clipped before the loss scaler unscaled them:
 *                  grad_norm is about amp.scale times the norm of the
 *                  gradients the optimizer then receives;
 *   loss-precision the loss is a bf16 or f16 tensor;
 *   lr-restart     after decaying to half its peak or less, lr climbs back.
 */
#include "detect_rules_internal.h"
#include "core_exception.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char CAUSE_CLIP[] =
    "clip_grad_norm_ is called on the scaled gradients, before GradScaler.unscale_(optimizer): the threshold is "
    "compared with gradients amp.scale times too large, so clipping cuts them to almost nothing";
static const char CAUSE_LOWP[] =
    "the loss is reduced in low precision (logits cast to bf16/fp16 before the loss, autocast around a loss it "
    "does not upcast): its sum loses bits and small improvements vanish";
static const char CAUSE_RESTART[] =
    "the scheduler was re-created or its state reset (a resume that rebuilt it, a new scheduler per epoch); if "
    "warm restarts (SGDR, cyclic) are meant, ignore";

void detect_end_record(detect_rank *c, const tft_reader *r, const tft_rec *rec)
{
    if (rec->kind == TFT_REC_EXCEPTION && !c->end.raised) {
        core_exception x = {0};
        core_exception_take(&x, r, rec);
        if (!x.known)
            return;
        c->end.raised = true;
        c->end.step = x.step;
        snprintf(c->end.type, sizeof(c->end.type), "%.63s", x.type);
        snprintf(c->end.where, sizeof(c->end.where), "%.95s", x.where);
        snprintf(c->end.message, sizeof(c->end.message), "%.199s", x.message);
        return;
    }
    if (rec->kind != TFT_REC_PROCESS || rec->len < sizeof(tft_rec_process))
        return;
    const tft_rec_process *p = (const tft_rec_process *)rec;
    if (p->event == TFT_PROC_START && !c->end.pid)
        c->end.pid = p->pid;
    else if (p->event == TFT_PROC_EXIT && p->pid == c->end.pid && !c->end.exited) {
        c->end.exited = true;
        c->end.code = p->exit_code;
        c->end.sig = p->signal;
    }
}

bool detect_crashed(const detect_rank *c)
{
    return c->end.raised || (c->end.exited && (c->end.sig || c->end.code));
}

void detect_crash_text(const detect_rank *c, char *buf, size_t n)
{
    char at[48], after[48];   /* "step 6", "before any step" */
    if (c->end.step == TFT_STEP_NONE)
        snprintf(at, sizeof(at), "before any step");
    else
        snprintf(at, sizeof(at), "at step %lld", (long long)c->end.step);
    if (c->end.last_step == TFT_STEP_NONE)
        snprintf(after, sizeof(after), "before any step");
    else
        snprintf(after, sizeof(after), "after step %lld", (long long)c->end.last_step);
    if (c->end.raised)
        snprintf(buf, n, "raised %s %s%s%s: %s", c->end.type, at, c->end.where[0] ? " in " : "", c->end.where,
                 c->end.message);
    else if (c->end.sig)
        snprintf(buf, n, "was killed by signal %d %s", c->end.sig, after);
    else
        snprintf(buf, n, "exited with status %d %s", c->end.code, after);
}

void detect_crash_finish(detect_rank *c)
{
    if (!detect_crashed(c))
        return;
    char what[420];
    detect_crash_text(c, what, sizeof(what));
    int64_t step = c->end.raised ? c->end.step : c->end.last_step;
    detect_add(c, "crash", DETECT_ERROR, step, NULL, NULL, c->end.raised ? 0 : (double)(c->end.sig ? c->end.sig : c->end.code),
               0, "", "the run %s", what);
}

/* ---- clip-scaled: this step's gradient sums ------------------------------ */

static void clip_judge(detect_rank *c)
{
    double s = c->clipscale.scale, g = c->clipscale.gnorm, g2 = c->clipscale.g2;
    if (c->clipscale.fired || !(s >= 16) || !(g > 0) || !c->clipscale.ng || !(g2 > 0))
        return;
    double ratio = g / sqrt(g2), need = s / 8 > 16 ? s / 8 : 16;
    if (!(ratio > need))
        return;
    c->clipscale.fired = true;
    detect_series *gn = detect_find(c, "grad_norm");
    detect_add(c, "clip-scaled", DETECT_ERROR, c->clipscale.step, gn, "amp.scale", ratio, need, CAUSE_CLIP,
               "at step %lld grad_norm is %.4g with amp.scale %.6g, while the %d gradients the optimizer receives "
               "have a norm of %.4g: %.3g times smaller",
               (long long)c->clipscale.step, g, s, c->clipscale.ng, sqrt(g2), ratio);
}

void detect_clip_step(detect_rank *c)
{
    clip_judge(c);
    c->clipscale.step = c->step;
    c->clipscale.g2 = 0;
    c->clipscale.ng = 0;
    c->clipscale.gnorm = c->clipscale.scale = NAN;
}

/* Each first record of the step of grad_norm, amp.scale, a parameter's
 * gradient; lr for lr-restart; the loss's dtype. */
void detect_run_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    (void)step;
    bool full = finite && t->mode >= TFT_STATS_FULL;
    if (s->cls & DETECT_C_GRAD) {
        if (s->param.grad && t->mode >= TFT_STATS_HEALTH && finite) {
            c->clipscale.g2 += t->stats.l2 * t->stats.l2;
            c->clipscale.ng++;
        }
    } else if (s->cls & DETECT_C_GRAD_NORM) {
        if (full && t->stats.numel == 1)
            c->clipscale.gnorm = t->stats.mean;
    } else if (s->cls & DETECT_C_LOSS) {
        if (s->nrec == 1 && (t->dtype == TFT_BF16 || t->dtype == TFT_F16))
            detect_add(c, "loss-precision", DETECT_WARNING, step, s, NULL, 0, 0, CAUSE_LOWP,
                       "%s is a %s tensor at step %lld (%llu elements)", s->name, tft_dtype_name(t->dtype),
                       (long long)step, (unsigned long long)t->stats.numel);
    } else if (!s->eval && !strcmp(s->name, "amp.scale")) {
        if (full && t->stats.numel == 1)
            c->clipscale.scale = t->stats.mean;
    } else if (!s->eval && !strcmp(s->name, "lr")) {
        c->optim_seen = true;
        c->lr_step = step;
        if (!full || t->stats.numel != 1)
            return;
        double v = t->stats.mean;
        if (v > c->lr.max) {
            c->lr.max = c->lr.low = v;
            c->lr.low_step = step;
        } else if (v < c->lr.low) {
            c->lr.low = v;
            c->lr.low_step = step;
        } else if (!c->lr.fired && c->lr.max > 0 && v > c->lr.low && c->lr.low <= 0.5 * c->lr.max &&
                   v >= 4 * c->lr.low && v >= 0.5 * c->lr.max) {   /* a schedule that starts at 0 is no restart */
            c->lr.fired = true;
            detect_add(c, "lr-restart", DETECT_WARNING, step, s, NULL, v / c->lr.max, 0.5, CAUSE_RESTART,
                       "lr decayed from its peak %.4g to %.4g (step %lld) and is back at %.4g at step %lld",
                       c->lr.max, c->lr.low, (long long)c->lr.low_step, v, (long long)step);
        }
    }
}

void detect_run_finish(detect_rank *c)
{
    clip_judge(c);
}
