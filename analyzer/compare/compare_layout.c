/*
 * compare_layout.c — one run against another layout (compare_internal.h;
 * docs/TFDIFF.md, "Across layouts"): a data-parallel run's ranks folded
 * into one, step by step, so that it compares with a single process that
 * ran the same global batch.
 *
 * Each rank's tensor is paired with rank 0's of the same name and
 * occurrence in the step. What the fold keeps:
 *   - per-sample tensors (activations, their gradients, the inputs): each
 *     rank holds its shard of the batch in dimension 0; their statistics
 *     merge exactly (counts and sums add, min and max and absmax take the
 *     extreme, l2 adds in squares, mean and std by Chan's combination), the
 *     fingerprint does not and is not used (a merged tensor is never
 *     "bit-identical");
 *   - replicated tensors (parameters, gradients after the all-reduce, the
 *     optimizer's state): bit-identical on every rank, compared as rank
 *     0's;
 *   - scalars (the loss): the mean over the ranks, as the single run's
 *     loss is the mean over the whole batch.
 * Which applies is decided against the single run's tensor at compare
 * time (compare_layout_view): a concatenation only where the single run's
 * dimension 0 is the ranks' sum. A gradient of a per-sample tensor
 * ("grad.*") on a rank is world times the single run's — each rank's loss
 * is the mean over its own shard, which the all-reduce's average undoes
 * for parameters only — so it compares at 1/world.
 */
#include "core.h"
#include "compare.h"
#include "compare_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a of a name, mixed with its occurrence in the step. */
static uint64_t name_key(const char *s, uint32_t occ)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return tft_u64map_hash2(h, occ);
}

static uint64_t finite_count(const tft_stats *s)
{
    uint64_t bad = s->nan + s->pinf + s->ninf;
    return s->numel > bad ? s->numel - bad : 0;
}

/* a and b's statistics as one tensor's: their elements together. */
static void stats_cat(tft_stats *a, const tft_stats *b)
{
    uint64_t na = finite_count(a), nb = finite_count(b), n = na + nb;
    if (nb) {
        if (!na) {
            a->min = b->min;
            a->max = b->max;
        } else {
            a->min = fmin(a->min, b->min);
            a->max = fmax(a->max, b->max);
        }
        double delta = b->mean - a->mean;
        double m2 = a->std * a->std * (double)na + b->std * b->std * (double)nb +
                    delta * delta * (double)na * (double)nb / (double)n;
        a->mean += delta * (double)nb / (double)n;
        a->std = sqrt(fmax(m2 / (double)n, 0));
        a->l1 += b->l1;
        a->l2 = sqrt(a->l2 * a->l2 + b->l2 * b->l2);
        a->absmax = fmax(a->absmax, b->absmax);
    }
    a->numel += b->numel;
    a->nan += b->nan;
    a->pinf += b->pinf;
    a->ninf += b->ninf;
    a->zero += b->zero;
    a->over_fp16 += b->over_fp16;
    a->over_bf16 += b->over_bf16;
    a->under_fp16 += b->under_fp16;
    a->fingerprint = tft_u64map_hash2(a->fingerprint, b->fingerprint);
}

/* The statistics of one value v (a scalar). */
static void stats_scalar(tft_stats *s, double v)
{
    uint64_t fp = s->fingerprint;
    bool finite = isfinite(v);
    double a = finite ? fabs(v) : 0;
    *s = (tft_stats){.numel = 1, .nan = isnan(v), .pinf = v == INFINITY, .ninf = v == -INFINITY, .zero = v == 0,
                     .fingerprint = fp, .min = finite ? v : 0, .max = finite ? v : 0, .mean = finite ? v : 0,
                     .l1 = a, .l2 = a, .absmax = a};
}

