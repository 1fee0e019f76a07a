/*
 * tftrace — runs a command with libtftrace preloaded and collects its
 * records into a trace directory. The collector lives in this process, so a
 * crash of the traced program loses nothing it committed to its rings.
 *
 *   tftrace [-o PATH] [--stats MODE] [--every N] [--timeout S] [--no-drop] -- CMD ...
 *   tftrace replay [options] GOLDEN BAD         (replay.c)
 *   tftrace gather OUT DIR...                   (gather.c)
 *   tftrace stacks [--json] PID...              (stacks_cmd.c, docs/ATTACH.md)
 *   tftrace attach [-o TRACE] PID...            (attach_cmd.c, docs/ATTACH.md)
 *
 * The trace directory (docs/SECURITY.md): new or empty, owned by the caller,
 * not a symbolic link (unless --force), locked for the whole run (the
 * instances of one mpirun job share it); files created 0600 (--mode) with
 * O_CREAT|O_EXCL|O_NOFOLLOW relative to the directory's fd. The rings live
 * in a memfd: nothing is left in /dev/shm whatever happens to this process.
 *
 * Exit status: the command's (128+signal when it was killed); 2 for usage
 * errors of tftrace itself (and a trace directory it refuses); 127 when the
 * command cannot be run; 86 (--incomplete-status) when the command
 * succeeded but records were lost to write errors.
 */
#include "capture_ref.h"
#include "capture_spec.h"
#include "collector.h"
#include "tft_drops.h"
#include "tft_writer_internal.h" /* tft_manifest_fragment_name */
#include "cli_internal.h"

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

/* The command succeeded, the trace lost records (disk full): a status no
 * common tool uses (not 1/2, not sysexits 64-78, not 100/101, not 124-127,
 * not 128+signal), documented in README and docs/SECURITY.md. */
#define INCOMPLETE_STATUS_DEFAULT 86

typedef struct opts {
    const char *out;
    int force;           /* --force: a non-empty or symlinked output directory */
    unsigned mode;       /* permission bits of the trace files (--mode), default 0600 */
    int no_redact;       /* --no-redact: the manifest keeps secrets in the command line */
    double nodrop_timeout; /* --no-drop-timeout: seconds a full ring waits for a stalled collector, 0 = no limit */
    long incomplete_status; /* exit status when the command succeeded but the trace lost records; 0 = the command's */
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
    const char *torch;   /* --torch: "modules" or "ops", NULL = off (TFT_TORCH) */
    long keep_steps;     /* --keep-steps: full records of the last N steps only, 0 = all */
    char **cmd;
} opts;

/* The trace directory of this run, opened once: every file in it is reached
 * through fd (openat), so nothing can swap the path under us. */
typedef struct trace_dir {
    int fd;
    int run_lock;        /* .run.lock, flock'ed for the whole run (closed at exit) */
    int joined;          /* another instance of the same job prepared it (mpirun ... tftrace) */
    int job_rank;        /* one instance of a job: its rank, whose manifest fragment it writes
                          * (manifest_launch.c, no lock); -1: manifest.json merged under flock */
    uint64_t start_ns;   /* CLOCK_REALTIME at the start (the fragment's start_ns) */
    uint8_t run_id[16];  /* the run's id (the final fragment repeats it) */
} trace_dir;

