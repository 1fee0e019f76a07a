/*
 * bench_interpose.c — cost of the LD_PRELOAD interposers per intercepted
 * call, each figure next to the same loop untraced in the same run (never
 * a timed assertion):
 *   small   malloc(64) + free with one recorded 2 MiB block alive (so free
 *           probes the recorded-block set): the cost of the size check;
 *   small0  the same with no recorded block alive (free: one load);
 *   big     malloc(2 MiB) + free: one recorded ALLOC and FREE per pair;
 *   sgemm   cblas_sgemm on 4 x 4 matrices, tftrace --stats shape: an op
 *           and three tensor records per call (A, B inputs; C output).
 * Configurations: untraced; libtftrace preloaded without recording (the
 * interposers present but off); under tftrace. Each measurement is a child
 * process running this program with --child; best of R, alternated.
 *   bench_interpose [--reps R] [--scale X] [--tftrace PATH] [--lib PATH]
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef TFT_BENCH_BLAS
#include <cblas.h>
#endif

static void *volatile sink;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* child: ns per iteration of kind over n iterations (after a warm-up) */
static double child(const char *kind, long n)
{
    /* recorded under tftrace: free probes the set */
    void *keep = strcmp(kind, "small0") ? malloc(2u << 20) : NULL;
    sink = keep;
    double t0 = 0;
    if (!strcmp(kind, "small") || !strcmp(kind, "small0")) {
        for (long i = -n / 10; i < n; i++) {
            if (i == 0)
                t0 = now();
            void *p = malloc(64);
            sink = p;
            free(p);
        }
    } else if (!strcmp(kind, "big")) {
        for (long i = -n / 10; i < n; i++) {
            if (i == 0)
                t0 = now();
            void *p = malloc(2u << 20);
            sink = p;
            free(p);
        }
#ifdef TFT_BENCH_BLAS
    } else if (!strcmp(kind, "sgemm")) {
        float a[16], b[16], c[16];
        for (int i = 0; i < 16; i++)
            a[i] = (float)i, b[i] = (float)(16 - i);
        for (long i = -n / 10; i < n; i++) {
            if (i == 0)
                t0 = now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 4, 4, 4, 1.0f, a, 4, b, 4, 0.0f, c, 4);
            sink = c;
        }
#endif
    } else {
        return -1;
    }
    double dt = now() - t0;
    free(keep);
    return dt / (double)n * 1e9;
}

enum { UNTRACED, PRELOADED, TRACED };

/* Runs this program as a child in configuration cfg; returns its figure. */
static double run(const char *self, int cfg, const char *kind, long n, const char *tftrace, const char *lib,
                  const char *dir)
{
    int fd[2];
    if (pipe(fd) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        char ns[32], out[4200];
        snprintf(ns, sizeof(ns), "%ld", n);
        snprintf(out, sizeof(out), "%s/%s.trace", dir, kind);
        unsetenv("TFT_SHM");
        unsetenv("TFT_OUTPUT");
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        if (cfg == TRACED)
            execl(tftrace, tftrace, "-q", "--stats", "shape", "--ring-kb", "65536", "-o", out, "--", self,
                  "--child", kind, ns, (char *)NULL);
        if (cfg == PRELOADED)
            setenv("LD_PRELOAD", lib, 1);
        execl(self, self, "--child", kind, ns, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[64] = {0};
    ssize_t got = read(fd[0], buf, sizeof(buf) - 1);
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    return got > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? atof(buf) : -1;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--child")) {
        double v = child(argv[2], atol(argv[3]));
        printf("%.3f\n", v);
        return v < 0;
    }
    int reps = 5;
    double scale = 1;
    const char *tftrace = TFT_BENCH_LAUNCHER, *lib = TFT_BENCH_LIBRARY;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--scale"))
            scale = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--tftrace"))
            tftrace = argv[i + 1];
        else if (!strcmp(argv[i], "--lib"))
            lib = argv[i + 1];
    }
    char dir[] = "/tmp/tft-bench-ip-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    const char *self = "/proc/self/exe";
    char exe[4096];
    ssize_t len = readlink(self, exe, sizeof(exe) - 1);
    if (len <= 0)
        return 1;
    exe[len] = '\0';
    static const struct {
        const char *kind, *what;
        long n;
    } cases[] = {
        {"small0", "malloc(64)+free, none recorded alive", 4000000},
        {"small", "malloc(64)+free, a recorded block alive", 4000000},
        {"big", "malloc(2 MiB)+free, recorded", 200000},
#ifdef TFT_BENCH_BLAS
        {"sgemm", "cblas_sgemm 4x4, --stats shape", 400000},
#endif
    };
    printf("ns per call (per malloc+free pair), best of %d, alternated; ratio = traced / untraced\n", reps);
    printf("%-40s %10s %12s %10s %8s\n", "", "untraced", "preload,off", "traced", "ratio");
    int bad = 0;
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        long n = (long)((double)cases[k].n * scale);
        n = n < 100 ? 100 : n;
        double best[3] = {1e30, 1e30, 1e30};
        for (int r = 0; r < reps; r++)
            for (int cfg = UNTRACED; cfg <= TRACED; cfg++) {
                double v = run(exe, cfg, cases[k].kind, n, tftrace, lib, dir);
                if (v < 0)
                    bad = 1;
                else if (v < best[cfg])
                    best[cfg] = v;
            }
        printf("%-40s %10.1f %12.1f %10.1f %8.2f\n", cases[k].what, best[UNTRACED], best[PRELOADED], best[TRACED],
               best[TRACED] / best[UNTRACED]);
    }
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0 || bad) {
        fprintf(stderr, "bench_interpose: a measurement failed\n");
        return 1;
    }
    return 0;
}
