/*
 * manifest.c — manifest.json of a trace directory (FORMAT.md §2), read and
 * written with cJSON. Timestamps are decimal strings of nanoseconds because
 * JSON numbers lose integers above 2^53.
 */
#include "format_internal.h"
#include "tft_procstat.h"
#include "tft_writer_internal.h" /* tft_manifest_write_textat */

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
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
    free(m->incomplete);
    free(m->redacted);
    free(m->collectors);
    memset(m, 0, sizeof(*m));
}

static void copy_str(char *dst, size_t cap, const cJSON *j)
{
    if (cJSON_IsString(j) && j->valuestring)
        snprintf(dst, cap, "%s", j->valuestring);
}

/* A decimal count: digits only, below 2^64 (a sign or garbage reads as 0). */
static uint64_t parse_u64(const char *s)
{
    uint64_t v = 0;
    if (!s || !*s)
        return 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return 0;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    return v;
}

/* Leading decimal digits of s (stops at the first other character). */
static uint64_t parse_u64_prefix(const char *s)
{
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++)
        if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return 0;
        else
            v = v * 10 + (uint64_t)(*s - '0');
    return v;
}

static uint64_t get_ns(const cJSON *j)
{
    if (cJSON_IsString(j) && j->valuestring)
        return parse_u64(j->valuestring);
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

/* A rank's "clock": {"offset_ns": "-123", "error_ns": "45", "ref_rank": 0}
 * (decimal strings: JSON numbers lose precision above 2^53). */
static void parse_clock(const cJSON *c, tft_manifest_rank *r)
{
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(c, "offset_ns");
    if (!cJSON_IsObject(c) || !cJSON_IsString(off) || !off->valuestring)
        return;
    const char *v = off->valuestring;
    int neg = v[0] == '-';
    uint64_t mag = parse_u64(v + neg);
    if (mag > (uint64_t)INT64_MAX)
        return;
    r->clock_offset_ns = neg ? -(int64_t)mag : (int64_t)mag;
    r->clock_error_ns = get_ns(cJSON_GetObjectItemCaseSensitive(c, "error_ns"));
    r->clock_ref = get_int(cJSON_GetObjectItemCaseSensitive(c, "ref_rank"), 0);
    r->clock_known = 1;
    const cJSON *an = cJSON_GetObjectItemCaseSensitive(c, "real_minus_mono_ns"); /* since 1.6 */
    if (cJSON_IsString(an) && an->valuestring) {
        neg = an->valuestring[0] == '-';
        mag = parse_u64(an->valuestring + neg);
        if (mag <= (uint64_t)INT64_MAX) {
            r->clock_anchor_ns = neg ? -(int64_t)mag : (int64_t)mag;
            r->clock_anchored = 1;
        }
    }
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
        copy_str(r->host, sizeof(r->host), cJSON_GetObjectItemCaseSensitive(it, "host"));
        parse_clock(cJSON_GetObjectItemCaseSensitive(it, "clock"), r);
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

/* One number of a version: 1 to 5 decimal digits, at most 65535 (the rank
 * file header holds u16 versions). Returns the character after it, NULL
 * when there is no such number. */
static const char *version_part(const char *s, int *out)
{
    int v = 0, n = 0;
    for (; *s >= '0' && *s <= '9'; s++, n++) {
        v = v * 10 + (*s - '0');
        if (v > 65535)
            return NULL;
    }
    if (n == 0)
        return NULL;
    *out = v;
    return s;
}

/* "MAJOR.MINOR", nothing else: no sign, no spaces, no third part. */
static bool parse_version(const char *s, int *major, int *minor)
{
    const char *p = version_part(s, major);
    if (!p || *p != '.')
        return false;
    p = version_part(p + 1, minor);
    return p && !*p;
}

/* "redacted": indices into the command whose values were replaced. */
static int parse_redacted(const cJSON *a, tft_manifest *m, char *err, size_t errlen)
{
    if (!a)
        return 0;
    int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
    if (n < 0 || n > TFT_MANIFEST_MAX_RANKS) {
        snprintf(err, errlen, "\"redacted\" is not a list of argument indices");
        return -EPROTO;
    }
    m->redacted = calloc((size_t)n + 1, sizeof(*m->redacted));
    if (!m->redacted)
        return -ENOMEM;
    const cJSON *it;
    cJSON_ArrayForEach(it, a)
    {
        int i = get_int(it, -1);
        if (i < 0 || (double)i != it->valuedouble) {
            snprintf(err, errlen, "\"redacted\"[%d] is not an argument index", m->nredacted);
            return -EPROTO;
        }
        m->redacted[m->nredacted++] = i;
    }
    return 0;
}

static int parse_collectors(const cJSON *a, tft_manifest *m)
{
    int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
    if (n <= 0)
        return 0;
    if (n > TFT_MANIFEST_MAX_RANKS)
        n = TFT_MANIFEST_MAX_RANKS;
    m->collectors = calloc((size_t)n, sizeof(*m->collectors));
    if (!m->collectors)
        return -ENOMEM;
    const cJSON *it;
    cJSON_ArrayForEach(it, a)
    {
        if (m->ncollectors == n)
            break;
        if (!cJSON_IsObject(it))
            continue;
        tft_manifest_collector *c = &m->collectors[m->ncollectors++];
        c->pid = get_int(cJSON_GetObjectItemCaseSensitive(it, "pid"), 0);
        copy_str(c->host, sizeof(c->host), cJSON_GetObjectItemCaseSensitive(it, "host"));
        copy_str(c->boot_id, sizeof(c->boot_id), cJSON_GetObjectItemCaseSensitive(it, "boot_id"));
        c->start_ticks = get_ns(cJSON_GetObjectItemCaseSensitive(it, "start_ticks"));
        c->done = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "done"));
    }
    return 0;
}

