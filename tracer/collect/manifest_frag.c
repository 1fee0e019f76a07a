/*
 * manifest_frag.c — the in-process writer's manifest: one fragment per rank
 * file, manifest.rank-NAME.json, replaced by rename and never shared, so
 * processes on several hosts can finish into one directory on a network
 * file system without flock (FORMAT.md §2.4). Readers merge the fragments
 * (formats/src/manifest_dir.c); manifest.json is refreshed as a snapshot of
 * them for older readers, last writer wins, and may miss a rank that
 * finished at the same moment: the fragments stay the authority.
 */
#include "collector.h"
#include "tft_writer_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* manifest.rank-00003.json for rank-00003.tft; -ENAMETOOLONG / -EINVAL. */
static int fragment_name(const char *file, char *out, size_t n)
{
    size_t len = strlen(file);
    if (len < 5 || strcmp(file + len - 4, ".tft") != 0 || strchr(file, '/'))
        return -EINVAL;
    if (snprintf(out, n, "manifest.%.*s.json", (int)(len - 4), file) >= (int)n)
        return -ENAMETOOLONG;
    return 0;
}

/* The snapshot: every fragment merged, written as manifest.json. Written
 * again while the directory gained fragments since it was read: of
 * processes finishing together, one that read before another's fragment
 * landed may rename last, and then sees that fragment when it reads again. */
void manifest_refresh_snapshot(int dir_fd, const char *dir, unsigned mode)
{
    char self[64]; /* the directory itself, whatever the program's cwd became */
    snprintf(self, sizeof(self), "/proc/self/fd/%d", dir_fd);
    const char *path = access(self, R_OK) == 0 ? self : dir;
    tft_manifest all;
    int written = -1;
    for (int tries = 0; tries < 8 && tft_manifest_read_dir_owned(path, geteuid(), &all, NULL, 0) == 0; tries++) {
        int n = all.nranks;
        if (n != written && tft_manifest_writeat(dir_fd, &all, mode) < 0)
            n = written; /* best effort: the fragments stay the authority */
        tft_manifest_free(&all);
        if (n == written)
            break;
        written = n;
    }
}

int manifest_write_fragment(int dir_fd, const char *dir, const manifest_run *run, const tft_manifest_rank *rank,
                            int world_size, uint64_t start_ns, int exit_status)
{
    char name[128];
    int e = fragment_name(rank->file, name, sizeof(name));
    if (e)
        return e;
    unsigned mode = run->file_mode ? run->file_mode : 0600;
    manifest_reserve_release(dir_fd); /* the fragment must fit on a full disk */
    tft_manifest m;
    memset(&m, 0, sizeof(m));
    m.start_ns = start_ns;
    manifest_fill_self(&m, !run->no_redact);
    if (run->run_id)
        for (int i = 0; i < 16; i++)
            snprintf(m.run_id + 2 * i, 3, "%02x", run->run_id[i]);
    m.world_size = world_size > 0 ? world_size : -1;
    m.end_ns = realtime_ns();
    m.exit_status = exit_status;
    m.dropped_stalled = run->dropped_stalled;
    m.complete = !(run->incomplete && run->incomplete[0]);
    if (!m.complete && !(m.incomplete = strdup(run->incomplete)))
        e = -ENOMEM;
    if (!e && run->options_json && !(m.options_json = strdup(run->options_json)))
        e = -ENOMEM;
    tft_manifest_rank me = *rank;
    if (!me.host[0])
        snprintf(me.host, sizeof(me.host), "%s", m.host);
    m.ranks = &me;
    m.nranks = 1;
    if (!e)
        e = tft_manifest_write_namedat(dir_fd, &m, mode, name);
    m.ranks = NULL;
    m.nranks = 0;
    tft_manifest_free(&m);
    if (!e)
        manifest_refresh_snapshot(dir_fd, dir, mode);
    return e;
}