static volatile sig_atomic_t got_signal;
static char shm_name[64]; /* the region as traced processes open it: /proc/PID/fd/N of our memfd */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tftrace [options] -- COMMAND [ARGS...]\n"
            "       tftrace replay [options] GOLDEN BAD   (see tftrace replay --help)\n"
            "       tftrace gather OUT DIR...             one trace from the directories of a job's nodes\n"
            "       tftrace stacks [--json] PID...        where every thread is (BPF; docs/ATTACH.md)\n"
            "       tftrace attach [-o TRACE] [--duration S] PID...  record running MPI processes (BPF)\n"
            "Runs COMMAND with the tftrace recorder and writes a trace directory.\n\n"
            "  -o, --output PATH     trace directory (default: tftrace-DATE-TIME.trace). It must be\n"
            "                        new or empty and yours; a symbolic link is not followed;\n"
            "                        locked while recording                  [TFT_OUTPUT]\n"
            "      --force           record into PATH even when it holds files (an earlier trace's\n"
            "                        manifest.json and rank-*.tft are deleted, other files left\n"
            "                        alone) or is a symbolic link to a directory of yours [TFT_FORCE=1]\n"
            "      --mode MODE       permission bits of the trace files, octal, owner rw at least\n"
            "                        (default 0600; the directory: x where r, 0700) [TFT_MODE]\n"
            "      --no-redact       keep secret-looking values in the command line the manifest\n"
            "                        records (default: the values of options and NAME=VALUE pairs\n"
            "                        whose name contains KEY, TOKEN, SECRET, PASSWORD or PASSWD,\n"
            "                        and URL passwords, are <redacted>)      [TFT_NO_REDACT=1]\n"
            "      --stats MODE      shape | health | full (default full)    [TFT_STATS]\n"
            "      --every N         tensor statistics every N steps, shape only between [TFT_EVERY]\n"
            "      --timeout SEC     end the command after SEC seconds: SIGTERM, then SIGKILL\n"
            "                        after --grace (default 5 s); the trace stays readable [TFT_TIMEOUT]\n"
            "      --grace SEC       seconds between SIGTERM and SIGKILL     [TFT_KILL_GRACE]\n"
            "      --no-drop         block the program when a ring is full instead of dropping\n"
            "                        records (they are counted either way)  [TFT_NO_DROP=1]\n"
            "      --no-drop-timeout SEC  with --no-drop: how long a full ring waits for a collector\n"
            "                        that stopped draining (slow disk, SIGSTOP) before the program\n"
            "                        drops after all, counted apart; 0 = as long as the collector\n"
            "                        lives (default 5)                      [TFT_NO_DROP_TIMEOUT]\n"
            "      --ring-kb N       ring size per thread in KiB (default 4096) [TFT_RING_KB]\n"
            "                        a full ring makes the program wait for the collector while\n"
            "                        it drains, up to N ms without progress (default 200, 0 =\n"
            "                        drop at once), then drops          [TFT_RING_WAIT_MS=N]\n"
            "      --keep-steps N    flight recorder: full records for the last N steps only; the\n"
            "                        scalars (loss, grad norm, lr), collectives, steps and\n"
            "                        allocations of every step are kept; older chunks are retired\n"
            "                        so disk use stays bounded (0 = keep all) [TFT_KEEP_STEPS]\n"
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
            "      --torch [MODE]    record PyTorch from Python in every Python process of the run\n"
            "                        (torchrun's and mpirun's included) as it imports torch:\n"
            "                        MODE modules (default: module outputs and gradients, loss,\n"
            "                        optimizer steps, parameters and state, torch.distributed)\n"
            "                        or ops (also every ATen op); docs/PYTORCH.md [TFT_TORCH]\n"
            "      --incomplete-status N  exit status when the command succeeded but records were\n"
            "                        lost to write errors (disk full); 0 = the command's own\n"
            "                        (default 86)                           [TFT_INCOMPLETE_STATUS]\n"
            "  -q, --quiet           no summary on stderr\n"
            "  -h, --help            this help\n"
            "  -V, --version         version\n\n"
            "Exit status: the command's (128+signal when killed); 2 usage error or a refused trace\n"
            "directory; 127 command not run; 86 the command succeeded but the trace is incomplete.\n"
            "What a trace holds, who may read it, what replay runs: docs/SECURITY.md.\n"
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

/* Octal permission bits with owner read and write ("0640", "600"). */
static int parse_mode(const char *s, unsigned *out)
{
    if (!s || !*s || strspn(s, "01234567") != strlen(s) || strlen(s) > 4)
        return -1;
    unsigned long v = strtoul(s, NULL, 8);
    if (v > 0777 || (v & 0600) != 0600)
        return -1;
    *out = (unsigned)v;
    return 0;
}

static int env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0");
}

static void env_defaults(opts *o)
{
    const char *v;
    o->mode = 0600;
    o->nodrop_timeout = 5;
    o->incomplete_status = INCOMPLETE_STATUS_DEFAULT;
    o->force = env_flag("TFT_FORCE");
    o->no_redact = env_flag("TFT_NO_REDACT");
    if ((v = getenv("TFT_MODE")) && *v)
        parse_mode(v, &o->mode);
    if ((v = getenv("TFT_NO_DROP_TIMEOUT")) && *v)
        parse_double(v, &o->nodrop_timeout);
    if ((v = getenv("TFT_INCOMPLETE_STATUS")) && *v) {
        long st;
        if (parse_long(v, &st, 0) == 0 && st <= 255)
            o->incomplete_status = st;
    }
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
    if ((v = getenv("TFT_KEEP_STEPS")) && *v)
        parse_long(v, &o->keep_steps, 0);
    o->no_drop = (v = getenv("TFT_NO_DROP")) && *v && strcmp(v, "0");
    o->until_step = -1;
    o->alloc_min = getenv("TFT_ALLOC_MIN");
    o->step_range = getenv("TFT_STEP_RANGE");
    long us;
    if ((v = getenv("TFT_UNTIL_STEP")) && parse_long(v, &us, 0) == 0)
        o->until_step = us;
    if ((v = getenv("TFT_CAPTURE")) && *v)
        o->capture = v;
    if ((v = getenv("TFT_TORCH")) && *v && strcmp(v, "0") && strcmp(v, "off"))
        o->torch = !strcmp(v, "ops") ? "ops" : "modules";
}

