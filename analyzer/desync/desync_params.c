/*
 * desync_params.c — the parameters' replication check. Tensors named
 * "param.*" are compared across ranks within a step, at equal (name,
 * occurrence), where the ranks are meant to hold the same values:
 *
 *  - replicas: ranks that agreed on at least 9 in 10 of their parameters
 *    at their first step with parameters (data parallelism after the
 *    initial broadcast) must hold identical values (gradients left
 *    unsynchronised, a stray update, one tensor loaded differently) —
 *    except a parameter whose first records and gradients both differ:
 *    a shard in an otherwise replicated model;
 *  - ranks whose gradients of the parameter (grad.X for param.X, the last
 *    of the step) are identical must hold identical values (initial
 *    parameters not broadcast: every step's all-reduced gradient agrees
 *    while the models differ).
 *
 * Ranks that are neither hold different slices of a model (tensor or
 * pipeline parallelism: shards differ from the start and their gradients
 * differ too) and are not compared. One step's fingerprints are kept (at
 * most DESYNC_MAX_PARAM_FPS) and judged when the next step starts; the
 * first step where replicated values differ is the finding (DS_VALUES,
 * comm 0).
 */
#include "desync_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_param_fp(const void *a, const void *b)
{
    const param_fp *x = a, *y = b;
    if (x->param != y->param)
        return x->param < y->param ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static int cmp_rank_param(const void *a, const void *b)
{
    const param_fp *x = a, *y = b;
    if (x->rank != y->rank)
        return (x->rank > y->rank) - (x->rank < y->rank);
    return (x->param > y->param) - (x->param < y->param);
}

/* Of the parameters both lists hold (sorted by param), how many have equal
 * fingerprints (*agree) and how many there are (*both). */
static void agreement(const param_fp *x, size_t nx, const param_fp *y, size_t ny, size_t *agree, size_t *both)
{
    size_t i = 0, j = 0;
    *agree = *both = 0;
    while (i < nx && j < ny) {
        if (x[i].param < y[j].param)
            i++;
        else if (x[i].param > y[j].param)
            j++;
        else {
            ++*both;
            *agree += x[i++].fp == y[j++].fp;
        }
    }
}

/* Ranks seen for the first time in this step get their replica class (the
 * rank file index of its first member): the first class whose first member
 * agrees with them on at least 9 in 10 of the parameters both recorded
 * first (occurrence 0: before any update of the step). Data-parallel
 * replicas agree on all of them; tensor-parallel peers only on the
 * replicated few (norms, some biases). At most DESYNC_REPLICA_CLASSES
 * classes are tried per step (time O(classes x records)); a rank beyond
 * them is a class of its own. */
enum { DESYNC_REPLICA_CLASSES = 8 };

/* A class being formed: its first member's records in the sorted list. */
typedef struct replica_class {
    size_t at, len;
    int32_t rank;
} replica_class;

static int assign_replicas(desync_state *s)
{
    param_fp *v = malloc((s->nfps ? s->nfps : 1) * sizeof(*v));
    size_t n = 0;
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < s->nfps; i++)
        if (s->params[s->fps[i].param].occ == 0 && s->rep[s->fps[i].rank] < 0)
            v[n++] = s->fps[i];
    qsort(v, n, sizeof(*v), cmp_rank_param);
    replica_class cls[DESYNC_REPLICA_CLASSES];
    int ncls = 0;
    for (size_t a = 0; a < n;) {
        size_t b = a + 1;
        while (b < n && v[b].rank == v[a].rank)
            b++;
        int32_t r = v[a].rank, rep = r;
        for (int c = 0; c < ncls; c++) {
            size_t agree, both;
            agreement(v + a, b - a, v + cls[c].at, cls[c].len, &agree, &both);
            if (both && agree * 10 >= both * 9) {
                rep = cls[c].rank;
                break;
            }
        }
        if (rep == r && ncls < DESYNC_REPLICA_CLASSES)
            cls[ncls++] = (replica_class){a, b - a, r};
        s->rep[r] = rep;
        a = b;
    }
    free(v);
    return 0;
}

