/*
 * detect_shape.c — shapes and dtypes (docs/CHECK.md): a tensor whose shape
 * or dtype changes from one step to the next (shape-change, dtype-change,
 * judged record by record, once per tensor); across ranks, a replicated
 * tensor that starts with another shape or dtype than on rank 0
 * (shape-ranks) and tokens bit-identical on two ranks (data-shard), judged
 * at merge in one walk over the series of each rank.
 */
#include "detect_rules_internal.h"

#include <stdio.h>
#include <string.h>

static const char CAUSE_SHAPE[] =
    "a short last batch, a truncation or padding length that depends on the batch, or a cast left in one path";

static bool is_eval_input(const detect_series *s)
{
    return s->eval && (!strncmp(s->name, "input.", 6) || !strncmp(s->name, "input[", 6));
}

/* The dimension where a and b differ when it is the only one, -1 else. */
static int one_dim(const int64_t *a, int na, const int64_t *b, int nb)
{
    int d = -1;
    if (na != nb)
        return -1;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) {
            if (d >= 0)
                return -1;
            d = i;
        }
    return d;
}

/* An input's change: kept for detect_shape_finish (whether the run ended
 * there decides), and what the rank's inputs vary in. */
static void input_change(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step)
{
    if (c->shapes.data_step != step)
        c->shapes.steps++;
    c->shapes.data_step = step;
    bool dt = s->shape_change.dtype != t->dtype;
    if (!s->shape_change.fired) {
        char a[64], b[64];
        detect_shape_text(s->shape_change.shape, s->shape_change.ndim, a, sizeof(a));
        detect_shape_text(t->shape, t->ndim, b, sizeof(b));
        snprintf(s->shape_change.was, sizeof(s->shape_change.was), "%s %s for steps %lld..%lld", a,
                 tft_dtype_name(s->shape_change.dtype), (long long)s->shape_change.since,
                 (long long)s->shape_change.until);
        snprintf(s->shape_change.now, sizeof(s->shape_change.now), "%s %s", b, tft_dtype_name(t->dtype));
        s->shape_change.fired = true;
        s->shape_change.first = step;
    }
    s->shape_change.dt |= dt;
    s->shape_change.last = step;
    int si = (int)(s - c->s) + 1;
    if (!c->shapes.vary && !dt) {
        c->shapes.vary = si;
        c->shapes.dim = one_dim(s->shape_change.shape, s->shape_change.ndim, t->shape, t->ndim);
        if (c->shapes.dim >= 0) {
            int64_t x = s->shape_change.shape[c->shapes.dim], y = t->shape[c->shapes.dim];
            c->shapes.lo = x < y ? x : y;
            c->shapes.hi = x < y ? y : x;
        }
    } else if (c->shapes.vary == si && c->shapes.dim >= 0 && c->shapes.dim < t->ndim) {
        int64_t y = t->shape[c->shapes.dim];
        c->shapes.lo = y < c->shapes.lo ? y : c->shapes.lo;
        c->shapes.hi = y > c->shapes.hi ? y : c->shapes.hi;
    }
}

/* Shape and dtype against the series' current ones (its first record's at
 * the first). A model input's change is judged at finish; another tensor's
 * change at a step where an input changed too follows the input (dynamic
 * padding, a short last batch, a validation batch of another size); one
 * where none did is reported (once per rank, the others counted). */