/* MODE of --torch: modules (also 1) or ops; NULL when s is neither. */
static const char *torch_mode(const char *s)
{
    if (!strcmp(s, "modules") || !strcmp(s, "1"))
        return "modules";
    if (!strcmp(s, "ops"))
        return "ops";
    return NULL;
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
        {"force", no_argument, 0, 'F'},        {"mode", required_argument, 0, 'M'},
        {"no-redact", no_argument, 0, 'N'},    {"no-drop-timeout", required_argument, 0, 'T'},
        {"incomplete-status", required_argument, 0, 'I'}, {"torch", optional_argument, 0, 'P'},
        {"keep-steps", required_argument, 0, 'K'},
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
        case 'K':
            if (parse_long(optarg, &o->keep_steps, 0) < 0)
                return fprintf(stderr, "tftrace: --keep-steps needs a step count >= 0, got '%s'\n", optarg), 2;
            break;
        case 'u': {
            long us;
            if (parse_long(optarg, &us, 0) < 0)
                return fprintf(stderr, "tftrace: --until-step needs a step number >= 0, got '%s'\n", optarg), 2;
            o->until_step = us;
            break;
        }
        case 'C': o->capture = optarg; break;
        case 'P':
            /* --torch, --torch=MODE or --torch MODE (MODE: modules | ops) */
            if (!optarg && optind < argc && torch_mode(argv[optind]))
                optarg = argv[optind++];
            if (!optarg)
                o->torch = "modules";
            else if (!(o->torch = torch_mode(optarg)))
                return fprintf(stderr, "tftrace: --torch takes modules or ops, got '%s'\n", optarg), 2;
            break;
        case 'F': o->force = 1; break;
        case 'N': o->no_redact = 1; break;
        case 'M':
            if (parse_mode(optarg, &o->mode) < 0)
                return fprintf(stderr, "tftrace: --mode needs octal permission bits that include owner read "
                                       "and write, like 0600 or 0640; got '%s'\n", optarg), 2;
            break;
        case 'T':
            if (parse_double(optarg, &o->nodrop_timeout) < 0)
                return fprintf(stderr, "tftrace: --no-drop-timeout needs seconds >= 0 (0 = no limit), got '%s'\n",
                               optarg), 2;
            break;
        case 'I': {
            long st;
            if (parse_long(optarg, &st, 0) < 0 || st > 255)
                return fprintf(stderr, "tftrace: --incomplete-status needs an exit status 0..255, got '%s'\n",
                               optarg), 2;
            o->incomplete_status = st;
            break;
        }
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
        case 'V': printf("tftrace %s (trace format %s)\n", tft_version(), tft_format_version()); exit(0);
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

/* libtftrace.so next to this program (build tree) or in ../lib (install). */
static int find_library(char *out, size_t n)
{
    const char *env = getenv("TFT_LIB");
    if (env && access(env, R_OK) == 0)
        return snprintf(out, n, "%s", env), 0;
    char exe[PATH_MAX];
    if (cli_exe_dir(exe, sizeof(exe)) < 0)
        return -1;
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

/* The folder holding the tftrace Python package (and its _boot/ with the
 * sitecustomize of --torch): TFT_PYTHON_DIR, else python/ next to this
 * program (the build tree links it there), else ../lib/tftrace/python
 * (cmake --install). */
static int find_python_dir(char *out, size_t n)
{
    const char *env = getenv("TFT_PYTHON_DIR");
    char probe[PATH_MAX + 64];
    if (env && *env) {
        snprintf(probe, sizeof(probe), "%s/tftrace/_boot/sitecustomize.py", env);
        if (access(probe, R_OK) == 0)
            return snprintf(out, n, "%s", env), 0;
        return -1;
    }
    char exe[PATH_MAX];
    if (cli_exe_dir(exe, sizeof(exe)) < 0)
        return -1;
    static const char *const rel[] = {"/python", "/../lib/tftrace/python", "/../lib64/tftrace/python",
                                      "/../lib/x86_64-linux-gnu/tftrace/python"};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        snprintf(probe, sizeof(probe), "%s%s/tftrace/_boot/sitecustomize.py", exe, rel[i]);
        if (access(probe, R_OK) == 0) {
            char dir[PATH_MAX + 32];
            snprintf(dir, sizeof(dir), "%s%s", exe, rel[i]);
            char real[PATH_MAX];
            if (!realpath(dir, real) || strlen(real) >= n)
                return -1;
            memcpy(out, real, strlen(real) + 1);
            return 0;
        }
    }
    return -1;
}

/* --torch: TFT_TORCH for the sitecustomize, whose folder goes first on
 * PYTHONPATH and the package's after it (a user's PYTHONPATH follows). */
static int set_torch_env(const opts *o)
{
    char dir[PATH_MAX];
    if (find_python_dir(dir, sizeof(dir)) < 0) {
        fprintf(stderr, "tftrace: --torch: the tftrace Python package was not found next to tftrace "
                        "(python/ or ../lib/tftrace/python); set TFT_PYTHON_DIR to the folder holding it\n");
        return -1;
    }
    const char *pp = getenv("PYTHONPATH");
    size_t need = 2 * strlen(dir) + (pp ? strlen(pp) : 0) + 32;
    char *v = malloc(need);
    if (!v)
        return -1;
    snprintf(v, need, "%s/tftrace/_boot:%s%s%s", dir, dir, pp && *pp ? ":" : "", pp && *pp ? pp : "");
    setenv("PYTHONPATH", v, 1);
    free(v);
    setenv("TFT_TORCH", o->torch, 1);
    return 0;
}

/* The rings live in a memfd: an anonymous file that goes away with its
 * last user, so no named segment outlives a SIGKILLed tftrace in /dev/shm.
 * Traced processes open it through this process's fd table
 * (/proc/PID/fd/N, TFT_SHM): that needs this process alive, which is when
 * there is someone to drain them; the fd itself is not inherited (CLOEXEC),
 * so programs that close or count their descriptors see nothing of ours. */
static shm_hdr *create_region(const opts *o, size_t *bytes)
{
    size_t ring = (size_t)o->ring_kb * 1024u;
    ring = (ring + 4095) / 4096 * 4096;
    uint32_t nrings = 128;
    *bytes = shm_region_size(nrings, ring);
    int fd = memfd_create("tftrace-rings", MFD_CLOEXEC);
    if (fd < 0)
        return NULL;
    snprintf(shm_name, sizeof(shm_name), "/proc/%d/fd/%d", (int)getpid(), fd);
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)*bytes) == 0)
        p = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    /* fd stays open for the run: it is what TFT_SHM names */
    shm_region_init(p, *bytes, nrings, ring, o->no_drop ? SHM_NO_DROP : 0);
    ((shm_hdr *)p)->nodrop_timeout_ns = (uint64_t)(o->nodrop_timeout * 1e9);
    shm_drop_wait_from_env(p);
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

