/*
 * dump_extract.c — tfdump --extract IN OUT: a smaller trace holding the
 * steps and ranks a CI job keeps (the window around a regression), written
 * as a trace like any other: every record is read with the format
 * library's reader and written again with its writer, so `tfdump --verify
 * OUT` checks it and `tfdiff` compares it. OUT's manifest carries an
 * `extract` object saying where it came from and what was kept (FORMAT.md
 * §2.3). This file selects the rank files and makes OUT;
 * dump_extract_file.c copies what is kept of each (and says what that is),
 * dump_extract_manifest.c writes OUT's manifest.
 *
 * Memory: one chunk per reader and writer plus the writer's table of the
 * distinct strings the kept records name: flat in trace length. Unknown
 * record kinds (a newer minor) are kept by their step; strings they name are
 * not known here and are lost.
 */
#include "core_out.h"
#include "dump_extract_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* "0,2,5-7" into a sorted array. Returns 0, -EINVAL or -ENOMEM. */
static int parse_ranks(const char *s, ex_sel *sel)
{
    size_t cap = 16;
    int *v = malloc(cap * sizeof(*v));
    int n = 0;
    if (!v)
        return -ENOMEM;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long a = strtol(p, &end, 10), b = a;
        if (errno || end == p || a < 0 || a > INT32_MAX || *p == '-' || *p == '+')
            goto bad;
        if (*end == '-') {
            const char *q = end + 1;
            b = strtol(q, &end, 10);
            if (errno || end == q || b < a || b > INT32_MAX || *q == '-' || *q == '+' || b - a > 65536)
                goto bad;
        }
        for (long r = a; r <= b; r++) {
            if ((size_t)n == cap) {
                int *nv = realloc(v, (cap *= 2) * sizeof(*v));
                if (!nv) {
                    free(v);
                    return -ENOMEM;
                }
                v = nv;
            }
            v[n++] = (int)r;
        }
        if (*end == ',' && end[1])
            end++;
        else if (*end)
            goto bad;
        p = end;
    }
    if (!n)
        goto bad;
    qsort(v, (size_t)n, sizeof(*v), cmp_int);
    sel->ranks = v;
    sel->nranks = n;
    return 0;
bad:
    free(v);
    return -EINVAL;
}

static bool rank_selected(const ex_sel *s, int rank)
{
    return !s->ranks || bsearch(&rank, s->ranks, (size_t)s->nranks, sizeof(int), cmp_int);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* OUT must not exist, or be an empty directory: an extract never writes
 * over files. Returns an open directory fd or -1 (said why). */
static int open_out(const char *out, unsigned mode, bool *created)
{
    *created = mkdir(out, 0700) == 0;   /* then exactly the bits asked, whatever the umask */
    if (!*created && errno != EEXIST) {
        dump_err("%s: cannot create the output directory: %s", out, strerror(errno));
        return -1;
    }
    int fd = open(out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        dump_err("%s: cannot open the output directory: %s", out, strerror(errno));
        return -1;
    }
    if (*created && fchmod(fd, (mode_t)core_out_dir_mode(mode)) < 0) {
        dump_err("%s: cannot set the output directory's mode: %s", out, strerror(errno));
        close(fd);
        return -1;
    }
    int dup_fd = dup(fd);
    DIR *dir = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    bool empty = dir != NULL;
    for (struct dirent *de; dir && (de = readdir(dir));)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            empty = false;
    if (dir)
        closedir(dir);
    else if (dup_fd >= 0)
        close(dup_fd);
    if (!empty) {
        dump_err("%s: the output directory exists and is not empty; give a new path (an extract never "
                 "writes over files)", out);
        close(fd);
        return -1;
    }
    return fd;
}

/* The rank files s keeps, into fs[0..): their ranks and their names in
 * OUT. Returns how many. */
static int plan_files(dump_trace *d, const ex_sel *s, ex_file *fs)
{
    int n = 0;
    for (int i = 0; i < d->n; i++) {
        int rank = tft_trace_rank_id(d->t, i);
        if (!rank_selected(s, rank))
            continue;
        fs[n] = (ex_file){.idx = i, .rank = rank};
        const char *bn = base_name(tft_trace_file_name(d->t, i));
        /* readers list rank-*.tft: a rank file given by another name gets its rank's */
        if (fnmatch("rank-*.tft", bn, 0) == 0 && strlen(bn) < sizeof(fs[n].name))
            snprintf(fs[n].name, sizeof(fs[n].name), "%s", bn);
        else
            snprintf(fs[n].name, sizeof(fs[n].name), "rank-%05d.tft", rank);
        n++;
    }
    return n;
}

/* The n rank files fs and the manifest into OUT (dirfd; created: made
 * here), or, on a failure, nothing: what was written goes again. Returns
 * DUMP_OK or DUMP_USAGE (said why). */
static int write_out(dump_trace *d, const dump_opts *o, const ex_sel *s, ex_file *fs, int n, int dirfd,
                     bool created)
{
    int status = DUMP_OK, done = 0;
    for (; done < n && status == DUMP_OK; done++)
        status = dump_extract_file(d, dirfd, o->extract_out, s, &fs[done]);
    if (status == DUMP_OK) {
        int e = dump_extract_manifest(d, dirfd, o->path, s, fs, n);
        if (e) {
            dump_err("%s/manifest.json: cannot write: %s", o->extract_out, strerror(-e));
            status = DUMP_USAGE;
        }
    }
    if (status != DUMP_OK) { /* no half-written trace left behind */
        for (int i = 0; i < done; i++)
            unlinkat(dirfd, fs[i].name, 0);
        if (created)
            rmdir(o->extract_out);
        return status;
    }
    uint64_t read = 0, kept = 0;
    for (int i = 0; i < n; i++)
        read += fs[i].read, kept += fs[i].kept;
    fprintf(stderr, "tfdump: %s: %d rank file%s, %" PRIu64 " of %" PRIu64 " records kept\n", o->extract_out, n,
            n == 1 ? "" : "s", kept, read);
    return DUMP_OK;
}

int dump_extract(dump_trace *d, const dump_opts *o)
{
    ex_sel s = {.lo = o->have_steps ? o->step_lo : INT64_MIN + 1, .hi = o->have_steps ? o->step_hi : INT64_MAX,
                .steps_given = o->have_steps, .stats = o->stats_to};
    int status = DUMP_USAGE;
    if (o->ranks_list && parse_ranks(o->ranks_list, &s) < 0) {
        dump_err("--ranks needs a list of ranks such as 0,2 or 0-3, not '%s'", o->ranks_list);
        return DUMP_USAGE;
    }
    if (o->rank >= 0 && !s.ranks) {
        s.ranks = malloc(sizeof(int));
        if (!s.ranks)
            return DUMP_USAGE;
        s.ranks[0] = o->rank;
        s.nranks = 1;
    }
    ex_file *fs = calloc((size_t)d->n + 1, sizeof(*fs));
    int n = 0, dirfd = -1;
    if (!fs)
        goto out;
    n = plan_files(d, &s, fs);
    if (!n) {
        dump_err("%s: none of its ranks is among those of --ranks/--rank; nothing to extract", o->path);
        goto out;
    }
    bool created = false;
    s.mode = o->file_mode ? o->file_mode : 0600;
    if ((dirfd = open_out(o->extract_out, s.mode, &created)) >= 0)
        status = write_out(d, o, &s, fs, n, dirfd, created);
out:
    if (dirfd >= 0)
        close(dirfd);
    free(fs);
    free(s.ranks);
    return status;
}

