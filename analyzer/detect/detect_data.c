/*
 * detect_data.c — the data detectors of tfdump --check: token ids past the
 * vocabulary or negative (token-range), targets equal to the same step's
 * tokens (label-shift), a loss_mask that never leaves a target out
 * (loss-mask-full; its per-step padding is what mask-padding reads), and,
 * over more than one step's record: all-padding rows (pad-rows, proved
 * from counts: the statistics hold no per-row numbers) and batches
 * repeated from an earlier step (the XXH3 fingerprint of `tokens`), which
 * after a checkpoint RESUME record is a data cursor that restarted
 * (`ckpt-data`) and otherwise an epoch boundary (`data-repeat`, a note).
 *
 * Memory: each rank keeps at most DETECT_FP_MAX fingerprints (the first
 * DETECT_FP_MAX distinct batches: 16 bytes and a flag each); a repeat of a
 * batch past them is not seen. They live until detect_rank_free, so that
 * detect_merge can look for a resumed process's batch in the rank files of
 * the processes before it (a job restarted under one recording).
 */
#include "detect_rules_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char CAUSE_TOKENS[] =
    "the tokenizer and the model disagree on the vocabulary (added special tokens, a wrong vocab size), or ids "
    "were corrupted before the embedding";
static const char CAUSE_SHIFT[] =
    "the labels are not shifted by one position (targets = inputs): the model learns to copy, the loss falls far "
    "below what the data allows";
static const char CAUSE_LM[] =
    "the loss mask covers padding (PAD targets count in the loss), unless these batches really have no padding";
static const char CAUSE_PADROWS[] =
    "rows with no real token reach the model: padding to a fixed batch shape without dropping empty documents, a "
    "collate function padding short batches, or a truncation that left nothing";
static const char CAUSE_CKPT_DATA[] =
    "the resume did not restore the data cursor (sampler or dataloader state): the run trains again on batches it "
    "has seen, from the first one";

/* Token ids: each new running maximum (the vocabulary is known only at
 * the end: detect_tokens_finish compares), and the first negative id. */
void detect_tokens_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (t->mode < TFT_STATS_HEALTH || t->stats.numel == t->stats.nan + t->stats.pinf + t->stats.ninf)
        return;
    if (t->stats.max > s->token_range.run_max) {
        s->token_range.run_max = t->stats.max;
        if (s->token_range.nmax < (int)(sizeof(s->token_range.max_step) / sizeof(s->token_range.max_step[0]))) {
            s->token_range.max_step[s->token_range.nmax] = step;
            s->token_range.max_val[s->token_range.nmax++] = t->stats.max;
        } else { /* keep the last slot at the latest maximum */
            s->token_range.max_step[s->token_range.nmax - 1] = step;
            s->token_range.max_val[s->token_range.nmax - 1] = t->stats.max;
        }
    }
    if (t->stats.min < 0 && s->token_range.neg_step == TFT_STEP_NONE) {
        s->token_range.neg_step = step;
        s->token_range.neg_val = t->stats.min;
    }
}

/* The vocabulary size: the option, else the first dimension of the token
 * embedding (tftrain's wte, a PyTorch embedding's weight). */
static double vocab_of(detect_rank *c)
{
    if (c->o.vocab > 0)
        return c->o.vocab;
    static const char *const names[] = {"wte", "wte.weight", "embed_tokens.weight", "tok_embeddings.weight",
                                        "word_embeddings.weight", "tok_emb.weight"};
    for (int i = 0; i < c->ns; i++)
        for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
            if (detect_ends(c->s[i].name, names[k]) && c->s[i].first_ndim == 2 && c->s[i].first_shape[0] > 0)
                return (double)c->s[i].first_shape[0];
    return 0;
}

/* The first step with a token id past the vocabulary, and a negative id. */
void detect_tokens_finish(detect_rank *c)
{
    double V = vocab_of(c);
    for (int i = 0; i < c->ns; i++) {
        detect_series *s = &c->s[i];
        if (!(s->cls & DETECT_C_TOKENS))
            continue;
        for (int k = 0; V > 0 && k < s->token_range.nmax; k++)
            if (s->token_range.max_val[k] >= V) {
                detect_add(c, "token-range", DETECT_ERROR, s->token_range.max_step[k], s, NULL,
                           s->token_range.max_val[k], V, CAUSE_TOKENS,
                           "%s holds id %.0f at step %lld, past the vocabulary of %.0f ids (0..%.0f)", s->name,
                           s->token_range.max_val[k], (long long)s->token_range.max_step[k], V, V - 1);
                break;
            }
        if (s->token_range.neg_step != TFT_STEP_NONE)
            detect_add(c, "token-range", DETECT_ERROR, s->token_range.neg_step, s, NULL, s->token_range.neg_val, 0,
                       CAUSE_TOKENS, "%s holds a negative id (%.0f) at step %lld", s->name, s->token_range.neg_val,
                       (long long)s->token_range.neg_step);
    }
}

