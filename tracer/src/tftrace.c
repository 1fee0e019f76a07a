/*
 * tftrace — runs a command with libtftrace preloaded and collects its
 * records into a trace directory. The collector lives in this process, so a
 * crash of the traced program loses nothing it committed to its rings.
 *
 *   tftrace [-o PATH] [--stats MODE] [--every N] [--timeout S] [--no-drop] -- CMD ...
 *   tftrace replay [options] GOLDEN BAD         (replay.c)
 *
 * Exit status: the command's (128+signal when it was killed); 2 for usage
 * errors of tftrace itself; 127 when the command cannot be run.
 */
#include "capture_ref.h"
#include "capture_spec.h"
#include "collector.h"
#include "replay.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef TFT_VERSION_STRING
#define TFT_VERSION_STRING "0.0.0"
#endif

typedef struct opts {
    const char *out;
    const char *stats;
    long every;
    double timeout;      /* seconds, 0 = none */
    double grace;        /* seconds between SIGTERM and SIGKILL */
    int no_drop;
    long ring_kb;
    int quiet;
    int64_t until_step;  /* stop the command once this step ended, -1 = never */
    const char *alloc_min;  /* host allocations recorded from this size (TFT_ALLOC_MIN) */
    const char *step_range; /* NVTX range name marking steps (TFT_STEP_RANGE) */
    const char *capture; /* capture spec (docs/CAPTURE.md), NULL = none */
    char **cmd;
} opts;

static volatile sig_atomic_t got_signal;
static char shm_name[64];

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tftrace [options] -- COMMAND [ARGS...]\n"
            "       tftrace replay [options] GOLDEN BAD   (see tftrace replay --help)\n"
            "Runs COMMAND with the tftrace recorder and writes a trace directory.\n\n"
            "  -o, --output PATH     trace directory (default: tftrace-DATE-TIME.trace, never\n"
            "                        overwriting an existing one)            [TFT_OUTPUT]\n"
            "      --stats MODE      shape | health | full (default full)    [TFT_STATS]\n"
            "      --every N         tensor statistics every N steps, shape only between [TFT_EVERY]\n"
            "      --timeout SEC     end the command after SEC seconds: SIGTERM, then SIGKILL\n"
            "                        after --grace (default 5 s); the trace stays readable [TFT_TIMEOUT]\n"
            "      --grace SEC       seconds between SIGTERM and SIGKILL     [TFT_KILL_GRACE]\n"
            "      --no-drop         block the program when a ring is full instead of dropping\n"
            "                        records (they are counted either way)  [TFT_NO_DROP=1]\n"
            "      --ring-kb N       ring size per thread in KiB (default 4096) [TFT_RING_KB]\n"
            "      --alloc-min SIZE  record host allocations (malloc, mmap, ...) of at least SIZE\n"
            "                        bytes, K/M/G suffixes, 'off' none (default 1M) [TFT_ALLOC_MIN]\n"
            "      --step-range NAME an NVTX range of this name marks a training step; 'NAME N'\n"
            "                        or 'NAME_N' gives the step number (default step) [TFT_STEP_RANGE]\n"
            "      --until-step S    stop the command (SIGTERM) once every process recording\n"
            "                        steps has ended step S                  [TFT_UNTIL_STEP]\n"
            "      --capture SPEC    store whole tensors (inputs and outputs) of the ops that\n"
            "                        match SPEC: terms step=N|A:B, seq=N|A:B, rank=N, name=GLOB\n"
            "                        joined by ',' (all must match); ';' separates alternatives.\n"
            "                        e.g. 'step=2,name=L0.attn.*' (docs/CAPTURE.md) [TFT_CAPTURE]\n"
            "  -q, --quiet           no summary on stderr\n"
            "  -h, --help            this help\n"
            "  -V, --version         version\n\n"
            "Exit status: the command's (128+signal when killed), 2 usage error, 127 command not run.\n"
            "Inspect with: tfdump PATH; compare with: tfdiff GOLDEN BAD.\n");
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < 0)
        return -1;
    *out = v;
    return 0;
}

