/*
 * manifest_dir.c — a trace directory's manifest as readers see it:
 * manifest.json merged with the per-rank fragments manifest.rank-*.json
 * that in-process writers leave (FORMAT.md §2.4), and the union of the
 * manifests of several directories of one run (a job whose nodes wrote
 * their ranks to local disks, docs/MULTINODE.md).
 *
 * No lock is involved: each fragment has one writer (the process that owns
 * the rank file of that name) and is replaced by rename, so a reader sees
 * each fragment whole or not at all. manifest.json beside fragments is a
 * snapshot one of the writers made; the fragments are the authority.
 */
#include "format_internal.h"
#include "tft_writer_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FRAG_PREFIX "manifest.rank-"
#define FRAG_SUFFIX ".json"
#define FRAGS_MAX 65536

bool tft_manifest_fragment_name(const char *name)
{
    size_t n = strlen(name), p = strlen(FRAG_PREFIX), s = strlen(FRAG_SUFFIX);
    return n > p + s && !strncmp(name, FRAG_PREFIX, p) && !strcmp(name + n - s, FRAG_SUFFIX) &&
           !strchr(name, '/');
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The fragment names of dir, sorted; count or -errno. */
static int list_fragments(const char *dir, char ***out)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    char **v = NULL;
    int n = 0, e = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < FRAGS_MAX) {
        if (!tft_manifest_fragment_name(de->d_name))
            continue;
        char **nv = realloc(v, (size_t)(n + 1) * sizeof(*nv));
        if (!nv || !(nv[n] = strdup(de->d_name))) {
            v = nv ? nv : v;
            e = -ENOMEM;
            break;
        }
        v = nv;
        n++;
    }
    closedir(d);
    if (e) {
        for (int i = 0; i < n; i++)
            free(v[i]);
        free(v);
        return e;
    }
    if (n > 1)
        qsort(v, (size_t)n, sizeof(*v), cmp_name);
    *out = v;
    return n;
}

/* Appends "; text" to m->incomplete (or starts it). */
static int add_incomplete(tft_manifest *m, const char *text)
{
    size_t old = m->incomplete ? strlen(m->incomplete) : 0, n = old + strlen(text) + 3;
    char *r = malloc(n);
    if (!r)
        return -ENOMEM;
    snprintf(r, n, "%s%s%s", m->incomplete ? m->incomplete : "", old ? "; " : "", text);
    free(m->incomplete);
    m->incomplete = r;
    return 0;
}

/* Adds src's rank entries to dst (an entry of the same file name is
 * replaced: the later fragment of one rank file wins); the host of an
 * entry without one is src's. */
static int add_ranks(tft_manifest *dst, const tft_manifest *src)
{
    tft_manifest_rank *nr = realloc(dst->ranks, (size_t)(dst->nranks + src->nranks + 1) * sizeof(*nr));
    if (!nr)
        return -ENOMEM;
    dst->ranks = nr;
    for (int k = 0; k < src->nranks; k++) {
        int j = 0;
        while (j < dst->nranks && strcmp(dst->ranks[j].file, src->ranks[k].file) != 0)
            j++;
        dst->ranks[j] = src->ranks[k];
        if (!dst->ranks[j].host[0])
            snprintf(dst->ranks[j].host, sizeof(dst->ranks[j].host), "%s", src->host);
        if (j == dst->nranks)
            dst->nranks++;
    }
    return 0;
}

int tft_manifest_merge(tft_manifest *dst, const tft_manifest *src)
{
    if (!dst->run_id[0])
        memcpy(dst->run_id, src->run_id, sizeof(dst->run_id));
    if (src->world_size > dst->world_size)
        dst->world_size = src->world_size;
    if (src->start_ns && (!dst->start_ns || src->start_ns < dst->start_ns))
        dst->start_ns = src->start_ns;
    if (!src->end_ns || !dst->end_ns)
        dst->end_ns = 0; /* one still running: the run is */
    else if (src->end_ns > dst->end_ns)
        dst->end_ns = src->end_ns;
    dst->complete = dst->complete && src->complete;
    if (src->exit_status > 0 && dst->exit_status <= 0)
        dst->exit_status = src->exit_status;
    else if (src->exit_status < 0)
        dst->exit_status = dst->exit_status > 0 ? dst->exit_status : -1;
    dst->dropped_stalled += src->dropped_stalled;
    int e = src->incomplete && src->incomplete[0] ? add_incomplete(dst, src->incomplete) : 0;
    if (!e)
        e = add_ranks(dst, src);
    if (!e && src->ncollectors) {
        tft_manifest_collector *nc =
            realloc(dst->collectors, (size_t)(dst->ncollectors + src->ncollectors) * sizeof(*nc));
        if (!nc)
            return -ENOMEM;
        memcpy(nc + dst->ncollectors, src->collectors, (size_t)src->ncollectors * sizeof(*nc));
        dst->collectors = nc;
        dst->ncollectors += src->ncollectors;
    }
    return e;
}

/* Fragments merged into *m (zeroed first): the first by name is the base
 * (command line, options, run id), the others add their ranks. A fragment
 * that does not parse is skipped and named in err. 0, or -ENOENT when no
 * fragment parsed. */
static int read_fragments(const char *dir, uid_t owner, char **names, int n, tft_manifest *m, char *err,
                          size_t errlen)
{
    int have = 0, e = 0;
    for (int i = 0; i < n && !e; i++) {
        char path[4096], why[256];
        tft_manifest f;
        if (snprintf(path, sizeof(path), "%s/%s", dir, names[i]) >= (int)sizeof(path))
            continue;
        int r = tft_manifest_read_owned(path, owner, &f, why, sizeof(why));
        if ((r == -ESPIPE || r == -EPERM) && owner != (uid_t)-1)
            continue;   /* the writer: not its own user's fragment, or planted: left alone */
        if (r == -EPROTONOSUPPORT || r == -ESPIPE) {
            if (have)
                tft_manifest_free(m);
            snprintf(err, errlen, "%s: %s", names[i], why);
            return r;
        }
        if (r) {
            if (!err[0])
                snprintf(err, errlen, "%s: %s; its rank's exit status is unknown", names[i], why);
            continue;
        }
        if (!have) {
            *m = f;
            for (int k = 0; k < m->nranks; k++)
                if (!m->ranks[k].host[0])
                    snprintf(m->ranks[k].host, sizeof(m->ranks[k].host), "%s", m->host);
            have = 1;
            continue;
        }
        e = tft_manifest_merge(m, &f);
        tft_manifest_free(&f);
    }
    if (e && have)
        tft_manifest_free(m);
    return e ? e : have ? 0 : -ENOENT;
}

int tft_manifest_read_dir(const char *dir, tft_manifest *m, char *err, size_t errlen)
{
    return tft_manifest_read_dir_owned(dir, (uid_t)-1, m, err, errlen);
}

int tft_manifest_read_dir_owned(const char *dir, uid_t owner, tft_manifest *m, char *err, size_t errlen)
{
    char dummy[8];
    fmt_manifest_start(m, &err, &errlen, dummy, sizeof(dummy));
    char **names;
    int n = list_fragments(dir, &names);
    int e = -ENOENT;
    if (n > 0) {
        e = read_fragments(dir, owner, names, n, m, err, errlen);
        for (int i = 0; i < n; i++)
            free(names[i]);
        free(names);
        if (e != -ENOENT)
            return e;
    }
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/manifest.json", dir) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    char why[448];
    int e2 = tft_manifest_read_owned(path, owner, m, why, sizeof(why));
    if (e2)
        snprintf(err, errlen, "manifest.json: %s", why);
    return e2;
}
