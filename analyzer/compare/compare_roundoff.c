/*
 * compare_roundoff.c — the round-off model of tfdiff (compare_internal.h;
 * docs/TFDIFF.md, "Round-off"): whether a pair the fixed tolerance finds
 * different is still the same computation, its bits changed by the order
 * of floating-point operations (threads, atomics, another library or
 * machine, a lower precision) rather than by a bug.
 *
 * A pair's difference d is the largest of its statistics' differences,
 * each relative to the magnitude it is bounded by when every element
 * moves by a relative e: |dmean| <= e * l1/n, |dstd| <= e * l2/sqrt(n),
 * |dl1| <= e * l1, |dl2| <= e * l2 (the moments: cancellation in a mean
 * near zero does not inflate them). min, max and absmax move with one
 * element, which a single rounding in a softmax or a clip can swing far
 * more than the rest: they are judged only where the moments are not
 * recorded (HEALTH statistics), relative to max(|min|, |max|).
 *
 * Round-off grows smoothly and everywhere: from the first step that
 * differs, each tensor's difference creeps up with the parameters'. A bug
 * makes a jump at one op. So a pair beyond the fixed tolerance (the floor;
 * for a 16-bit float, RO_ULPS of its epsilon) is a match when either
 *   - its d is at most RO_KEY_GROWTH times the largest d of the same
 *     tensor (name and occurrence in its step) in earlier steps, or
 *   - its d is at most RO_RUN_GROWTH times the largest d of the rank so
 *     far (earlier steps, and this step's tensors before it): of its
 *     forward tensors for a forward tensor, of every tensor for a gradient
 *     ("grad.*", "grad_norm"). Gradients are differences of large terms: their round-off
 *     runs far above the forward's (tftrain: 0.06 against 0.005 at step
 *     150), where a bug in the forward would hide.
 * Both factors come from measurements (docs/TFDIFF.md): over healthy pairs
 * of runs that differ by thread count, the largest growth of one tensor's
 * difference over its own history was 8x (tiny GPT) and 105x (a 4-layer
 * one, at a step where an attention row and the loss swung), while its
 * growth over the rank's envelope at the same moment stayed under 4.2x; a
 * planted bug (unscaled attention at step 150) grew its op's difference
 * 61700x over its history and 97x over the envelope.
 *
 * An optimizer step's outputs (a parameter, a moment) are judged by their
 * own history only and stay out of the rank's envelope and the summary's
 * growth: Adam moves a parameter whose gradient is zero in exact
 * arithmetic (an attention key's bias) by a full step either way, on the
 * sign of round-off. One beyond its own envelope is pending
 * (compare_judge.c): the first divergence when the next step parts too,
 * else counted as optimizer noise.
 *
 * With --noise the envelope also holds, per tensor and step, how far
 * GOLDEN and GOLDEN2 differed up to this step (compare_noise), and the
 * rank's largest of those.
 */
#include "core.h"
#include "compare.h"
#include "compare_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* RO_KEY_GROWTH, RO_RUN_GROWTH: compare.h */
#define RO_ULPS 4.0        /* the floor of a 16-bit float: this many of its epsilon */
#define RO_TINY 1e-30      /* a difference per element below this is none (denormals) */
#define RO_NOISE_MAX (1u << 22) /* (tensor, step) differences a calibration holds */

struct compare_noise {
    tft_u64map at;   /* hash(key, step) -> double: the calibration pair's difference */
    tft_u64map step; /* step << 1 | gradient -> double: the largest of the rank's forward tensors
                      * (0) or gradients (1), optimizer outputs left out */
};

compare_noise *compare_noise_new(void)
{
    compare_noise *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    tft_u64map_init(&n->at, &(tft_u64map_opts){.vsize = sizeof(double), .max_n = RO_NOISE_MAX, .hashed = true});
    tft_u64map_init(&n->step, &(tft_u64map_opts){.vsize = sizeof(double), .max_n = RO_NOISE_MAX});
    return n;
}

void compare_noise_free(compare_noise *n)
{
    if (!n)
        return;
    tft_u64map_free(&n->at);
    tft_u64map_free(&n->step);
    free(n);
}

uint64_t compare_noise_entries(const compare_noise *n)
{
    return n ? n->at.n : 0;
}

/* ---- a pair's difference -------------------------------------------------- */

static bool is_float(int dtype)
{
    return dtype == TFT_F32 || dtype == TFT_F64 || dtype == TFT_F16 || dtype == TFT_BF16 || dtype == TFT_F8E4M3 ||
           dtype == TFT_F8E5M2;
}

