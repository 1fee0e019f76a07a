/*
 * launch_dir.c — the trace directory a launcher records into
 * (docs/SECURITY.md): new or empty, owned by the caller, not a symbolic
 * link (unless --force), locked for the whole run; the instances of one
 * job (mpirun -np N tftrace -o DIR ...) share it and its run id, each
 * writing its own manifest fragment. The start manifest is written here.
 */
#include "launch_internal.h"
#include "tft_writer_internal.h" /* tft_manifest_fragment_name */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Lock files and leftovers that do not make a directory "not empty". */
static int ignorable_entry(const char *n)
{
    return !strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, ".prepare.lock") || !strcmp(n, ".run.lock") ||
           !strcmp(n, ".manifest.lock") || !strncmp(n, ".manifest.reserve.", 18);
}

/* An earlier trace's files, which --force deletes. */
static int trace_entry(const char *n)
{
    size_t len = strlen(n);
    return !strcmp(n, "manifest.json") || !strncmp(n, ".manifest.reserve.", 18) || tft_manifest_fragment_name(n) ||
           (!strncmp(n, ".manifest.json.", 15) && len > 4 && !strcmp(n + len - 4, ".tmp")) ||
           (!strncmp(n, "rank-", 5) && len > 4 && !strcmp(n + len - 4, ".tft")) ||
           (!strncmp(n, "processes-", 10) && len > 5 && !strcmp(n + len - 5, ".json"));
}

/* The first entry of the directory that is neither ignorable nor (when
 * remove is set) an earlier trace's file, which is deleted — unlinkat on
 * the name: a link is removed, never what it points to. "" when none. */
static int scan_dir(int dfd, int remove, char *first, size_t n)
{
    first[0] = '\0';
    int fd = dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -errno;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (ignorable_entry(de->d_name))
            continue;
        struct stat sb;
        if (remove && trace_entry(de->d_name) && fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
            !S_ISDIR(sb.st_mode) && unlinkat(dfd, de->d_name, 0) == 0)
            continue;
        if (!first[0])
            snprintf(first, n, "%s", de->d_name);
    }
    closedir(d);
    return 0;
}

/* The job this instance belongs to when a parallel launcher started several
 * tftrace (mpirun -np N tftrace -o DIR ...): they share the directory and
 * the run id. strong: the launcher's own job id (a late instance may join
 * a job whose other instances already finished). "" when not one of several. */
static void job_key(char *buf, size_t n, int *strong)
{
    static const char *const ids[][2] = {{"PMIX_NAMESPACE", "pmix"},
                                         {"OMPI_MCA_ess_base_jobid", "ompi"},
                                         {"OMPI_MCA_orte_ess_jobid", "ompi"},
                                         {"TORCHELASTIC_RUN_ID", "torch"}};
    const char *v;
    buf[0] = '\0';
    *strong = 1;
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
        if ((v = getenv(ids[i][0])) && *v) {
            snprintf(buf, n, "%s:%s", ids[i][1], v);
            return;
        }
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    if (job && *job && step && *step && getenv("SLURM_PROCID")) {
        snprintf(buf, n, "slurm:%s.%s", job, step);
        return;
    }
    /* another launcher that only sets a rank (MPICH's hydra: PMI_RANK;
     * RANK): the instances on one node share their parent, the launcher's
     * proxy; only instances that overlap in time can join */
    static const char *const rank_vars[] = {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "RANK"};
    for (size_t i = 0; i < sizeof(rank_vars) / sizeof(rank_vars[0]); i++)
        if ((v = getenv(rank_vars[i])) && *v) {
            char host[64] = "";
            gethostname(host, sizeof(host) - 1);
            snprintf(buf, n, "parent:%d@%s", (int)getppid(), host);
            *strong = 0;
            return;
        }
}

/* A lock file in the directory: never through a link, ours, regular;
 * *created: this call made it (a refused directory gets it removed). */
static int lock_file(int dfd, const char *name, bool *created)
{
    int fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    *created = fd >= 0;
    if (fd < 0 && errno == EEXIST)
        fd = openat(dfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    struct stat sb;
    if (fd >= 0 && (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid())) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

/* This instance's rank in its job (-1 none): two live instances of one job
 * with one rank are two runs, not one. */
static int launcher_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "RANK"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long r = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && !*end && r >= 0 && r < INT_MAX)
            return (int)r;
    }
    return -1;
}