static int parse_root(const cJSON *root, tft_manifest *m, char *err, size_t errlen)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "format_version");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "tftrace") != 0 || !cJSON_IsString(ver)) {
        snprintf(err, errlen, "not a tftrace manifest (\"format\"/\"format_version\" missing)");
        return -EPROTO;
    }
    if (!parse_version(ver->valuestring, &m->major, &m->minor)) {
        snprintf(err, errlen, "\"format_version\" \"%.40s\" is not MAJOR.MINOR (two numbers up to 65535)",
                 ver->valuestring);
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
    /* -1 = unknown; 0 (what unfinished manifests said before) and other
     * values below 1 mean the same */
    m->world_size = get_int(cJSON_GetObjectItemCaseSensitive(root, "world_size"), -1);
    if (m->world_size < 1)
        m->world_size = -1;
    m->complete = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "complete"));
    m->exit_status = get_int(cJSON_GetObjectItemCaseSensitive(root, "exit_status"), -1);
    const cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "options");
    if (cJSON_IsObject(opt) && !(m->options_json = cJSON_PrintUnformatted(opt)))
        return -ENOMEM;
    int e = parse_command(cJSON_GetObjectItemCaseSensitive(root, "command"), m);
    if (e)
        return e;
    const cJSON *inc = cJSON_GetObjectItemCaseSensitive(root, "incomplete");
    if (cJSON_IsString(inc) && !(m->incomplete = strdup(inc->valuestring)))
        return -ENOMEM;
    if ((e = parse_redacted(cJSON_GetObjectItemCaseSensitive(root, "redacted"), m, err, errlen)) ||
        (e = parse_collectors(cJSON_GetObjectItemCaseSensitive(root, "collectors"), m)))
        return e;
    m->dropped_stalled = get_ns(cJSON_GetObjectItemCaseSensitive(root, "dropped_stalled"));
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(root, "ranks");
    if (!cJSON_IsArray(ranks)) {
        snprintf(err, errlen, "\"ranks\" missing");
        return -EPROTO;
    }
    return parse_ranks(ranks, m, err, errlen);
}

void fmt_manifest_start(tft_manifest *m, char **err, size_t *errlen, char *scratch, size_t n)
{
    if (!*err || !*errlen) {
        *err = scratch;
        *errlen = n;
    }
    (*err)[0] = '\0';
    memset(m, 0, sizeof(*m));
    m->exit_status = -1;
}

