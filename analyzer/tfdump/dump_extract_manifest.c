/*
 * dump_extract_manifest.c — the manifest of a trace written by tfdump
 * --extract (dump_extract_internal.h): the source's run (or what the rank
 * files' headers say), the kept ranks, and the `extract` object saying where
 * it came from and what was kept (FORMAT.md §2.3); and the summary's line
 * that reads that object back (dump_extract_describe).
 */
#include "dump_extract_internal.h"
#include "tft_writer_internal.h" /* tft_manifest_write_textat */

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The manifest's rank entry of file `name`, or NULL. */
static const tft_manifest_rank *manifest_rank(const tft_manifest *m, const char *name)
{
    for (int i = 0; m && i < m->nranks; i++)
        if (!strcmp(m->ranks[i].file, name))
            return &m->ranks[i];
    return NULL;
}

static void json_step_pair(cJSON *o, const char *key, bool given, int64_t a, int64_t b)
{
    if (!given) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    cJSON *arr = cJSON_AddArrayToObject(o, key);
    cJSON_AddItemToArray(arr, a == INT64_MIN + 1 ? cJSON_CreateNull() : cJSON_CreateNumber((double)a));
    cJSON_AddItemToArray(arr, b == INT64_MAX ? cJSON_CreateNull() : cJSON_CreateNumber((double)b));
}

/* The `extract` object of OUT's manifest (FORMAT.md §2.3). */
static cJSON *extract_json(const dump_trace *d, const char *in, const ex_sel *s, const ex_file *fs, int n,
                           const char *src_run_id)
{
    cJSON *x = cJSON_CreateObject();
    char *abs = realpath(in, NULL);
    cJSON_AddStringToObject(x, "source", abs ? abs : in);
    free(abs);
    cJSON_AddStringToObject(x, "source_run_id", src_run_id);
    const tft_manifest *m = tft_trace_manifest(d->t);
    dump_json_str_or_null(x, "source_tool_version", m && m->tool_version[0] ? m->tool_version : NULL);
    cJSON_AddStringToObject(x, "tool_version", tft_version());
    json_step_pair(x, "steps", s->steps_given, s->lo, s->hi);
    cJSON *ranks = cJSON_AddArrayToObject(x, "ranks");
    uint64_t read = 0, kept = 0;
    for (int i = 0; i < n; i++) {
        cJSON_AddItemToArray(ranks, cJSON_CreateNumber(fs[i].rank));
        read += fs[i].read, kept += fs[i].kept;
    }
    cJSON_AddNumberToObject(x, "source_ranks", d->n);
    const char *mode[] = {"shape", "health"};
    cJSON_AddItemToObject(x, "stats", s->stats < 0 ? cJSON_CreateNull() : cJSON_CreateString(mode[s->stats]));
    core_json_u64(x, "records_read", read);
    core_json_u64(x, "records_kept", kept);
    cJSON *files = cJSON_AddArrayToObject(x, "files");
    for (int i = 0; i < n; i++) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "file", fs[i].name);
        cJSON_AddNumberToObject(f, "rank", fs[i].rank);
        json_step_pair(f, "kept_steps", fs[i].first != TFT_STEP_NONE, fs[i].first, fs[i].last);
        if (fs[i].lo != s->lo)
            cJSON_AddNumberToObject(f, "narrowed_to", (double)fs[i].lo);
        core_json_u64(f, "records_kept", fs[i].kept);
        cJSON_AddStringToObject(f, "source_integrity", dump_integrity_name(fs[i].integrity));
        if (fs[i].refused)
            core_json_u64(f, "records_refused", fs[i].refused);
        cJSON_AddItemToArray(files, f);
    }
    return x;
}

