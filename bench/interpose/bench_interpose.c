/*
 * bench_interpose.c — cost of the LD_PRELOAD interposers per intercepted
 * call, each figure next to the same loop untraced in the same run (never
 * a timed assertion):
 *   small   malloc(64) + free with one recorded 2 MiB block alive (so free
 *           probes the recorded-block set): the cost of the size check;
 *   small0  the same with no recorded block alive (free: one load);
 *   big     malloc(2 MiB) + free: one recorded ALLOC and FREE per pair;
 *   sgemm   cblas_sgemm on 4 x 4 matrices, under tftrace --stats shape (an
 *           op and C's shape per call) and with full statistics (A and B
 *           as inputs, each an op and a tensor, then the op and C).
 * Configurations: untraced; libtftrace preloaded without recording (the
 * interposers present but off); under tftrace. Each measurement is a child
 * process running this program with --child, reporting its best of 30
 * short passes, each followed by a pause (child()); best of R such runs,
 * alternated. tftrace runs with its defaults (4 MiB rings); a traced run
 * whose trace shows dropped records is left out. Prints a table and one
 * BENCH-RESULT line per figure (bench/run.sh), in CPU time.
 *   bench_interpose [--reps R] [--scale X] [--tftrace PATH] [--lib PATH]
 * --scale X multiplies the calls per pass.
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

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }

#define PASSES 30     /* measured passes per run */
#define WARM_PASSES 30 /* before them: the ring lapped, its pages mapped */
#define PAUSE_NS 10000000L

/* One pass of n iterations of kind; seconds. */
static double pass(const char *kind, long n);

/* child: ns per iteration of kind, the best of PASSES passes of n
 * iterations (on a loaded machine the best one is the one least
 * disturbed), in wall-clock time and in the thread's CPU time (*cpu: what
 * the calls cost the program; the wall clock adds the time other processes
 * took the core). Each pass is followed by a 10 ms pause, in which the
 * collector drains what the pass wrote: the figure is the cost of a call
 * with room in the ring, not the collector's throughput (a pass writes at
 * most ~1.2 MB, less than the default 4 MiB ring). The warm-up passes lap
 * the ring, so its pages are mapped: the first touch of each costs a page
 * fault, once per ring. */
static double child(const char *kind, long n, double *cpu)
{
    /* recorded under tftrace: free probes the set */
    void *keep = strcmp(kind, "small0") ? malloc(2u << 20) : NULL;
    sink = keep;
    double best = 1e30, best_cpu = 1e30;
    const struct timespec pause = {0, PAUSE_NS};
    for (int p = 0; p < WARM_PASSES + PASSES; p++) {
        double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
        double t = pass(kind, n);
        double c = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
        if (t < 0) {
            free(keep);
            return -1;
        }
        if (p >= WARM_PASSES) {
            best = t < best ? t : best;
            best_cpu = c < best_cpu ? c : best_cpu;
        }
        nanosleep(&pause, NULL);
    }
    free(keep);
    *cpu = best_cpu / (double)n * 1e9;
    return best / (double)n * 1e9;
}

static double pass(const char *kind, long n)
{
    double t0 = now();
    if (!strcmp(kind, "small") || !strcmp(kind, "small0")) {
        for (long i = 0; i < n; i++) {
            void *p = malloc(64);
            sink = p;
            free(p);
        }
    } else if (!strcmp(kind, "big")) {
        for (long i = 0; i < n; i++) {
            void *p = malloc(2u << 20);
            sink = p;
            free(p);
        }
#ifdef TFT_BENCH_BLAS
    } else if (!strcmp(kind, "sgemm")) {
        float a[16], b[16], c[16];
        for (int i = 0; i < 16; i++)
            a[i] = (float)i, b[i] = (float)(16 - i);
        for (long i = 0; i < n; i++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 4, 4, 4, 1.0f, a, 4, b, 4, 0.0f, c, 4);
            sink = c;
        }
#endif
    } else {
        return -1;
    }
    return now() - t0;
}

enum { UNTRACED, PRELOADED, TRACED };

