/*
 * tfdiff_keep.c — the kept scalars of --keep-steps traces (FORMAT.md §3.6)
 * compared before the steps both sides have in full.
 *
 * A flight-recorder trace keeps every record for its last N steps only,
 * and for every step its one-element tensors (loss, learning rate,
 * gradient norm, loss scale). compare_rank compares from the first step
 * both sides have in full (tfdiff_rank.c, keep_limit); this file reads the
 * scalars of the steps before it from the same pass (compare_rank's tap)
 * and compares them pair by pair, (step, name, occurrence in the step), so
 * a fault that begins before the window is reported at its own step: the
 * first scalar that differs, flagged `kept` with the step the full records
 * start at.
 *
 * Judgement: a scalar pair matches when its fingerprints are equal, its
 * value differs within |g-b| <= atol + rtol*max(|g|,|b|), or (the
 * round-off model on, the default) its relative difference stays within
 * RO_KEY_GROWTH times the largest that scalar showed before, as
 * compare_roundoff.c's key envelope judges tensors. A scalar present on
 * one side only is not judged (the structure of the full steps says more).
 *
 * Memory: the scalars of the steps one side has read and the other not
 * yet; compare_rank walks both files step by step, so a step or two.
 */
#include "tfdiff_internal.h"
#include "core_common.h"

#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct kept_scalar {
    int64_t step, seq;
    uint64_t name;
    int dtype, ndim, mode;
    int64_t shape[TFT_MAX_NDIM];
    tft_stats stats;
} kept_scalar;

typedef struct keep_side {
    kept_scalar *v;
    size_t n, cap;
    int64_t seen;             /* the largest step read so far, TFT_STEP_NONE none */
} keep_side;

typedef struct keep_env {
    uint64_t name;
    double env;               /* the largest relative difference of its matched pairs */
} keep_env;

struct keep_scan {
    int64_t lo, hi;           /* steps compared: lo <= step < hi */
    const compare_opts *o;
    tft_reader *r[2];
    keep_side s[2];
    keep_env *env;
    size_t nenv, capenv;
    int64_t drained;          /* steps up to this one are judged (INT64_MIN: none yet) */
    compare_point first;      /* the first pair that differs */
    compare_nonfinite nonfinite; /* BAD's first non-finite scalar */
    uint64_t compared, identical, within;
    int (*tap)(void *ctx, int side, const tft_rec *rec);
    void *tap_ctx;
};

static const char *name_of(const keep_scan *k, int side, uint64_t id, char *buf, size_t n)
{
    const char *s = k->r[side] ? tft_reader_string(k->r[side], id) : NULL;
    if (!s)
        snprintf(buf, n, "%016llx", (unsigned long long)id);
    else
        snprintf(buf, n, "%s", s);
    return buf;
}

/* Whether the scalar named name is compared (--name, --collectives). */
static bool wanted(const keep_scan *k, const char *name)
{
    if (!k->o->collectives && (!strncmp(name, "MPI_", 4) || !strncmp(name, "nccl", 4)))
        return false;
    return !k->o->name_glob || fnmatch(k->o->name_glob, name, 0) == 0;
}

static double *env_of(keep_scan *k, uint64_t name)
{
    for (size_t i = 0; i < k->nenv; i++)
        if (k->env[i].name == name)
            return &k->env[i].env;
    if (k->nenv == k->capenv) {
        size_t ncap = k->capenv ? k->capenv * 2 : 16;
        keep_env *ne = realloc(k->env, ncap * sizeof(*ne));
        if (!ne)
            return NULL;
        k->env = ne;
        k->capenv = ncap;
    }
    k->env[k->nenv] = (keep_env){.name = name};
    return &k->env[k->nenv++].env;
}

static void side_fill(const keep_scan *k, int side, const kept_scalar *x, compare_tensor_side *out)
{
    memset(out, 0, sizeof(*out));
    out->present = true;
    out->step = x->step;
    out->seq = x->seq;
    name_of(k, side, x->name, out->name, sizeof(out->name));
    out->dtype = x->dtype;
    out->ndim = x->ndim;
    memcpy(out->shape, x->shape, sizeof(out->shape));
    out->mode = x->mode;
    out->stats = x->stats;
}