void detect_shift_step(detect_rank *c)
{
    c->label_shift.have_tokens = false;
    c->label_shift.labels_fp = 0;
}

/* This step's tokens (kept for targets) and targets equal to them (labels
 * not shifted). */
void detect_shift_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (t->mode < TFT_STATS_HEALTH)
        return;
    if (s->cls & DETECT_C_TOKENS) {
        c->label_shift.have_tokens = true;
        c->label_shift.tokens_fp = t->stats.fingerprint;
        c->label_shift.tokens_numel = t->stats.numel;
    } else if (detect_ends(s->name, "labels")) {
        c->label_shift.labels_fp = t->stats.fingerprint; /* (label-preshift: labels equal to the ids say nothing) */
    } else if (c->label_shift.have_tokens) {
        /* (labels: Hugging Face's convention, labels = input_ids and the
         * model shifts them: label-preshift judges those) */
        c->label_shift.data_steps++;
        if (t->stats.fingerprint == c->label_shift.tokens_fp && t->stats.numel == c->label_shift.tokens_numel &&
            t->stats.numel > 1) {
            if (!c->label_shift.steps++)
                c->label_shift.first = c->step;
        }
    }
}

/* Targets equal to tokens in at least half of the steps with both. */
void detect_shift_finish(detect_rank *c)
{
    if (c->label_shift.steps && 2 * c->label_shift.steps >= c->label_shift.data_steps)
        detect_add(c, "label-shift", DETECT_ERROR, c->label_shift.first, detect_find(c, "targets"), "tokens",
                   (double)c->label_shift.steps, (double)c->label_shift.data_steps, CAUSE_SHIFT,
                   "targets are bit-identical to tokens (same fingerprint) at %llu of %llu steps, from step %lld",
                   (unsigned long long)c->label_shift.steps, (unsigned long long)c->label_shift.data_steps,
                   (long long)c->label_shift.first);
}

void detect_lossmask_step(detect_rank *c)
{
    c->loss_mask.have = false;
}

/* This step's loss_mask: whether the batch has padding (mask-padding reads
 * it), and the steps with no zero. */
void detect_lossmask_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (t->mode < TFT_STATS_HEALTH)
        return;
    c->loss_mask.have = true;
    c->loss_mask.zeros = t->stats.zero;
    c->loss_mask.steps++;
    c->loss_mask.full += t->stats.zero == 0 && t->stats.numel > 0;
    if (c->loss_mask.first == TFT_STEP_NONE)
        c->loss_mask.first = c->step;
}

/* A loss_mask with no zero at any of at least min_steps steps. */
void detect_lossmask_finish(detect_rank *c)
{
    if (c->loss_mask.steps >= c->o.min_steps && c->loss_mask.full == c->loss_mask.steps)
        detect_add(c, "loss-mask-full", DETECT_WARNING, c->loss_mask.first, detect_find(c, "loss_mask"), NULL, 0,
                   (double)c->loss_mask.steps, CAUSE_LM,
                   "loss_mask has no zero at any of its %llu steps: no target is ever "
                   "left out of the loss",
                   (unsigned long long)c->loss_mask.steps);
}

/* Rows a step's data tensor proves all padding (the statistics hold counts,
 * not rows): a 0/1 mask with fewer ones than rows has at least rows - ones
 * rows without a one; token ids that are all pad_id make every row padding,
 * and with pad_id 0 a zero count above rows x (T - 1) forces that many
 * more than rows x (T - 1) rows to be all zeros. 0 when nothing is proved. */
static uint64_t pad_rows(const detect_rank *c, const detect_series *s, const tft_rec_tensor *t, uint64_t *rows)
{
    if (t->mode < TFT_STATS_HEALTH || t->ndim < 1 || t->shape[t->ndim - 1] < 2 || t->stats.nan || t->stats.pinf ||
        t->stats.ninf)
        return 0;
    uint64_t T = (uint64_t)t->shape[t->ndim - 1], n = t->stats.numel;
    if (n % T || !n)
        return 0;
    *rows = n / T;
    if (s->cls & DETECT_C_PAD_MASK) {
        uint64_t ones = n - t->stats.zero;
        return t->stats.min >= 0 && t->stats.max <= 1 && ones < *rows ? *rows - ones : 0;
    }
    double pad = c->o.pad_id;
    if (!(pad >= 0) || !(s->cls & DETECT_C_TOKENS))
        return 0;
    if (t->stats.min == pad && t->stats.max == pad)
        return *rows;
    if (pad == 0 && t->stats.zero > *rows * (T - 1))
        return t->stats.zero - *rows * (T - 1);
    return 0;
}