/* Records the trace at dir says were dropped, -1 when unreadable. */
static long trace_dropped(const char *tfdump, const char *dir)
{
    char cmd[4400];
    snprintf(cmd, sizeof(cmd), "'%s' --json '%s' 2>/dev/null", tfdump, dir);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    char line[512];
    long n = -1;
    while (fgets(line, sizeof(line), f))
        if (n < 0 && !strncmp(line, "\t\"dropped\":", 11)) /* the summary's own, one tab in */
            n = atol(line + 11);
    pclose(f);
    return n;
}

/* Runs this program as a child in configuration cfg; returns its wall
 * figure, *cpu its CPU-time figure; -1 when it failed. */
static double run(const char *self, int cfg, const char *kind, const char *stats, long n, const char *tftrace,
                  const char *lib, const char *dir, double *cpu)
{
    static int runs; /* each traced run records into a new directory */
    runs++;
    int fd[2];
    if (pipe(fd) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        char ns[32], out[4200];
        snprintf(ns, sizeof(ns), "%ld", n);
        snprintf(out, sizeof(out), "%s/%s-%d.trace", dir, kind, runs);
        unsetenv("TFT_SHM");
        unsetenv("TFT_OUTPUT");
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        if (cfg == TRACED)
            execl(tftrace, tftrace, "-q", "--stats", stats, "-o", out, "--", self,
                  "--child", kind, ns, (char *)NULL);
        if (cfg == PRELOADED)
            setenv("LD_PRELOAD", lib, 1);
        execl(self, self, "--child", kind, ns, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[128] = {0};
    ssize_t got = read(fd[0], buf, sizeof(buf) - 1);
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    double wall = -1;
    if (got <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || sscanf(buf, "%lf %lf", &wall, cpu) != 2)
        return -1;
    if (cfg == TRACED) {
        char out[4200];
        snprintf(out, sizeof(out), "%s/%s-%d.trace", dir, kind, runs);
        long d = trace_dropped(TFT_BENCH_TFDUMP, out);
        if (d != 0) {
            fprintf(stderr, "bench_interpose: %s (--stats %s): %ld records dropped%s; run discarded\n", kind, stats,
                    d, d < 0 ? " (trace unreadable)" : "");
            return -2;
        }
    }
    return wall;
}

/* The cases measured; goal: ns per call over untraced, < 0 none
 * (BENCH-RESULT "goal": null); n: calls per pass. */
static const struct bench_case {
    const char *id, *kind, *stats, *what;
    long n;
    double goal;
} cases[] = {
    {"interpose.malloc.small0", "small0", "shape", "malloc(64)+free, none recorded alive", 40000, -1},
    {"interpose.malloc.small", "small", "shape", "malloc(64)+free, a recorded block alive", 40000, -1},
    /* 100 ns per intercepted call (docs/BENCHMARKS.md): two per pair */
    {"interpose.malloc.big", "big", "shape", "malloc(2 MiB)+free, recorded", 4000, 200},
#ifdef TFT_BENCH_BLAS
    {"interpose.sgemm4.shape", "sgemm", "shape", "cblas_sgemm 4x4, --stats shape", 2000, 100},
    {"interpose.sgemm4.full", "sgemm", "full", "cblas_sgemm 4x4, full statistics", 1000, -1},
#endif
};
enum { NCASES = sizeof(cases) / sizeof(cases[0]) };

typedef struct bench_opts {
    int reps;
    double scale;
    const char *tftrace, *lib;
    char exe[4096], dir[32];
} bench_opts;

/* Runs case c reps times in each configuration, alternated, keeping the
 * best wall and CPU times per configuration; prints its row. Returns 1
 * when a measurement failed (a run with drops is left out, not a failure). */
static int measure(const bench_opts *o, const struct bench_case *c, double best[3], double cpu[3])
{
    int bad = 0;
    long n = (long)((double)c->n * o->scale);
    n = n < 100 ? 100 : n;
    for (int cfg = UNTRACED; cfg <= TRACED; cfg++)
        best[cfg] = cpu[cfg] = 1e30;
    for (int r = 0; r < o->reps; r++)
        for (int cfg = UNTRACED; cfg <= TRACED; cfg++) {
            double t, v = run(o->exe, cfg, c->kind, c->stats, n, o->tftrace, o->lib, o->dir, &t);
            if (v < 0) {
                bad |= v == -1;
                continue;
            }
            best[cfg] = v < best[cfg] ? v : best[cfg];
            cpu[cfg] = t < cpu[cfg] ? t : cpu[cfg];
        }
    printf("%-40s", c->what);
    for (int cfg = UNTRACED; cfg <= TRACED; cfg++)
        printf(" %6.1f (%6.1f)", best[cfg], cpu[cfg]);
    printf(" %6.2f\n", cpu[TRACED] / cpu[UNTRACED]);
    return bad;
}

/* The figures of case c: CPU time, which the other processes of a loaded
 * machine disturb far less than the wall clock. */
static void bench_results(const struct bench_case *c, const double b[3])
{
    if (b[TRACED] >= 1e30 || b[UNTRACED] >= 1e30)
        return; /* every traced run dropped records: no figure */
    char goal[32] = "null";
    if (c->goal >= 0)
        snprintf(goal, sizeof(goal), "%g", c->goal);
    printf("BENCH-RESULT {\"id\":\"%s\",\"what\":\"%s under tftrace (CPU time per call)\",\"unit\":\"ns/call\","
           "\"figure\":%.1f,\"baseline\":%.1f,\"baseline_what\":\"untraced\",\"metric\":\"delta\",\"value\":%.1f,"
           "\"goal_op\":\"<=\",\"goal\":%s}\n",
           c->id, c->what, b[TRACED], b[UNTRACED], b[TRACED] - b[UNTRACED], goal);
    printf("BENCH-RESULT {\"id\":\"%s.off\",\"what\":\"%s, libtftrace preloaded, not recording (CPU time per call)\","
           "\"unit\":\"ns/call\",\"figure\":%.1f,\"baseline\":%.1f,\"baseline_what\":\"untraced\","
           "\"metric\":\"delta\",\"value\":%.1f,\"goal_op\":\"<=\",\"goal\":null}\n",
           c->id, c->what, b[PRELOADED], b[UNTRACED], b[PRELOADED] - b[UNTRACED]);
}

/* --reps N --scale X --tftrace PATH --lib PATH, its own executable's path
 * and a scratch directory. 0, or -1 when either cannot be had. */
static int parse_opts(int argc, char **argv, bench_opts *o)
{
    *o = (bench_opts){.reps = 5, .scale = 1, .tftrace = TFT_BENCH_LAUNCHER, .lib = TFT_BENCH_LIBRARY};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps"))
            o->reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--scale"))
            o->scale = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--tftrace"))
            o->tftrace = argv[i + 1];
        else if (!strcmp(argv[i], "--lib"))
            o->lib = argv[i + 1];
    }
    snprintf(o->dir, sizeof(o->dir), "/tmp/tft-bench-ip-XXXXXX");
    if (!mkdtemp(o->dir))
        return -1;
    ssize_t len = readlink("/proc/self/exe", o->exe, sizeof(o->exe) - 1);
    if (len <= 0)
        return -1;
    o->exe[len] = '\0';
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--child")) {
        double cpu = -1, v = child(argv[2], atol(argv[3]), &cpu);
        printf("%.3f %.3f\n", v, cpu);
        return v < 0;
    }
    static bench_opts o;
    if (parse_opts(argc, argv, &o) < 0)
        return 1;
    double load0[1] = {0}, load1[1] = {0};
    getloadavg(load0, 1);
    printf("ns per call (per malloc+free pair), best of %d runs of %d passes, alternated, default ring; wall clock\n"
           "(CPU time of the calling thread); ratio = traced / untraced CPU time\n", o.reps, PASSES);
    printf("%-40s %15s %15s %15s %6s\n", "", "untraced", "preload,off", "traced", "ratio");
    int bad = 0;
    double best[NCASES][3], cpu[NCASES][3];
    for (size_t k = 0; k < NCASES; k++)
        bad |= measure(&o, &cases[k], best[k], cpu[k]);
    getloadavg(load1, 1);
    printf("load average %.1f -> %.1f\n", load0[0], load1[0]);
    for (size_t k = 0; k < NCASES && !bad; k++)
        bench_results(&cases[k], cpu[k]);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", o.dir);
    if (system(cmd) != 0 || bad) {
        fprintf(stderr, "bench_interpose: a measurement failed\n");
        return 1;
    }
    return 0;
}
