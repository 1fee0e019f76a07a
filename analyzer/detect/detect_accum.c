/*
 * detect_accum.c — gradients not zeroed between steps, seen in one trace
 * through a sparse gradient: an embedding's gradient is zero in the rows
 * of the tokens a batch does not use, so its zero count goes up and down
 * with the batches. Accumulated without zeroing, a row once touched stays
 * nonzero: the count can only fall. docs/CHECK.md (grad-accum) says what
 * this cannot see (dense gradients, tied embeddings such as tftrain's).
 *
 * State: four numbers per `grad.*` series, updated record by record.
 */
#include "detect_rules_internal.h"

#include <stdio.h>
#include <string.h>

static const char CAUSE_ACCUM[] =
    "gradients are not zeroed between optimizer steps (a missing optimizer.zero_grad() or model.zero_grad()): "
    "each step applies the sum of every gradient so far";

void detect_accum_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    if (t->mode < TFT_STATS_HEALTH || !finite)
        return;
    uint64_t z = t->stats.zero;
    if (s->nrec == 1) {
        s->z_first = s->z_prev = z;
        return;
    }
    if (z > s->z_prev)
        s->z_rose = true;
    else if (z < s->z_prev && !s->z_falls++)
        s->z_fall_step = s->last_step;
    s->z_prev = z;
}

/* The first gradient with zeros at its first step whose zero count never
 * rose over at least min_steps steps and fell at two or more. */
void detect_accum_finish(detect_rank *c)
{
    const detect_series *best = NULL;
    int others = 0;
    for (int i = 0; i < c->ns; i++) {
        const detect_series *s = &c->s[i];
        if (!(s->cls & DETECT_C_GRAD) || s->mode < TFT_STATS_HEALTH || !s->z_first ||
            s->z_first >= s->first.numel || s->z_rose || s->z_falls < 2 || (double)s->nrec < c->o.min_steps)
            continue;
        if (best)
            others++;
        else
            best = s;
    }
    if (!best)
        return;
    detect_add(c, "grad-accum", DETECT_WARNING, best->z_fall_step, best, NULL, (double)best->z_falls, c->o.min_steps,
            CAUSE_ACCUM,
            "the zero count of %s (a sparse gradient: rows the batch does not use) never rises over its %llu steps "
            "and falls at %llu of them, %llu at step %lld to %llu: rows once touched keep a gradient; %d other "
            "gradient(s) likewise",
            best->name, (unsigned long long)best->nrec, (unsigned long long)best->z_falls,
            (unsigned long long)best->z_first, (long long)best->first_step, (unsigned long long)best->z_prev, others);
}