void detect_padrows_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    uint64_t rows = 0, k = pad_rows(c, s, t, &rows);
    if (!k)
        return;
    c->pad_rows.steps += step != c->pad_rows.last_step;
    c->pad_rows.last_step = step;
    if (c->pad_rows.fi >= 0)
        return;
    c->pad_rows.fi = c->nf;
    long long T = (long long)t->shape[t->ndim - 1];
    if (s->cls & DETECT_C_TOKENS)
        detect_add(c, "pad-rows", DETECT_WARNING, step, s, NULL, (double)k, (double)rows, CAUSE_PADROWS,
                   "%s at step %lld (%llu rows of %lld): its pad ids (%.0f) prove at least %llu row(s) all padding",
                   s->name, (long long)step, (unsigned long long)rows, T, c->o.pad_id, (unsigned long long)k);
    else
        detect_add(c, "pad-rows", DETECT_WARNING, step, s, NULL, (double)k, (double)rows, CAUSE_PADROWS,
                   "%s at step %lld has %llu one(s) for %llu rows of %lld: at least %llu row(s) have no target in the "
                   "loss (all padding)",
                   s->name, (long long)step, (unsigned long long)(t->stats.numel - t->stats.zero),
                   (unsigned long long)rows, T, (unsigned long long)k);
}

/* The count of the steps with such rows. */
void detect_padrows_finish(detect_rank *c)
{
    if (c->pad_rows.steps > 1)
        detect_note(c, c->pad_rows.fi, "; %llu steps have such rows", (unsigned long long)c->pad_rows.steps);
}

/* The earlier step with this batch, TFT_STEP_NONE none; remembers it. */
static int64_t fp_seen(detect_rank *c, uint64_t fp, int64_t step)
{
    void *v;
    int k = tft_u64map_insert(&c->repeat.fps, fp, NULL, NULL, &v);
    if (k == 1) {
        *(int64_t *)v = step;
        return TFT_STEP_NONE;
    }
    return k == 0 && *(int64_t *)v < step ? *(int64_t *)v : TFT_STEP_NONE;
}

static void add_ckpt_data(detect_rank *c, const detect_series *s, int64_t step, int64_t earlier, int other_rank)
{
    char where[48] = "";
    if (other_rank >= 0)
        snprintf(where, sizeof(where), " (rank %d's file before the restart)", other_rank);
    c->repeat.ckpt_done = true;
    detect_add(c, "ckpt-data", DETECT_ERROR, step, s, NULL, (double)earlier, (double)c->resume_step, CAUSE_CKPT_DATA,
               "%s at step %lld, the first after the resume at step %lld, is bit-identical to step %lld's%s", s->name,
               (long long)step, (long long)c->resume_step, (long long)earlier, where);
}

/* tokens: a batch seen at an earlier step. After a resume record, its first
 * batch repeating one is ckpt-data; otherwise the first repeat is a note. */
void detect_repeat_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (t->mode < TFT_STATS_HEALTH || t->stats.numel < 2)
        return;
    uint64_t fp = t->stats.fingerprint ^ t->stats.numel * 0x9E3779B97F4A7C15ull;
    bool after_resume =
        c->resume_step != TFT_STEP_NONE && step >= c->resume_step && c->repeat.resume_tok_step == TFT_STEP_NONE;
    if (after_resume) {
        c->repeat.resume_tok_step = step;
        c->repeat.resume_fp = fp;
        c->repeat.tok_si = (int)(s - c->s);
    }
    int64_t earlier = fp_seen(c, fp, step);
    if (earlier == TFT_STEP_NONE)
        return;
    if (after_resume) {
        add_ckpt_data(c, s, step, earlier, -1);
        return;
    }
    if (c->repeat.n++ || c->repeat.ckpt_done)
        return;
    detect_add(c, "data-repeat", DETECT_INFO, step, s, NULL, (double)earlier, 0, "",
               "%s at step %lld is bit-identical to step %lld's: an epoch boundary (%lld steps per epoch) or a data "
               "cursor that restarted",
               s->name, (long long)step, (long long)earlier, (long long)(step - earlier));
}

/* A resumed process's first batch in the rank files before it (a job
 * restarted under one recording): at an earlier step there, the cursor
 * restarted. */