/* The run lock's content: "PID KEY\n" of the instance that took it first,
 * then "RANK PID\n" per instance of the job. *dup: a live instance other
 * than this one holds rank. */
static void read_owner(int fd, int rank, int *pid, char *key, size_t n, int *dup)
{
    char buf[8192];
    ssize_t k = pread(fd, buf, sizeof(buf) - 1, 0);
    buf[k > 0 ? k : 0] = '\0';
    *pid = *dup = 0;
    key[0] = '\0';
    char *nl = strchr(buf, '\n'), *sp = strchr(buf, ' ');
    if (!nl || !sp || sp > nl)
        return;
    *nl = '\0';
    *pid = atoi(buf);
    snprintf(key, n, "%s", sp + 1);
    for (char *line = nl + 1; *line; line = nl + 1) {
        int r, p;
        if (!(nl = strchr(line, '\n')))
            break;
        if (sscanf(line, "%d %d", &r, &p) == 2 && r == rank && rank >= 0 && p != (int)getpid() &&
            (kill(p, 0) == 0 || errno == EPERM))
            *dup = 1;
    }
}

/* first: this instance starts the lock's content; else it adds its rank. */
static void write_owner(int fd, const char *key, int rank, int first)
{
    char buf[512];
    int k = 0;
    if (first)
        k = snprintf(buf, sizeof(buf), "%d %s\n", (int)getpid(), key);
    if (key[0] && rank >= 0)
        k += snprintf(buf + k, sizeof(buf) - (size_t)k, "%d %d\n", rank, (int)getpid());
    off_t at = first ? 0 : lseek(fd, 0, SEEK_END);
    if ((first && ftruncate(fd, 0) < 0) || at < 0 || pwrite(fd, buf, (size_t)k, at) != k)
        (void)0; /* informative (who records, which ranks): the flock is the lock */
}

/* The run id the manifest holds (a joining instance adopts it): the
 * fragments' (instances of a job write one each), else manifest.json. */
static int manifest_run_id(int dfd, uint8_t run_id[16])
{
    tft_manifest m;
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", dfd);
    if (tft_manifest_read_dir(self, &m, NULL, 0) != 0 && manifest_read_at(dfd, &m) < 0)
        return -1;
    uint8_t id[16];
    int ok = strlen(m.run_id) == 32;
    for (int i = 0; ok && i < 16; i++) {
        unsigned v;
        ok = sscanf(m.run_id + 2 * i, "%2x", &v) == 1;
        id[i] = (uint8_t)v;
    }
    tft_manifest_free(&m);
    if (ok)
        memcpy(run_id, id, 16);
    return ok ? 0 : -1;
}

static int prepare_manifest(const trace_dir *td, const char *dir, const launch_opts *o, const uint8_t run_id[16])
{
    char oj[4608]; /* options with a capture spec of up to 4 KiB */
    launch_opts_json(o, oj, sizeof(oj));
    manifest_run run = {.run_id = run_id, .options_json = oj, .no_redact = o->no_redact, .file_mode = o->mode,
                        .collector = 1};
    int e = td->job_rank >= 0 ? manifest_launcher_fragment(td->fd, dir, &run, td->job_rank, NULL, 0, td->start_ns, -1)
                              : manifest_merge_rank(td->fd, &run, NULL, 0, -1);
    if (e < 0) {
        fprintf(stderr, "tftrace: %s/manifest.json: cannot write: %s\n", dir, strerror(-e));
        return -1;
    }
    return 0;
}

/* Opens (creating it when new) the trace directory. Refused, with a message
 * that says why and what to do: a symbolic link (unless --force), a
 * directory of another user, one that is not empty (unless --force). */
