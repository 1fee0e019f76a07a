/*
 * detect_shape.c — shapes and dtypes (docs/CHECK.md): a tensor whose shape
 * or dtype changes from one step to the next (shape-change, dtype-change,
 * judged record by record, once per tensor); across ranks, a replicated
 * tensor that starts with another shape or dtype than on rank 0
 * (shape-ranks) and tokens bit-identical on two ranks (data-shard), judged
 * at merge in one walk over the series of each rank.
 */
#include "detect_rules_internal.h"

#include <string.h>

static const char CAUSE_SHAPE[] =
    "a short last batch, a truncation or padding length that depends on the batch, or a cast left in one path";

/* Shape and dtype against the series' current ones (its first record's at
 * the first). */
void detect_shape_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    bool changed = s->nrec > 1 && (s->shape_change.dtype != t->dtype || s->shape_change.ndim != t->ndim ||
                                   memcmp(s->shape_change.shape, t->shape, (size_t)t->ndim * sizeof(int64_t)));
    if (changed && !s->shape_change.fired) {
        char a[96], b[96];
        detect_shape_text(s->shape_change.shape, s->shape_change.ndim, a, sizeof(a));
        detect_shape_text(t->shape, t->ndim, b, sizeof(b));
        bool dt = s->shape_change.dtype != t->dtype;
        detect_add(c, dt ? "dtype-change" : "shape-change", DETECT_ERROR, step, s, NULL, 0, 0, CAUSE_SHAPE,
                   "%s was %s %s for steps %lld..%lld and %s %s at step %lld", s->name, a,
                   tft_dtype_name(s->shape_change.dtype), (long long)s->shape_change.since,
                   (long long)s->shape_change.until, b, tft_dtype_name(t->dtype), (long long)step);
        s->shape_change.fired = true;
    }
    if (changed || s->nrec == 1) {
        s->shape_change.dtype = t->dtype;
        s->shape_change.ndim = t->ndim;
        memcpy(s->shape_change.shape, t->shape, sizeof(s->shape_change.shape));
        s->shape_change.since = step;
    }
    s->shape_change.until = step;
}

static bool replicated(const char *name)
{
    return !strncmp(name, "param.", 6) || detect_ends(name, "tokens") || detect_ends(name, "targets") ||
           !strcmp(name, "lr") || !strcmp(name, "grad_norm");
}

/* Replicated tensors that start with another shape or dtype than on rank
 * 0 (shape-ranks), tokens bit-identical to rank 0's at the same first step
 * (data-shard): at most one of each per rank. */
void detect_ranks_merge(detect_rank *const *ranks, int n)
{
    if (n < 2 || !ranks[0])
        return;
    detect_rank *c0 = ranks[0];
    for (int r = 1; r < n; r++) {
        detect_rank *c = ranks[r];
        bool shape_done = false, shard_done = false;
        for (int i = 0; i < c->ns; i++) {
            const detect_series *s = &c->s[i];
            const uint32_t *ix = tft_u64map_find(&c0->idx, s->id, NULL, NULL);
            if (!ix || !replicated(s->name))
                continue;
            const detect_series *z = &c0->s[*ix - 1];
            bool same = z->first_ndim == s->first_ndim && z->first_dtype == s->first_dtype &&
                        !memcmp(z->first_shape, s->first_shape, (size_t)s->first_ndim * sizeof(int64_t));
            if (!same && !shape_done) {
                char a[96], b[96];
                detect_add(c, "shape-ranks", DETECT_ERROR, s->first_step, s, NULL, 0, 0,
                           "ranks run different configurations or data pipelines (a rank-dependent shape or dtype)",
                           "%s is %s %s on rank %d and %s %s on rank %d", s->name,
                           detect_shape_text(z->first_shape, z->first_ndim, a, sizeof(a)),
                           tft_dtype_name(z->first_dtype), c0->rank,
                           detect_shape_text(s->first_shape, s->first_ndim, b, sizeof(b)),
                           tft_dtype_name(s->first_dtype), c->rank);
                shape_done = true;
            }
            if ((s->cls & DETECT_C_TOKENS) && !shard_done &&
                s->mode >= TFT_STATS_HEALTH && z->first_step == s->first_step &&
                z->first.fingerprint == s->first.fingerprint && s->first.numel > 1) {
                detect_add(c, "data-shard", DETECT_WARNING, s->first_step, s, NULL, 0, 0,
                           "every rank reads the same shard: the sampler is not split by rank (rank or world size "
                           "not passed)",
                           "%s at step %lld is bit-identical on rank %d and rank %d", s->name, (long long)s->first_step,
                           c0->rank, c->rank);
                shard_done = true;
            }
        }
    }
}
