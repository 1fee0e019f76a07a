/*
 * attach_cmd.c — `tftrace attach PID... [-o TRACE] [--duration S]
 * [--children] [--probe LIST]`: records the MPI and NCCL collectives,
 * cudaMalloc/cudaFree and large malloc/calloc/free of running processes
 * that were started without tftrace, through uprobes
 * (tracer/bpf/attach.bpf.c) on the libraries each maps (/proc/PID/maps:
 * libmpi, libnccl, libcudart, libc), into an ordinary trace (one rank file
 * per process, a manifest), which tfdump and tfdiff read as any other
 * (docs/ATTACH.md). The records: attach_write.c; written as they come, in
 * bounded memory: attach_stream.c. Calls the BPF ring buffer had no room
 * for are counted per process and written as DROPPED records (read once a
 * second). The world rank and size come from OMPI_COMM_WORLD_RANK/SIZE
 * (PMI_RANK/SIZE). Calls still inside a collective at the end are written
 * as entered and never left. Ends on --duration, Ctrl-C/SIGTERM, or when
 * every target has exited; the probes are removed on every path (the
 * targets run on unharmed).
 */
#include "cli_internal.h"
#include "collector.h"
#include "stacks_report.h"
#include "tft_clock.h"
#include "tft_procstat.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#ifdef TFT_HAVE_BPF
#include "attach_cmd_internal.h"

static volatile sig_atomic_t stop_signal;
static void on_stop(int sig) { stop_signal = sig; }

/* The libraries probed, what they are found by in /proc/PID/maps (the
 * file name's start) and their functions. */
enum { LIB_MPI, LIB_LIBC, LIB_CUDART, LIB_NCCL, LIB_COUNT };
static const struct {
    const char *probe;   /* its name in --probe */
    const char *prefix;  /* of the mapped file's name */
    int fn_lo, fn_hi;    /* enum tft_attach_fn [lo, hi] */
    const char *funcs[8];
} libs[LIB_COUNT] = {
    [LIB_MPI] = {"mpi", "libmpi.so", TFT_AFN_ALLREDUCE, TFT_AFN_BARRIER,
                 {"MPI_Allreduce", "MPI_Reduce", "MPI_Bcast", "MPI_Allgather", "MPI_Barrier"}},
    [LIB_LIBC] = {"malloc", "libc.so", TFT_AFN_MALLOC, TFT_AFN_FREE, {"malloc", "calloc", "free"}},
    [LIB_CUDART] = {"cuda", "libcudart.so", TFT_AFN_CUDA_MALLOC, TFT_AFN_CUDA_FREE, {"cudaMalloc", "cudaFree"}},
    [LIB_NCCL] = {"nccl", "libnccl.so", TFT_AFN_NCCL_ALLREDUCE, TFT_AFN_NCCL_RECV,
                  {"ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather", "ncclReduceScatter", "ncclSend",
                   "ncclRecv"}},
};

/* The libraries process pid maps, by kind (paths into out[kind], "" none);
 * 0 or -errno. */
static int find_libs(pid_t pid, char out[LIB_COUNT][4096])
{
    char path[64], line[4352];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    for (int k = 0; k < LIB_COUNT; k++)
        out[k][0] = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = strchr(line, '/');
        if (!p)
            continue;
        p[strcspn(p, "\n")] = 0;
        const char *b = strrchr(p, '/') + 1;
        for (int k = 0; k < LIB_COUNT; k++)
            if (!out[k][0] && !strncmp(b, libs[k].prefix, strlen(libs[k].prefix)) && strlen(p) < 4096)
                snprintf(out[k], 4096, "%s", p);
    }
    fclose(f);
    return 0;
}

static int env_int(pid_t pid, const char *const *vars, int nvars)
{
    /* stacks_rank_of reads the rank; the size has its own names */
    char path[64], buf[1 << 16];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0)
        return -1;
    buf[len] = 0;
    for (int v = 0; v < nvars; v++)
        for (ssize_t i = 0; i < len; i += (ssize_t)strlen(buf + i) + 1) {
            size_t vl = strlen(vars[v]);
            if (!strncmp(buf + i, vars[v], vl) && buf[i + vl] == '=')
                return atoi(buf + i + vl + 1);
        }
    return -1;
}

