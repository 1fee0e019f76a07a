/*
 * dump_check.c — tfdump --check: the findings one trace shows on its own,
 * without a GOLDEN: the first non-finite tensor, collective desyncs across
 * ranks (diff_desync.c) and leaks (diff_leak.c).
 */
#include "diff.h"
#include "diff_common.h"
#include "dump_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

typedef struct nonfinite {
    bool found;
    int rank;
    int64_t step, seq;
    char name[96];
    uint64_t nan, inf;
} nonfinite;

static void release_all(dump_trace *d)
{
    for (int i = 0; i < d->n; i++)
        tft_trace_release(d->t, i);
}

/* The first tensor with a NaN or Inf in (step, seq) order across ranks:
 * every rank file open at once (one chunk each). 0 or a negative errno. */
static int find_nonfinite(dump_trace *d, nonfinite *nf)
{
    tft_merge *m = tft_merge_open(d->t, TFT_ORDER_STEP_SEQ);
    if (!m)
        return errno ? -errno : -EIO;
    const tft_rec *rec;
    int idx, e;
    while ((e = tft_merge_next(m, &rec, &idx)) == 1) {
        if (rec->kind != TFT_REC_TENSOR || rec->len < sizeof(tft_rec_tensor))
            continue;
        const tft_rec_tensor *t = (const tft_rec_tensor *)rec;
        if (t->mode < TFT_STATS_HEALTH || t->stats.nan + t->stats.pinf + t->stats.ninf == 0)
            continue;
        char buf[18];
        const char *name = rec_string(tft_trace_reader(d->t, idx), t->name, buf);
        *nf = (nonfinite){true, tft_trace_rank_id(d->t, idx), rec->step, rec->seq, "", t->stats.nan,
                          t->stats.pinf + t->stats.ninf};
        snprintf(nf->name, sizeof(nf->name), "%s", name ? name : "?");
        break;
    }
    tft_merge_close(m);
    return e < 0 ? e : 0;
}

/* Leaks rank by rank, one rank file open at a time. */
static int find_leaks(dump_trace *d, uint64_t min_bytes, diff_leak *out, int max)
{
    int n = 0;
    for (int i = 0; i < tft_trace_nranks(d->t) && n < max; i++) {
        tft_reader *r = tft_trace_reader(d->t, i);
        if (!r)
            return errno ? -errno : -EIO;
        tft_reader_rewind(r);
        int k = diff_leaks_mem(r, tft_trace_rank_id(d->t, i), min_bytes, out + n, max - n, NULL);
        tft_trace_release(d->t, i);
        if (k < 0)
            return k;
        n += k;
    }
    return n;
}

/* KEY: N, or null outside any step. */
static void json_step(cJSON *o, const char *key, int64_t step)
{
    if (step == TFT_STEP_NONE)
        cJSON_AddNullToObject(o, key);
    else
        json_i64(o, key, step);
}

static void print_text(const nonfinite *nf, const diff_leak *l, int nl, const diff_desync *ds, int nd)
{
    char sb[48];
    if (nf->found)
        printf("non-finite: rank %d, %s, seq %lld: %s (%" PRIu64 " NaN, %" PRIu64 " Inf)\n", nf->rank,
               diff_step_text(nf->step, sb, sizeof(sb)), (long long)nf->seq, nf->name, nf->nan, nf->inf);
    for (int i = 0; i < nl; i++) {
        char what[400];
        diff_leak_describe(&l[i], what, sizeof(what));
        printf("leak: rank %d, %s\n", l[i].rank, what);
    }
    for (int i = 0; i < nd; i++) {
        char where[160];
        diff_desync_where(ds, nd, i, where, sizeof(where));
        printf("desync: %s at %s (%s): %s\n", desync_kind_name(ds[i].kind),
               diff_step_text(ds[i].step, sb, sizeof(sb)), where, ds[i].detail);
    }
    if (!nf->found && !nl && !nd)
        printf("OK: no non-finite values, leaks or desyncs\n");
}