void detect_repeat_merge(detect_rank *const *ranks, int n)
{
    for (int i = 0; i < n; i++) {
        detect_rank *c = ranks[i];
        if (!c || c->repeat.resume_tok_step == TFT_STEP_NONE || c->repeat.ckpt_done)
            continue;
        for (int j = 0; j < n && !c->repeat.ckpt_done; j++) {
            const int64_t *v =
                j != i && ranks[j] ? tft_u64map_find(&ranks[j]->repeat.fps, c->repeat.resume_fp, NULL, NULL) : NULL;
            if (v && *v < c->repeat.resume_tok_step)
                add_ckpt_data(c, &c->s[c->repeat.tok_si], c->repeat.resume_tok_step, *v, ranks[j]->rank);
        }
    }
}

static const char CAUSE_STUCK[] =
    "the data loader yields one batch again and again: an iterator re-created every step (next(iter(loader))), a "
    "sampler or cursor that does not advance, a cached batch";
static const char CAUSE_PRESHIFT[] =
    "the labels were shifted by the data pipeline and the model (Hugging Face *ForCausalLM) shifts them again: it "
    "learns to predict the token after next";
static const char CAUSE_INPUT_ZERO[] =
    "the batch was lost on its way to the model (a faulty device or peer copy, a buffer reused before the copy "
    "finished, a collate function that returns zeros)";

/* The first training input of each step (tokens, input.NAME): the same
 * batch at data-stuck consecutive steps; float inputs that turn all zero;
 * input.labels.shifted (tftrace --torch: the share of positions where the
 * labels equal the next input id). */
void detect_input_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    (void)finite;
    if (t->mode < TFT_STATS_HEALTH)
        return;
    const tft_stats *st = &t->stats;
    if (!strcmp(s->name, "input.labels.shifted")) {
        bool same = c->label_shift.have_tokens && c->label_shift.labels_fp == c->label_shift.tokens_fp;
        if (st->numel == 1 && st->mean >= 0.9 && !same && !s->param.zeroed && t->mode >= TFT_STATS_FULL) {
            s->param.zeroed = true;
            detect_add(c, "label-preshift", DETECT_ERROR, step, s, "input.input_ids", st->mean, 0.9, CAUSE_PRESHIFT,
                       "at step %lld input.labels equals input.input_ids shifted left by one at %.1f%% of the "
                       "positions, while the model takes labels = input_ids and shifts them itself",
                       (long long)step, 100 * st->mean);
        }
        return;
    }
    bool is_float = t->dtype == TFT_F32 || t->dtype == TFT_F64 || t->dtype == TFT_F16 || t->dtype == TFT_BF16;
    /* float inputs and token ids (labels or masks may be all zero legitimately) */
    if ((is_float || (s->cls & DETECT_C_TOKENS)) && st->numel > 1) {
        if (st->zero < st->numel) {
            s->param.nonzero = true;
        } else if (s->param.nonzero && !s->param.zeroed) {
            s->param.zeroed = true;
            detect_add(c, "input-zeroed", DETECT_ERROR, step, s, NULL, (double)st->numel, 0, CAUSE_INPUT_ZERO,
                       "%s is all zeros (%llu elements) at step %lld; earlier batches were not", s->name,
                       (unsigned long long)st->numel, (long long)step);
        }
    }
    if (c->stuck.step == step || st->numel < 2)
        return; /* the step's first input only */
    uint64_t fp = st->fingerprint ^ st->numel * 0x9E3779B97F4A7C15ull;
    if (c->stuck.step != TFT_STEP_NONE && step == c->stuck.step + 1 && fp == c->stuck.fp && c->stuck.si == (int)(s - c->s)) {
        if (!c->stuck.fired && step - c->stuck.from + 1 >= 3 && !(st->zero == st->numel && s->param.zeroed)) {
            c->stuck.fired = true;
            c->stuck.fi = c->nf;
            c->stuck.run_from = c->stuck.from;
            detect_add(c, "data-stuck", DETECT_WARNING, c->stuck.from, s, NULL, (double)(step - c->stuck.from + 1), 3,
                       CAUSE_STUCK, "%s is bit-identical at steps %lld..%lld: the same batch every step", s->name,
                       (long long)c->stuck.from, (long long)step);
        }
        if (c->stuck.fired && c->stuck.from == c->stuck.run_from)
            c->stuck.run_end = step;
    } else {
        c->stuck.from = step;
    }
    c->stuck.fp = fp;
    c->stuck.step = step;
    c->stuck.si = (int)(s - c->s);
}

/* How long the first run of one batch lasted. */
void detect_input_finish(detect_rank *c)
{
    if (c->stuck.fired && c->stuck.fi >= 0 && c->stuck.run_end > c->stuck.run_from + 2)
        detect_note(c, c->stuck.fi, "; the same batch through step %lld (%lld steps)", (long long)c->stuck.run_end,
                    (long long)(c->stuck.run_end - c->stuck.run_from + 1));
}
