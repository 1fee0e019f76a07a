/*
 * detect_rules_internal.h — the rules of tfdump --check as the dispatcher
 * (detect.c) sees them: one detect_rule per detector (or per few detectors
 * that share their state), each a set of hooks the dispatcher calls, and
 * the hooks of every rule, grouped by the file of their family. Not
 * installed.
 *
 * Contract of the hooks (all optional):
 *   step    a tensor record of a new step arrived (before its series is
 *           looked up, whether or not the name is followed);
 *   record  a counted record (a series' first record in its step) of a
 *           series whose class (detect_series.cls) the rule's match holds,
 *           every series when match is DETECT_ANY; the series store has
 *           counted it already (detect_series_count);
 *   finish  the rank file is read: the rule judges what it kept (the
 *           histories are still there);
 *   merge   every rank is finished: the rules across rank files.
 * Hooks call the stores (detect_internal.h) only, never each other or the
 * dispatcher. The order of the table is the order findings are added, which
 * the output keeps where the sort ties (detect.c).
 */
#ifndef TFT_CHECK_DETECT_RULES_INTERNAL_H
#define TFT_CHECK_DETECT_RULES_INTERNAL_H

#include "detect_internal.h"

#define DETECT_ANY 0u /* detect_rule.match: every series */

/* The hooks' types (the contract above). record: t is the record, step
 * its step, finite whether it holds no NaN or Inf. */
typedef void detect_step_fn(detect_rank *c);
typedef void detect_record_fn(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
typedef void detect_finish_fn(detect_rank *c);
typedef void detect_merge_fn(detect_rank *const *ranks, int n);

typedef struct detect_rule {
    uint32_t match;           /* DETECT_C_* whose records it reads (any of them), DETECT_ANY */
    detect_step_fn *step;     /* NULL: none (likewise below) */
    detect_record_fn *record;
    detect_finish_fn *finish;
    detect_merge_fn *merge;
} detect_rule;

/* detect_shape.c: shape-change / dtype-change; shape-ranks and data-shard across ranks */
detect_record_fn detect_shape_record;
detect_merge_fn detect_ranks_merge;

/* detect_data.c: token-range, label-shift, loss-mask-full, pad-rows, data-repeat, ckpt-data */
detect_record_fn detect_tokens_record;
detect_finish_fn detect_tokens_finish;
detect_step_fn detect_shift_step;
detect_record_fn detect_shift_record;
detect_finish_fn detect_shift_finish;
detect_step_fn detect_lossmask_step;
detect_record_fn detect_lossmask_record;
detect_finish_fn detect_lossmask_finish;
detect_record_fn detect_padrows_record;
detect_finish_fn detect_padrows_finish;
detect_record_fn detect_repeat_record;
detect_merge_fn detect_repeat_merge;

/* detect_mask.c: mask-future and mask-padding */
detect_record_fn detect_mask_record;
detect_record_fn detect_probs_record;

/* detect_init.c: init-zero, init-constant, init-scale */
detect_finish_fn detect_init_finish;

/* detect_loss.c: loss-flat and loss-rise */
detect_finish_fn detect_loss_finish;

/* detect_optim.c: no-warmup, update-ratio, ckpt-optim */
detect_finish_fn detect_warmup_finish;
detect_record_fn detect_update_record;
detect_finish_fn detect_update_finish;
detect_finish_fn detect_ckpt_finish;

/* detect_grad.c: grad-spike, grad-growth, clip-*, grad-accum */
detect_record_fn detect_gradnorm_record;
detect_finish_fn detect_gradnorm_finish;
detect_finish_fn detect_clip_finish;
detect_record_fn detect_accum_record;
detect_finish_fn detect_accum_finish;

/* detect_numerics.c: absmax-growth, precision-risk, softmax-overflow, layer-growth */
detect_record_fn detect_absmax_record;
detect_finish_fn detect_absmax_finish;
detect_record_fn detect_risk_record;
detect_finish_fn detect_risk_finish;
detect_record_fn detect_softmax_record;
detect_finish_fn detect_softmax_finish;
detect_record_fn detect_layer_record;
detect_finish_fn detect_layer_finish;

/* detect_attn.c: attn-collapse, attn-scale, attn-uniform */
detect_finish_fn detect_collapse_finish;
detect_finish_fn detect_attnscale_finish;
detect_finish_fn detect_uniform_finish;

/* detect_params.c: opt-noop, opt-partial, no-grad, frozen-update, frozen-trains, param-zeroed, init-repeat */
detect_record_fn detect_param_record;
detect_record_fn detect_pgrad_record;
detect_finish_fn detect_params_finish;
detect_finish_fn detect_reinit_finish;

/* detect_run.c: crash, clip-scaled, loss-precision, lr-restart (and the run's end for shape-change) */
detect_step_fn detect_clip_step;
detect_record_fn detect_run_record;
detect_finish_fn detect_run_finish;
detect_finish_fn detect_crash_finish;
/* The EXCEPTION and PROCESS records of the rank (its crash). */
void detect_end_record(detect_rank *c, const tft_reader *r, const tft_rec *rec);
/* Whether the rank raised, was killed or exited non-zero; its text
 * ("raised RuntimeError at step 3 in model.x: ..."). */
bool detect_crashed(const detect_rank *c);
void detect_crash_text(const detect_rank *c, char *buf, size_t n);

/* detect_data.c: data-stuck, input-zeroed, label-preshift */
detect_record_fn detect_input_record;
detect_finish_fn detect_input_finish;

/* detect_mask.c: mask-future of a mask buffer */
detect_record_fn detect_maskbuf_record;

/* detect_eval.c: eval-nondet, eval-far */
void detect_eval_any(detect_rank *c, detect_series *s, const tft_rec_tensor *t);
/* A training forward (a record made in training mode with gradients on):
 * eval forwards before it and after it are not compared (eval-nondet). */
void detect_eval_trained(detect_rank *c);
detect_finish_fn detect_eval_finish;

/* detect_shape.c: the inputs' changes, judged once the run's end is known */
detect_finish_fn detect_shape_finish;

#endif