/* Adds the descendants of the targets (--children). */
static void add_children(void)
{
    for (int grew = 1; grew && att_NT < ATT_MAX_TARGETS;) {
        grew = 0;
        DIR *d = opendir("/proc");
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL && att_NT < ATT_MAX_TARGETS) {
            char buf[512];
            pid_t p = (pid_t)atoi(e->d_name);
            if (p <= 0)
                continue;
            const char *fields = tft_procstat_fields(p, buf, sizeof buf);
            int ppid = 0;
            char st;
            if (!fields || sscanf(fields, " %c %d", &st, &ppid) != 2)
                continue;
            int known = 0, parent = 0;
            for (int i = 0; i < att_NT; i++)
                known |= att_T[i].pid == p, parent |= att_T[i].pid == ppid;
            if (parent && !known) {
                att_T[att_NT++].pid = p;
                grew = 1;
            }
        }
        if (d)
            closedir(d);
    }
}

/* The trace directory: new (or empty), 0700, and one rank file per target. */
static int open_trace(const char *out, int *dfd, const uint8_t run_id[16])
{
    if (mkdir(out, 0700) < 0 && errno != EEXIST)
        return fprintf(stderr, "tftrace attach: cannot create %s: %s\n", out, strerror(errno)), -1;
    *dfd = open(out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*dfd < 0)
        return fprintf(stderr, "tftrace attach: cannot open %s: %s\n", out, strerror(errno)), -1;
    for (int i = 0; i < att_NT; i++) {
        att_target *t = &att_T[i];
        snprintf(t->file, sizeof t->file, t->rank >= 0 ? "rank-%05d.tft" : "rank-pid%d.tft",
                 t->rank >= 0 ? t->rank : (int)t->pid);
        int fd = openat(*dfd, t->file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            return fprintf(stderr, "tftrace attach: %s/%s: %s (the trace directory must be new or empty)\n", out,
                           t->file, strerror(errno)), -1;
        tft_file_info fi = {0};
        memcpy(fi.run_id, run_id, 16);
        fi.rank = t->rank >= 0 ? t->rank : i;
        fi.world_size = t->size;
        fi.pid = t->pid;
        if (t->rank < 0)
            fi.flags |= TFT_FILE_RANK_IS_INDEX;
        struct timespec rt;
        clock_gettime(CLOCK_REALTIME, &rt);
        fi.start_monotonic_ns = tft_clock_mono_ns();
        fi.start_realtime_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
        gethostname(fi.host, sizeof(fi.host) - 1);
        tft_writer_opts wo = TFT_WRITER_OPTS(.zstd_level = 1);
        t->w = tft_writer_fdopen(fd, &fi, &wo);
        if (!t->w)
            return fprintf(stderr, "tftrace attach: %s/%s: cannot start the rank file: %s\n", out, t->file,
                           strerror(errno)), -1;
    }
    return 0;
}

static int alive(pid_t pid)
{
    char buf[512];
    const char *fields = tft_procstat_fields(pid, buf, sizeof buf);
    return fields && fields[0] == ' ' && !tft_procstat_zombie(fields);
}

/* Probes every target's libraries (those in the mask want); the number of
 * targets with at least one probe. */
static int place_probes(tft_attach *a, unsigned want)
{
    static char found[LIB_COUNT][4096];
    int probed = 0;
    for (int i = 0; i < att_NT; i++) {
        att_target *t = &att_T[i];
        if (find_libs(t->pid, found) < 0 || tft_attach_target(a, t->pid) < 0) {
            fprintf(stderr, "tftrace attach: pid %d: cannot read its mappings: %s\n", (int)t->pid, strerror(errno));
            continue;
        }
        for (int k = 0; k < LIB_COUNT; k++) {
            if (!(want & (1u << k)) || !found[k][0])
                continue;
            int ok = 0;
            for (int f = libs[k].fn_lo; f <= libs[k].fn_hi; f++) {
                int e = tft_attach_probe(a, t->pid, found[k], libs[k].funcs[f - libs[k].fn_lo], f);
                if (e < 0)
                    fprintf(stderr, "tftrace attach: pid %d: %s in %s: %s\n", (int)t->pid,
                            libs[k].funcs[f - libs[k].fn_lo], found[k], strerror(-e));
                ok |= e == 0;
            }
            if (ok)
                t->probed_libs |= 1u << k;
        }
        t->mpi_probed = (t->probed_libs >> LIB_MPI) & 1;
        if (!t->probed_libs)
            fprintf(stderr, "tftrace attach: pid %d maps none of the libraries probed (libmpi, libnccl, libcudart,"
                            " libc): nothing to probe in it\n", (int)t->pid);
        probed += t->probed_libs != 0;
    }
    return probed;
}

/* Reads each target's ring-buffer losses and writes the new ones. */
static void note_losses(tft_attach *a)
{
    for (int i = 0; i < att_NT; i++) {
        struct tft_alost l;
        if (att_T[i].probed_libs && tft_attach_lost_of(a, att_T[i].pid, &l) == 0)
            att_write_losses(&att_T[i], &l);
    }
}

/* Calls inside a collective when recording ended: one entered more than a
 * second before is taken as stuck (written as entered, never left); a
 * younger one was merely in flight and is left out, as is an allocation
 * that had not returned. */
static uint64_t end_ns;
static void on_open_call(void *ctx, const struct tft_acall *c)
{
    (void)ctx;
    int coll = c->fn < TFT_AFN_MPI_END || (c->fn >= TFT_AFN_NCCL_ALLREDUCE && c->fn <= TFT_AFN_NCCL_RECV);
    for (int i = 0; coll && i < att_NT; i++)
        if (att_T[i].pid == c->pid && end_ns - c->t_enter > 1000000000ull)
            att_write_call(&att_T[i], c);
}

static int finish_trace(int dfd, const char *out, const uint8_t run_id[16])
{
    tft_manifest_rank mr[ATT_MAX_TARGETS];
    uint64_t calls = 0, open = 0, edge = 0, allocs = 0, frees = 0, cuda = 0, nccl = 0, lost = 0;
    size_t qmax = 0;
    for (int i = 0; i < att_NT; i++) {
        att_target *t = &att_T[i];
        tft_writer_close(t->w);
        t->w = NULL;
        mr[i] = (tft_manifest_rank){.rank = t->rank >= 0 ? t->rank : i, .pid = t->pid};
        snprintf(mr[i].file, sizeof mr[i].file, "%s", t->file);
        calls += t->calls, open += t->open, edge += t->dropped_edge, allocs += t->allocs, frees += t->frees;
        cuda += t->cuda, nccl += t->nccl, lost += t->lost;
        qmax = t->qmax > qmax ? t->qmax : qmax;
        att_target_free(t);
    }
    manifest_run run = {.run_id = run_id, .file_mode = 0600, .collector = 0, .options_json = "{\"attach\":true}",
                        .incomplete = lost ? "tftrace attach: calls lost (BPF ring buffer full)" : NULL};
    int me = manifest_merge_rank(dfd, &run, mr, att_NT, 0);
    fprintf(stderr, "tftrace attach: %s: %d process%s, %llu collective calls recorded (%llu of them NCCL; %llu at the"
                    " edges of the window left out so that every rank's MPI_COMM_WORLD calls are the same ones), %llu"
                    " stuck in one at the end; %llu large allocations and %llu frees, %llu CUDA calls; probes"
                    " removed\n", out, att_NT, att_NT == 1 ? "" : "es", (unsigned long long)calls,
            (unsigned long long)nccl, (unsigned long long)edge, (unsigned long long)open, (unsigned long long)allocs,
            (unsigned long long)frees, (unsigned long long)cuda);
    if (lost)
        fprintf(stderr, "tftrace attach: %s: %llu calls lost (the BPF ring buffer was full): the trace says so"
                        " (DROPPED records; tfdump --check)\n", out, (unsigned long long)lost);
    if (getenv("TFT_TEST_ATTACH_STATS"))   /* tests only: the most calls one queue held */
        fprintf(stderr, "tftrace attach: queue max %zu\n", qmax);
    if (me < 0)
        fprintf(stderr, "tftrace attach: %s/manifest.json: %s\n", out, strerror(-me));
    return me < 0 ? 2 : 0;
}

/* Records until --duration, a signal, or every target's exit; writes as
 * it goes, flushing every rank file and reading the losses once a second. */
static void record(tft_attach *a, double duration)
{
    double start = (double)tft_clock_mono_ns() / 1e9, last = start;
    while (!stop_signal) {
        tft_attach_poll(a, 100, att_stream_call, NULL);
        double now = (double)tft_clock_mono_ns() / 1e9;
        if (duration > 0 && now - start >= duration)
            break;
        if (now - last >= 1.0) {
            last = now;
            note_losses(a);
            for (int i = 0; i < att_NT; i++)
                if (att_T[i].w)
                    tft_writer_flush(att_T[i].w);
        }
        int any = 0;
        for (int i = 0; i < att_NT && !any; i++)
            any = alive(att_T[i].pid);
        if (!any)
            break;
    }
    tft_attach_poll(a, 0, att_stream_call, NULL);
    note_losses(a);
    att_stream_finish();
    end_ns = tft_clock_mono_ns();
    tft_attach_open_calls(a, on_open_call, NULL);
}

/* TFT_ALLOC_MIN as the interposer reads it: bytes with an optional k/M/G,
 * or "off". 0 and the value, or -1 for a value that is none of these. */
static int alloc_min(uint64_t *out)
{
    const char *v = getenv("TFT_ALLOC_MIN");
    *out = 1 << 20;
    if (!v || !*v)
        return 0;
    if (!strcasecmp(v, "off"))
        return *out = UINT64_MAX, 0;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    int shift = *end == 'k' || *end == 'K' ? 10 : *end == 'm' || *end == 'M' ? 20 : *end == 'g' || *end == 'G' ? 30 : 0;
    end += shift != 0;
    if (errno || *end || v[0] < '0' || v[0] > '9' || x > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)x << shift;
    return 0;
}

static int run_attach(const char *out, double duration, int children, unsigned want)
{
    char err[256];
    uint64_t min_bytes;
    if (alloc_min(&min_bytes) < 0)
        return fprintf(stderr, "tftrace attach: TFT_ALLOC_MIN='%s' is not a size (bytes, with k, M or G, or"
                               " 'off')\n", getenv("TFT_ALLOC_MIN")), 2;
    /* tests only: a smaller BPF ring buffer (a power of two of pages) forces losses */
    const char *rb = getenv("TFT_TEST_ATTACH_RINGBUF_BYTES");
    size_t ring = rb ? (size_t)strtoull(rb, NULL, 10) : 0;
    if (children)
        add_children();
    for (int i = 0; i < att_NT; i++) {
        static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"};
        att_T[i].rank = stacks_rank_of(att_T[i].pid, NULL, 0);
        att_T[i].size = env_int(att_T[i].pid, sizes, 3);
    }
    tft_attach *a = tft_attach_open(min_bytes, ring, err, sizeof err);
    if (!a) {
        fprintf(stderr, "tftrace attach: %s%s\n", errno == EPERM || errno == EACCES ? "BPF is not permitted here: " : "",
                err);
        return 2;
    }
    uint8_t run_id[16] = {0};
    if (getrandom(run_id, sizeof run_id, 0) != sizeof run_id)
        run_id[0] = 1;
    int dfd = -1, rc = 2;
    if (place_probes(a, want) == 0) {
        fprintf(stderr, "tftrace attach: no target maps a library probed: nothing attached\n");
        goto out;
    }
    if (open_trace(out, &dfd, run_id) < 0)
        goto out;
    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    fprintf(stderr, "tftrace attach: recording %d process%s into %s (%s)\n", att_NT, att_NT == 1 ? "" : "es", out,
            duration > 0 ? "until --duration" : "until Ctrl-C or the targets exit");
    record(a, duration);
    rc = finish_trace(dfd, out, run_id);
out:
    tft_attach_close(a);
    if (dfd >= 0)
        close(dfd);
    return rc;
}

/* --probe mpi,nccl,cuda,malloc: the mask of libs, 0 for a bad list. */
static unsigned parse_probes(const char *s)
{
    unsigned m = 0;
    while (*s) {
        size_t n = strcspn(s, ",");
        int k = 0;
        while (k < LIB_COUNT && !(strlen(libs[k].probe) == n && !strncmp(s, libs[k].probe, n)))
            k++;
        if (k == LIB_COUNT)
            return 0;
        m |= 1u << k;
        s += n + (s[n] == ',');
    }
    return m;
}
#endif

static void attach_usage(FILE *f)
{
    fprintf(f, "usage: tftrace attach [-o TRACE] [--duration S] [--children] [--probe LIST] PID...\n"
               "Records, of running processes started without tftrace, through uprobes on the libraries\n"
               "each maps, into an ordinary trace: the MPI collectives (MPI_Allreduce, MPI_Reduce,\n"
               "MPI_Bcast, MPI_Allgather, MPI_Barrier), the NCCL collectives (ncclAllReduce,\n"
               "ncclBroadcast, ncclReduce, ncclAllGather, ncclReduceScatter, ncclSend, ncclRecv),\n"
               "cudaMalloc/cudaFree, and with --probe malloc the malloc/calloc of at least TFT_ALLOC_MIN\n"
               "bytes (default 1M) with their free. The probes are removed at the end and the processes\n"
               "run on unharmed.\n\n"
               "  -o, --output TRACE   trace directory, new or empty (default: attach-DATE-TIME.trace)\n"
               "      --duration S     stop after S seconds (default: Ctrl-C, or when every target exited)\n"
               "      --children       also every descendant of each PID\n"
               "      --probe LIST     what to probe, of mpi,nccl,cuda,malloc (default: mpi,nccl,cuda; malloc\n"
               "                       traps on every malloc and free, a cost to the process)\n"
               "Needs root or CAP_BPF + CAP_PERFMON; see docs/ATTACH.md.\n");
}

int attach_main(int argc, char **argv)
{
    static const struct option lo[] = {{"output", required_argument, 0, 'o'}, {"duration", required_argument, 0, 'd'},
                                       {"children", no_argument, 0, 'c'},     {"help", no_argument, 0, 'h'},
                                       {"probe", required_argument, 0, 'p'},  {0, 0, 0, 0}};
    const char *out = NULL;
    double duration = 0;
    int children = 0, c;
    /* malloc is opt-in: its probes trap on every malloc and free (a CPython
     * loop of small lists runs ~50x slower under them, docs/ATTACH.md) */
    const char *probes = "mpi,nccl,cuda";
    optind = 1;
    while ((c = getopt_long(argc, argv, "+o:h", lo, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'o': out = optarg; break;
        case 'd':
            duration = strtod(optarg, &end);
            if (*end || end == optarg || !(duration > 0))
                return fprintf(stderr, "tftrace attach: --duration needs seconds > 0, got '%s'\n", optarg), 2;
            break;
        case 'c': children = 1; break;
        case 'p': probes = optarg; break;
        case 'h': attach_usage(stdout); return 0;
        default: attach_usage(stderr); return 2;
        }
    }
    if (optind >= argc)
        return fprintf(stderr, "tftrace attach: no PID given\n"), attach_usage(stderr), 2;
    if (!tft_stacks_supported())
        return fprintf(stderr, "tftrace attach: this tftrace was built without BPF support (docs/ATTACH.md)\n"), 2;
#ifdef TFT_HAVE_BPF
    unsigned want = parse_probes(probes);
    if (!want)
        return fprintf(stderr, "tftrace attach: --probe takes a list of mpi, nccl, cuda, malloc; got '%s'\n", probes),
               2;
    for (int i = optind; i < argc; i++) {
        char *end;
        long v = strtol(argv[i], &end, 10);
        if (*end || end == argv[i] || v <= 0 || v > 0x3fffffff)
            return fprintf(stderr, "tftrace attach: '%s' is not a process id\n", argv[i]), 2;
        if (att_NT == ATT_MAX_TARGETS)
            return fprintf(stderr, "tftrace attach: at most %d processes\n", ATT_MAX_TARGETS), 2;
        att_T[att_NT++].pid = (pid_t)v;
    }
    if (bpf_privilege_check("attach"))
        return 2;
    for (int i = 0; i < att_NT; i++)
        if (bpf_target_check("attach", att_T[i].pid))
            return 2;
    char buf[4096];
    if (!out) {
        cli_fresh_name(buf, sizeof buf, "attach", ".trace");
        out = buf;
    }
    return run_attach(out, duration, children, want);
#else
    return 2;
#endif
}
