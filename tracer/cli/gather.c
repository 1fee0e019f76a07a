/*
 * gather.c — `tftrace gather OUT DIR...`: one trace directory from the
 * pieces a job's nodes wrote to their local disks (docs/MULTINODE.md).
 *
 * The pieces are opened as one trace by the format library
 * (tft_trace_open_parts), which refuses pieces of different runs, a rank
 * held in two pieces, copies and mixes, with a message naming the files.
 * Then every rank file is copied into OUT (new or empty: O_EXCL, no links
 * followed) and OUT/manifest.json written: the pieces' manifests merged,
 * one entry per rank file with its rank, pid, host (from the file's
 * header when the piece's manifest had none) and exit status. On any
 * failure what OUT received is removed again. Exit: 0, or 2 with a message.
 */
#include "cli_internal.h"
#include "collector.h"
#include "tft_format.h"
#include "tft_writer_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void gather_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level <= TFT_LOG_WARN)
        fprintf(stderr, "tftrace gather: %s\n", msg);
}

static int usage(void)
{
    fprintf(stderr, "usage: tftrace gather OUT DIR...\n"
                    "  assembles one trace OUT (a new or empty directory) from the directories DIR... that\n"
                    "  the nodes of one job wrote (TFT_OUTPUT on each node's local disk): checks that they\n"
                    "  are of one run and that no rank comes twice, copies the rank files, merges the\n"
                    "  manifests (host per rank kept). docs/MULTINODE.md\n");
    return 2;
}

/* OUT: created 0700, or an existing empty directory of ours. fd or -1. */
static int open_out(const char *out)
{
    int created = mkdir(out, 0700) == 0;
    if (!created && errno != EEXIST) {
        fprintf(stderr, "tftrace gather: %s: cannot create: %s\n", out, strerror(errno));
        return -1;
    }
    int fd = open(out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "tftrace gather: %s: cannot open as a directory: %s\n", out, strerror(errno));
        return -1;
    }
    DIR *d = created ? NULL : fdopendir(dup(fd));
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            fprintf(stderr, "tftrace gather: %s is not empty (holds %s): give a new or empty directory\n", out,
                    de->d_name);
            closedir(d);
            close(fd);
            return -1;
        }
    }
    if (d)
        closedir(d);
    return fd;
}

/* Copies src into dirfd/name (created O_EXCL, mode 0600). 0 or -errno. */
static int copy_file(const char *src, int dirfd, const char *name)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -errno;
    int o = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (o < 0) {
        int e = -errno;
        close(in);
        return e;
    }
    char buf[1 << 16];
    int e = 0;
    for (;;) {
        ssize_t k = read(in, buf, sizeof(buf));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            e = k < 0 ? -errno : 0;
            break;
        }
        for (ssize_t w = 0; w < k && !e;) {
            ssize_t x = write(o, buf + w, (size_t)(k - w));
            if (x < 0 && errno != EINTR)
                e = -errno;
            w += x > 0 ? x : 0;
        }
        if (e)
            break;
    }
    if (!e && fsync(o) < 0)
        e = -errno;
    close(in);
    if (close(o) < 0 && !e)
        e = -errno;
    return e;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* The piece's manifest entry of file i (same name and pid), NULL none. */
static const tft_manifest_rank *piece_entry(const tft_manifest *m, const char *file, int pid)
{
    for (int k = 0; m && k < m->nranks; k++)
        if (!strcmp(m->ranks[k].file, file) && m->ranks[k].pid == pid)
            return &m->ranks[k];
    return NULL;
}

/* Copies the rank files into OUT, entry k of ranks for file k. */
static int copy_ranks(tft_trace *t, int dirfd, const char *out, tft_manifest_rank *ranks, char (*names)[64])
{
    const tft_manifest *m = tft_trace_manifest(t);
    for (int i = 0; i < tft_trace_nranks(t); i++) {
        const tft_file_info *fi = tft_trace_file_info(t, i);
        const char *src = tft_trace_file_name(t, i), *base = base_name(src);
        snprintf(names[i], sizeof(names[i]), "%s", base);
        int e = copy_file(src, dirfd, names[i]);
        if (e == -EEXIST) { /* two pieces used one name (renumbered ranks): keep both */
            snprintf(names[i], sizeof(names[i]), "rank-%05d-n%d.tft", tft_trace_rank_id(t, i),
                     tft_trace_file_part(t, i));
            e = copy_file(src, dirfd, names[i]);
        }
        if (e) {
            fprintf(stderr, "tftrace gather: %s -> %s/%s: %s\n", src, out, names[i], strerror(-e));
            names[i][0] = '\0';
            return e;
        }
        const tft_manifest_rank *pe = piece_entry(m, base, fi->pid);
        tft_manifest_rank *r = &ranks[i];
        if (pe)
            *r = *pe;
        r->rank = fi->rank;
        r->pid = fi->pid;
        snprintf(r->file, sizeof(r->file), "%s", names[i]);
        if (!r->host[0])
            snprintf(r->host, sizeof(r->host), "%s", fi->host);
    }
    return 0;
}

