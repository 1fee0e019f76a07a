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

typedef struct detect_rule {
    uint32_t match; /* DETECT_C_* whose records it reads (any of them), DETECT_ANY */
    void (*step)(detect_rank *c);
    void (*record)(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
    void (*finish)(detect_rank *c);
    void (*merge)(detect_rank *const *ranks, int n);
} detect_rule;

/* detect_shape.c: shape-change / dtype-change; shape-ranks and data-shard across ranks */
void detect_shape_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
void detect_ranks_merge(detect_rank *const *ranks, int n);

/* detect_data.c: token-range, label-shift, loss-mask-full, pad-rows, data-repeat, ckpt-data */
void detect_tokens_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
void detect_tokens_finish(detect_rank *c);
void detect_shift_step(detect_rank *c);
void detect_shift_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
void detect_shift_finish(detect_rank *c);
void detect_lossmask_step(detect_rank *c);
void detect_lossmask_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
void detect_lossmask_finish(detect_rank *c);
void detect_padrows_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
void detect_padrows_finish(detect_rank *c);
void detect_repeat_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
void detect_repeat_merge(detect_rank *const *ranks, int n);

/* detect_mask.c: mask-future and mask-padding */
void detect_mask_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
void detect_probs_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);

/* detect_init.c: init-zero, init-constant, init-scale */
void detect_init_finish(detect_rank *c);

/* detect_loss.c: loss-flat and loss-rise */
void detect_loss_finish(detect_rank *c);

/* detect_optim.c: no-warmup, update-ratio, ckpt-optim */
void detect_warmup_finish(detect_rank *c);
void detect_update_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
void detect_update_finish(detect_rank *c);
void detect_ckpt_finish(detect_rank *c);

/* detect_grad.c: grad-spike, grad-growth, clip-*, grad-accum */
void detect_gradnorm_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
void detect_gradnorm_finish(detect_rank *c);
void detect_clip_finish(detect_rank *c);
void detect_accum_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
void detect_accum_finish(detect_rank *c);

/* detect_numerics.c: absmax-growth, precision-risk, softmax-overflow, layer-growth */
void detect_absmax_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
void detect_absmax_finish(detect_rank *c);
void detect_risk_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
void detect_risk_finish(detect_rank *c);
void detect_softmax_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
void detect_softmax_finish(detect_rank *c);
void detect_layer_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite);
void detect_layer_finish(detect_rank *c);

/* detect_attn.c: attn-collapse, attn-scale, attn-uniform */
void detect_collapse_finish(detect_rank *c);
void detect_attnscale_finish(detect_rank *c);
void detect_uniform_finish(detect_rank *c);

#endif