static double now_s(void) { return (double)tft_clock_mono_ns() / 1e9; }

/* Drains until the command and every traced descendant are gone. */
static void supervise(collector *col, const opts *o, run_state *rs)
{
    double start = now_s(), last_flush = start, child_gone_at = 0;
    for (;;) {
        size_t n = collector_poll(col);
        proc_events_poll(col, rs->child);
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
            timeout_stacks(col, o->quiet);   /* where it hangs, before it is stopped (docs/ATTACH.md) */
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

/* What the rank files on disk hold, from their chunk headers (the index,
 * or a scan of a file left without one): bytes, raw bytes, step range. */
typedef struct disk_sum {
    uint64_t disk, raw;
    int64_t first_step, last_step;
} disk_sum;

static void trace_sizes(const char *dir, const collector_summary *s, disk_sum *d)
{
    *d = (disk_sum){.first_step = TFT_STEP_NONE, .last_step = TFT_STEP_NONE};
    for (int i = 0; i < s->nranks; i++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", dir, s->ranks[i].file);
        tft_reader *r = tft_reader_open(path, NULL);
        if (!r)
            continue;
        for (size_t k = 0; k < tft_reader_chunk_count(r); k++) {
            const tft_chunk_info *c = tft_reader_chunk(r, k);
            d->raw += c->raw_size;
            if (c->first_step != TFT_STEP_NONE && (d->first_step == TFT_STEP_NONE || c->first_step < d->first_step))
                d->first_step = c->first_step;
            if (c->last_step != TFT_STEP_NONE && (d->last_step == TFT_STEP_NONE || c->last_step > d->last_step))
                d->last_step = c->last_step;
        }
        tft_reader_status st;
        tft_reader_get_status(r, &st);
        d->disk += st.file_bytes;
        tft_reader_close(r);
    }
}

/* What reached the disk: the collector counts the records of the chunks
 * the writer completed, which is what a reader gets back (a torn tail is
 * dropped); bytes and steps are read back from the files. */
static void print_summary(const char *dir, const collector_summary *s)
{
    disk_sum d;
    trace_sizes(dir, s, &d);
    char steps[64] = "none", stalled[96] = "";
    if (d.first_step != TFT_STEP_NONE)
        snprintf(steps, sizeof(steps), "%lld..%lld", (long long)d.first_step, (long long)d.last_step);
    if (s->dropped_stalled)
        snprintf(stalled, sizeof(stalled), " (%llu when --no-drop gave up on a stalled collector)",
                 (unsigned long long)s->dropped_stalled);
    fprintf(stderr,
            "tftrace: %s: %d rank%s, steps %s, %llu records%s, %.1f MB on disk (%.1f MB raw, %.1fx), "
            "%llu dropped%s\n",
            dir, s->nranks, s->nranks == 1 ? "" : "s", steps, (unsigned long long)s->records,
            s->errors ? " on disk" : "", d.disk / 1e6, d.raw / 1e6, d.disk ? (double)d.raw / (double)d.disk : 0.0,
            (unsigned long long)s->dropped, stalled);
}

/* One loud line per rank that dropped records: how many, of which kinds,
 * in which steps, and what to do. Printed even with --quiet: a trace
 * with holes must not pass for a whole one. */
static void warn_dropped(const collector_summary *s)
{
    for (int i = 0; i < s->nranks; i++) {
        const collector_rank *r = &s->ranks[i];
        if (!r->dropped)
            continue;
        tft_drop_sum d;
        tft_drop_sum_init(&d);
        d.count = r->dropped;
        memcpy(d.by_kind, r->drop_kind, sizeof(d.by_kind));
        tft_drop_sum_steps(&d, r->drop_first_step, r->drop_last_step);
        char what[512];
        fprintf(stderr, "tftrace: WARNING: %s of rank %d — %s\n", tft_drop_describe(&d, what, sizeof(what)),
                r->rank,
                r->dropped_stalled >= r->dropped
                    ? "the collector stopped draining (--no-drop gave up after --no-drop-timeout)"
                    : "raise --ring-kb or use --no-drop");
    }
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
                     "{\"stats\":\"%s\",\"every\":%ld,\"timeout\":%g,\"no_drop\":%s,\"no_drop_timeout\":%g,"
                     "\"ring_kb\":%ld,\"until_step\":%lld",
                     o->stats ? o->stats : "full", o->every, o->timeout, o->no_drop ? "true" : "false",
                     o->nodrop_timeout, o->ring_kb, (long long)o->until_step);
    k = json_text_opt(buf, n, k, "capture", o->capture);
    k = json_text_opt(buf, n, k, "alloc_min", o->alloc_min);
    k = json_text_opt(buf, n, k, "step_range", o->step_range);
    if (o->keep_steps && k > 0 && (size_t)k + 32 < n) /* flight-recorder mode (FORMAT.md §3.6) */
        k += snprintf(buf + k, n - (size_t)k, ",\"keep_steps\":%ld", o->keep_steps);
    if (k > 0 && (size_t)k + 2 <= n)
        snprintf(buf + k, n - (size_t)k, "}");
}

static int finish(collector *col, const trace_dir *td, const char *dir, const opts *o, const run_state *rs)
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
    char why[4096];
    collector_incomplete_reason(&s, why, sizeof(why));
    manifest_run run = {.no_redact = o->no_redact, .file_mode = o->mode, .collector = 1,
                        .incomplete = why[0] ? why : NULL, .dropped_stalled = s.dropped_stalled};
    char oj[4608];
    if (td->job_rank >= 0) { /* the fragment replaces the start's: all it said again */
        options_json(o, oj, sizeof(oj));
        run.run_id = td->run_id;
        run.options_json = oj;
    }
    int me = td->job_rank >= 0
                 ? manifest_launcher_fragment(td->fd, dir, &run, td->job_rank, mr, mr ? s.nranks : 0, td->start_ns, code)
                 : manifest_merge_rank(td->fd, &run, mr, mr ? s.nranks : 0, code);
    if (me < 0)
        fprintf(stderr, "tftrace: %s/manifest.json: cannot write the final manifest: %s; the rank files are "
                        "readable without it (tfdump %s)\n", dir, strerror(-me), dir);
    free(mr);
    if (!o->quiet)
        print_summary(dir, &s);
    proc_events_finish(td->fd, dir, o->mode, o->quiet, &s);
    warn_dropped(&s);
    for (int i = 0; i < s.nranks; i++)
        if (s.ranks[i].err)
            fprintf(stderr, "tftrace: %s/%s: INCOMPLETE: %s failed (%s): %llu records reached the disk, "
                            "%llu lost\n", dir, s.ranks[i].file, s.ranks[i].err_what ? s.ranks[i].err_what : "write",
                    strerror(-s.ranks[i].err), (unsigned long long)s.ranks[i].records,
                    (unsigned long long)s.ranks[i].lost);
    if (rs->stopped)
        code = 0; /* stopped on purpose by --until-step: the manifest keeps the real status */
    if ((s.errors || me < 0) && code == 0 && o->incomplete_status) {
        fprintf(stderr, "tftrace: the command succeeded but the trace is incomplete: exit status %ld "
                        "(--incomplete-status)\n", o->incomplete_status);
        code = (int)o->incomplete_status;
    }
    return code;
}