/* A lookup in grad_ix or first_ix: the array indexed and the (parameter,
 * rank file) searched. */
typedef struct rank_fp_key {
    const rank_fp *arr;
    uint64_t name;
    int32_t rank;
} rank_fp_key;

static bool rank_fp_eq(const void *ctx, const void *val)
{
    const rank_fp_key *k = ctx;
    const rank_fp *f = &k->arr[*(const uint32_t *)val];
    return f->name == k->name && f->rank == k->rank;
}

static const rank_fp *rank_fp_find(const tft_u64map *ix, const rank_fp *arr, uint64_t name, int rank)
{
    rank_fp_key k = {arr, name, rank};
    const uint32_t *v = tft_u64map_find(ix, tft_u64map_hash2(name, (uint64_t)(uint32_t)rank), rank_fp_eq, &k);
    return v ? &arr[*v] : NULL;
}

/* Adds f to (*arr, *n) under ix, or when (name, rank) is there already
 * replaces its fp (replace) or keeps it. At most DESYNC_MAX_PARAM_FPS. */
static int rank_fp_put(tft_u64map *ix, rank_fp **arr, size_t *n, size_t *cap, rank_fp f, bool replace)
{
    if (*n >= DESYNC_MAX_PARAM_FPS)
        return 0;
    if (tft_u64map_reserve(ix) < 0)
        return -ENOMEM;
    rank_fp_key k = {*arr, f.name, f.rank};
    void *v;
    if (tft_u64map_insert(ix, tft_u64map_hash2(f.name, (uint64_t)(uint32_t)f.rank), rank_fp_eq, &k, &v) != 1) {
        if (replace)
            (*arr)[*(uint32_t *)v].fp = f.fp;
        return 0;
    }
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 256;
        rank_fp *g = realloc(*arr, ncap * sizeof(*g));
        if (!g) {
            tft_u64map_remove(ix, v);
            return -ENOMEM;
        }
        *arr = g;
        *cap = ncap;
    }
    (*arr)[*n] = f;
    *(uint32_t *)v = (uint32_t)(*n)++;
    return 0;
}

/* What makes two ranks' values of a parameter meant to be equal. */
enum { BY_REPLICA, BY_FIRST, BY_GRAD, BY_N };

static const char *const by_text[BY_N] = {
    " (replicas: their parameters agreed at their first step)",
    " (equal at their first record: a replicated parameter)",
    " (their gradients agree: the models differ)",
};

/* One rank's record of a parameter, with what it is compared by: key[m]
 * where has[m] (mode m: BY_*); k and khas are the mode being judged. */
typedef struct judged {
    int32_t rank;
    bool has[BY_N], khas;
    uint64_t key[BY_N], k;
    uint64_t fp;
    bool has_first0;          /* any first record (all zero too) */
    uint64_t first0;
} judged;

/* Replicas x and y that differed from their first records with different
 * gradients hold a shard each, not copies (a vocabulary-parallel head in an
 * otherwise replicated model): not compared. */
static bool shard_like(const judged *x, const judged *y)
{
    return x->has[BY_GRAD] && y->has[BY_GRAD] && x->key[BY_GRAD] != y->key[BY_GRAD] && x->has_first0 &&
           y->has_first0 && x->first0 != y->first0;
}

