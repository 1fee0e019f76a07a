/*
 * manifest_launch.c — the manifest of a launcher that is one instance of a
 * job (`mpirun -np N tftrace -o DIR -- prog`, docs/MULTINODE.md): instead
 * of merging manifest.json under flock, which network file systems do not
 * reliably provide, each instance writes its own fragment
 * manifest.rank-NNNNN.json (NNNNN: its rank in the job) by rename, at its
 * start (listing itself as a collector not done) and again at its end (done,
 * with its rank files and exit status), as the in-process writers do
 * (manifest_frag.c, FORMAT.md §2.4). Readers merge the fragments;
 * manifest.json is refreshed after each as a snapshot for older readers.
 */
#include "collector.h"
#include "tft_writer_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The job's size as its launcher tells each instance (as the in-process
 * writers read it), -1 unknown. */
static int job_world(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "WORLD_SIZE"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long r = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && !*end && r > 0 && r < 10000000)
            return (int)r;
    }
    return -1;
}

static int fill(tft_manifest *m, const manifest_run *run, uint64_t start_ns, bool end, int exit_status)
{
    m->start_ns = start_ns;
    manifest_fill_self(m, !run->no_redact);
    if (run->run_id)
        for (int i = 0; i < 16; i++)
            snprintf(m->run_id + 2 * i, 3, "%02x", run->run_id[i]);
    m->world_size = job_world();
    m->exit_status = end ? exit_status : -1;
    m->dropped_stalled = run->dropped_stalled;
    m->complete = end && !(run->incomplete && run->incomplete[0]);
    if (end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        m->end_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
    if (run->incomplete && run->incomplete[0] && !(m->incomplete = strdup(run->incomplete)))
        return -ENOMEM;
    if (run->options_json && !(m->options_json = strdup(run->options_json)))
        return -ENOMEM;
    if (!(m->collectors = calloc(1, sizeof(*m->collectors))))
        return -ENOMEM;
    tft_manifest_collector_self(&m->collectors[0]);
    m->collectors[0].done = end;
    m->ncollectors = 1;
    return 0;
}

int manifest_launcher_fragment(int dir_fd, const char *dir, const manifest_run *run, int job_rank,
                               const tft_manifest_rank *ranks, int n, uint64_t start_ns, int exit_status)
{
    if (job_rank < 0 || n < 0 || (n && !ranks))
        return -EINVAL;
    char name[64];
    snprintf(name, sizeof(name), "manifest.rank-%05d.json", job_rank);
    bool end = exit_status >= 0;
    unsigned mode = run->file_mode ? run->file_mode : 0600;
    if (end) /* the final fragment must fit on a full disk */
        manifest_reserve_release(dir_fd);
    tft_manifest m;
    memset(&m, 0, sizeof(m));
    int e = fill(&m, run, start_ns, end, exit_status);
    tft_manifest_rank *rs = !e && n ? calloc((size_t)n, sizeof(*rs)) : NULL;
    if (!e && n && !rs)
        e = -ENOMEM;
    for (int i = 0; rs && i < n; i++) {
        rs[i] = ranks[i];
        if (!rs[i].host[0])
            snprintf(rs[i].host, sizeof(rs[i].host), "%s", m.host);
    }
    m.ranks = rs;
    m.nranks = rs ? n : 0;
    if (m.world_size < m.nranks)
        m.world_size = m.nranks > 0 ? m.nranks : -1;
    if (!e)
        e = tft_manifest_write_namedat(dir_fd, &m, mode, name);
    tft_manifest_free(&m); /* frees rs */
    if (!e)
        manifest_refresh_snapshot(dir_fd, dir, mode);
    return e;
}
