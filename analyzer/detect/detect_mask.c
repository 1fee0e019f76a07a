/*
 * detect_mask.c — the attention mask (docs/CHECK.md), judged record by
 * record: a 0/1 `*.attn.mask` [..., T, T] that allows more pairs than a
 * causal mask can, or attention probabilities with no 1 once a mask is
 * recorded (mask-future); a plain causal mask in a step whose loss_mask
 * shows padding (mask-padding, from detect_data.c's loss_mask state). One
 * finding of each per rank.
 */
#include "detect_rules_internal.h"

#include <math.h>
#include <string.h>

static const char CAUSE_MASK_FUTURE[] =
    "the causal mask is off by one (j <= i + 1) or missing: each position sees the token it must predict";
static const char CAUSE_MASK_PAD[] =
    "the padding mask is not combined with the causal mask: real tokens attend to padding";

/* The attention mask (a 0/1 tensor [..., T, T]): a causal mask allows at
 * most T(T+1)/2 pairs per matrix; exactly that many while the batch has
 * padding (a loss_mask zero this step) means padding is not masked. */
void detect_mask_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (t->ndim < 2 || t->mode < TFT_STATS_HEALTH || t->shape[t->ndim - 1] != t->shape[t->ndim - 2] ||
        t->stats.min < 0 || t->stats.max > 1 || t->shape[t->ndim - 1] <= 1)
        return;
    uint64_t T = (uint64_t)t->shape[t->ndim - 1];
    if (T > (1u << 20) || t->stats.numel % (T * T))
        return;
    c->mask.causal_seen = true;
    uint64_t lead = t->stats.numel / (T * T), ones = t->stats.numel - t->stats.zero;
    uint64_t bound = lead * (T * (T + 1) / 2);
    if (ones > bound && !c->mask.future_done) {
        detect_add(c, "mask-future", DETECT_ERROR, step, s, NULL, (double)ones, (double)bound, CAUSE_MASK_FUTURE,
                   "%s allows %llu query-key pairs, more than a causal mask can (%llu = %llu x %llu*%llu/2): some "
                   "position sees a later one",
                   s->name, (unsigned long long)ones, (unsigned long long)bound, (unsigned long long)lead,
                   (unsigned long long)T, (unsigned long long)(T + 1));
        c->mask.future_done = true;
    }
    /* a row whose T tokens are all real still has a PAD target when its
     * document ends at T: more zeros than rows means padded tokens */
    if (ones == bound && c->loss_mask.have && c->loss_mask.zeros > lead && !c->mask.pad_done) {
        detect_add(c, "mask-padding", DETECT_ERROR, step, s, "loss_mask", (double)ones, (double)bound, CAUSE_MASK_PAD,
                   "%s allows exactly the %llu pairs of a plain causal mask while this step's batch has padding "
                   "(loss_mask has more zeros than rows)",
                   s->name, (unsigned long long)ones);
        c->mask.pad_done = true;
    }
}

/* Attention probabilities under a causal mask: the first query position
 * sees one key only, so some probability is exactly 1; none is when that
 * position sees a later one too. */
void detect_probs_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (!c->mask.causal_seen || c->mask.probs_done || t->mode < TFT_STATS_HEALTH || t->stats.nan || t->stats.pinf ||
        !(t->stats.max > 0) || t->stats.max >= 0.999)
        return;
    detect_add(c, "mask-future", DETECT_ERROR, step, s, NULL, t->stats.max, 1.0, CAUSE_MASK_FUTURE,
               "the largest attention probability in %s is %.4g, below 1: under a causal mask the first position "
               "attends to itself only (probability 1), so it sees a later position too",
               s->name, t->stats.max);
    c->mask.probs_done = true;
}

/* A registered mask buffer (tftrace --torch's buffer.*, a name with mask,
 * bias, causal or tril in it, nanoGPT's attn.bias): [..., T, T] of two
 * values, 0/1 (the allowed pairs are the ones) or 0/-inf or 0/-large
 * (additive: the allowed pairs are the zeros). More than T(T+1)/2 allowed
 * pairs per matrix, fewer than all, is mask-future. */
void detect_maskbuf_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    (void)finite;
    const char *n = s->name;
    if (c->mask.future_done || t->ndim < 2 || t->mode < TFT_STATS_HEALTH ||
        t->shape[t->ndim - 1] != t->shape[t->ndim - 2] || t->shape[t->ndim - 1] <= 1 ||
        !(strstr(n, "mask") || strstr(n, "bias") || strstr(n, "causal") || strstr(n, "tril")))
        return;
    const tft_stats *st = &t->stats;
    uint64_t T = (uint64_t)t->shape[t->ndim - 1];
    if (T > (1u << 20) || st->numel % (T * T) || st->nan || st->pinf)
        return;
    uint64_t allowed;
    if (!st->ninf && st->min >= 0 && st->max <= 1 && fabs(st->l1 - (double)(st->numel - st->zero)) < 0.5)
        allowed = st->numel - st->zero; /* 0/1 */
    else if (st->max == 0 && (st->ninf + st->zero == st->numel ||
                              (st->min <= -1e4 && fabs(st->l1 + st->min * (double)(st->numel - st->zero)) <=
                                                      1e-6 * st->l1)))
        allowed = st->zero; /* additive */
    else
        return;
    c->mask.causal_seen = true;
    uint64_t lead = st->numel / (T * T), bound = lead * (T * (T + 1) / 2);
    if (allowed <= bound || allowed >= st->numel)
        return;
    detect_add(c, "mask-future", DETECT_ERROR, step, s, NULL, (double)allowed, (double)bound, CAUSE_MASK_FUTURE,
               "the mask buffer %s allows %llu query-key pairs, more than a causal mask can (%llu = %llu x "
               "%llu*%llu/2): some position sees a later one",
               s->name, (unsigned long long)allowed, (unsigned long long)bound, (unsigned long long)lead,
               (unsigned long long)T, (unsigned long long)(T + 1));
    c->mask.future_done = true;
}
