/*
 * detect.c — the dispatcher of tfdump --check's detectors (detect.h): a
 * rank's state, the table of every rule (detect_rules_internal.h) and the
 * walks over it: for each tensor record (after the series store has
 * counted it), when the rank file is read, and at merge.
 *
 * Input is untrusted: records shorter than their kind and ndim past
 * TFT_MAX_NDIM are skipped; statistics may be anything (NaN; negative
 * counts are impossible: u64).
 */
#include "detect_rules_internal.h"
#include "core_common.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

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
    c->step = c->resume_step = TFT_STEP_NONE;
    tft_u64map_init(&c->idx, &(tft_u64map_opts){.vsize = sizeof(uint32_t), .max_n = DETECT_MAX_SERIES});
    /* the rules' state that does not start at zero */
    c->label_shift.first = c->loss_mask.first = TFT_STEP_NONE;
    c->pad_rows.fi = -1;
    c->pad_rows.last_step = TFT_STEP_NONE;
    tft_u64map_init(&c->repeat.fps, &(tft_u64map_opts){.vsize = sizeof(int64_t), .max_n = DETECT_FP_MAX});
    c->repeat.resume_tok_step = TFT_STEP_NONE;
    c->grad_spike.fi = c->update_ratio.fi = c->softmax.fi = c->layer_growth.fi = -1;
    c->shapes.data_step = c->shapes.eval_step = TFT_STEP_NONE;
    c->shapes.fi = c->stuck.fi = c->zeroed.fi = -1;
    c->end.step = c->end.last_step = c->stuck.step = c->lr.low_step = TFT_STEP_NONE;
    c->clipscale.step = c->lr_step = TFT_STEP_NONE;
    c->clipscale.gnorm = c->clipscale.scale = NAN;
    tft_u64map_init(&c->evalfp.seen, &(tft_u64map_opts){.vsize = sizeof(uint64_t), .max_n = DETECT_FP_MAX});
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
    tft_u64map_free(&c->repeat.fps);
    tft_u64map_free(&c->evalfp.seen);
    free(c);
}

/* ---- the table and the dispatcher ------------------------------------------ */

/* Every rule, in the order the dispatcher calls them. That order is the
 * order findings are added (record by record, then at finish, then at
 * merge), which the output keeps where the sort (severity, step, rank,
 * layer) ties and which decides what is dropped past DETECT_FIND_MAX: a
 * new rule goes where its findings should come (usually last). Each row:
 * the kinds it reports (docs/CHECK.md), its file, its state (members of
 * detect_series s and detect_rank c, detect_internal.h). */