/* Writes OUT/manifest.json: the merged manifest with the copied files. */
static int write_manifest(tft_trace *t, int dirfd, tft_manifest_rank *ranks)
{
    tft_manifest m;
    memset(&m, 0, sizeof(m));
    m.exit_status = -1;
    const tft_manifest *pm = tft_trace_manifest(t);
    int n = tft_trace_nranks(t), e = 0;
    if (pm)
        e = tft_manifest_merge(&m, pm); /* a copy: ranks replaced below */
    if (!e && !pm) { /* no piece had a manifest: what the rank files say */
        const tft_file_info *fi = tft_trace_file_info(t, 0);
        for (int k = 0; k < 16; k++)
            snprintf(m.run_id + 2 * k, 3, "%02x", fi->run_id[k]);
        m.world_size = fi->world_size;
        m.start_ns = fi->start_realtime_ns;
    }
    if (!e && pm) {
        memcpy(m.tool_version, pm->tool_version, sizeof(m.tool_version));
        memcpy(m.host, pm->host, sizeof(m.host));
        memcpy(m.cwd, pm->cwd, sizeof(m.cwd));
        m.complete = pm->complete;
        m.end_ns = pm->end_ns;
        m.exit_status = pm->exit_status;
        m.argv = pm->argv; /* borrowed: not freed below */
        m.argc = pm->argc;
        m.options_json = pm->options_json;
    }
    free(m.ranks);
    m.ranks = ranks;
    m.nranks = n;
    if (m.world_size > n) /* a node's piece is missing */
        m.complete = 0;
    if (m.world_size < n)
        m.world_size = n;
    if (!e)
        e = tft_manifest_writeat(dirfd, &m, 0600);
    m.argv = NULL;
    m.argc = 0;
    m.options_json = NULL;
    m.ranks = NULL;
    m.nranks = 0;
    tft_manifest_free(&m);
    return e;
}

static void print_summary(tft_trace *t, const char *out, int npieces, const tft_manifest_rank *ranks)
{
    char id[33];
    const tft_file_info *fi = tft_trace_file_info(t, 0);
    for (int k = 0; k < 16; k++)
        snprintf(id + 2 * k, 3, "%02x", fi->run_id[k]);
    int n = tft_trace_nranks(t);
    printf("gathered %d rank file%s of run %s from %d director%s into %s\n", n, n == 1 ? "" : "s", id, npieces,
           npieces == 1 ? "y" : "ies", out);
    for (int i = 0; i < n; i++)
        printf("  rank %d  host %s  %s  (from %s)\n", ranks[i].rank, ranks[i].host[0] ? ranks[i].host : "?",
               ranks[i].file, tft_trace_file_name(t, i));
}

int gather_main(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage();
        return 0;
    }
    if (argc < 3 || argv[1][0] == '-')
        return usage();
    const char *out = argv[1];
    tft_reader_opts ro = TFT_READER_OPTS(.log = gather_log);
    tft_trace *t = tft_trace_open_parts((const char *const *)argv + 2, argc - 2, &ro, 1);
    if (!t) {
        fprintf(stderr, "tftrace gather: nothing written to %s\n", out);
        return 2;
    }
    int n = tft_trace_nranks(t), rc = 2;
    tft_manifest_rank *ranks = calloc((size_t)n + 1, sizeof(*ranks));
    char (*names)[64] = calloc((size_t)n + 1, sizeof(*names));
    int dirfd = ranks && names ? open_out(out) : -1;
    if (dirfd >= 0) {
        int e = copy_ranks(t, dirfd, out, ranks, names);
        if (!e && (e = write_manifest(t, dirfd, ranks)) < 0)
            fprintf(stderr, "tftrace gather: %s/manifest.json: cannot write: %s\n", out, strerror(-e));
        if (e) { /* leave nothing half gathered */
            for (int i = 0; i < n; i++)
                if (names[i][0])
                    unlinkat(dirfd, names[i], 0);
        } else {
            print_summary(t, out, argc - 2, ranks);
            rc = 0;
        }
        close(dirfd);
    }
    free(ranks);
    free(names);
    tft_trace_close(t);
    return rc;
}
