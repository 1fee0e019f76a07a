/*
 * manifest.c — manifest.json of a trace directory (FORMAT.md §2), read and
 * written with cJSON. Timestamps are decimal strings of nanoseconds because
 * JSON numbers lose integers above 2^53.
 */
#include "format_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MANIFEST_MAX_BYTES (64u << 20)

void tft_manifest_free(tft_manifest *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->argc; i++)
        free(m->argv[i]);
    free(m->argv);
    free(m->options_json);
    free(m->ranks);
    memset(m, 0, sizeof(*m));
}

static void copy_str(char *dst, size_t cap, const cJSON *j)
{
    if (cJSON_IsString(j) && j->valuestring)
        snprintf(dst, cap, "%s", j->valuestring);
}

static uint64_t get_ns(const cJSON *j)
{
    if (cJSON_IsString(j) && j->valuestring)
        return strtoull(j->valuestring, NULL, 10);
    if (cJSON_IsNumber(j) && j->valuedouble > 0 && j->valuedouble < 1.8e19)
        return (uint64_t)j->valuedouble;
    return 0;
}

static int get_int(const cJSON *j, int dflt)
{
    if (!cJSON_IsNumber(j) || !(j->valuedouble >= -2147483648.0 && j->valuedouble <= 2147483647.0))
        return dflt; /* also rejects NaN */
    return (int)j->valuedouble;
}

/* A rank file name must stay inside the trace directory. */
static bool safe_file_name(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n < 64 && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

static int parse_ranks(const cJSON *ranks, tft_manifest *m, char *err, size_t errlen)
{
    int n = cJSON_GetArraySize(ranks);
    if (n < 0 || n > TFT_MANIFEST_MAX_RANKS) {
        snprintf(err, errlen, "too many ranks (%d)", n);
        return -EPROTO;
    }
    m->ranks = calloc((size_t)n + 1, sizeof(*m->ranks));
    if (!m->ranks)
        return -ENOMEM;
    const cJSON *it;
    cJSON_ArrayForEach(it, ranks)
    {
        tft_manifest_rank *r = &m->ranks[m->nranks];
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(it, "file");
        if (!cJSON_IsObject(it) || !cJSON_IsString(file) || !safe_file_name(file->valuestring)) {
            snprintf(err, errlen, "ranks[%d]: missing or unsafe \"file\"", m->nranks);
            return -EPROTO;
        }
        snprintf(r->file, sizeof(r->file), "%s", file->valuestring);
        r->rank = get_int(cJSON_GetObjectItemCaseSensitive(it, "rank"), m->nranks);
        r->pid = get_int(cJSON_GetObjectItemCaseSensitive(it, "pid"), 0);
        const cJSON *ex = cJSON_GetObjectItemCaseSensitive(it, "exit");
        if (cJSON_IsObject(ex)) {
            r->exited = 1;
            r->exit_code = get_int(cJSON_GetObjectItemCaseSensitive(ex, "code"), 0);
            r->signal = get_int(cJSON_GetObjectItemCaseSensitive(ex, "signal"), 0);
        }
        m->nranks++;
    }
    return 0;
}

static int parse_command(const cJSON *cmd, tft_manifest *m)
{
    int n = cJSON_IsArray(cmd) ? cJSON_GetArraySize(cmd) : 0;
    m->argv = calloc((size_t)n + 1, sizeof(char *));
    if (!m->argv)
        return -ENOMEM;
    if (!cJSON_IsArray(cmd)) /* an object would be walked member by member */
        return 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, cmd)
    {
        if (!cJSON_IsString(it))
            continue;
        if (!(m->argv[m->argc] = strdup(it->valuestring)))
            return -ENOMEM;
        m->argc++;
    }
    return 0;
}

static int parse_root(const cJSON *root, tft_manifest *m, char *err, size_t errlen)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "format_version");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "tftrace") != 0 || !cJSON_IsString(ver) ||
        sscanf(ver->valuestring, "%d.%d", &m->major, &m->minor) != 2) {
        snprintf(err, errlen, "not a tftrace manifest (\"format\"/\"format_version\" missing)");
        return -EPROTO;
    }
    if (m->major > TFT_FORMAT_MAJOR) {
        snprintf(err, errlen, "written by trace format %d.%d; this build reads %d.x — upgrade tftrace",
                 m->major, m->minor, TFT_FORMAT_MAJOR);
        return -EPROTONOSUPPORT;
    }
    copy_str(m->run_id, sizeof(m->run_id), cJSON_GetObjectItemCaseSensitive(root, "run_id"));
    copy_str(m->tool_version, sizeof(m->tool_version), cJSON_GetObjectItemCaseSensitive(root, "tool_version"));
    copy_str(m->host, sizeof(m->host), cJSON_GetObjectItemCaseSensitive(root, "host"));
    copy_str(m->cwd, sizeof(m->cwd), cJSON_GetObjectItemCaseSensitive(root, "cwd"));
    m->start_ns = get_ns(cJSON_GetObjectItemCaseSensitive(root, "start_ns"));
    m->end_ns = get_ns(cJSON_GetObjectItemCaseSensitive(root, "end_ns"));
    m->world_size = get_int(cJSON_GetObjectItemCaseSensitive(root, "world_size"), -1);
    m->complete = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "complete"));
    m->exit_status = get_int(cJSON_GetObjectItemCaseSensitive(root, "exit_status"), -1);
    const cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "options");
    if (cJSON_IsObject(opt) && !(m->options_json = cJSON_PrintUnformatted(opt)))
        return -ENOMEM;
    int e = parse_command(cJSON_GetObjectItemCaseSensitive(root, "command"), m);
    if (e)
        return e;
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(root, "ranks");
    if (!cJSON_IsArray(ranks)) {
        snprintf(err, errlen, "\"ranks\" missing");
        return -EPROTO;
    }
    return parse_ranks(ranks, m, err, errlen);
}