static bool same_past_dim0(const align_tensor *a, const align_tensor *b)
{
    if (a->ndim != b->ndim || a->ndim < 1 || a->dtype != b->dtype)
        return false;
    for (int d = 1; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

int compare_layout_fold(align_side *s, const align_side *extra, tft_u64map *scratch)
{
    /* extra's tensors by (name, occurrence) */
    tft_u64map_clear(scratch);
    for (size_t k = 0; k < extra->n_tensors; k++) {
        const align_tensor *t = &extra->tensors[k];
        uint32_t occ = 0;
        uint32_t *idx;
        for (;; occ++) { /* the first free occurrence of its name */
            int rc = tft_u64map_insert(scratch, name_key(t->name, occ), NULL, NULL, (void **)&idx);
            if (rc < 0)
                return -ENOMEM;
            if (rc == 1) /* created */
                break;
        }
        *idx = (uint32_t)k;
    }
    tft_u64map occs;
    tft_u64map_init(&occs, &(tft_u64map_opts){.vsize = sizeof(uint32_t), .hashed = true});
    int rc = 0;
    for (size_t k = 0; k < s->n_tensors && rc == 0; k++) {
        align_tensor *t = &s->tensors[k];
        uint32_t *occ;
        if (tft_u64map_insert(&occs, name_key(t->name, 0), NULL, NULL, (void **)&occ) < 0) {
            rc = -ENOMEM;
            break;
        }
        const uint32_t *idx = tft_u64map_find(scratch, name_key(t->name, (*occ)++), NULL, NULL);
        if (!idx)
            continue;
        const align_tensor *o = &extra->tensors[*idx];
        if (!t->merged) { /* the first fold: this rank alone */
            t->replicated = true;
            t->cat_ok = true;
            t->cat_dim0 = t->ndim ? t->shape[0] : 1;
            t->cat = t->stats;
            t->mean_avg = t->stats.mean;
        }
        t->merged++;
        t->mean_avg += (o->stats.mean - t->mean_avg) / (double)(t->merged + 1);
        t->replicated = t->replicated && o->stats.fingerprint == t->stats.fingerprint && o->ndim == t->ndim &&
                        !memcmp(o->shape, t->shape, sizeof(t->shape[0]) * t->ndim);
        if (t->stats.numel == 1 && o->stats.numel == 1) { /* the running mean over the ranks */
            double m = t->cat.mean + (o->stats.mean - t->cat.mean) / (double)(t->merged + 1);
            if (o->stats.nan + o->stats.pinf + o->stats.ninf || t->cat.nan + t->cat.pinf + t->cat.ninf)
                m = NAN;
            uint64_t fp = tft_u64map_hash2(t->cat.fingerprint, o->stats.fingerprint);
            stats_scalar(&t->cat, m);
            t->cat.fingerprint = fp;
            continue;
        }
        t->cat_ok = t->cat_ok && same_past_dim0(t, o);
        if (t->cat_ok) {
            t->cat_dim0 += o->shape[0];
            stats_cat(&t->cat, &o->stats);
        }
    }
    tft_u64map_free(&occs);
    return rc;
}

/* s's statistics times f (a linear map: counts stay). */
static void stats_scale(tft_stats *s, double f)
{
    s->min *= f;
    s->max *= f;
    s->mean *= f;
    s->std *= fabs(f);
    s->l1 *= fabs(f);
    s->l2 *= fabs(f);
    s->absmax *= fabs(f);
    if (f < 0) {
        double t = s->min;
        s->min = s->max;
        s->max = t;
    }
}

const align_tensor *compare_layout_view(const align_tensor *m, const align_tensor *other, int world, align_tensor *tmp)
{
    if (!m->merged)
        return m;
    if (m->stats.numel == 1 && other->stats.numel == 1 && !m->replicated) {
        *tmp = *m;
        tmp->stats = m->cat;
        return tmp;
    }
    bool same = other->ndim == m->ndim && !memcmp(other->shape, m->shape, sizeof(m->shape[0]) * m->ndim);
    if (same && !m->replicated) { /* batch-reduced: the ranks' average, its mean alone */
        *tmp = *m;
        tmp->stats.mean = m->mean_avg;
        tmp->mean_only = true;
        return tmp;
    }
    if (m->replicated || !m->cat_ok || other->ndim != m->ndim || other->shape[0] != m->cat_dim0 ||
        m->cat_dim0 == m->shape[0])
        return m;
    for (int d = 1; d < m->ndim; d++)
        if (other->shape[d] != m->shape[d])
            return m;
    *tmp = *m;
    tmp->shape[0] = m->cat_dim0;
    tmp->stats = m->cat;
    if (!strncmp(m->name, "grad.", 5) && world > 1)
        stats_scale(&tmp->stats, 1.0 / world);
    return tmp;
}