int dump_extract_manifest(const dump_trace *d, int dirfd, const char *in, const ex_sel *s, const ex_file *fs,
                          int n)
{
    const tft_manifest *src = tft_trace_manifest(d->t);
    tft_manifest m = {0};
    tft_manifest_rank *ranks = calloc((size_t)n + 1, sizeof(*ranks));
    if (!ranks)
        return -ENOMEM;
    if (src) {
        m = *src; /* shallow: only the ranks and collectors are replaced */
    } else {
        const tft_file_info *fi = tft_trace_file_info(d->t, 0);
        dump_run_id_hex(fi->run_id, m.run_id);
        snprintf(m.host, sizeof(m.host), "%s", fi->host);
        m.world_size = fi->world_size;
        m.start_ns = fi->start_realtime_ns;
        m.exit_status = -1;
    }
    char src_run_id[33];
    snprintf(src_run_id, sizeof(src_run_id), "%s", m.run_id);
    for (int i = 0; i < n; i++) {
        const tft_manifest_rank *mr = manifest_rank(src, fs[i].name);
        const tft_file_info *fi = tft_trace_file_info(d->t, fs[i].idx);
        if (mr)
            ranks[i] = *mr;
        else
            ranks[i] = (tft_manifest_rank){.rank = fs[i].rank, .pid = fi->pid};
        snprintf(ranks[i].file, sizeof(ranks[i].file), "%s", fs[i].name);
        if (!src && i == 0)
            dump_run_id_hex(fi->run_id, m.run_id);
    }
    m.ranks = ranks;
    m.nranks = n;
    /* Its collector is tfdump itself, done: a reader then judges the
     * extract by its own ranks (a manifest listing no collector and fewer
     * ranks than world_size reads as a run cut short) */
    tft_manifest_collector self;
    tft_manifest_collector_self(&self);
    self.done = 1;
    m.collectors = &self;
    m.ncollectors = 1;
    m.dropped_stalled = 0; /* the rank files' dropped counts say what the extract lost */
    m.complete = src ? src->complete : 1;
    snprintf(m.tool_version, sizeof(m.tool_version), "%s", tft_version());
    char *text = tft_manifest_to_json(&m);
    free(ranks);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!root)
        return -ENOMEM;
    cJSON_AddItemToObject(root, "extract", extract_json(d, in, s, fs, n, src_run_id));
    char *out = cJSON_Print(root);
    cJSON_Delete(root);
    if (!out)
        return -ENOMEM;
    int e = tft_manifest_write_textat(dirfd, out, s->mode);
    cJSON_free(out);
    return e;
}

/* "steps 4..6" / "every step" of an `extract.steps` value. */
static void steps_text(const cJSON *st, char *buf, size_t n)
{
    const cJSON *a = cJSON_GetArrayItem(st, 0), *b = cJSON_GetArrayItem(st, 1);
    if (!cJSON_IsArray(st) || !a || !b) {
        snprintf(buf, n, "every step");
        return;
    }
    char x[24] = "", y[24] = "";
    if (cJSON_IsNumber(a))
        snprintf(x, sizeof(x), "%.0f", a->valuedouble);
    if (cJSON_IsNumber(b))
        snprintf(y, sizeof(y), "%.0f", b->valuedouble);
    snprintf(buf, n, "steps %s..%s", x, y);
}

/* The manifest.json of the trace directory at path, parsed (the caller
 * deletes it); NULL when path is no directory or it cannot be read. */
static cJSON *manifest_json(const char *path)
{
    char mp[4096];
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode) ||
        (size_t)snprintf(mp, sizeof(mp), "%s/manifest.json", path) >= sizeof(mp))
        return NULL;
    FILE *in = fopen(mp, "r");
    if (!in)
        return NULL;
    char *text = malloc(1u << 20);
    size_t len = text ? fread(text, 1, (1u << 20) - 1, in) : 0;
    fclose(in);
    cJSON *root = text ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    return root;
}

/* The number of ranks an extract's manifest says it kept, or -1 when the
 * trace at path is no extract (or its manifest cannot be read). */
int dump_extract_ranks_kept(const char *path)
{
    cJSON *root = manifest_json(path);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "extract"), "ranks");
    int n = cJSON_IsArray(r) ? cJSON_GetArraySize(r) : -1;
    cJSON_Delete(root);
    return n;
}

void dump_extract_describe(const char *path, FILE *f)
{
    cJSON *root = manifest_json(path);
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, "extract");
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(x, "source");
    if (cJSON_IsObject(x) && cJSON_IsString(src)) {
        char steps[64], ranks[128] = "";
        steps_text(cJSON_GetObjectItemCaseSensitive(x, "steps"), steps, sizeof(steps));
        size_t k = 0;
        const cJSON *r;
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(x, "ranks"))
        if (cJSON_IsNumber(r) && k < sizeof(ranks) - 16)
            k += (size_t)snprintf(ranks + k, sizeof(ranks) - k, "%s%.0f", k ? "," : "", r->valuedouble);
        const cJSON *stats = cJSON_GetObjectItemCaseSensitive(x, "stats");
        fprintf(f, "extract      %s, rank%s %s of %s", steps, strchr(ranks, ',') ? "s" : "", ranks, src->valuestring);
        if (cJSON_IsString(stats))
            fprintf(f, " (statistics reduced to %s)", stats->valuestring);
        fputc('\n', f);
    }
    cJSON_Delete(root);
}
