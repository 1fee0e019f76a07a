/*
 * report_desync.c — a desync finding as the JSON object of docs/TFDIFF.md
 * and docs/CHECK.md, for tfdiff's report (report_json.c) and tfdump
 * --check (report_check_json.c), which differ in how they write coll_seq
 * and step (tfdump: exact, as decimal text).
 */
#include "report_internal.h"
#include "core_json.h"

#include <stdbool.h>

static void null_or_number(cJSON *x, const char *key, bool has, double v)
{
    if (has)
        cJSON_AddNumberToObject(x, key, v);
    else
        cJSON_AddNullToObject(x, key);
}

/* The keys after comm, coll_seq and step. */
static void json_keys(cJSON *x, const desync_finding *ds, int nd, int i)
{
    const desync_finding *d = &ds[i];
    cJSON_AddStringToObject(x, "kind", desync_kind_name(d->kind));
    cJSON *rk = cJSON_AddArrayToObject(x, "ranks");
    for (int k = 0; k < d->nranks && k < 16; k++)
        cJSON_AddItemToArray(rk, cJSON_CreateNumber(d->ranks[k]));
    cJSON_AddStringToObject(x, "detail", d->detail);
    null_or_number(x, "seq", d->seq != TFT_SEQ_NONE, (double)d->seq);
    if (d->kind == DS_STRAGGLER) /* across hosts: the clocks' error bound; 0 one host (docs/MULTINODE.md) */
        cJSON_AddNumberToObject(x, "clock_error_ns", (double)d->clock_error_ns);
    if (d->comm_name[0])
        cJSON_AddStringToObject(x, "comm_name", d->comm_name);
    else
        cJSON_AddNullToObject(x, "comm_name");
    if (d->nmembers > 0 && d->nmembers <= DESYNC_MEMBERS) {
        cJSON *m = cJSON_AddArrayToObject(x, "members");
        for (int k = 0; m && k < d->nmembers; k++)
            cJSON_AddItemToArray(m, cJSON_CreateNumber(d->members[k]));
    } else {
        cJSON_AddNullToObject(x, "members");
    }
    int c = desync_index(ds, nd, d->cause);
    null_or_number(x, "caused_by", c >= 0, c);
    null_or_number(x, "peer", d->kind == DS_P2P && d->peer >= 0, d->peer);
    null_or_number(x, "tag", d->kind == DS_P2P, d->tag);
}

cJSON *report_desync_json(const desync_finding *ds, int nd, int i, bool exact)
{
    const desync_finding *d = &ds[i];
    cJSON *x = cJSON_CreateObject();
    core_json_hex(x, "comm", d->comm);
    if (exact)
        core_json_u64(x, "coll_seq", d->coll_seq);
    else
        cJSON_AddNumberToObject(x, "coll_seq", (double)d->coll_seq);
    if (d->step == TFT_STEP_NONE)
        cJSON_AddNullToObject(x, "step");
    else if (exact)
        core_json_i64(x, "step", d->step);
    else
        cJSON_AddNumberToObject(x, "step", (double)d->step);
    json_keys(x, ds, nd, i);
    return x;
}