int tft_manifest_parse(const char *text, size_t len, tft_manifest *m, char *err, size_t errlen)
{
    char dummy[8];
    fmt_manifest_start(m, &err, &errlen, dummy, sizeof(dummy));
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

/* path's bytes into a malloc'ed buffer: a regular file (not a link, FIFO,
 * socket or device: the open never blocks nor follows a planted link;
 * -ESPIPE otherwise) of at most MANIFEST_MAX_BYTES, owned by owner unless
 * that is (uid_t)-1 (-EPERM otherwise). */
static int read_small_file(const char *path, uid_t owner, char **out, size_t *outlen, char *err, size_t errlen)
{
    *out = NULL;
    *outlen = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP) {
            snprintf(err, errlen, "not a regular file (a symbolic link), not read");
            return -ESPIPE;
        }
        snprintf(err, errlen, "cannot open: %s", strerror(e));
        return -e;
    }
    struct stat sb;
    int e = 0;
    if (fstat(fd, &sb) < 0) {
        e = -errno;
        snprintf(err, errlen, "cannot stat: %s", strerror(-e));
    }
    else if (!S_ISREG(sb.st_mode)) {
        e = -ESPIPE;
        snprintf(err, errlen, "not a regular file (%s), not read",
                 S_ISFIFO(sb.st_mode) ? "a FIFO" : S_ISDIR(sb.st_mode) ? "a directory" : S_ISSOCK(sb.st_mode) ? "a socket" : "a device");
    }
    else if (owner != (uid_t)-1 && sb.st_uid != owner) {
        e = -EPERM;
        snprintf(err, errlen, "owned by uid %u, not %u: not read", (unsigned)sb.st_uid, (unsigned)owner);
    }
    else if ((uint64_t)sb.st_size > MANIFEST_MAX_BYTES) {
        e = -EFBIG;
        snprintf(err, errlen, "manifest too large (%lld bytes)", (long long)sb.st_size);
    }
    char *buf = NULL;
    size_t len = 0, cap = e ? 0 : (size_t)sb.st_size + 1;
    if (!e && !(buf = malloc(cap))) {
        e = -ENOMEM;
        snprintf(err, errlen, "out of memory");
    }
    while (!e && len < cap) {   /* the size can change under a writer: read to the end, bounded */
        ssize_t got = read(fd, buf + len, cap - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            e = -EIO;
            snprintf(err, errlen, "read error: %s", strerror(errno));
            break;
        }
        if (got == 0)
            break;
        len += (size_t)got;
        if (len == cap) {
            char *nb = cap * 2 > MANIFEST_MAX_BYTES + 1 ? NULL : realloc(buf, cap * 2);
            if (!nb) {
                e = -EFBIG;
                snprintf(err, errlen, "manifest too large or out of memory");
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    close(fd);
    if (e) {
        free(buf);
        return e;
    }
    *out = buf;
    *outlen = len;
    return 0;
}

int tft_manifest_read_owned(const char *path, uid_t owner, tft_manifest *m, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || !errlen) {
        err = dummy;
        errlen = sizeof(dummy);
    }
    memset(m, 0, sizeof(*m));
    char *buf;
    size_t len;
    int e = read_small_file(path, owner, &buf, &len, err, errlen);
    if (e)
        return e;
    e = tft_manifest_parse(buf, len, m, err, errlen);
    free(buf);
    return e;
}

int tft_manifest_read(const char *path, tft_manifest *m, char *err, size_t errlen)
{
    return tft_manifest_read_owned(path, (uid_t)-1, m, err, errlen);
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

/* One entry of the manifest's "collectors" (FORMAT.md §2.3). */
static cJSON *collector_json(const tft_manifest_collector *c)
{
    cJSON *jc = cJSON_CreateObject();
    char b[24];
    cJSON_AddNumberToObject(jc, "pid", c->pid);
    cJSON_AddStringToObject(jc, "host", c->host);
    cJSON_AddStringToObject(jc, "boot_id", c->boot_id);
    snprintf(b, sizeof(b), "%" PRIu64, c->start_ticks);
    cJSON_AddStringToObject(jc, "start_ticks", b);
    cJSON_AddBoolToObject(jc, "done", c->done);
    return jc;
}

/* One entry of the manifest's "ranks": file, pid, host, the clock
 * estimate when known, the exit. */
static cJSON *rank_json(const tft_manifest_rank *r)
{
    cJSON *jr = cJSON_CreateObject();
    cJSON_AddNumberToObject(jr, "rank", r->rank);
    cJSON_AddStringToObject(jr, "file", r->file);
    cJSON_AddNumberToObject(jr, "pid", r->pid);
    if (r->host[0])
        cJSON_AddStringToObject(jr, "host", r->host);
    if (r->clock_known) {
        char b[32];
        cJSON *jc = cJSON_AddObjectToObject(jr, "clock");
        snprintf(b, sizeof(b), "%lld", (long long)r->clock_offset_ns);
        cJSON_AddStringToObject(jc, "offset_ns", b);
        snprintf(b, sizeof(b), "%llu", (unsigned long long)r->clock_error_ns);
        cJSON_AddStringToObject(jc, "error_ns", b);
        cJSON_AddNumberToObject(jc, "ref_rank", r->clock_ref);
        if (r->clock_anchored) {
            snprintf(b, sizeof(b), "%lld", (long long)r->clock_anchor_ns);
            cJSON_AddStringToObject(jc, "real_minus_mono_ns", b);
        }
    }
    if (r->exited) {
        cJSON *ex = cJSON_AddObjectToObject(jr, "exit");
        if (r->signal)
            cJSON_AddNumberToObject(ex, "signal", r->signal);
        else
            cJSON_AddNumberToObject(ex, "code", r->exit_code);
    } else {
        cJSON_AddNullToObject(jr, "exit");
    }
    return jr;
}

static cJSON *build(const tft_manifest *m)
{
    cJSON *o = cJSON_CreateObject();
    char ver[32];
    snprintf(ver, sizeof(ver), "%d.%d", TFT_FORMAT_MAJOR, TFT_FORMAT_MINOR);
    cJSON_AddStringToObject(o, "format", "tftrace");
    cJSON_AddStringToObject(o, "format_version", ver);
    cJSON_AddStringToObject(o, "run_id", m->run_id);
    cJSON_AddStringToObject(o, "tool_version", m->tool_version[0] ? m->tool_version : tft_version());
    cJSON_AddStringToObject(o, "host", m->host);
    cJSON_AddStringToObject(o, "cwd", m->cwd);
    cJSON *cmd = cJSON_AddArrayToObject(o, "command");
    for (int i = 0; i < m->argc && cmd; i++)
        cJSON_AddItemToArray(cmd, cJSON_CreateString(m->argv[i] ? m->argv[i] : ""));
    add_ns(o, "start_ns", m->start_ns);
    add_ns(o, "end_ns", m->end_ns);
    cJSON_AddNumberToObject(o, "world_size", m->world_size > 0 ? m->world_size : -1);
    cJSON_AddBoolToObject(o, "complete", m->complete);
    if (m->incomplete)
        cJSON_AddStringToObject(o, "incomplete", m->incomplete);
    if (m->nredacted > 0) {
        cJSON *red = cJSON_AddArrayToObject(o, "redacted");
        for (int i = 0; red && i < m->nredacted; i++)
            cJSON_AddItemToArray(red, cJSON_CreateNumber(m->redacted[i]));
    }
    if (m->dropped_stalled)
        cJSON_AddNumberToObject(o, "dropped_stalled", (double)m->dropped_stalled);
    if (m->ncollectors > 0) {
        cJSON *cs = cJSON_AddArrayToObject(o, "collectors");
        for (int i = 0; cs && i < m->ncollectors; i++)
            cJSON_AddItemToArray(cs, collector_json(&m->collectors[i]));
    }
    if (m->exit_status >= 0)
        cJSON_AddNumberToObject(o, "exit_status", m->exit_status);
    else
        cJSON_AddNullToObject(o, "exit_status");
    cJSON *opt = m->options_json ? cJSON_Parse(m->options_json) : NULL;
    cJSON_AddItemToObject(o, "options", opt ? opt : cJSON_CreateObject());
    cJSON *ranks = cJSON_AddArrayToObject(o, "ranks");
    for (int i = 0; i < m->nranks && ranks; i++)
        cJSON_AddItemToArray(ranks, rank_json(&m->ranks[i]));
    return o;
}

char *tft_manifest_to_json(const tft_manifest *m)
{
    cJSON *o = build(m);
    char *s = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    return s;
}

/* Field 22 of /proc/PID/stat: the start time in clock ticks after boot
 * (0 when unreadable). The name field may hold spaces and ')'. */
static uint64_t proc_start_ticks(int pid)
{
    char buf[1024];
    const char *p = tft_procstat_fields(pid, buf, sizeof(buf));
    if (!p)
        return 0;
    for (int field = 3; field < 22 && p; field++) /* p: the space before field `field` */
        p = strchr(p + 1, ' ');
    return p ? parse_u64_prefix(p + 1) : 0;
}

static void boot_id(char *out, size_t n)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f)
        return;
    if (!fgets(out, (int)n, f))
        out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
}