static const detect_rule rules[] = {
    /* the state of parameters and gradients the later rules read (param.initial, grad links), and lr-restart,
     * loss-precision, clip-scaled: detect_params.c, detect_run.c, s->param, c->lr, c->clipscale */
    {.match = DETECT_C_PARAM, .record = detect_param_record},
    {.match = DETECT_C_GRAD, .record = detect_pgrad_record},
    {.match = DETECT_ANY, .step = detect_clip_step, .record = detect_run_record, .finish = detect_run_finish},
    /* shape-change, dtype-change, shape-varies: detect_shape.c, s->shape_change, c->shapes (after crash's state) */
    {.match = DETECT_ANY, .record = detect_shape_record, .finish = detect_shape_finish},
    /* shape-ranks, data-shard: detect_shape.c, the series' first records */
    {.merge = detect_ranks_merge},
    /* token-range: detect_data.c, s->token_range */
    {.match = DETECT_C_TOKENS, .record = detect_tokens_record, .finish = detect_tokens_finish},
    /* label-shift: detect_data.c, c->label_shift */
    {.match = DETECT_C_TOKENS | DETECT_C_TARGETS, .step = detect_shift_step, .record = detect_shift_record,
     .finish = detect_shift_finish},
    /* loss-mask-full: detect_data.c, c->loss_mask (this step's padding, for mask-padding) */
    {.match = DETECT_C_LOSS_MASK, .step = detect_lossmask_step, .record = detect_lossmask_record,
     .finish = detect_lossmask_finish},
    /* pad-rows: detect_data.c, c->pad_rows */
    {.match = DETECT_C_TOKENS | DETECT_C_PAD_MASK, .record = detect_padrows_record, .finish = detect_padrows_finish},
    /* data-repeat, ckpt-data: detect_data.c, c->repeat */
    {.match = DETECT_C_TOKENS, .record = detect_repeat_record, .merge = detect_repeat_merge},
    /* mask-future, mask-padding: detect_mask.c, c->mask */
    {.match = DETECT_C_CAUSAL_MASK, .record = detect_mask_record},
    /* mask-future from the probabilities: detect_mask.c, c->mask */
    {.match = DETECT_C_PROBS, .record = detect_probs_record},
    /* init-zero, init-constant, init-scale: detect_init.c, the first records */
    {.finish = detect_init_finish},
    /* loss-flat, loss-rise: detect_loss.c, the histories */
    {.finish = detect_loss_finish},
    /* no-warmup: detect_optim.c, lr's scalar summary */
    {.finish = detect_warmup_finish},
    /* grad-spike, grad-growth: detect_grad.c, s->grad_norm, c->grad_spike */
    {.match = DETECT_C_GRAD_NORM, .record = detect_gradnorm_record, .finish = detect_gradnorm_finish},
    /* clip-always, clip-never, clip-unknown: detect_grad.c, grad_norm's summary and s->grad_norm.over_clip */
    {.finish = detect_clip_finish},
    /* update-ratio: detect_optim.c, s->update_ratio, c->update_ratio */
    {.match = DETECT_C_PARAM, .record = detect_update_record, .finish = detect_update_finish},
    /* absmax-growth: detect_numerics.c, s->absmax_growth */
    {.match = DETECT_C_ACTIVATION, .record = detect_absmax_record, .finish = detect_absmax_finish},
    /* attn-collapse: detect_attn.c, the histories */
    {.finish = detect_collapse_finish},
    /* attn-scale: detect_attn.c, the first records */
    {.finish = detect_attnscale_finish},
    /* ckpt-optim: detect_optim.c, the first records after c->resume_step */
    {.finish = detect_ckpt_finish},
    /* precision-risk: detect_numerics.c, s->precision_risk */
    {.match = DETECT_ANY, .record = detect_risk_record, .finish = detect_risk_finish},
    /* softmax-overflow: detect_numerics.c, c->softmax */
    {.match = DETECT_C_SCORES, .record = detect_softmax_record, .finish = detect_softmax_finish},
    /* layer-growth: detect_numerics.c, s->layer_growth, c->layer_growth */
    {.match = DETECT_C_ACTIVATION, .record = detect_layer_record, .finish = detect_layer_finish},
    /* attn-uniform: detect_attn.c, the histories, c->mask.causal_seen */
    {.finish = detect_uniform_finish},
    /* grad-accum: detect_grad.c, s->grad_accum */
    {.match = DETECT_C_GRAD, .record = detect_accum_record, .finish = detect_accum_finish},
    /* data-stuck, input-zeroed, label-preshift: detect_data.c, c->stuck, s->param */
    {.match = DETECT_C_INPUT, .record = detect_input_record, .finish = detect_input_finish},
    /* mask-future of a registered mask buffer: detect_mask.c, c->mask */
    {.match = DETECT_C_BUFFER, .record = detect_maskbuf_record},
    /* opt-noop, opt-partial, no-grad, frozen-update, frozen-trains; init-repeat: detect_params.c, s->param */
    {.finish = detect_params_finish},
    {.finish = detect_reinit_finish},
    /* eval-nondet, eval-far: detect_eval.c, c->evalfp, the eval series (every eval record: detect_eval_any) */
    {.finish = detect_eval_finish},
    /* crash: detect_run.c, c->end (the EXCEPTION and PROCESS records: detect_end_record) */
    {.finish = detect_crash_finish},
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
    bool eval = (t->h.flags & TFT_TENSOR_EVAL) != 0;
    detect_series *s = detect_series_get(c, r, t->name, eval, &e);
    c->end.last_step = step;
    if (eval) /* every eval record, not only a name's first in the step (eval-nondet) */
        detect_eval_any(c, s, t);
    else if ((t->h.flags & TFT_TENSOR_TRAIN) && !(t->h.flags & TFT_TENSOR_NO_GRAD))
        detect_eval_trained(c); /* a training forward: the model may change before the next eval */
    if (s && s->last_step == step && (s->cls & DETECT_C_PARAM))
        detect_param_record(c, s, t, step, !t->stats.nan && !t->stats.pinf && !t->stats.ninf);
    if (!s || s->last_step == step)
        return e;
    bool finite = (!t->stats.nan && !t->stats.pinf && !t->stats.ninf) || core_mask_inf(s->name, &t->stats);
    detect_series_count(s, t, step, finite);
    for (size_t i = 0; i < NRULES; i++)
        if (rules[i].record && (rules[i].match == DETECT_ANY || (s->cls & rules[i].match)))
            rules[i].record(c, s, t, step, finite);
    c->nonfinite_any |= !finite;
    detect_series_keep(s, t, finite);
    return 0;
}

int detect_rank_record(detect_rank *c, const tft_reader *r, const tft_rec *rec)
{
    if (rec->kind == TFT_REC_TENSOR && rec->len >= sizeof(tft_rec_tensor))
        return on_tensor(c, r, (const tft_rec_tensor *)rec);
    if (rec->kind == TFT_REC_CHECKPOINT && rec->len >= sizeof(tft_rec_checkpoint) &&
        ((const tft_rec_checkpoint *)rec)->action == TFT_CKPT_RESUME && c->resume_step == TFT_STEP_NONE)
        c->resume_step = rec->step;
    if (rec->kind == TFT_REC_EXCEPTION || rec->kind == TFT_REC_PROCESS)
        detect_end_record(c, r, rec);
    return 0;
}

void detect_rank_hole(detect_rank *c)
{
    for (int i = 0; i < c->ns; i++) {
        c->s[i].after_hole = true;
        c->s[i].have_prev = false;
    }
}

int detect_rank_finish(detect_rank *c)
{
    for (size_t i = 0; i < NRULES; i++)
        if (rules[i].finish)
            rules[i].finish(c);
    detect_series_free_hist(c);
    return 0;
}

int detect_merge(detect_rank *const *ranks, int n, detect_finding *out, int max)
{
    for (size_t i = 0; i < NRULES; i++)
        if (rules[i].merge)
            rules[i].merge(ranks, n);
    return detect_findings_gather(ranks, n, out, max);
}