static int parse_long(const char *s, long *out, long min)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min)
        return -1;
    *out = v;
    return 0;
}

static void env_defaults(opts *o)
{
    const char *v;
    o->out = getenv("TFT_OUTPUT");
    o->stats = getenv("TFT_STATS");
    o->every = 1;
    o->grace = 5;
    o->ring_kb = 4096;
    if ((v = getenv("TFT_EVERY")))
        parse_long(v, &o->every, 1);
    if ((v = getenv("TFT_TIMEOUT")))
        parse_double(v, &o->timeout);
    if ((v = getenv("TFT_KILL_GRACE")))
        parse_double(v, &o->grace);
    if ((v = getenv("TFT_RING_KB")))
        parse_long(v, &o->ring_kb, 64);
    o->no_drop = (v = getenv("TFT_NO_DROP")) && *v && strcmp(v, "0");
    o->until_step = -1;
    o->alloc_min = getenv("TFT_ALLOC_MIN");
    o->step_range = getenv("TFT_STEP_RANGE");
    long us;
    if ((v = getenv("TFT_UNTIL_STEP")) && parse_long(v, &us, 0) == 0)
        o->until_step = us;
    if ((v = getenv("TFT_CAPTURE")) && *v)
        o->capture = v;
}

/* GOLDEN of a first-divergence-of capture term, "" none; its reference
 * file (capture_ref.h), removed when the run ends. */
static char capture_golden[4096], capture_ref_path[4200];

/* Checks the capture spec before the command runs (the recorder cannot say
 * what is wrong with one). Returns 0 or the exit status 2. */
static int check_capture(const char *spec)
{
    capspec *cs = malloc(sizeof(*cs));
    char err[512];
    if (!cs)
        return fprintf(stderr, "tftrace: out of memory\n"), 2;
    int bad = capspec_parse(spec, cs, err, sizeof(err)) < 0;
    if (bad)
        fprintf(stderr, "tftrace: --capture '%s': %s\n", spec, err);
    else if (cs->first_divergence_of[0])
        snprintf(capture_golden, sizeof(capture_golden), "%s", cs->first_divergence_of);
    free(cs);
    return bad ? 2 : 0;
}

/* SIZE of --alloc-min: digits with an optional K, M or G (and B / iB), or off. */
static int valid_size(const char *v)
{
    if (!strcasecmp(v, "off"))
        return 1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || v[0] == '-' || v[0] == '+')
        return 0;
    (void)x;
    if (*end && strchr("kKmMgG", *end)) {
        end++;
        return !*end || !strcasecmp(end, "b") || !strcasecmp(end, "ib");
    }
    return !*end || !strcasecmp(end, "b");
}

