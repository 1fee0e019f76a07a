/*
 * manifest_merge.c — read-modify-write of a trace directory's manifest under
 * flock, shared by the launcher and the in-process writer; the redaction of
 * secrets in the recorded command line; the disk-space reserve that lets
 * the final manifest be written on a full disk.
 *
 * Every file is reached through the directory's fd, never by path, and
 * never through a symbolic link (docs/SECURITY.md).
 */
#include "collector.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MANIFEST_READ_MAX (64u << 20)
#define RESERVE_BYTES (64u << 10)

/* ---- redaction ------------------------------------------------------------ */

static const char *const secret_words[] = {"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD"};

/* Whether the n bytes at s (a name) contain one of secret_words, in any case. */
static bool secret_name(const char *s, size_t n)
{
    for (size_t w = 0; w < sizeof(secret_words) / sizeof(secret_words[0]); w++) {
        size_t k = strlen(secret_words[w]);
        for (size_t i = 0; i + k <= n; i++)
            if (strncasecmp(s + i, secret_words[w], k) == 0)
                return true;
    }
    return false;
}

/* Replaces argv[i] by its first `keep` bytes followed by REDACTED (plus the
 * bytes from `rest` on, when rest is not NULL). */
static int redact_at(char **argv, int i, size_t keep, const char *rest)
{
    size_t n = keep + strlen(MANIFEST_REDACTED) + (rest ? strlen(rest) : 0) + 1;
    char *r = malloc(n);
    if (!r)
        return -ENOMEM;
    snprintf(r, n, "%.*s%s%s", (int)keep, argv[i], MANIFEST_REDACTED, rest ? rest : "");
    free(argv[i]);
    argv[i] = r;
    return 0;
}

/* The password of the first URL's user information at or after a,
 * scheme://user:PASSWORD@host: its start and end in a, or false. The
 * password runs to the last '@' of the authority (a password may hold
 * '@': user:p@ss@host). */
static bool url_password(const char *a, size_t *from, size_t *to)
{
    for (const char *s = strstr(a, "://"); s; s = strstr(s, "://")) {
        s += 3;
        size_t auth = strcspn(s, "/?#");
        const char *at = memrchr(s, '@', auth);
        const char *colon = at ? memchr(s, ':', (size_t)(at - s)) : NULL;
        if (!colon || colon + 1 == at)
            continue;
        *from = (size_t)(colon + 1 - a);
        *to = (size_t)(at - a);
        return true;
    }
    return false;
}

/* Every URL password in argv[i] (after byte `from`), wherever it stands
 * (--db-url=postgres://u:PW@h, a list of URLs): 1 when one was redacted,
 * 0 none, -ENOMEM. */
static int redact_urls(char **argv, int i, size_t from)
{
    int hit = 0;
    size_t p, q;
    while (from < strlen(argv[i]) && url_password(argv[i] + from, &p, &q)) {
        char *rest = strdup(argv[i] + from + q);
        if (!rest || redact_at(argv, i, from + p, rest) != 0) {
            free(rest);
            return -ENOMEM;
        }
        free(rest);
        from += p + strlen(MANIFEST_REDACTED);
        hit = 1;
    }
    return hit;
}

int manifest_redact(char **argv, int argc, int *idx, int max_idx)
{
    int n = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        int hit = -1, e = 0;
        if (a[0] == '-') {
            const char *name = a + strspn(a, "-");
            if (eq && eq[1] && secret_name(name, (size_t)(eq - name))) {
                e = redact_at(argv, i, (size_t)(eq + 1 - a), NULL);
                hit = i;
            } else if (!eq && *name && secret_name(name, strlen(name)) && i + 1 < argc && argv[i + 1][0] != '-') {
                e = redact_at(argv, i + 1, 0, NULL); /* --api-key VALUE */
                hit = ++i;
            }
        } else if (eq && eq > a && eq[1] && (isalpha((unsigned char)a[0]) || a[0] == '_') &&
                   strspn(a, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == (size_t)(eq - a) &&
                   secret_name(a, (size_t)(eq - a))) {
            e = redact_at(argv, i, (size_t)(eq + 1 - a), NULL); /* API_KEY=VALUE */
            hit = i;
        }
        if (!e && hit != i) {   /* a URL's password, in any argument not redacted whole */
            int u = redact_urls(argv, i, 0);
            e = u < 0 ? u : 0;
            if (u > 0)
                hit = i;
        }
        if (e)
            return e;
        if (hit >= 0 && n < max_idx)
            idx[n++] = hit;
    }
    return n;
}

/* ---- the manifest ---------------------------------------------------------- */

void manifest_fill_self(tft_manifest *m, bool redact)
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
            if ((m->argv[m->argc] = strdup(buf + i)))
                m->argc++;
        free(m->redacted);
        m->redacted = calloc((size_t)m->argc + 1, sizeof(int));
        m->nredacted = 0;
        if (redact && m->redacted) {
            int k = manifest_redact(m->argv, m->argc, m->redacted, m->argc);
            m->nredacted = k > 0 ? k : 0;
        }
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