int tft_manifest_parse(const char *text, size_t len, tft_manifest *m, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || !errlen) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    err[0] = '\0';
    memset(m, 0, sizeof(*m));
    m->exit_status = -1;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root || !cJSON_IsObject(root)) {
        size_t at = (root || !end) ? 0 : (size_t)(end - text);
        snprintf(err, errlen, "invalid JSON near byte %zu", at);
        cJSON_Delete(root);
        return -EPROTO;
    }
    int e = parse_root(root, m, err, errlen);
    cJSON_Delete(root);
    if (e) {
        if (e == -ENOMEM)
            snprintf(err, errlen, "out of memory");
        tft_manifest_free(m);
        m->exit_status = -1;
    }
    return e;
}

int tft_manifest_read(const char *path, tft_manifest *m, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || !errlen) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    memset(m, 0, sizeof(*m));
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "cannot open: %s", strerror(e));
        return -e;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int e = 0;
    for (;;) {
        if (len + 65536 > cap) {
            cap = cap ? cap * 2 : 65536;
            char *nb = cap > MANIFEST_MAX_BYTES ? NULL : realloc(buf, cap);
            if (!nb) {
                snprintf(err, errlen, "manifest too large or out of memory");
                e = -EFBIG;
                goto out;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        snprintf(err, errlen, "read error");
        e = -EIO;
        goto out;
    }
    e = tft_manifest_parse(buf, len, m, err, errlen);
out:
    free(buf);
    fclose(f);
    return e;
}

static void add_ns(cJSON *o, const char *key, uint64_t ns)
{
    char b[32];
    snprintf(b, sizeof(b), "%" PRIu64, ns);
    cJSON_AddStringToObject(o, key, b);
    if (ns) {
        char iso[64];
        time_t t = (time_t)(ns / 1000000000u);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%SZ", &tm);
        char k[40];
        snprintf(k, sizeof(k), "%.*s_time", (int)(strlen(key) - 3), key);
        cJSON_AddStringToObject(o, k, iso);
    }
}

static cJSON *build(const tft_manifest *m)
{
    cJSON *o = cJSON_CreateObject();
    char ver[32];
    snprintf(ver, sizeof(ver), "%d.%d", TFT_FORMAT_MAJOR, TFT_FORMAT_MINOR);
    cJSON_AddStringToObject(o, "format", "tftrace");
    cJSON_AddStringToObject(o, "format_version", ver);
    cJSON_AddStringToObject(o, "run_id", m->run_id);
    cJSON_AddStringToObject(o, "tool_version", m->tool_version[0] ? m->tool_version : tft_format_version());
    cJSON_AddStringToObject(o, "host", m->host);
    cJSON_AddStringToObject(o, "cwd", m->cwd);
    cJSON *cmd = cJSON_AddArrayToObject(o, "command");
    for (int i = 0; i < m->argc && cmd; i++)
        cJSON_AddItemToArray(cmd, cJSON_CreateString(m->argv[i] ? m->argv[i] : ""));
    add_ns(o, "start_ns", m->start_ns);
    add_ns(o, "end_ns", m->end_ns);
    cJSON_AddNumberToObject(o, "world_size", m->world_size);
    cJSON_AddBoolToObject(o, "complete", m->complete);
    if (m->exit_status >= 0)
        cJSON_AddNumberToObject(o, "exit_status", m->exit_status);
    else
        cJSON_AddNullToObject(o, "exit_status");
    cJSON *opt = m->options_json ? cJSON_Parse(m->options_json) : NULL;
    cJSON_AddItemToObject(o, "options", opt ? opt : cJSON_CreateObject());
    cJSON *ranks = cJSON_AddArrayToObject(o, "ranks");
    for (int i = 0; i < m->nranks && ranks; i++) {
        const tft_manifest_rank *r = &m->ranks[i];
        cJSON *jr = cJSON_CreateObject();
        cJSON_AddNumberToObject(jr, "rank", r->rank);
        cJSON_AddStringToObject(jr, "file", r->file);
        cJSON_AddNumberToObject(jr, "pid", r->pid);
        if (r->exited) {
            cJSON *ex = cJSON_AddObjectToObject(jr, "exit");
            if (r->signal)
                cJSON_AddNumberToObject(ex, "signal", r->signal);
            else
                cJSON_AddNumberToObject(ex, "code", r->exit_code);
        } else {
            cJSON_AddNullToObject(jr, "exit");
        }
        cJSON_AddItemToArray(ranks, jr);
    }
    return o;
}

char *tft_manifest_to_json(const tft_manifest *m)
{
    cJSON *o = build(m);
    char *s = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    return s;
}

int tft_manifest_write(const char *dir, const tft_manifest *m)
{
    char *json = tft_manifest_to_json(m);
    if (!json)
        return -ENOMEM;
    char tmp[4096], dst[4096];
    snprintf(dst, sizeof(dst), "%s/manifest.json", dir);
    snprintf(tmp, sizeof(tmp), "%s/.manifest.json.%d.tmp", dir, (int)getpid());
    int e = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        e = -errno;
        goto out;
    }
    size_t n = strlen(json);
    e = fmt_write_full(fd, json, n);
    if (!e)
        e = fmt_write_full(fd, "\n", 1);
    if (!e && fsync(fd) < 0 && errno != EINVAL)
        e = -errno;
    if (close(fd) < 0 && !e)
        e = -errno;
    if (!e && rename(tmp, dst) < 0)
        e = -errno;
    if (e)
        unlink(tmp);
out:
    cJSON_free(json);
    return e;
}