static int cmp_judged(const void *a, const void *b)
{
    const judged *x = a, *y = b;
    if (x->khas != y->khas)
        return x->khas ? -1 : 1;
    if (x->k != y->k)
        return x->k < y->k ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Within runs of equal key of mode m, a record whose value differs from
 * the run's first: the finding, once; every such rank joins its evidence. */
static void judge_runs(desync_state *s, judged *j, size_t n, int m, uint64_t name)
{
    for (size_t i = 0; i < n; i++) {
        j[i].khas = j[i].has[m];
        j[i].k = j[i].key[m];
    }
    qsort(j, n, sizeof(*j), cmp_judged);
    desync_finding *d = &s->param_finding;
    for (size_t a = 0; a < n && j[a].khas;) {
        size_t b = a + 1;
        while (b < n && j[b].khas && j[b].k == j[a].k)
            b++;
        for (size_t k = a + 1; k < b; k++) {
            if (j[k].fp == j[a].fp || (m == BY_REPLICA && shard_like(&j[k], &j[a])))
                continue;
            if (!s->param_done) {
                memset(d, 0, sizeof(*d));
                d->step = s->param_step;
                d->seq = TFT_SEQ_NONE;
                d->kind = DS_VALUES;
                d->peer = -1;
                d->tag = TFT_TAG_NONE;
                snprintf(d->detail, sizeof(d->detail),
                         "%.96s differs across ranks at step %" PRId64 ": rank %d fp=%016" PRIx64
                         ", rank %d fp=%016" PRIx64 "%s",
                         desync_str_of(s, name), s->param_step, desync_rank_id(s, j[a].rank), j[a].fp,
                         desync_rank_id(s, j[k].rank), j[k].fp, by_text[m]);
                s->param_done = true;
            }
            desync_add_rank(d, desync_rank_id(s, j[k].rank));
        }
        a = b;
    }
}

/* The step's parameters in the order they first appeared: the first whose
 * replicated values differ is the finding. */
void desync_params_judge(desync_state *s)
{
    if (s->nfps > 1)
        qsort(s->fps, s->nfps, sizeof(*s->fps), cmp_param_fp);
    /* out of memory: replicas unknown this step, or the step not judged */
    judged *j = s->nfps && assign_replicas(s) == 0 ? malloc((size_t)s->nranks * sizeof(*j)) : NULL;
    for (size_t a = 0; j && a < s->nfps && !s->param_done;) {
        size_t b = a + 1;
        while (b < s->nfps && s->fps[b].param == s->fps[a].param)
            b++;
        uint64_t name = s->params[s->fps[a].param].name;
        size_t n = 0;
        bool differ = false;
        for (size_t k = a; k < b && n < (size_t)s->nranks; k++) {
            const param_fp *f = &s->fps[k];
            judged *x = &j[n++];
            const rank_fp *g = rank_fp_find(&s->grad_ix, s->gfps, name, f->rank);
            const rank_fp *f0 = rank_fp_find(&s->first_ix, s->firsts, name, f->rank);
            *x = (judged){.rank = f->rank, .fp = f->fp,
                          .has = {s->rep[f->rank] >= 0, f0 && !f0->zero, g != NULL},
                          .key = {(uint64_t)s->rep[f->rank], f0 ? f0->fp : 0, g ? g->fp : 0},
                          .has_first0 = f0 != NULL, .first0 = f0 ? f0->fp : 0};
            differ |= f->fp != s->fps[a].fp;
        }
        for (int m = 0; differ && m < BY_N && !s->param_done; m++)
            judge_runs(s, j, n, m, name);
        a = b;
    }
    free(j);
    s->nparams = s->nfps = s->ngfps = 0;
    tft_u64map_clear(&s->param_ix);
    tft_u64map_clear(&s->occ_ix);
    tft_u64map_clear(&s->grad_ix);
}

typedef struct occ_key {
    const desync_state *s;
    uint64_t name;
    uint32_t occ_or_rank;
} occ_key;

static bool param_eq(const void *ctx, const void *val)
{
    const occ_key *k = ctx;
    const param_entry *p = &k->s->params[*(const uint32_t *)val];
    return p->name == k->name && p->occ == k->occ_or_rank;
}

/* occ_ix values index fps: the rank's latest record of the name (its
 * param's occ + 1 is the rank's count of that name so far). */
static bool occ_eq(const void *ctx, const void *val)
{
    const occ_key *k = ctx;
    const param_fp *f = &k->s->fps[*(const uint32_t *)val];
    return k->s->params[f->param].name == k->name && (uint32_t)f->rank == k->occ_or_rank;
}

/* Notes rank i's fingerprint of (name, its next occurrence) in this step:
 * O(1) per record. Past DESYNC_MAX_PARAM_FPS records the step's
 * remaining parameters are not compared. */
static int param_note(desync_state *s, int i, uint64_t name, uint64_t fp)
{
    if (s->nfps >= DESYNC_MAX_PARAM_FPS)
        return 0;
    if (tft_u64map_reserve(&s->occ_ix) < 0 || tft_u64map_reserve(&s->param_ix) < 0)
        return -ENOMEM;
    occ_key ok = {s, name, (uint32_t)i};
    uint64_t hk = tft_u64map_hash2(name, (uint64_t)(uint32_t)i);
    const uint32_t *last = tft_u64map_find(&s->occ_ix, hk, occ_eq, &ok);
    uint32_t occ = last ? s->params[s->fps[*last].param].occ + 1 : 0;
    occ_key pk = {s, name, occ};
    void *pv;
    if (tft_u64map_insert(&s->param_ix, tft_u64map_hash2(name, 0x100000000ull | occ), param_eq, &pk, &pv) == 1) {
        if (s->nparams == s->params_cap) {
            size_t ncap = s->params_cap ? s->params_cap * 2 : 64;
            param_entry *p = realloc(s->params, ncap * sizeof(*p));
            if (!p) {
                tft_u64map_remove(&s->param_ix, pv);
                return -ENOMEM;
            }
            s->params = p;
            s->params_cap = ncap;
        }
        s->params[s->nparams] = (param_entry){.name = name, .occ = occ};
        *(uint32_t *)pv = (uint32_t)s->nparams++;
    }
    uint32_t param = *(uint32_t *)pv;
    if (s->nfps == s->fps_cap) {
        size_t ncap = s->fps_cap ? s->fps_cap * 2 : 256;
        param_fp *f = realloc(s->fps, ncap * sizeof(*f));
        if (!f)
            return -ENOMEM;
        s->fps = f;
        s->fps_cap = ncap;
    }
    s->fps[s->nfps] = (param_fp){.param = param, .rank = i, .fp = fp};
    void *ov;
    tft_u64map_insert(&s->occ_ix, hk, occ_eq, &ok, &ov); /* room reserved above */
    *(uint32_t *)ov = (uint32_t)s->nfps++;
    return 0;
}

/* A record of step: the previous step's records are judged first.
 * false once a finding exists. */
static bool at_step(desync_state *s, int64_t step)
{
    if (s->param_done)
        return false;
    if (step != s->param_step) {
        desync_params_judge(s);
        s->param_step = step;
    }
    return !s->param_done;
}

/* A "param.*" tensor of a step with statistics (the extract keeps only
 * those); zero: every element is zero. */
int desync_on_param(desync_state *s, int i, int64_t step, uint64_t name, uint64_t fp, bool zero)
{
    if (!at_step(s, step))
        return 0;
    int e = rank_fp_put(&s->first_ix, &s->firsts, &s->nfirsts, &s->firsts_cap,
                        (rank_fp){.name = name, .rank = i, .zero = zero, .fp = fp}, false);
    return e ? e : param_note(s, i, name, fp);
}

/* A "grad.X" tensor of a step (name: the id of param.X): the rank's last
 * one of the step is kept. */
int desync_on_grad(desync_state *s, int i, int64_t step, uint64_t name, uint64_t fp)
{
    if (!at_step(s, step))
        return 0;
    return rank_fp_put(&s->grad_ix, &s->gfps, &s->ngfps, &s->gfps_cap, (rank_fp){.name = name, .rank = i, .fp = fp},
                       true);
}