void tft_manifest_collector_self(tft_manifest_collector *c)
{
    memset(c, 0, sizeof(*c));
    c->pid = (int32_t)getpid();
    gethostname(c->host, sizeof(c->host) - 1);
    boot_id(c->boot_id, sizeof(c->boot_id));
    c->start_ticks = proc_start_ticks(c->pid);
}

int tft_manifest_collector_state(const tft_manifest_collector *c)
{
    char host[64] = "", boot[40];
    gethostname(host, sizeof(host) - 1);
    boot_id(boot, sizeof(boot));
    if (!c->boot_id[0] || !boot[0] || strcmp(c->host, host) != 0 || c->pid <= 0)
        return TFT_COLLECTOR_UNKNOWN;
    if (strcmp(c->boot_id, boot) != 0)
        return TFT_COLLECTOR_GONE; /* rebooted since */
    uint64_t st = proc_start_ticks(c->pid);
    if (!st || (c->start_ticks && st != c->start_ticks))
        return TFT_COLLECTOR_GONE; /* no such process, or the pid was reused */
    return TFT_COLLECTOR_RUNNING;
}

static int write_named(int dirfd, const char *json, unsigned mode, const char *name);

int tft_manifest_write_textat(int dirfd, const char *json, unsigned mode)
{
    return write_named(dirfd, json, mode, "manifest.json");
}