/* The machine epsilon of a floating dtype (2^-mantissa bits), 0 otherwise. */
static double dtype_eps(int dtype)
{
    switch (dtype) {
    case TFT_F64: return 0x1p-52;
    case TFT_F32: return 0x1p-23;
    case TFT_F16: return 0x1p-10;
    case TFT_BF16: return 0x1p-7;
    case TFT_F8E4M3: return 0x1p-3;
    case TFT_F8E5M2: return 0x1p-2;
    default: return 0;
    }
}

double compare_ro_floor(const compare_opts *o, int dg, int db)
{
    double e = fmax(dtype_eps(dg), dtype_eps(db));
    return fmax(o->rtol, RO_ULPS * (e > 0x1p-20 ? e : 0));
}

bool compare_ro_mixed(int dg, int db)
{
    return dg != db && is_float(dg) && is_float(db);
}

/* |x| / scale, 0 for a difference within atol (below float's normal
 * range: a zero-initialised bias perturbed to a denormal is no difference;
 * the fixed tolerance's atol would hide a gradient's round-off, whose
 * elements are that small), infinite where the scale is 0. */
static double rel(double x, double scale, double atol)
{
    x = fabs(x);
    if (x <= atol)
        return 0;
    return scale > 0 ? x / scale : INFINITY;
}

double compare_ro_diff(const align_tensor *g, const align_tensor *b)
{
    const double atol = RO_TINY;
    const tft_stats *gs = &g->stats, *bs = &b->stats;
    if (g->mode < TFT_STATS_FULL || b->mode < TFT_STATS_FULL) {
        double m = fmax(fmax(fabs(gs->min), fabs(gs->max)), fmax(fabs(bs->min), fabs(bs->max)));
        return fmax(rel(gs->min - bs->min, m, atol), rel(gs->max - bs->max, m, atol));
    }
    double n = gs->numel ? (double)gs->numel : 1;
    double l1 = fmax(gs->l1, bs->l1), l2 = fmax(gs->l2, bs->l2);
    if (g->mean_only || b->mean_only) /* its mean alone is known: scaled by the side that is whole */
        return rel(gs->mean - bs->mean, (g->mean_only ? bs->l1 : gs->l1) / n, atol);
    double d = rel(gs->mean - bs->mean, l1 / n, atol);
    d = fmax(d, rel(gs->std - bs->std, l2 / sqrt(n), atol));
    d = fmax(d, rel(gs->l1 - bs->l1, l1, atol * n));
    d = fmax(d, rel(gs->l2 - bs->l2, l2, atol * sqrt(n)));
    return isnan(d) ? INFINITY : d;
}

/* Whether g is a gradient or of them ("grad.*", "grad_norm": the PyTorch
 * layer's and tftrain's names). */
static bool is_grad(const align_tensor *g)
{
    return !strncmp(g->name, "grad", 4);
}

/* ---- the envelope ----------------------------------------------------------- */

/* FNV-1a of a name: keys hold names, not string ids, so that a
 * calibration pass and the comparison key a tensor alike. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

int compare_ro_init(ro_state *r, const compare_opts *o, compare_roundoff *sum)
{
    memset(r, 0, sizeof *r);
    r->o = o;
    r->sum = sum;
    r->step = TFT_STEP_NONE;
    memset(sum, 0, sizeof *sum);
    sum->on = o->roundoff;
    sum->noise = o->noise != NULL;
    sum->first_step = sum->last_step = sum->max_step = sum->jump_step = sum->wide_step = TFT_STEP_NONE;
    sum->width = 1;
    tft_u64map_init(&r->env, &(tft_u64map_opts){.vsize = sizeof(double), .hashed = true});
    tft_u64map_init(&r->nenv, &(tft_u64map_opts){.vsize = sizeof(double), .hashed = true});
    tft_u64map_init(&r->occ, &(tft_u64map_opts){.vsize = sizeof(uint32_t), .hashed = true});
    return 0;
}

void compare_ro_free(ro_state *r)
{
    tft_u64map_free(&r->env);
    tft_u64map_free(&r->nenv);
    tft_u64map_free(&r->occ);
}

static double map_double(const tft_u64map *m, uint64_t k, bool *found)
{
    const double *v = tft_u64map_find(m, k, NULL, NULL);
    if (found)
        *found = v != NULL;
    return v ? *v : 0;
}

/* m[k] = max(m[k], d); false when the map is full or out of memory. */
static bool map_max(tft_u64map *m, uint64_t k, double d)
{
    double *v;
    if (tft_u64map_insert(m, k, NULL, NULL, (void **)&v) < 0)
        return false;
    if (d > *v)
        *v = d;
    return true;
}

