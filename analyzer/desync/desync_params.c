/*
 * desync_params.c — the parameters' replication check: tensors named
 * "param.*" are replicated under data parallelism, so within a step their
 * fingerprints at equal (name, occurrence) must agree across ranks. One
 * step's fingerprints are kept (at most DESYNC_MAX_PARAM_FPS) and judged
 * when the next step starts; the first step where they differ is the
 * finding (DS_VALUES, comm 0).
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

/* The step's parameters in the order they first appeared, each over its
 * ranks in rank file order: the first whose fingerprints differ is the
 * finding (the first rank holding it is the reference). */
void desync_params_judge(desync_state *s)
{
    if (s->nfps > 1)
        qsort(s->fps, s->nfps, sizeof(*s->fps), cmp_param_fp);
    desync_finding *d = &s->param_finding;
    for (size_t a = 0; a < s->nfps && !s->param_done;) {
        size_t b = a + 1;
        while (b < s->nfps && s->fps[b].param == s->fps[a].param)
            b++;
        const param_fp *ref = &s->fps[a];
        for (size_t k = a + 1; k < b; k++) {
            const param_fp *x = &s->fps[k];
            if (x->fp == ref->fp)
                continue;
            if (!s->param_done) {
                memset(d, 0, sizeof(*d));
                d->step = s->param_step;
                d->seq = TFT_SEQ_NONE;
                d->kind = DS_VALUES;
                d->peer = -1;
                d->tag = TFT_TAG_NONE;
                snprintf(d->detail, sizeof(d->detail), "%.96s differs across ranks at step %" PRId64
                         ": rank %d fp=%016" PRIx64 ", rank %d fp=%016" PRIx64,
                         desync_str_of(s, s->params[ref->param].name), s->param_step,
                         desync_rank_id(s, ref->rank), ref->fp, desync_rank_id(s, x->rank), x->fp);
                s->param_done = true;
            }
            desync_add_rank(d, desync_rank_id(s, x->rank));
        }
        a = b;
    }
    s->nparams = s->nfps = 0;
    tft_u64map_clear(&s->param_ix);
    tft_u64map_clear(&s->occ_ix);
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

/* A "param.*" tensor of a step with statistics (the extract keeps only those). */
int desync_on_param(desync_state *s, int i, int64_t step, uint64_t name, uint64_t fp)
{
    if (s->param_done)
        return 0;
    if (step != s->param_step) {
        desync_params_judge(s);
        s->param_step = step;
        if (s->param_done)
            return 0;
    }
    return param_note(s, i, name, fp);
}