/* ---- the trace directory ------------------------------------------------------ */

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

/* A lock file in the directory: never through a link, ours, regular. */
static int lock_file(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
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

static int prepare_manifest(const trace_dir *td, const char *dir, const opts *o, const uint8_t run_id[16])
{
    char oj[4608]; /* options with a capture spec of up to 4 KiB */
    options_json(o, oj, sizeof(oj));
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
static int open_dir(const char *dir, const opts *o, trace_dir *td)
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
static int prepare_dir(const char *dir, const opts *o, uint8_t run_id[16], trace_dir *td)
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
    int prep = lock_file(td->fd, ".prepare.lock");
    td->run_lock = prep >= 0 ? lock_file(td->fd, ".run.lock") : -1;
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

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "gather"))
        return gather_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "replay"))
        return replay_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "stacks"))
        return stacks_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "attach"))
        return attach_main(argc - 1, argv + 1);
    opts o = {0};
    int e = parse_args(argc, argv, &o);
    if (e)
        return e;
    if (o.torch && set_torch_env(&o) < 0)
        return 2;
    char outbuf[4096], lib[PATH_MAX];
    if (!o.out) {
        cli_fresh_name(outbuf, sizeof(outbuf), "tftrace", ".trace");
        o.out = outbuf;
    }
    if (find_library(lib, sizeof(lib)) < 0) {
        fprintf(stderr, "tftrace: libtftrace.so not found next to tftrace or in ../lib; set TFT_LIB\n");
        return 2;
    }
    uint8_t run_id[16]; /* every run its own (a joining instance of a job adopts the job's) */
    if (getrandom(run_id, sizeof(run_id), 0) != sizeof(run_id)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x[2] = {(uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec, (uint64_t)getpid() << 32 ^ tft_clock_mono_ns()};
        memcpy(run_id, x, sizeof(run_id));
    }
    if (capture_golden[0] && build_capture_ref(&o) < 0)
        return 2;
    trace_dir td;
    if (prepare_dir(o.out, &o, run_id, &td) < 0)
        return 2;
    size_t bytes;
    shm_hdr *h = create_region(&o, &bytes);
    if (!h) {
        fprintf(stderr, "tftrace: cannot create the shared memory for the rings (memfd, %zu bytes): %s\n",
                bytes, strerror(errno));
        return 2;
    }
    collector_opts co = {.sz = sizeof(co), .log = log_stderr, .file_mode = o.mode,
                         .keep_steps = o.keep_steps};
    collector *col = collector_new(h, o.out, td.fd, run_id, &co);
    if (!col)
        return 2;
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
    proc_events_start();   /* before the fork: the command is tracked from its first instruction */
    rs.child = spawn(o.cmd);
    if (rs.child < 0) {
        fprintf(stderr, "tftrace: fork: %s\n", strerror(errno));
        return 2;
    }
    collector_set_child(col, rs.child);
    supervise(col, &o, &rs);
    int code = finish(col, &td, o.out, &o, &rs);
    collector_free(col);
    munmap(h, bytes);
    return code;
}
