/*
 * launch_opts.c — the launcher's options (`tftrace [options] -- CMD`): the
 * TFT_* environment as defaults, the command line over them, each value
 * checked with a message that names the option and what it takes; --help;
 * and the options as the manifest records them ("options").
 */
#include "launch_internal.h"
#include "capture_spec.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The command succeeded, the trace lost records (disk full): a status no
 * common tool uses (not 1/2, not sysexits 64-78, not 100/101, not 124-127,
 * not 128+signal), documented in README and docs/SECURITY.md. */
#define INCOMPLETE_STATUS_DEFAULT 86

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
            "      --perturb         flip the last mantissa bit of every floating parameter at the\n"
            "                        start (PyTorch --torch, tftrain): a GOLDEN2 for tfdiff --noise\n"
            "                        (docs/PYTORCH.md, runtime/README.md)   [TFTRACE_PERTURB=1]\n"
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

static void env_defaults(launch_opts *o)
{
    const char *v;
    o->mode = 0600;
    o->nodrop_timeout = 5;
    o->incomplete_status = INCOMPLETE_STATUS_DEFAULT;
    o->force = env_flag("TFT_FORCE");
    o->no_redact = env_flag("TFT_NO_REDACT");
    o->perturb = env_flag("TFTRACE_PERTURB");
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

/* Checks the capture spec before the command runs (the recorder cannot say
 * what is wrong with one). Returns 0 or the exit status 2. */
static int check_capture(const char *spec, launch_opts *o)
{
    capspec *cs = malloc(sizeof(*cs));
    char err[512];
    if (!cs)
        return fprintf(stderr, "tftrace: out of memory\n"), 2;
    int bad = capspec_parse(spec, cs, err, sizeof(err)) < 0;
    if (bad)
        fprintf(stderr, "tftrace: --capture '%s': %s\n", spec, err);
    else if (cs->first_divergence_of[0])
        snprintf(o->capture_golden, sizeof(o->capture_golden), "%s", cs->first_divergence_of);
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

/* Options that take a number, checked: applies option c (its argument in
 * optarg) to o. 0; the exit status 2 with a message on stderr; -1 when c
 * is not one of them. */
static int parse_number_opt(int c, launch_opts *o)
{
    long v;
    switch (c) {
    case 'e':
        if (parse_long(optarg, &o->every, 1) < 0)
            return fprintf(stderr, "tftrace: --every needs a positive integer, got '%s'\n", optarg), 2;
        return 0;
    case 't':
        if (parse_double(optarg, &o->timeout) < 0)
            return fprintf(stderr, "tftrace: --timeout needs seconds >= 0, got '%s'\n", optarg), 2;
        return 0;
    case 'g':
        if (parse_double(optarg, &o->grace) < 0)
            return fprintf(stderr, "tftrace: --grace needs seconds >= 0, got '%s'\n", optarg), 2;
        return 0;
    case 'r':
        if (parse_long(optarg, &o->ring_kb, 64) < 0)
            return fprintf(stderr, "tftrace: --ring-kb needs an integer >= 64, got '%s'\n", optarg), 2;
        return 0;
    case 'K':
        if (parse_long(optarg, &o->keep_steps, 0) < 0)
            return fprintf(stderr, "tftrace: --keep-steps needs a step count >= 0, got '%s'\n", optarg), 2;
        return 0;
    case 'u':
        if (parse_long(optarg, &v, 0) < 0)
            return fprintf(stderr, "tftrace: --until-step needs a step number >= 0, got '%s'\n", optarg), 2;
        o->until_step = v;
        return 0;
    case 'M':
        if (parse_mode(optarg, &o->mode) < 0)
            return fprintf(stderr, "tftrace: --mode needs octal permission bits that include owner read "
                                   "and write, like 0600 or 0640; got '%s'\n", optarg), 2;
        return 0;
    case 'T':
        if (parse_double(optarg, &o->nodrop_timeout) < 0)
            return fprintf(stderr, "tftrace: --no-drop-timeout needs seconds >= 0 (0 = no limit), got '%s'\n",
                           optarg), 2;
        return 0;
    case 'I':
        if (parse_long(optarg, &v, 0) < 0 || v > 255)
            return fprintf(stderr, "tftrace: --incomplete-status needs an exit status 0..255, got '%s'\n",
                           optarg), 2;
        o->incomplete_status = v;
        return 0;
    }
    return -1;
}

/* Applies option c of getopt_long (its argument in optarg; --torch may
 * take the next word, moving optind) to o. 0, or the exit status 2 with a
 * message on stderr; --help and --version print and exit. */
static int parse_opt(int c, int argc, char **argv, launch_opts *o)
{
    int e = parse_number_opt(c, o);
    if (e >= 0)
        return e;
    switch (c) {
    case 'o': o->out = optarg; break;
    case 's': o->stats = optarg; break;
    case 'n': o->no_drop = 1; break;
    case 'q': o->quiet = 1; break;
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
    case 'p': o->perturb = 1; break;
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
    return 0;
}

int launch_opts_parse(int argc, char **argv, launch_opts *o)
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
        {"keep-steps", required_argument, 0, 'K'}, {"perturb", no_argument, 0, 'p'},
        {"help", no_argument, 0, 'h'},         {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    env_defaults(o);
    int c, e;
    while ((c = getopt_long(argc, argv, "+o:qhV", lo, NULL)) != -1)
        if ((e = parse_opt(c, argc, argv, o)))
            return e;
    if (o->stats && strcmp(o->stats, "shape") && strcmp(o->stats, "health") && strcmp(o->stats, "full"))
        return fprintf(stderr, "tftrace: --stats must be shape, health or full, got '%s'\n", o->stats), 2;
    if (o->capture && check_capture(o->capture, o))
        return 2;
    if (optind >= argc)
        return fprintf(stderr, "tftrace: no command given\nusage: tftrace [options] -- COMMAND [ARGS...]\n"), 2;
    o->cmd = argv + optind;
    return 0;
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

void launch_opts_json(const launch_opts *o, char *buf, size_t n)
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
    if (o->perturb && k > 0 && (size_t)k + 24 < n) /* the parameters were perturbed: a GOLDEN2 */
        k += snprintf(buf + k, n - (size_t)k, ",\"perturb\":true");
    if (k > 0 && (size_t)k + 2 <= n)
        snprintf(buf + k, n - (size_t)k, "}");
}
