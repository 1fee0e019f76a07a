/*
 * manifest_merge.c — read-modify-write of a trace directory's manifest under
 * flock, shared by the launcher and the in-process writer.
 */
#include "collector.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

static void fill_from_self(tft_manifest *m)
{
    if (!m->cwd[0] && !getcwd(m->cwd, sizeof(m->cwd)))
        m->cwd[0] = '\0';
    if (!m->host[0])
        gethostname(m->host, sizeof(m->host) - 1);
    if (!m->start_ns) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        m->start_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
    if (m->argc == 0) { /* the command line from /proc: NUL-separated */
        FILE *f = fopen("/proc/self/cmdline", "rb");
        char buf[8192];
        size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = '\0';
        int argc = 0;
        for (size_t i = 0; i < n; i++)
            argc += buf[i] == '\0';
        m->argv = calloc((size_t)argc + 1, sizeof(char *));
        for (size_t i = 0; m->argv && i < n; i += strlen(buf + i) + 1)
            m->argv[m->argc++] = strdup(buf + i);
    }
}

static int add_ranks(tft_manifest *m, const tft_manifest_rank *ranks, int n)
{
    tft_manifest_rank *nr = realloc(m->ranks, (size_t)(m->nranks + n + 1) * sizeof(*nr));
    if (!nr)
        return -ENOMEM;
    m->ranks = nr;
    for (int k = 0; k < n; k++) {
        int j = 0;
        while (j < m->nranks && m->ranks[j].rank != ranks[k].rank)
            j++;
        m->ranks[j] = ranks[k];
        if (j == m->nranks)
            m->nranks++;
    }
    return 0;
}

static void set_run(tft_manifest *m, const manifest_run *run)
{
    if (!run)
        return;
    if (run->run_id && !m->run_id[0])
        for (int i = 0; i < 16; i++)
            snprintf(m->run_id + 2 * i, 3, "%02x", run->run_id[i]);
    if (run->options_json && !m->options_json)
        m->options_json = strdup(run->options_json);
}

int manifest_merge_rank(const char *dir, const manifest_run *run, const tft_manifest_rank *ranks, int n,
                        int exit_status)
{
    char lock[4200], path[4200];
    snprintf(lock, sizeof(lock), "%s/.manifest.lock", dir);
    snprintf(path, sizeof(path), "%s/manifest.json", dir);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    while (flock(fd, LOCK_EX) < 0 && errno == EINTR)
        ;
    tft_manifest m;
    if (tft_manifest_read(path, &m, NULL, 0) < 0) {
        memset(&m, 0, sizeof(m));
        m.world_size = -1;
        m.exit_status = -1;
    }
    fill_from_self(&m);
    set_run(&m, run);
    int e = add_ranks(&m, ranks, n);
    if (m.world_size < m.nranks)
        m.world_size = m.nranks;
    if (exit_status >= 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        m.end_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        m.complete = 1;
        if (m.exit_status <= 0)
            m.exit_status = exit_status;
    }
    if (!e)
        e = tft_manifest_write(dir, &m);
    tft_manifest_free(&m);
    flock(fd, LOCK_UN);
    close(fd);
    return e;
}