void compare_ro_step(ro_state *r, int64_t step)
{
    tft_u64map_clear(&r->occ);
    r->step = step;
    for (int k = 0; r->o->noise && k < 2; k++)
        r->ngenv[k] = fmax(r->ngenv[k], map_double(&r->o->noise->step, (uint64_t)step << 1 | (uint64_t)k, NULL));
}

uint64_t compare_ro_key(ro_state *r, const align_tensor *g)
{
    uint64_t h = name_hash(g->name);
    uint32_t *occ;
    if (tft_u64map_insert(&r->occ, h, NULL, NULL, (void **)&occ) < 0)
        return h;
    return tft_u64map_hash2(h, (*occ)++);
}

/* The key's envelope from the calibration, up to this step: its difference
 * at this step folded in (compare_ro_note does for every pair, so every
 * step the key was judged at counts). */
static double noise_env(ro_state *r, uint64_t key)
{
    if (!r->o->noise)
        return 0;
    bool found;
    double d = map_double(&r->o->noise->at, tft_u64map_hash2(key, (uint64_t)r->step), &found);
    if (found)
        map_max(&r->nenv, key, d);
    return map_double(&r->nenv, key, NULL);
}

bool compare_ro_explains(ro_state *r, uint64_t key, const align_tensor *g, double d, double growth[2])
{
    double own = fmax(map_double(&r->env, key, NULL), noise_env(r, key));
    double run = is_grad(g) ? fmax(fmax(r->genv[0], r->genv[1]), fmax(r->ngenv[0], r->ngenv[1]))
                            : fmax(r->genv[0], r->ngenv[0]);
    growth[0] = own > 0 ? d / own : INFINITY;
    growth[1] = run > 0 ? d / run : INFINITY;
    if (!(d < INFINITY))
        return false;
    return d <= RO_KEY_GROWTH * own || d <= RO_RUN_GROWTH * run;
}

static void bucket_add(compare_roundoff *s, int64_t step, double d)
{
    if (s->first_step == TFT_STEP_NONE)
        s->base = step;
    if (step < s->base)
        return;
    while ((step - s->base) / s->width >= COMPARE_RO_BUCKETS) { /* halve the resolution */
        for (int k = 0; k < COMPARE_RO_BUCKETS / 2; k++)
            s->bucket[k] = fmax(s->bucket[2 * k], s->bucket[2 * k + 1]);
        memset(&s->bucket[COMPARE_RO_BUCKETS / 2], 0, sizeof(s->bucket) / 2);
        s->width *= 2;
    }
    int64_t k = (step - s->base) / s->width;
    s->bucket[k] = fmax(s->bucket[k], d);
}

void compare_ro_note(ro_state *r, uint64_t key, const align_tensor *g, double d, bool matched, bool beyond,
                     const double growth[2], bool summary, bool run)
{
    compare_roundoff *s = r->sum;
    noise_env(r, key); /* the calibration's difference at this step, folded into the key's envelope */
    if (r->o->noise_out) {
        map_max(&r->o->noise_out->at, tft_u64map_hash2(key, (uint64_t)r->step), d);
        if (run)
            map_max(&r->o->noise_out->step, (uint64_t)r->step << 1 | (uint64_t)is_grad(g), d);
    }
    if (!matched)
        return;
    map_max(&r->env, key, d);
    if (run && d > r->genv[is_grad(g)])
        r->genv[is_grad(g)] = d;
    if (d == 0 || !summary)
        return;
    s->differing++;
    s->explained += beyond;
    if (!run) /* the growth is told in the computation's tensors, not the optimizer's outputs */
        return;
    bucket_add(s, r->step, d);
    if (d >= RO_WIDE && !is_grad(g) && s->wide_step == TFT_STEP_NONE)
        s->wide_step = r->step; /* the forward: where a bug in it would hide */
    if (s->first_step == TFT_STEP_NONE || r->step == s->first_step) {
        s->first_step = r->step;
        s->first_diff = fmax(s->first_diff, d);
    }
    if (r->step != s->last_step)
        s->last_diff = 0;
    s->last_step = r->step;
    s->last_diff = fmax(s->last_diff, d);
    if (d > s->max_diff) {
        s->max_diff = d;
        s->max_step = r->step;
        compare_copy_text(s->max_tensor, sizeof s->max_tensor, g->name, sizeof s->max_tensor - 1);
    }
    /* the nearest to a divergence: the largest share of the nearer threshold */
    double share = beyond ? fmin(growth[0] / RO_KEY_GROWTH, growth[1] / RO_RUN_GROWTH) : 0;
    if (share > s->jump_share) {
        s->jump_share = share;
        s->jump = growth[0];
        s->jump_run = growth[1];
        s->jump_step = r->step;
        compare_copy_text(s->jump_tensor, sizeof s->jump_tensor, g->name, sizeof s->jump_tensor - 1);
    }
}