void detect_shape_record(detect_rank *c, detect_series *s, const tft_rec_tensor *t, int64_t step, bool finite)
{
    (void)finite;
    if (!strcmp(s->name, "input") || strstr(s->name, "aten."))
        return; /* --torch ops: an op's name (and "input", the leaf inputs of ops) is many call sites, not one
                   tensor: the module outputs around them carry the shapes */
    bool hole = s->after_hole;   /* records missing before this one: it starts the series over */
    s->after_hole = false;
    bool changed = s->nrec > 1 && !hole &&
                   (s->shape_change.dtype != t->dtype || s->shape_change.ndim != t->ndim ||
                    memcmp(s->shape_change.shape, t->shape, (size_t)t->ndim * sizeof(int64_t)));
    if (changed) {
        if (s->cls & DETECT_C_INPUT) {
            input_change(c, s, t, step);
        } else if (is_eval_input(s)) {
            c->shapes.eval_step = step;
        } else if ((s->eval ? c->shapes.eval_step : c->shapes.data_step) > s->shape_change.until &&
                   (s->eval ? c->shapes.eval_step : c->shapes.data_step) <= step &&
                   s->shape_change.dtype == t->dtype) {
            /* an input changed since this tensor's last record (a short last
             * batch reaches a GAN's generator gradients a step later) */
            c->shapes.explained++;
        } else if (s->shape_change.fired) {
        } else if (c->shapes.fi >= 0) {
            c->shapes.more++;
            s->shape_change.fired = true;
        } else {
            char a[96], b[96];
            detect_shape_text(s->shape_change.shape, s->shape_change.ndim, a, sizeof(a));
            detect_shape_text(t->shape, t->ndim, b, sizeof(b));
            bool dt = s->shape_change.dtype != t->dtype;
            c->shapes.fi = c->nf;
            detect_add(c, dt ? "dtype-change" : "shape-change", DETECT_ERROR, step, s, NULL, 0, 0, CAUSE_SHAPE,
                       "%s%s was %s %s for steps %lld..%lld and %s %s at step %lld, where no model input changed",
                       s->name, s->eval ? " (eval)" : "", a, tft_dtype_name(s->shape_change.dtype),
                       (long long)s->shape_change.since, (long long)s->shape_change.until, b,
                       tft_dtype_name(t->dtype), (long long)step);
            s->shape_change.fired = true;
        }
    } else if (s->nrec == 1 && is_eval_input(s) && s->eval) {
        c->shapes.eval_step = step; /* an eval forward's first input: its activations start here */
    }
    if (changed || hole || s->nrec == 1) {
        s->shape_change.dtype = t->dtype;
        s->shape_change.ndim = t->ndim;
        memcpy(s->shape_change.shape, t->shape, sizeof(s->shape_change.shape));
        s->shape_change.since = step;
    }
    s->shape_change.until = step;
}

/* The inputs' changes: one at the step where the run then crashed is the
 * cause named (error); a dtype change otherwise a warning; shapes that
 * vary from batch to batch a note, once per rank. */
void detect_shape_finish(detect_rank *c)
{
    bool crashed = detect_crashed(c) || !c->end.exited;
    bool said_vary = false;
    char what[420] = "";
    if (detect_crashed(c))
        detect_crash_text(c, what, sizeof(what));
    for (int i = 0; i < c->ns; i++) {
        detect_series *s = &c->s[i];
        if (!(s->cls & DETECT_C_INPUT) || !s->shape_change.fired)
            continue;
        bool at_end = crashed && s->shape_change.last >= c->end.last_step;
        if (!at_end && !s->shape_change.dt)
            continue;
        bool dt = s->shape_change.dt;
        int64_t step = at_end ? s->shape_change.last : s->shape_change.first;
        detect_add(c, dt ? "dtype-change" : "shape-change", at_end ? DETECT_ERROR : DETECT_WARNING, step, s, NULL, 0,
                   0, CAUSE_SHAPE, "%s was %s and %s at step %lld%s%s", s->name, s->shape_change.was,
                   s->shape_change.now, (long long)s->shape_change.first,
                   at_end ? (what[0] ? "; the run then " : "; the run ends at that step") : "", at_end ? what : "");
        said_vary |= (int)(s - c->s) + 1 == c->shapes.vary;
    }
    if (c->shapes.vary && !said_vary) {
        const detect_series *s = &c->s[c->shapes.vary - 1];
        char how[96];
        if (c->shapes.dim >= 0)
            snprintf(how, sizeof(how), "its dimension %d varies from batch to batch: %lld..%lld", c->shapes.dim,
                     (long long)c->shapes.lo, (long long)c->shapes.hi);
        else
            snprintf(how, sizeof(how), "its shape varies from batch to batch");
        detect_add(c, "shape-varies", DETECT_INFO, s->shape_change.first, s, NULL, (double)c->shapes.steps, 0,
                   "dynamic padding, a short last batch or variable-size samples (normal when meant)",
                   "%s: %s (it changed at %llu steps, first at step %lld); %llu shape changes of other tensors "
                   "follow it",
                   s->name, how, (unsigned long long)c->shapes.steps, (long long)s->shape_change.first,
                   (unsigned long long)c->shapes.explained);
    }
    if (c->shapes.fi >= 0 && c->shapes.more)
        detect_note(c, c->shapes.fi, "; %llu other tensors changed shape where no input did",
                    (unsigned long long)c->shapes.more);
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
