/*
 * dump_procs.c — tfdump's view of the process table(s) a BPF-enabled
 * tftrace writes into the trace directory (processes-PID.json, FORMAT.md
 * §2.5): how many processes the job had, and each that did not end with
 * status 0 — exit code, signal, the OOM killer, no recorder in it. A trace
 * without the file shows nothing; a damaged file is said, never fatal.
 */
#include "dump_internal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { TABLE_MAX = 16 << 20 };

/* The parsed processes-*.json of dir, NULL when none (or dir is a file). */
static cJSON *read_table(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC); /* a FIFO never blocks */
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > TABLE_MAX) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    ssize_t n = buf ? read(fd, buf, (size_t)st.st_size) : -1;
    close(fd);
    cJSON *j = NULL;
    if (n >= 0) {
        buf[n] = 0;
        j = cJSON_Parse(buf);
    }
    free(buf);
    if (!j || !cJSON_IsArray(cJSON_GetObjectItem(j, "processes"))) {
        dump_err("%s: not a process table (written by tftrace; FORMAT.md §2.5): ignored", path);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* Every process of every table of dir, appended to out (an array). */
static int collect(const char *dir, cJSON *out)
{
    DIR *d = opendir(dir);
    int tables = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "processes-", 10) || len < 15 || strcmp(e->d_name + len - 5, ".json"))
            continue;
        cJSON *j = read_table(dir, e->d_name);
        if (!j)
            continue;
        tables++;
        cJSON *p, *a = cJSON_GetObjectItem(j, "processes");
        cJSON_ArrayForEach(p, a)
            if (cJSON_IsObject(p))
                cJSON_AddItemToArray(out, cJSON_Duplicate(p, 1));
        cJSON_Delete(j);
    }
    closedir(d);
    return tables;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

void dump_procs_text(const char *dir)
{
    cJSON *all = cJSON_CreateArray();
    if (!all || !collect(dir, all)) {
        cJSON_Delete(all);
        return;
    }
    int n = cJSON_GetArraySize(all), ok = 0;
    cJSON *p;
    cJSON_ArrayForEach(p, all)
        ok += !strcmp(str(p, "end"), "exit 0");
    printf("processes    %d in the job (exec/exit/OOM from the kernel), %d ended with status 0\n", n, ok);
    cJSON_ArrayForEach(p, all) {
        if (!strcmp(str(p, "end"), "exit 0"))
            continue;
        const cJSON *rank = cJSON_GetObjectItem(p, "rank");
        const char *exe = str(p, "exe")[0] ? str(p, "exe") : str(p, "comm");
        const cJSON *pid = cJSON_GetObjectItem(p, "pid");   /* the file is input: never trusted */
        long long pv = cJSON_IsNumber(pid) && pid->valuedouble >= 0 && pid->valuedouble < 1e12
                           ? (long long)pid->valuedouble : -1;
        printf("             pid %lld %s: %s%s\n", pv, exe, str(p, "end"), cJSON_IsNumber(rank) ? "" : " (no recorder in it)");
    }
    cJSON_Delete(all);
}

void dump_procs_json(cJSON *j, const char *dir)
{
    cJSON *all = cJSON_CreateArray();
    if (!all)
        return;
    if (!collect(dir, all)) {
        cJSON_Delete(all);
        cJSON_AddNullToObject(j, "processes");
        return;
    }
    cJSON_AddItemToObject(j, "processes", all);
}