/* This process in "collectors": added at the start, marked done at the end. */
static int set_collector(tft_manifest *m, bool done)
{
    tft_manifest_collector me;
    tft_manifest_collector_self(&me);
    me.done = done;
    for (int i = 0; i < m->ncollectors; i++) {
        tft_manifest_collector *c = &m->collectors[i];
        if (c->pid == me.pid && !strcmp(c->host, me.host) && !strcmp(c->boot_id, me.boot_id)) {
            *c = me;
            return 0;
        }
    }
    tft_manifest_collector *nc = realloc(m->collectors, (size_t)(m->ncollectors + 1) * sizeof(*nc));
    if (!nc)
        return -ENOMEM;
    m->collectors = nc;
    m->collectors[m->ncollectors++] = me;
    return 0;
}

/* Appends "; text" to the manifest's incomplete reason (or starts it). */
static int add_incomplete(tft_manifest *m, const char *text)
{
    size_t old = m->incomplete ? strlen(m->incomplete) : 0;
    char *r = malloc(old + strlen(text) + 3);
    if (!r)
        return -ENOMEM;
    snprintf(r, old + strlen(text) + 3, "%s%s%s", m->incomplete ? m->incomplete : "", old ? "; " : "", text);
    free(m->incomplete);
    m->incomplete = r;
    return 0;
}

static int set_run(tft_manifest *m, const manifest_run *run, bool end)
{
    if (!run)
        return 0;
    if (run->run_id && !m->run_id[0])
        for (int i = 0; i < 16; i++)
            snprintf(m->run_id + 2 * i, 3, "%02x", run->run_id[i]);
    if (run->options_json && !m->options_json)
        m->options_json = strdup(run->options_json);
    m->dropped_stalled += run->dropped_stalled;
    int e = 0;
    if (run->incomplete && run->incomplete[0])
        e = add_incomplete(m, run->incomplete);
    if (!e && run->collector)
        e = set_collector(m, end);
    return e;
}

int manifest_read_at(int dir_fd, tft_manifest *m)
{
    memset(m, 0, sizeof(*m));
    int fd = openat(dir_fd, "manifest.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat sb;
    int e = 0;
    char *buf = NULL;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size > (off_t)MANIFEST_READ_MAX)
        e = -EPROTO;
    else if (!(buf = malloc((size_t)sb.st_size + 1)))
        e = -ENOMEM;
    size_t len = 0;
    while (!e && len < (size_t)sb.st_size) {
        ssize_t k = read(fd, buf + len, (size_t)sb.st_size - len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    if (!e)
        e = tft_manifest_parse(buf, len, m, NULL, 0);
    free(buf);
    close(fd);
    return e;
}

int manifest_reserve(int dir_fd)
{
    char name[64];
    snprintf(name, sizeof(name), ".manifest.reserve.%d", (int)getpid());
    int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int e = posix_fallocate(fd, 0, RESERVE_BYTES);
    if (e) { /* a file system without fallocate: the blocks written by hand */
        static const char zeros[4096];
        e = 0;
        for (unsigned off = 0; !e && off < RESERVE_BYTES; off += sizeof(zeros))
            if (write(fd, zeros, sizeof(zeros)) != (ssize_t)sizeof(zeros))
                e = errno ? errno : ENOSPC;
    }
    close(fd);
    if (e)
        unlinkat(dir_fd, name, 0);
    return -e;
}

void manifest_reserve_release(int dir_fd)
{
    char name[64];
    snprintf(name, sizeof(name), ".manifest.reserve.%d", (int)getpid());
    unlinkat(dir_fd, name, 0);
}

int manifest_merge_rank(int dir_fd, const manifest_run *run, const tft_manifest_rank *ranks, int n,
                        int exit_status)
{
    unsigned mode = run && run->file_mode ? run->file_mode : 0600;
    int fd = openat(dir_fd, ".manifest.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid()) {
        close(fd);
        return -EPERM; /* not a lock file of ours */
    }
    while (flock(fd, LOCK_EX) < 0 && errno == EINTR)
        ;
    bool end = exit_status >= 0;
    if (end) /* the final manifest must fit on a full disk: free our reserve for it */
        manifest_reserve_release(dir_fd);
    tft_manifest m;
    if (manifest_read_at(dir_fd, &m) < 0) {
        memset(&m, 0, sizeof(m));
        m.world_size = -1;
        m.exit_status = -1;
    }
    manifest_fill_self(&m, !(run && run->no_redact));
    int e = set_run(&m, run, end);
    if (!e)
        e = add_ranks(&m, ranks, n);
    if (!end && run && run->collector)
        m.complete = 0; /* a collector joins: not final until it is done */
    if (m.nranks > 0 && m.world_size < m.nranks)
        m.world_size = m.nranks;
    if (end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        m.end_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        /* complete: every collector that joined has finished, and nothing
         * was lost to write errors */
        m.complete = !m.incomplete;
        for (int i = 0; i < m.ncollectors; i++)
            m.complete &= m.collectors[i].done;
        if (m.exit_status <= 0)
            m.exit_status = exit_status;
    }
    if (!e)
        e = tft_manifest_writeat(dir_fd, &m, mode);
    tft_manifest_free(&m);
    flock(fd, LOCK_UN);
    close(fd);
    return e;
}
