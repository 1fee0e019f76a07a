/*
 * bpf_stacks.c — loads stacks.bpf.c (its skeleton), takes one user-stack
 * snapshot per thread of the target processes and unloads it again.
 * Workload: a few processes, tens of threads, once per command; the
 * programs are attached for window_ms plus one task iteration.
 */
#include "bpf_stacks.h"

#ifdef TFT_HAVE_BPF
#include "stacks.skel.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int tft_stacks_supported(void) { return 1; }

typedef struct snap_sink {
    struct tft_snap *v;
    size_t n, cap;
    int oom;
} snap_sink;

static int on_snap(void *ctx, void *data, size_t size)
{
    snap_sink *k = ctx;
    if (size < sizeof(struct tft_snap))
        return 0;
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 16;
        struct tft_snap *v = realloc(k->v, cap * sizeof(*v));
        if (!v) {
            k->oom = 1;
            return -ENOMEM;
        }
        k->v = v;
        k->cap = cap;
    }
    memcpy(&k->v[k->n++], data, sizeof(struct tft_snap));
    return 0;
}

static int quiet_print(enum libbpf_print_level level, const char *fmt, va_list ap) { return 0; }

/* A CPU-clock sampling event on every online CPU, each running prog. The
 * links go to links[] (up to max); returns how many, or -errno when none. */
static int attach_cpu_clock(struct bpf_program *prog, struct bpf_link **links, int max, int period_us)
{
    int ncpu = libbpf_num_possible_cpus(), k = 0, last = -ENODEV;
    for (int cpu = 0; cpu < ncpu && k < max; cpu++) {
        struct perf_event_attr a = {.type = PERF_TYPE_SOFTWARE, .size = sizeof(a),
                                    .config = PERF_COUNT_SW_CPU_CLOCK,
                                    .sample_period = (unsigned long long)period_us * 1000};
        int fd = (int)syscall(__NR_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            last = -errno;   /* an offline CPU: ENODEV; keep going */
            continue;
        }
        links[k] = bpf_program__attach_perf_event(prog, fd);
        if (!links[k]) {
            last = -errno;
            close(fd);
            continue;
        }
        k++;
    }
    return k ? k : last;
}

/* Runs the task iterator once; its output goes to the ring buffer. */
static int run_iterator(struct tft_stacks_bpf *skel)
{
    struct bpf_link *l = bpf_program__attach_iter(skel->progs.tft_snap_offcpu, NULL);
    if (!l)
        return -errno;
    int fd = bpf_iter_create(bpf_link__fd(l)), rc = 0;
    if (fd < 0) {
        rc = -errno;
    } else {
        char buf[256];
        ssize_t r;
        while ((r = read(fd, buf, sizeof buf)) > 0)
            ;
        if (r < 0)
            rc = -errno;
        close(fd);
    }
    bpf_link__destroy(l);
    return rc;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static int set_err(char *err, size_t len, int rc, const char *what)
{
    if (err && len)
        snprintf(err, len, "%s: %s", what, strerror(-rc));
    return rc;
}

int tft_stacks_snapshot(const pid_t *pids, size_t npids, const tft_snapshot_opts *opts,
                        struct tft_snap **out, size_t *n, char *err, size_t errlen)
{
    enum { MAX_CPUS = 1024 };
    unsigned window = opts && opts->window_ms ? opts->window_ms : 300;
    struct bpf_link **links = calloc(MAX_CPUS, sizeof(*links));
    struct ring_buffer *rb = NULL;
    snap_sink sink = {0};
    int nlinks = 0, rc;
    *out = NULL;
    *n = 0;
    if (!links)
        return -ENOMEM;
    libbpf_set_print(quiet_print);
    struct tft_stacks_bpf *skel = tft_stacks_bpf__open_and_load();
    if (!skel) {
        rc = set_err(err, errlen, -errno, "loading the BPF programs");
        goto out;
    }
    for (size_t i = 0; i < npids; i++) {
        __u32 k = (__u32)pids[i];
        __u8 one = 1;
        if (bpf_map__update_elem(skel->maps.targets, &k, sizeof k, &one, 1, BPF_ANY) < 0) {
            rc = set_err(err, errlen, -errno, "filling the target map");
            goto out;
        }
    }
    rb = ring_buffer__new(bpf_map__fd(skel->maps.snaps), on_snap, &sink, NULL);
    if (!rb) {
        rc = set_err(err, errlen, -errno, "opening the BPF ring buffer");
        goto out;
    }
    nlinks = attach_cpu_clock(skel->progs.tft_snap_oncpu, links, MAX_CPUS, 1000);
    if (nlinks < 0) {
        rc = set_err(err, errlen, nlinks, "opening CPU-clock perf events");
        nlinks = 0;
        goto out;
    }
    sleep_ms(window);
    for (int i = 0; i < nlinks; i++)
        bpf_link__destroy(links[i]);
    nlinks = 0;
    ring_buffer__consume(rb);
    rc = run_iterator(skel);
    if (rc < 0) {
        set_err(err, errlen, rc, "running the BPF task iterator");
        goto out;
    }
    ring_buffer__consume(rb);
    if (sink.oom) {
        rc = -ENOMEM;
        goto out;
    }
    *out = sink.v;
    *n = sink.n;
    sink.v = NULL;
    rc = 0;
out:
    for (int i = 0; i < nlinks; i++)
        bpf_link__destroy(links[i]);
    ring_buffer__free(rb);
    tft_stacks_bpf__destroy(skel);
    free(links);
    free(sink.v);
    return rc;
}

#else /* !TFT_HAVE_BPF */

#include <errno.h>
#include <stdio.h>

int tft_stacks_supported(void) { return 0; }

int tft_stacks_snapshot(const pid_t *pids, size_t npids, const tft_snapshot_opts *opts,
                        struct tft_snap **out, size_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    if (err && errlen)
        snprintf(err, errlen, "built without BPF support (libbpf, clang, bpftool, libdw and kernel BTF are needed at build time)");
    return -ENOSYS;
}

#endif