int tft_manifest_write_namedat(int dirfd, const tft_manifest *m, unsigned mode, const char *name)
{
    if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
        return -EINVAL;
    char *json = tft_manifest_to_json(m);
    if (!json)
        return -ENOMEM;
    int e = write_named(dirfd, json, mode, name);
    cJSON_free(json);
    return e;
}

static int write_named(int dirfd, const char *json, unsigned mode, const char *name)
{
    char tmp[96];
    int e = 0, fd = -1;
    /* a name of our own: EEXIST (a planted file or link, or a leftover of a
     * killed writer that had our pid) picks another */
    for (int k = 0; k < 16 && fd < 0; k++) {
        unsigned rnd = 0;
        if (k && getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
            rnd = (unsigned)k * 2654435761u;
        snprintf(tmp, sizeof(tmp), ".manifest.json.%d.%08x.tmp", (int)getpid(), rnd);
        fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode ? mode & 0777 : 0644);
        if (fd < 0 && errno != EEXIST && errno != ELOOP)
            return -errno;
    }
    if (fd < 0)
        return -EEXIST;
    if (mode && fchmod(fd, mode & 0777) < 0)
        e = -errno;
    size_t n = strlen(json);
    if (!e)
        e = fmt_write_full(fd, json, n);
    if (!e && (n == 0 || json[n - 1] != '\n'))
        e = fmt_write_full(fd, "\n", 1);
    if (!e && fsync(fd) < 0 && errno != EINVAL)
        e = -errno;
    if (close(fd) < 0 && !e)
        e = -errno;
    if (!e && renameat(dirfd, tmp, dirfd, name) < 0)
        e = -errno;
    if (e)
        unlinkat(dirfd, tmp, 0);
    return e;
}

int tft_manifest_writeat(int dirfd, const tft_manifest *m, unsigned mode)
{
    char *json = tft_manifest_to_json(m);
    if (!json)
        return -ENOMEM;
    int e = tft_manifest_write_textat(dirfd, json, mode);
    cJSON_free(json);
    return e;
}

int tft_manifest_write(const char *dir, const tft_manifest *m)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    int e = tft_manifest_writeat(dfd, m, 0);
    close(dfd);
    return e;
}