static int parse_args(int argc, char **argv, opts *o)
{
    static const struct option lo[] = {
        {"output", required_argument, 0, 'o'}, {"stats", required_argument, 0, 's'},
        {"every", required_argument, 0, 'e'},  {"timeout", required_argument, 0, 't'},
        {"grace", required_argument, 0, 'g'},  {"no-drop", no_argument, 0, 'n'},
        {"ring-kb", required_argument, 0, 'r'}, {"quiet", no_argument, 0, 'q'},
        {"until-step", required_argument, 0, 'u'}, {"alloc-min", required_argument, 0, 'A'},
        {"step-range", required_argument, 0, 'R'}, {"capture", required_argument, 0, 'C'},
        {"help", no_argument, 0, 'h'},         {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    env_defaults(o);
    int c;
    while ((c = getopt_long(argc, argv, "+o:qhV", lo, NULL)) != -1) {
        switch (c) {
        case 'o': o->out = optarg; break;
        case 's': o->stats = optarg; break;
        case 'n': o->no_drop = 1; break;
        case 'q': o->quiet = 1; break;
        case 'e':
            if (parse_long(optarg, &o->every, 1) < 0)
                return fprintf(stderr, "tftrace: --every needs a positive integer, got '%s'\n", optarg), 2;
            break;
        case 't':
            if (parse_double(optarg, &o->timeout) < 0)
                return fprintf(stderr, "tftrace: --timeout needs seconds >= 0, got '%s'\n", optarg), 2;
            break;
        case 'g':
            if (parse_double(optarg, &o->grace) < 0)
                return fprintf(stderr, "tftrace: --grace needs seconds >= 0, got '%s'\n", optarg), 2;
            break;
        case 'r':
            if (parse_long(optarg, &o->ring_kb, 64) < 0)
                return fprintf(stderr, "tftrace: --ring-kb needs an integer >= 64, got '%s'\n", optarg), 2;
            break;
        case 'u': {
            long us;
            if (parse_long(optarg, &us, 0) < 0)
                return fprintf(stderr, "tftrace: --until-step needs a step number >= 0, got '%s'\n", optarg), 2;
            o->until_step = us;
            break;
        }
        case 'C': o->capture = optarg; break;
        case 'A':
            if (!valid_size(optarg))
                return fprintf(stderr, "tftrace: --alloc-min needs a size like 1048576, 4M or off, got '%s'\n",
                               optarg), 2;
            o->alloc_min = optarg;
            break;
        case 'R':
            if (!*optarg)
                return fprintf(stderr, "tftrace: --step-range needs a range name\n"), 2;
            o->step_range = optarg;
            break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf("tftrace %s (trace format %d.%d)\n", TFT_VERSION_STRING, TFT_FORMAT_MAJOR, TFT_FORMAT_MINOR); exit(0);
        default: fprintf(stderr, "Try 'tftrace --help'.\n"); return 2;
        }
    }
    if (o->stats && strcmp(o->stats, "shape") && strcmp(o->stats, "health") && strcmp(o->stats, "full"))
        return fprintf(stderr, "tftrace: --stats must be shape, health or full, got '%s'\n", o->stats), 2;
    if (o->capture && check_capture(o->capture))
        return 2;
    if (optind >= argc)
        return fprintf(stderr, "tftrace: no command given\nusage: tftrace [options] -- COMMAND [ARGS...]\n"), 2;
    o->cmd = argv + optind;
    return 0;
}

void fresh_name(char *buf, size_t n, const char *prefix, const char *suffix)
{
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    char stamp[32];
    strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
    snprintf(buf, n, "%s-%s%s", prefix, stamp, suffix);
    for (int k = 2; access(buf, F_OK) == 0 && k < 1000; k++)
        snprintf(buf, n, "%s-%s-%d%s", prefix, stamp, k, suffix);
}

/* Removes rank files of an earlier, finished run in the same directory. */
static void clear_old_trace(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/manifest.json", dir);
    tft_manifest m;
    int have = tft_manifest_read(path, &m, NULL, 0) == 0;
    int running = have && !m.complete;
    if (have)
        tft_manifest_free(&m);
    if (running) /* another instance of this run (mpirun -np N tftrace ...) */
        return;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (strncmp(de->d_name, "rank-", 5) == 0 && len > 4 && !strcmp(de->d_name + len - 4, ".tft")) {
            snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
            unlink(path);
        }
    }
    if (d)
        closedir(d);
    snprintf(path, sizeof(path), "%s/manifest.json", dir);
    unlink(path);
}

/* libtftrace.so next to this program (build tree) or in ../lib (install). */
static int find_library(char *out, size_t n)
{
    const char *env = getenv("TFT_LIB");
    if (env && access(env, R_OK) == 0)
        return snprintf(out, n, "%s", env), 0;
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len <= 0)
        return -1;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    static const char *const rel[] = {"/libtftrace.so", "/../lib/libtftrace.so",
                                      "/../lib64/libtftrace.so", "/../lib/x86_64-linux-gnu/libtftrace.so"};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        snprintf(out, n, "%s%s", exe, rel[i]);
        if (access(out, R_OK) == 0) {
            char real[PATH_MAX];
            if (realpath(out, real))
                snprintf(out, n, "%s", real);
            return 0;
        }
    }
    return -1;
}