/* Judges a pair: true when it differs, with its kind and statistic. */
static bool pair_differs(keep_scan *k, const kept_scalar *g, const kept_scalar *b, int *kind, char stat[32])
{
    const tft_stats *gs = &g->stats, *bs = &b->stats;
    if (gs->fingerprint == bs->fingerprint && g->dtype == b->dtype) {
        k->identical++;
        return false;
    }
    if (g->dtype != b->dtype) {
        *kind = DK_DTYPE;
        snprintf(stat, 32, "dtype");
        return true;
    }
    const struct { const char *name; uint64_t g, b; } counts[] = {
        {"nan", gs->nan, bs->nan}, {"pinf", gs->pinf, bs->pinf}, {"ninf", gs->ninf, bs->ninf}};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
        if (counts[i].g != counts[i].b) {
            *kind = counts[i].b ? DK_NONFINITE : DK_VALUE;
            snprintf(stat, 32, "%s", counts[i].name);
            return true;
        }
    bool full = g->mode >= TFT_STATS_FULL && b->mode >= TFT_STATS_FULL;
    double gv = full ? gs->mean : gs->min, bv = full ? bs->mean : bs->min;
    double d = fabs(gv - bv), mag = fmax(fabs(gv), fabs(bv));
    double rel = mag > 0 ? d / mag : 0, *env = env_of(k, g->name);
    bool ok = d <= k->o->atol + k->o->rtol * mag ||
              (k->o->roundoff && env && *env > 0 && rel <= *env * RO_KEY_GROWTH);
    if (ok) {
        if (env && rel > *env)
            *env = rel;
        k->within++;
        return false;
    }
    *kind = DK_VALUE;
    snprintf(stat, 32, "%s", full ? "mean" : "min");
    return true;
}

static void note_nonfinite(keep_scan *k, const kept_scalar *b, bool in_golden)
{
    if (k->nonfinite.found || !(b->stats.nan || b->stats.pinf || b->stats.ninf))
        return;
    k->nonfinite.found = true;
    k->nonfinite.step = b->step;
    k->nonfinite.seq = b->seq;
    name_of(k, 1, b->name, k->nonfinite.tensor, sizeof(k->nonfinite.tensor));
    k->nonfinite.in_golden = in_golden;
}

/* Judges the scalars of step st, each GOLDEN one against BAD's of the same
 * name and occurrence in the step. */
static void judge_step(keep_scan *k, int64_t st)
{
    keep_side *g = &k->s[0], *b = &k->s[1];
    for (size_t j = 0; j < b->n; j++) /* in record order: the first non-finite */
        if (b->v[j].step == st) {
            bool in_golden = false;
            for (size_t i = 0; i < g->n && !in_golden; i++)
                in_golden = g->v[i].step == st && g->v[i].name == b->v[j].name &&
                            (g->v[i].stats.nan || g->v[i].stats.pinf || g->v[i].stats.ninf);
            note_nonfinite(k, &b->v[j], in_golden);
        }
    for (size_t i = 0; i < g->n && !k->first.found; i++) {
        const kept_scalar *x = &g->v[i];
        if (x->step != st)
            continue;
        int occ = 0;
        for (size_t p = 0; p < i; p++)
            occ += g->v[p].step == st && g->v[p].name == x->name;
        const kept_scalar *y = NULL;
        for (size_t p = 0; p < b->n && !y; p++)
            if (b->v[p].step == st && b->v[p].name == x->name && occ-- == 0)
                y = &b->v[p];
        char name[96];
        if (!y || !wanted(k, name_of(k, 0, x->name, name, sizeof(name))))
            continue;
        k->compared++;
        int kind = DK_VALUE;
        char stat[32] = "";
        if (!pair_differs(k, x, y, &kind, stat))
            continue;
        compare_point *p = &k->first;
        p->found = true;
        p->step = y->step;
        p->seq = y->seq;
        snprintf(p->tensor, sizeof(p->tensor), "%s", name);
        p->kind = kind;
        p->thread = -1;
        side_fill(k, 0, x, &p->golden);
        side_fill(k, 1, y, &p->bad);
        snprintf(p->stat, sizeof(p->stat), "%s", stat);
        p->kept = true;
        p->full_from = k->hi;
    }
}

