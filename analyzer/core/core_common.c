/*
 * core_common.c — what tfdiff and tfdump share beyond the analyses
 * themselves (core_common.h).
 */
#include "core_common.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* "rank-*.tft", the names tft_trace_open reads. */
static bool rank_file_name(const char *name)
{
    size_t len = strlen(name);
    return !strncmp(name, "rank-", 5) && len >= 9 && !strcmp(name + len - 4, ".tft");
}

bool trace_unrecorded(const char *path, tft_manifest *m)
{
    struct stat sb;
    if (stat(path, &sb) < 0 || !S_ISDIR(sb.st_mode))
        return false;
    DIR *dp = opendir(path);
    if (!dp)
        return false;
    bool any = false;
    struct dirent *de;
    while (!any && (de = readdir(dp)))
        any = rank_file_name(de->d_name);
    closedir(dp);
    char mp[4096];
    if (any || snprintf(mp, sizeof(mp), "%s/manifest.json", path) >= (int)sizeof(mp))
        return false;
    return tft_manifest_read(mp, m, NULL, 0) == 0;
}

static void null_or_number(cJSON *x, const char *key, bool has, double v)
{
    if (has)
        cJSON_AddNumberToObject(x, key, v);
    else
        cJSON_AddNullToObject(x, key);
}

void diff_desync_json_more(cJSON *x, const diff_desync *ds, int nd, int i)
{
    const diff_desync *d = &ds[i];
    null_or_number(x, "seq", d->seq != TFT_SEQ_NONE, (double)d->seq);
    if (d->kind == DS_STRAGGLER) /* across hosts: the clocks' error bound; 0 one host (docs/MULTINODE.md) */
        cJSON_AddNumberToObject(x, "clock_error_ns", (double)d->clock_error_ns);
    if (d->comm_name[0])
        cJSON_AddStringToObject(x, "comm_name", d->comm_name);
    else
        cJSON_AddNullToObject(x, "comm_name");
    if (d->nmembers > 0 && d->nmembers <= DIFF_DESYNC_MEMBERS) {
        cJSON *m = cJSON_AddArrayToObject(x, "members");
        for (int k = 0; m && k < d->nmembers; k++)
            cJSON_AddItemToArray(m, cJSON_CreateNumber(d->members[k]));
    } else {
        cJSON_AddNullToObject(x, "members");
    }
    int c = diff_desync_index(ds, nd, d->cause);
    null_or_number(x, "caused_by", c >= 0, c);
    null_or_number(x, "peer", d->kind == DS_P2P && d->peer >= 0, d->peer);
    null_or_number(x, "tag", d->kind == DS_P2P, d->tag);
}