static shm_hdr *create_region(const opts *o, size_t *bytes)
{
    uint32_t rnd = 0;
    if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
        rnd = (uint32_t)time(NULL);
    snprintf(shm_name, sizeof(shm_name), "/tftrace-%d-%08x", (int)getpid(), rnd);
    size_t ring = (size_t)o->ring_kb * 1024u;
    ring = (ring + 4095) / 4096 * 4096;
    uint32_t nrings = 128;
    *bytes = shm_region_size(nrings, ring);
    int fd = shm_open(shm_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return NULL;
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)*bytes) == 0)
        p = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(shm_name);
        return NULL;
    }
    shm_region_init(p, *bytes, nrings, ring, o->no_drop ? SHM_NO_DROP : 0);
    shm_setup_clock(p);
    return p;
}

/* A sanitizer runtime loaded in this (sanitized) launcher must precede a
 * sanitized libtftrace in LD_PRELOAD, or the runtime refuses to start. */
static int find_sanitizer(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *n = info->dlpi_name;
    if (n && (strstr(n, "/libasan.so") || strstr(n, "/libtsan.so")) && !*(char *)data) {
        snprintf(data, PATH_MAX, "%s", n);
        return 1;
    }
    return 0;
}

/* Sets the command's environment; returns 0, or -1 when out of memory. */
static int set_child_env(const opts *o, const char *lib)
{
    const char *pre = getenv("LD_PRELOAD");
    char buf[64], san[PATH_MAX] = "";
    dl_iterate_phdr(find_sanitizer, san);
    /* sized to fit: a user's LD_PRELOAD may be long, and a cut one would
     * preload a path that does not exist */
    size_t need = strlen(san) + strlen(lib) + (pre ? strlen(pre) : 0) + 3;
    char *ld = malloc(need);
    if (!ld)
        return -1;
    if (pre && *pre)
        snprintf(ld, need, "%s%s%s:%s", san, san[0] ? ":" : "", lib, pre);
    else
        snprintf(ld, need, "%s%s%s", san, san[0] ? ":" : "", lib);
    setenv("LD_PRELOAD", ld, 1);
    free(ld);
    setenv("TFT_SHM", shm_name, 1);
    if (o->stats)
        setenv("TFT_STATS", o->stats, 1);
    snprintf(buf, sizeof(buf), "%ld", o->every);
    setenv("TFT_EVERY", buf, 1);
    if (o->capture)
        setenv("TFT_CAPTURE", o->capture, 1);
    if (o->alloc_min)
        setenv("TFT_ALLOC_MIN", o->alloc_min, 1);
    if (o->step_range)
        setenv("TFT_STEP_RANGE", o->step_range, 1);
    /* NVTX ranges (steps, scopes) through NVTX's injection hook, served by
     * the preloaded libtftrace itself; CUPTI (allocations, kernels) through
     * the CUDA driver's, by the plugin next to it (loaded only when the
     * program initialises CUDA). A user's own setting (a profiler) wins. */
    if (!getenv("NVTX_INJECTION64_PATH"))
        setenv("NVTX_INJECTION64_PATH", lib, 1);
    char plugin[PATH_MAX + 32];
    snprintf(plugin, sizeof(plugin), "%s", lib);
    char *slash = strrchr(plugin, '/');
    if (slash && !getenv("CUDA_INJECTION64_PATH")) {
        snprintf(slash + 1, sizeof(plugin) - (size_t)(slash + 1 - plugin), "libtftrace-cuda.so");
        if (access(plugin, R_OK) == 0)
            setenv("CUDA_INJECTION64_PATH", plugin, 1);
    }
    return 0;
}

static void on_signal(int sig) { got_signal = sig; }

static void log_stderr(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (level <= TFT_LOG_WARN)
        fprintf(stderr, "tftrace: %s\n", msg);
}

typedef struct run_state {
    pid_t child;
    int status;
    int exited;
    double term_sent_at, kill_sent_at;
    int stopped;         /* by --until-step: its exit is ours, not a failure */
} run_state;

static double now_s(void) { return (double)shm_now_ns() / 1e9; }