static int open_dir(const char *dir, const launch_opts *o, trace_dir *td)
{
    unsigned dmode = o->mode | ((o->mode & 0444) >> 2); /* x where r: 0600 -> 0700 */
    int created = mkdir(dir, dmode) == 0;
    if (!created && errno != EEXIST) {
        fprintf(stderr, "tftrace: %s: cannot create the trace directory: %s\n", dir, strerror(errno));
        return -1;
    }
    td->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (o->force ? 0 : O_NOFOLLOW));
    if (td->fd < 0) {
        int e = errno;
        struct stat lsb;
        if ((e == ELOOP || e == ENOTDIR) && lstat(dir, &lsb) == 0 && S_ISLNK(lsb.st_mode))
            fprintf(stderr, "tftrace: %s: is a symbolic link; tftrace does not follow it (in a shared directory it "
                            "can point anywhere): give the real directory, or pass --force\n", dir);
        else if (e == ENOTDIR)
            fprintf(stderr, "tftrace: %s: exists and is not a directory; choose another -o\n", dir);
        else
            fprintf(stderr, "tftrace: %s: cannot open the trace directory: %s\n", dir, strerror(e));
        return -1;
    }
    struct stat sb;
    if (fstat(td->fd, &sb) < 0 || sb.st_uid != geteuid()) {
        fprintf(stderr, "tftrace: %s: belongs to uid %d, not to you (uid %d): tftrace records only into a "
                        "directory of your own; choose another -o\n", dir, (int)sb.st_uid, (int)geteuid());
        return -1;
    }
    if (created && fchmod(td->fd, dmode) < 0) /* exact, whatever the umask */
        fprintf(stderr, "tftrace: %s: cannot set mode %03o: %s\n", dir, dmode, strerror(errno));
    return 0;
}

/* The directory for this run, locked: the first instance (or the only one)
 * takes the run lock alone, checks the directory is empty (--force: deletes
 * an earlier trace in it), writes the start manifest with this run's id;
 * the instances of one job then share the lock and the run id. Another run
 * already recording there, or a refused directory: exit status 2, before
 * the command starts. */
int launch_dir_prepare(const char *dir, const launch_opts *o, uint8_t run_id[16], trace_dir *td)
{
    td->fd = td->run_lock = td->job_rank = -1;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    td->start_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    if (open_dir(dir, o, td) < 0)
        return -1;
    char key[300], owner_key[300];
    int strong, owner = 0, dup = 0, rc = -1, rank = launcher_rank();
    job_key(key, sizeof(key), &strong);
    bool made_prep = false, made_run = false;
    int prep = lock_file(td->fd, ".prepare.lock", &made_prep);
    td->run_lock = prep >= 0 ? lock_file(td->fd, ".run.lock", &made_run) : -1;
    if (prep < 0 || td->run_lock < 0) {
        fprintf(stderr, "tftrace: %s: cannot create its lock files: %s\n", dir, strerror(errno));
        goto out;
    }
    while (flock(prep, LOCK_EX) < 0 && errno == EINTR)
        ;
    read_owner(td->run_lock, rank, &owner, owner_key, sizeof(owner_key), &dup);
    if (flock(td->run_lock, LOCK_EX | LOCK_NB) == 0) { /* nobody records here now */
        td->joined = key[0] && strong && !strcmp(key, owner_key) && manifest_run_id(td->fd, run_id) == 0;
        if (td->joined)
            write_owner(td->run_lock, key, rank, 0);
        if (!td->joined) {
            char first[256];
            int e = scan_dir(td->fd, o->force, first, sizeof(first));
            if (e < 0) {
                fprintf(stderr, "tftrace: %s: cannot list it: %s\n", dir, strerror(-e));
                goto out;
            }
            if (first[0] && !o->force) {
                fprintf(stderr, "tftrace: %s: is not empty (it holds %s): tftrace records only into a new or "
                                "empty directory; choose another -o, or pass --force to replace the trace in it\n",
                        dir, first);
                /* nothing in a refused directory is touched: the lock files this call made go */
                if (made_run)
                    unlinkat(td->fd, ".run.lock", 0);
                if (made_prep)
                    unlinkat(td->fd, ".prepare.lock", 0);
                goto out;
            }
            write_owner(td->run_lock, key, rank, 1);
        }
        if (key[0] && flock(td->run_lock, LOCK_SH) < 0) /* let the job's other instances in */
            goto out;
    } else if (key[0] && !strcmp(key, owner_key) && !dup && flock(td->run_lock, LOCK_SH | LOCK_NB) == 0) {
        td->joined = manifest_run_id(td->fd, run_id) == 0;
        write_owner(td->run_lock, key, rank, 0);
    } else {
        fprintf(stderr, "tftrace: %s: another tftrace (pid %d) is recording into it; wait for it to end or "
                        "choose another -o\n", dir, owner);
        goto out;
    }
    /* one instance of a job: its own manifest fragment, no manifest lock */
    td->job_rank = key[0] && rank >= 0 ? rank : -1;
    memcpy(td->run_id, run_id, 16);
    rc = prepare_manifest(td, dir, o, run_id);
    manifest_reserve(td->fd); /* best effort: without it a full disk may keep the final manifest out */
out:
    if (prep >= 0)
        close(prep); /* releases it */
    return rc;
}
