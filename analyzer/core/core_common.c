/*
 * core_common.c — what tfdiff and tfdump share beyond the analyses
 * themselves (core_common.h).
 */
#include "core_common.h"
#include "core.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

bool core_rank_file_name(const char *name)
{
    size_t len = strlen(name);
    return !strncmp(name, "rank-", 5) && len >= 9 && !strcmp(name + len - 4, ".tft");
}

bool core_trace_unrecorded(const char *path, tft_manifest *m)
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
        any = core_rank_file_name(de->d_name);
    closedir(dp);
    char mp[4096];
    if (any || snprintf(mp, sizeof(mp), "%s/manifest.json", path) >= (int)sizeof(mp))
        return false;
    return tft_manifest_read(mp, m, NULL, 0) == 0;
}

const char *core_step_text(int64_t step, char *buf, size_t n)
{
    if (step == TFT_STEP_NONE)
        snprintf(buf, n, "no step");
    else if (CORE_IS_STEPLESS(step))
        snprintf(buf, n, "no step (window %lld)", (long long)(step - CORE_STEPLESS_BASE));
    else
        snprintf(buf, n, "step %lld", (long long)step);
    return buf;
}

void core_raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

const char *core_memory_limit(char *buf, size_t n)
{
    struct rlimit rl;
    snprintf(buf, n, "the machine is out of memory");
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        snprintf(buf, n, "the address space is limited to %llu MiB (ulimit -v)",
                 (unsigned long long)(rl.rlim_cur >> 20));
    return buf;
}

const char *core_rec_string(const tft_reader *r, uint64_t id, char buf[18])
{
    if (id == 0)
        return NULL;
    const char *s = tft_reader_string(r, id);
    if (s)
        return s;
    snprintf(buf, 18, "#%016" PRIx64, id);
    return buf;
}

bool core_manifest_duration(const tft_manifest *m, uint64_t *ns)
{
    if (!m || !m->complete || !m->start_ns || m->end_ns < m->start_ns)
        return false;
    *ns = m->end_ns - m->start_ns;
    return true;
}

bool core_manifest_exit(const tft_manifest *m, int *code, int *sig)
{
    if (!m || m->exit_status < 0)
        return false;
    *sig = m->exit_status > 128 && m->exit_status < 128 + 65 ? m->exit_status - 128 : 0;
    *code = *sig ? 0 : m->exit_status;
    return true;
}

bool core_manifest_rank_exit(const tft_manifest *m, int rank, int *code, int *sig)
{
    for (int k = 0; m && k < m->nranks; k++) {
        if (m->ranks[k].rank != rank || !m->ranks[k].exited)
            continue;
        *code = m->ranks[k].exit_code;
        *sig = m->ranks[k].signal;
        return true;
    }
    return false;
}

bool core_mask_inf(const char *name, const tft_stats *st)
{
    if (!name || !st->ninf || st->nan || st->pinf)
        return false;
    static const char *const ops[] = {"masked_fill", "aten.where", "aten.full", "aten.fill", "aten.triu",
                                      "aten.tril", "mask"};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (strstr(name, ops[i]))
            return true;
    return false;
}

bool core_trace_cut(const tft_trace *t, char *why, size_t n)
{
    const tft_manifest *m = tft_trace_manifest(t);
    if (!m)
        return false;
    if (m->incomplete && m->incomplete[0]) {
        snprintf(why, n, "records were lost to write errors (%.300s)", m->incomplete);
        return true;
    }
    for (int i = 0; i < m->ncollectors; i++)
        if (!m->collectors[i].done && tft_manifest_collector_state(&m->collectors[i]) == TFT_COLLECTOR_GONE) {
            snprintf(why, n, "its collector died (tftrace pid %d on %s) before finishing the trace",
                     m->collectors[i].pid, m->collectors[i].host);
            return true;
        }
    return false;
}