/* Drains until the command and every traced descendant are gone. */
static void supervise(collector *col, const opts *o, run_state *rs)
{
    double start = now_s(), last_flush = start, child_gone_at = 0;
    for (;;) {
        size_t n = collector_poll(col);
        double t = now_s();
        if (!rs->exited) {
            int st;
            pid_t w = waitpid(rs->child, &st, WNOHANG);
            if (w == rs->child) {
                rs->exited = 1;
                rs->status = st;
                child_gone_at = t;
                collector_child_exit(col, rs->child, st);
            }
        }
        if (got_signal && !rs->exited) {
            kill(-rs->child, got_signal);
            got_signal = 0;
        }
        if (o->until_step >= 0 && !rs->exited && !rs->term_sent_at && collector_steps_done(col, o->until_step)) {
            if (!o->quiet)
                fprintf(stderr, "tftrace: step %lld done (--until-step): stopping the command\n",
                        (long long)o->until_step);
            kill(-rs->child, SIGTERM);
            rs->term_sent_at = t;
            rs->stopped = 1;
        }
        if (o->timeout > 0 && !rs->exited && t - start > o->timeout && !rs->term_sent_at) {
            fprintf(stderr, "tftrace: timeout after %.0f s: sending SIGTERM to the command\n", o->timeout);
            kill(-rs->child, SIGTERM);
            rs->term_sent_at = t;
        }
        if (rs->term_sent_at && !rs->kill_sent_at && t - rs->term_sent_at > o->grace) {
            fprintf(stderr, "tftrace: still running %.0f s after SIGTERM: sending SIGKILL\n", o->grace);
            kill(-rs->child, SIGKILL);
            rs->kill_sent_at = t;
        }
        if (rs->exited && (collector_live_procs(col) == 0 || t - child_gone_at > 2.0))
            break;
        if (t - last_flush > 1.0) {
            collector_flush(col);
            last_flush = t;
        }
        if (n == 0) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
}

static int exit_code_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

/* Bytes on disk and raw bytes of the rank files, from their indexes. */
static void trace_sizes(const char *dir, const collector_summary *s, uint64_t *disk, uint64_t *raw)
{
    *disk = *raw = 0;
    for (int i = 0; i < s->nranks; i++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", dir, s->ranks[i].file);
        tft_reader *r = tft_reader_open(path, NULL);
        if (!r)
            continue;
        for (size_t k = 0; k < tft_reader_chunk_count(r); k++)
            *raw += tft_reader_chunk(r, k)->raw_size;
        tft_reader_status st;
        tft_reader_get_status(r, &st);
        *disk += st.file_bytes;
        tft_reader_close(r);
    }
}

static void print_summary(const char *dir, const collector_summary *s)
{
    uint64_t disk, raw;
    trace_sizes(dir, s, &disk, &raw);
    char steps[64] = "none";
    if (s->first_step != TFT_STEP_NONE)
        snprintf(steps, sizeof(steps), "%lld..%lld", (long long)s->first_step, (long long)s->last_step);
    fprintf(stderr,
            "tftrace: %s: %d rank%s, steps %s, %llu records, %.1f MB on disk (%.1f MB raw, %.1fx), "
            "%llu dropped\n",
            dir, s->nranks, s->nranks == 1 ? "" : "s", steps, (unsigned long long)s->records, disk / 1e6,
            raw / 1e6, disk ? (double)raw / (double)disk : 0.0, (unsigned long long)s->dropped);
}

/* Appends ,"key":"text" (JSON-escaped) at buf + k when text is set and
 * fits; returns the new length. */
static int json_text_opt(char *buf, size_t n, int k, const char *key, const char *text)
{
    if (!text || k <= 0 || (size_t)k + strlen(key) + 16 >= n)
        return k;
    k += snprintf(buf + k, n - (size_t)k, ",\"%s\":\"", key);
    for (const unsigned char *p = (const unsigned char *)text; *p && (size_t)k + 8 < n; p++)
        k += *p == '"' || *p == '\\' ? snprintf(buf + k, n - (size_t)k, "\\%c", *p)
             : *p < 0x20           ? snprintf(buf + k, n - (size_t)k, "\\u%04x", *p)
                                   : snprintf(buf + k, n - (size_t)k, "%c", *p);
    return k + snprintf(buf + k, n - (size_t)k, "\"");
}

static void options_json(const opts *o, char *buf, size_t n)
{
    int k = snprintf(buf, n,
                     "{\"stats\":\"%s\",\"every\":%ld,\"timeout\":%g,\"no_drop\":%s,\"ring_kb\":%ld,\"until_step\":%lld",
                     o->stats ? o->stats : "full", o->every, o->timeout, o->no_drop ? "true" : "false", o->ring_kb,
                     (long long)o->until_step);
    k = json_text_opt(buf, n, k, "capture", o->capture);
    k = json_text_opt(buf, n, k, "alloc_min", o->alloc_min);
    k = json_text_opt(buf, n, k, "step_range", o->step_range);
    if (k > 0 && (size_t)k + 2 <= n)
        snprintf(buf + k, n - (size_t)k, "}");
}

static int finish(collector *col, const char *dir, const opts *o, const run_state *rs)
{
    collector_summary s;
    collector_finish(col, &s);
    int code = exit_code_of(rs->status);
    tft_manifest_rank *mr = calloc((size_t)s.nranks + 1, sizeof(*mr));
    for (int i = 0; mr && i < s.nranks; i++) {
        mr[i] = (tft_manifest_rank){.rank = s.ranks[i].rank, .pid = s.ranks[i].pid,
                                    .exited = s.ranks[i].exited, .exit_code = s.ranks[i].exit_code,
                                    .signal = s.ranks[i].signal};
        snprintf(mr[i].file, sizeof(mr[i].file), "%s", s.ranks[i].file);
    }
    if (manifest_merge_rank(dir, NULL, mr, mr ? s.nranks : 0, code) < 0)
        fprintf(stderr, "tftrace: %s/manifest.json: cannot write: %s\n", dir, strerror(errno));
    free(mr);
    if (!o->quiet)
        print_summary(dir, &s);
    if (s.errors)
        fprintf(stderr, "tftrace: %d rank file(s) could not be written completely\n", s.errors);
    /* stopped on purpose by --until-step: the manifest keeps the real status */
    return rs->stopped ? (s.errors ? 1 : 0) : code;
}

static int prepare_manifest(const char *dir, const opts *o, const uint8_t run_id[16]);

/* The run id the manifest holds: the first instance's, when N instances of
 * one run (mpirun -np N tftrace -o DIR) share the directory. */
static void adopt_run_id(const char *dir, uint8_t run_id[16])
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/manifest.json", dir);
    tft_manifest m;
    if (tft_manifest_read(path, &m, NULL, 0) < 0)
        return;
    uint8_t id[16];
    int ok = strlen(m.run_id) == 32;
    for (int i = 0; ok && i < 16; i++) {
        unsigned v;
        ok = sscanf(m.run_id + 2 * i, "%2x", &v) == 1;
        id[i] = (uint8_t)v;
    }
    if (ok)
        memcpy(run_id, id, 16);
    tft_manifest_free(&m);
}