/* ---- summaries ---------------------------------------------------------------- */

void compare_roundoff_merge(compare_roundoff *all, const compare_roundoff *r)
{
    if (!all->on && !all->differing) { /* the first rank */
        *all = *r;
        return;
    }
    all->on |= r->on;
    all->noise |= r->noise;
    all->differing += r->differing;
    if (r->wide_step != TFT_STEP_NONE && (all->wide_step == TFT_STEP_NONE || r->wide_step < all->wide_step))
        all->wide_step = r->wide_step;
    if (r->optimizer_noise && (!all->optimizer_noise || r->optimizer_noise_step < all->optimizer_noise_step)) {
        all->optimizer_noise_step = r->optimizer_noise_step;
        memcpy(all->optimizer_noise_tensor, r->optimizer_noise_tensor, sizeof all->optimizer_noise_tensor);
    }
    all->optimizer_noise += r->optimizer_noise;
    all->explained += r->explained;
    if (r->first_step != TFT_STEP_NONE) {
        if (all->first_step == TFT_STEP_NONE || r->first_step < all->first_step)
            all->first_step = r->first_step, all->first_diff = r->first_diff;
        else if (r->first_step == all->first_step)
            all->first_diff = fmax(all->first_diff, r->first_diff);
        if (all->last_step == TFT_STEP_NONE || r->last_step > all->last_step)
            all->last_step = r->last_step, all->last_diff = r->last_diff;
        else if (r->last_step == all->last_step)
            all->last_diff = fmax(all->last_diff, r->last_diff);
    }
    if (r->max_diff > all->max_diff) {
        all->max_diff = r->max_diff;
        all->max_step = r->max_step;
        memcpy(all->max_tensor, r->max_tensor, sizeof all->max_tensor);
    }
    if (r->jump_share > all->jump_share) {
        all->jump_share = r->jump_share;
        all->jump_run = r->jump_run;
        all->jump = r->jump;
        all->jump_step = r->jump_step;
        memcpy(all->jump_tensor, r->jump_tensor, sizeof all->jump_tensor);
    }
    /* buckets: kept when both ranks' share a base and a width (ranks of one
     * run step together), else the larger width's, the other folded in */
    if (r->first_step == TFT_STEP_NONE)
        return;
    compare_roundoff tmp = *r;
    while (tmp.width < all->width) {
        for (int k = 0; k < COMPARE_RO_BUCKETS / 2; k++)
            tmp.bucket[k] = fmax(tmp.bucket[2 * k], tmp.bucket[2 * k + 1]);
        memset(&tmp.bucket[COMPARE_RO_BUCKETS / 2], 0, sizeof(tmp.bucket) / 2);
        tmp.width *= 2;
    }
    for (int k = 0; k < COMPARE_RO_BUCKETS; k++) {
        if (!tmp.bucket[k])
            continue;
        int64_t step = tmp.base + k * tmp.width;
        if (step < all->base)
            continue;
        int64_t j = (step - all->base) / all->width;
        if (j < COMPARE_RO_BUCKETS)
            all->bucket[j] = fmax(all->bucket[j], tmp.bucket[k]);
    }
}

int compare_roundoff_windows(const compare_roundoff *r, int n, int64_t *lo, int64_t *hi, double *max)
{
    if (r->first_step == TFT_STEP_NONE || n <= 0)
        return 0;
    int used = (int)((r->last_step - r->base) / r->width) + 1;
    if (used > COMPARE_RO_BUCKETS)
        used = COMPARE_RO_BUCKETS;
    int per = (used + n - 1) / n, k = 0;
    for (int i = 0; i < used; i += per, k++) {
        lo[k] = r->base + i * r->width;
        hi[k] = r->base + (int64_t)(i + per) * r->width - 1;
        if (hi[k] > r->last_step)
            hi[k] = r->last_step;
        max[k] = 0;
        for (int j = i; j < i + per && j < used; j++)
            max[k] = fmax(max[k], r->bucket[j]);
    }
    return k;
}