/* One leak: the keys of tfdiff's leaks (docs/TFDIFF.md) but GOLDEN's. */
static cJSON *json_leak(const diff_leak *l)
{
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "rank", l->rank);
    cJSON_AddStringToObject(x, "site", l->site);
    cJSON_AddStringToObject(x, "how", l->how == DIFF_LEAK_AT_EXIT ? "at-exit" : "growth");
    json_step(x, "from_step", l->per_alloc && l->how == DIFF_LEAK_GROWTH ? TFT_STEP_NONE : l->from_step);
    if (l->per_alloc)
        json_u64(x, "from_allocation", l->from_alloc);
    cJSON_AddStringToObject(x, "per", l->per_alloc ? "allocation" : "step");
    json_u64(x, "iterations", l->iterations);
    cJSON_AddNumberToObject(x, "bytes_per_step", l->bytes_per_step);
    json_u64(x, "live_bytes_at_end", l->live_bytes_at_end);
    json_u64(x, "live_allocs_at_end", l->live_allocs_at_end);
    if (l->first_known)
        json_u64(x, "first_alloc_ns", l->first_alloc_ns);
    else
        cJSON_AddNullToObject(x, "first_alloc_ns");
    json_step(x, "first_alloc_step", l->first_known ? l->first_alloc_step : TFT_STEP_NONE);
    if (l->how == DIFF_LEAK_AT_EXIT)
        json_u64(x, "min_bytes", l->min_bytes);
    else
        cJSON_AddNullToObject(x, "min_bytes");
    return x;
}

static void print_json(const nonfinite *nf, const diff_leak *l, int nl, const diff_desync *ds, int nd)
{
    cJSON *o = cJSON_CreateObject();
    if (nf->found) {
        cJSON *n = cJSON_AddObjectToObject(o, "first_nonfinite");
        cJSON_AddNumberToObject(n, "rank", nf->rank);
        json_step(n, "step", nf->step);
        json_i64(n, "seq", nf->seq);
        cJSON_AddStringToObject(n, "tensor", nf->name);
    } else {
        cJSON_AddNullToObject(o, "first_nonfinite");
    }
    cJSON *la = cJSON_AddArrayToObject(o, "leaks");
    for (int i = 0; i < nl; i++)
        cJSON_AddItemToArray(la, json_leak(&l[i]));
    cJSON *da = cJSON_AddArrayToObject(o, "desync");
    for (int i = 0; i < nd; i++) {
        cJSON *x = cJSON_CreateObject();
        json_hex(x, "comm", ds[i].comm);
        json_u64(x, "coll_seq", ds[i].coll_seq);
        json_step(x, "step", ds[i].step);
        cJSON_AddStringToObject(x, "kind", desync_kind_name(ds[i].kind));
        cJSON *rk = cJSON_AddArrayToObject(x, "ranks");
        for (int k = 0; k < ds[i].nranks && k < 16; k++)
            cJSON_AddItemToArray(rk, cJSON_CreateNumber(ds[i].ranks[k]));
        cJSON_AddStringToObject(x, "detail", ds[i].detail);
        diff_desync_json_more(x, ds, nd, i);
        cJSON_AddItemToArray(da, x);
    }
    cJSON_AddBoolToObject(o, "recorded", true); /* false: dump_unrecorded */
    out_json_line(o);
    cJSON_Delete(o);
}

int dump_check(dump_trace *d, const dump_opts *o)
{
    nonfinite nf = {0};
    diff_leak leaks[64];
    diff_desync ds[64];
    int e = find_nonfinite(d, &nf);
    release_all(d);
    if (e == -ENOMEM) {
        dump_nomem(o->path, "--check (the first non-finite, reading every rank file at once)");
        return DUMP_USAGE;
    }
    if (e < 0) {
        dump_err("%s: read error while scanning tensors: %s", o->path, strerror(-e));
        return DUMP_USAGE;
    }
    int nl = find_leaks(d, o->leak_min_bytes, leaks, 64);
    int nd = nl < 0 ? 0 : diff_desyncs(d->t, ds, 64);
    release_all(d);
    if (nl == -ENOMEM || nd == -ENOMEM) {
        dump_nomem(o->path, nl == -ENOMEM ? "--check (leaks)" : "--check (desyncs across ranks)");
        return DUMP_USAGE;
    }
    if (nl < 0 || nd < 0) {
        dump_err("%s: read error while scanning allocations and collectives: %s", o->path,
                 strerror(-(nl < 0 ? nl : nd)));
        return DUMP_USAGE;
    }
    if (o->json)
        print_json(&nf, leaks, nl, ds, nd);
    else
        print_text(&nf, leaks, nl, ds, nd);
    return nf.found || nl || nd ? DUMP_FINDINGS : DUMP_OK;
}