static int prepare_dir(const char *dir, const opts *o, uint8_t run_id[16])
{
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "tftrace: %s: cannot create trace directory: %s\n", dir, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "tftrace: %s: exists and is not a directory\n", dir);
        return -1;
    }
    /* N instances of one run (mpirun -np N tftrace -o DIR) start together:
     * clearing an old run and announcing this one happen under one lock */
    char lock[4200];
    snprintf(lock, sizeof(lock), "%s/.prepare.lock", dir);
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lfd >= 0)
        while (flock(lfd, LOCK_EX) < 0 && errno == EINTR)
            ;
    clear_old_trace(dir);
    int e = prepare_manifest(dir, o, run_id);
    if (!e)
        adopt_run_id(dir, run_id);
    if (lfd >= 0)
        close(lfd); /* releases the lock */
    return e;
}

static int prepare_manifest(const char *dir, const opts *o, const uint8_t run_id[16])
{
    char oj[4608]; /* options with a capture spec of up to 4 KiB */
    options_json(o, oj, sizeof(oj));
    manifest_run run = {.run_id = run_id, .options_json = oj};
    if (manifest_merge_rank(dir, &run, NULL, 0, -1) < 0) {
        fprintf(stderr, "tftrace: %s/manifest.json: cannot write: %s\n", dir, strerror(errno));
        return -1;
    }
    return 0;
}

