/*
 * report_check_json.c — tfdump --check --json: the findings of one trace
 * (report_check.h) as one JSON object, the keys of docs/CHECK.md. Its
 * integers are exact, as decimal text (core_json.h), where tfdiff's JSON
 * (report_json.c) writes cJSON numbers; its leaks have the keys of
 * tfdiff's but GOLDEN's.
 */
#include "report_internal.h"
#include "core_json.h"
#include "tft_drops.h"

#include <cjson/cJSON.h>
#include <stdio.h>

/* KEY: N, or null outside any step. */
static void json_step(cJSON *o, const char *key, int64_t step)
{
    if (step == TFT_STEP_NONE)
        cJSON_AddNullToObject(o, key);
    else
        core_json_i64(o, key, step);
}

/* One leak: the keys of tfdiff's leaks (docs/TFDIFF.md) but GOLDEN's. */
static cJSON *json_leak(const leak_finding *l)
{
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "rank", l->rank);
    cJSON_AddStringToObject(x, "site", l->site);
    cJSON_AddStringToObject(x, "how", l->how == LEAK_AT_EXIT ? "at-exit" : "growth");
    json_step(x, "from_step", l->per_alloc && l->how == LEAK_GROWTH ? TFT_STEP_NONE : l->from_step);
    if (l->per_alloc)
        core_json_u64(x, "from_allocation", l->from_alloc);
    cJSON_AddStringToObject(x, "per", l->per_alloc ? "allocation" : "step");
    core_json_u64(x, "iterations", l->iterations);
    cJSON_AddNumberToObject(x, "bytes_per_step", l->bytes_per_step);
    core_json_u64(x, "live_bytes_at_end", l->live_bytes_at_end);
    core_json_u64(x, "live_allocs_at_end", l->live_allocs_at_end);
    if (l->first_known)
        core_json_u64(x, "first_alloc_ns", l->first_alloc_ns);
    else
        cJSON_AddNullToObject(x, "first_alloc_ns");
    json_step(x, "first_alloc_step", l->first_known ? l->first_alloc_step : TFT_STEP_NONE);
    if (l->how == LEAK_AT_EXIT)
        core_json_u64(x, "min_bytes", l->min_bytes);
    else
        cJSON_AddNullToObject(x, "min_bytes");
    return x;
}

/* The keys findings, verdict and counts. */
static void json_findings(cJSON *o, const report_check_result *r)
{
    cJSON *a = cJSON_AddArrayToObject(o, "findings");
    for (int i = 0; i < r->nfind; i++) {
        cJSON *j = detect_finding_json(&r->findings[i]);
        cJSON_AddItemToArray(a, j);
    }
    char v[256];
    report_check_verdict(r, v, sizeof(v));
    cJSON_AddStringToObject(o, "verdict", v);
    cJSON *c = cJSON_AddObjectToObject(o, "counts");
    cJSON_AddNumberToObject(c, "error", r->nerr);
    cJSON_AddNumberToObject(c, "warning", r->nwarn);
    cJSON_AddNumberToObject(c, "info", r->ninfo);
}

/* A rank file that lost records: its rank, how many, in which steps. */
static cJSON *json_dropped(const struct tft_drop_sum *d, int rank)
{
    char what[256];
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "rank", rank);
    core_json_u64(x, "count", d->count);
    json_step(x, "first_step", d->first_step);
    json_step(x, "last_step", d->last_step);
    cJSON_AddStringToObject(x, "what", tft_drop_describe(d, what, sizeof(what)));
    return x;
}

static cJSON *json_nonfinite(const report_check_nonfinite *nf)
{
    if (!nf->found)
        return cJSON_CreateNull();
    cJSON *n = cJSON_CreateObject();
    cJSON_AddNumberToObject(n, "rank", nf->rank);
    json_step(n, "step", nf->step);
    core_json_i64(n, "seq", nf->seq);
    cJSON_AddStringToObject(n, "tensor", nf->name);
    return n;
}

cJSON *report_check_json(const report_check_result *res, const tft_trace *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *dm = cJSON_AddArrayToObject(o, "damage"); /* a cut recording, torn or damaged rank files */
    for (int i = 0; i < res->ndamage; i++)
        cJSON_AddItemToArray(dm, cJSON_CreateString(res->damage[i]));
    cJSON_AddNumberToObject(o, "damage_more", res->damage_more);
    cJSON *dr = cJSON_AddArrayToObject(o, "dropped"); /* ranks that lost records */
    for (int i = 0; i < tft_trace_nranks(t); i++)
        if (res->drops[i].count)
            cJSON_AddItemToArray(dr, json_dropped(&res->drops[i], tft_trace_rank_id(t, i)));
    cJSON_AddItemToObject(o, "first_nonfinite", json_nonfinite(&res->nf));
    cJSON *la = cJSON_AddArrayToObject(o, "leaks");
    for (int i = 0; i < res->nl; i++)
        cJSON_AddItemToArray(la, json_leak(&res->leaks[i]));
    cJSON *da = cJSON_AddArrayToObject(o, "desync");
    for (int i = 0; i < res->nd; i++)
        cJSON_AddItemToArray(da, report_desync_json(res->ds, res->nd, i, true));
    cJSON_AddItemToObject(o, "stacks", desync_stacks_json(&res->stacks));
    json_findings(o, res);
    cJSON_AddBoolToObject(o, "recorded", true); /* false: tfdump's dump_unrecorded */
    return o;
}
