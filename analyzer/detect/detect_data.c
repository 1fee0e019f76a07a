/*
 * detect_data.c — the data detectors of tfdump --check that need more than
 * one step's record: all-padding rows (proved from counts: the statistics
 * hold no per-row numbers) and batches repeated from an earlier step (the
 * XXH3 fingerprint of `tokens`), which after a checkpoint RESUME record is
 * a data cursor that restarted (`ckpt-data`) and otherwise an epoch
 * boundary (a note).
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

static const char CAUSE_PADROWS[] =
    "rows with no real token reach the model: padding to a fixed batch shape without dropping empty documents, a "
    "collate function padding short batches, or a truncation that left nothing";
static const char CAUSE_CKPT_DATA[] =
    "the resume did not restore the data cursor (sampler or dataloader state): the run trains again on batches it "
    "has seen, from the first one";

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
    c->pad_steps += step != c->pad_last_step;
    c->pad_last_step = step;
    if (c->padrows_fi >= 0)
        return;
    c->padrows_fi = c->nf;
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

/* The earlier step with this batch, TFT_STEP_NONE none; remembers it. */
static int64_t fp_seen(detect_rank *c, uint64_t fp, int64_t step)
{
    void *v;
    int k = tft_u64map_insert(&c->fps, fp, NULL, NULL, &v);
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
    c->ckpt_data_done = true;
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
    bool after_resume = c->resume_step != TFT_STEP_NONE && step >= c->resume_step && c->resume_tok_step == TFT_STEP_NONE;
    if (after_resume) {
        c->resume_tok_step = step;
        c->resume_fp = fp;
        c->tok_si = (int)(s - c->s);
    }
    int64_t earlier = fp_seen(c, fp, step);
    if (earlier == TFT_STEP_NONE)
        return;
    if (after_resume) {
        add_ckpt_data(c, s, step, earlier, -1);
        return;
    }
    if (c->repeats++ || c->ckpt_data_done)
        return;
    detect_add(c, "data-repeat", DETECT_INFO, step, s, NULL, (double)earlier, 0, "",
            "%s at step %lld is bit-identical to step %lld's: an epoch boundary (%lld steps per epoch) or a data "
            "cursor that restarted",
            s->name, (long long)step, (long long)earlier, (long long)(step - earlier));
}

/* The count of the steps with such rows. */
void detect_padrows_finish(detect_rank *c)
{
    if (c->padrows_fi >= 0 && c->padrows_fi < c->nf && c->pad_steps > 1) {
        detect_finding *f = &c->f[c->padrows_fi];
        size_t k = strlen(f->evidence);
        snprintf(f->evidence + k, sizeof(f->evidence) - k, "; %llu steps have such rows",
                 (unsigned long long)c->pad_steps);
    }
}

/* A resumed process's first batch in the rank files before it (a job
 * restarted under one recording): at an earlier step there, the cursor
 * restarted. */
void detect_repeat_merge(detect_rank *const *ranks, int n)
{
    for (int i = 0; i < n; i++) {
        detect_rank *c = ranks[i];
        if (!c || c->resume_tok_step == TFT_STEP_NONE || c->ckpt_data_done)
            continue;
        for (int j = 0; j < n && !c->ckpt_data_done; j++) {
            const int64_t *v = j != i && ranks[j] ? tft_u64map_find(&ranks[j]->fps, c->resume_fp, NULL, NULL) : NULL;
            if (v && *v < c->resume_tok_step)
                add_ckpt_data(c, &c->s[c->tok_si], c->resume_tok_step, *v, ranks[j]->rank);
        }
    }
}