static pid_t spawn(char **cmd)
{
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        execvp(cmd[0], cmd);
        fprintf(stderr, "tftrace: cannot run '%s': %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    if (pid > 0)
        setpgid(pid, pid);
    return pid;
}

/* --capture first-divergence-of=GOLDEN: golden's fingerprints, for the
 * recorder to compare each tensor with as it is recorded (TFT_CAPTURE_REF). */
static void remove_capture_ref(void) { unlink(capture_ref_path); }

static int build_capture_ref(const opts *o)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(capture_ref_path, sizeof(capture_ref_path), "%s/tftrace-ref-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(capture_ref_path);
    if (fd < 0) {
        fprintf(stderr, "tftrace: %s: cannot create: %s\n", capture_ref_path, strerror(errno));
        return -1;
    }
    close(fd);
    atexit(remove_capture_ref);
    char err[512] = "";
    uint64_t n = 0;
    if (!o->quiet)
        fprintf(stderr, "tftrace: reading %s for --capture first-divergence-of\n", capture_golden);
    if (capref_build(capture_golden, capture_ref_path, &n, err, sizeof(err)) < 0) {
        fprintf(stderr, "tftrace: --capture first-divergence-of: %s\n", err);
        return -1;
    }
    if (!o->quiet)
        fprintf(stderr, "tftrace: %llu golden tensors to compare with; the first that differs is captured\n",
                (unsigned long long)n);
    setenv("TFT_CAPTURE_REF", capture_ref_path, 1);
    return 0;
}

/* Directory of this executable ("." when unknown). */
static void self_dir(char *buf, size_t n)
{
    ssize_t len = readlink("/proc/self/exe", buf, n - 1);
    if (len <= 0) {
        snprintf(buf, n, ".");
        return;
    }
    buf[len] = '\0';
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = '\0';
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "replay")) {
        char dir[PATH_MAX];
        self_dir(dir, sizeof(dir));
        return replay_main(argc - 1, argv + 1, dir);
    }
    opts o = {0};
    int e = parse_args(argc, argv, &o);
    if (e)
        return e;
    char outbuf[4096], lib[PATH_MAX];
    if (!o.out) {
        fresh_name(outbuf, sizeof(outbuf), "tftrace", ".trace");
        o.out = outbuf;
    }
    if (find_library(lib, sizeof(lib)) < 0) {
        fprintf(stderr, "tftrace: libtftrace.so not found next to tftrace or in ../lib; set TFT_LIB\n");
        return 2;
    }
    uint8_t run_id[16];
    if (getrandom(run_id, sizeof(run_id), 0) != sizeof(run_id))
        memset(run_id, 7, sizeof(run_id));
    if (capture_golden[0] && build_capture_ref(&o) < 0)
        return 2;
    if (prepare_dir(o.out, &o, run_id) < 0)
        return 2;
    size_t bytes;
    shm_hdr *h = create_region(&o, &bytes);
    if (!h) {
        fprintf(stderr, "tftrace: cannot create shared memory (%s): %s\n", shm_name, strerror(errno));
        return 2;
    }
    collector_opts co = {.sz = sizeof(co), .log = log_stderr};
    collector *col = collector_new(h, o.out, run_id, &co);
    if (!col) {
        shm_unlink(shm_name);
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (set_child_env(&o, lib) < 0) {
        fprintf(stderr, "tftrace: out of memory\n");
        shm_unlink(shm_name);
        return 2;
    }
    run_state rs = {0};
    rs.child = spawn(o.cmd);
    if (rs.child < 0) {
        fprintf(stderr, "tftrace: fork: %s\n", strerror(errno));
        shm_unlink(shm_name);
        return 2;
    }
    collector_set_child(col, rs.child);
    supervise(col, &o, &rs);
    shm_unlink(shm_name);
    int code = finish(col, o.out, &o, &rs);
    collector_free(col);
    munmap(h, bytes);
    return code;
}