/* Removes the scalars of step st from s. */
static void side_drop(keep_side *s, int64_t st)
{
    size_t w = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].step != st)
            s->v[w++] = s->v[i];
    s->n = w;
}

/* Judges every step up to st (both sides are past it), in step order. */
static void drain(keep_scan *k, int64_t st)
{
    for (;;) {
        int64_t next = TFT_STEP_NONE;
        for (int side = 0; side < 2; side++)
            for (size_t i = 0; i < k->s[side].n; i++) {
                int64_t x = k->s[side].v[i].step;
                if (x <= st && (next == TFT_STEP_NONE || x < next))
                    next = x;
            }
        if (next == TFT_STEP_NONE)
            break;
        if (!k->first.found)
            judge_step(k, next);
        side_drop(&k->s[0], next);
        side_drop(&k->s[1], next);
    }
    if (st > k->drained)
        k->drained = st;
}

static int push(keep_side *s, const tft_rec *rec)
{
    if (s->n == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 64;
        kept_scalar *nv = realloc(s->v, ncap * sizeof(*nv));
        if (!nv)
            return -1;
        s->v = nv;
        s->cap = ncap;
    }
    const tft_rec_tensor *t = (const tft_rec_tensor *)rec;
    kept_scalar *x = &s->v[s->n++];
    x->step = rec->step;
    x->seq = rec->seq;
    x->name = t->name;
    x->dtype = t->dtype;
    x->ndim = t->ndim <= TFT_MAX_NDIM ? t->ndim : TFT_MAX_NDIM;
    x->mode = t->mode;
    memcpy(x->shape, t->shape, sizeof(x->shape));
    x->stats = t->stats;
    return 0;
}

int tfdiff_keep_tap(void *ctx, int side, const tft_rec *rec)
{
    keep_scan *k = ctx;
    if (!k->first.found && rec->step != TFT_STEP_NONE && rec->step < k->hi && side >= 0 && side < 2) {
        keep_side *s = &k->s[side];
        if (s->seen == TFT_STEP_NONE || rec->step > s->seen)
            s->seen = rec->step;
        if (rec->step >= k->lo && rec->step > k->drained && tft_rec_is_scalar(rec) && push(s, rec) < 0)
            return -ENOMEM;
        int64_t both = k->s[0].seen < k->s[1].seen ? k->s[0].seen : k->s[1].seen;
        if (both != TFT_STEP_NONE && both - 1 > k->drained) /* both sides are past step both - 1 */
            drain(k, both - 1);
    }
    return k->tap ? k->tap(k->tap_ctx, side, rec) : 0;
}

keep_scan *tfdiff_keep_begin(tft_reader *g, tft_reader *b, int64_t lo, int64_t hi, compare_opts *o)
{
    keep_scan *k = calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    k->lo = lo;
    k->hi = hi;
    k->o = o;
    k->r[0] = g;
    k->r[1] = b;
    k->s[0].seen = k->s[1].seen = TFT_STEP_NONE;
    k->drained = lo == INT64_MIN ? INT64_MIN : lo - 1;
    k->tap = o->tap;
    k->tap_ctx = o->tap_ctx;
    o->tap = tfdiff_keep_tap;
    o->tap_ctx = k;
    return k;
}

void tfdiff_keep_end(keep_scan *k, compare_result *res)
{
    if (!k)
        return;
    if (res) {
        drain(k, k->hi - 1);
        res->compared += k->compared;
        res->identical += k->identical;
        res->within_tolerance += k->within;
        if (k->first.found) {
            res->first = k->first;
            res->first.rank = res->rank;
            res->origin.found = false; /* ops are gone this far back: no origin */
            res->n_context = 0;
        }
        if (k->nonfinite.found && (!res->nonfinite.found || res->nonfinite.step > k->nonfinite.step)) {
            res->nonfinite = k->nonfinite;
            res->nonfinite.rank = res->rank;
        }
    }
    for (int side = 0; side < 2; side++)
        free(k->s[side].v);
    free(k->env);
    free(k);
}
