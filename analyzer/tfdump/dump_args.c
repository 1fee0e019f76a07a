/*
 * dump_args.c — tfdump's command line (dump_internal.h): the options into
 * a dump_opts, one mode at most, and a message naming the option and what
 * it needs for every wrong one (exit status 2).
 */
#include "core_out.h"
#include "dump_internal.h"
#include "export.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int usage_error(const char *fmt, const char *arg)
{
    fputs("tfdump: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\nTry 'tfdump --help' for more information.\n", stderr);
    return DUMP_USAGE;
}

/* Parses a decimal int64; the whole of s[0..n) must be the number. */
static bool parse_i64(const char *s, size_t n, int64_t *out)
{
    char buf[32];
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* A:B, A:, :B or A. */
static bool parse_steps(const char *s, dump_opts *o)
{
    const char *colon = strchr(s, ':');
    o->step_lo = INT64_MIN + 1; /* INT64_MIN is TFT_STEP_NONE */
    o->step_hi = INT64_MAX;
    o->have_steps = 1;
    if (!colon) {
        if (!parse_i64(s, strlen(s), &o->step_lo))
            return false;
        o->step_hi = o->step_lo;
        return true;
    }
    if (colon > s && !parse_i64(s, (size_t)(colon - s), &o->step_lo))
        return false;
    if (colon[1] && !parse_i64(colon + 1, strlen(colon + 1), &o->step_hi))
        return false;
    return (colon > s || colon[1]) && o->step_lo <= o->step_hi;
}

/* Comma-separated kind names into the o->kinds bit set. */
static bool parse_kinds(const char *s, dump_opts *o)
{
    char buf[256];
    if (snprintf(buf, sizeof(buf), "%s", s) >= (int)sizeof(buf))
        return false;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "unknown") == 0) {
            o->kinds |= KIND_BIT_UNKNOWN;
            continue;
        }
        int k = TFT_REC_STEP;
        while (k < TFT_REC_KIND_MAX && strcmp(tok, tft_rec_kind_name((uint16_t)k)) != 0)
            k++;
        if (k == TFT_REC_KIND_MAX)
            return false;
        o->kinds |= 1ull << k;
    }
    return o->kinds != 0;
}

/* N, NK, NM or NG (powers of 1024), "off" or 0 for none. */
static bool parse_bytes(const char *s, uint64_t *out)
{
    if (!strcmp(s, "off")) {
        *out = 0;
        return true;
    }
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9')
        return false;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (errno || end[shift ? 1 : 0] || (shift && v > (UINT64_MAX >> shift)))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

enum { OPT_VERIFY = 256, OPT_CHUNKS, OPT_ORDER, OPT_CHECK, OPT_TENSOR, OPT_CAPTURES, OPT_OUT, OPT_RAW,
       OPT_REPLAY, OPT_RTOL, OPT_ATOL, OPT_LEAK_MIN, OPT_EXTRACT, OPT_RANKS, OPT_STATS,
       OPT_EXPORT, OPT_HTML, OPT_THRESHOLD, OPT_FILE_MODE, OPT_COMPACT };

static const struct option long_opts[] = {
    {"events", no_argument, NULL, 'e'},   {"verify", no_argument, NULL, OPT_VERIFY},
    {"chunks", no_argument, NULL, OPT_CHUNKS}, {"json", no_argument, NULL, 'j'},
    {"check", no_argument, NULL, OPT_CHECK}, {"compact", no_argument, NULL, OPT_COMPACT},
    {"tensor", required_argument, NULL, OPT_TENSOR}, {"captures", no_argument, NULL, OPT_CAPTURES},
    {"out", required_argument, NULL, OPT_OUT}, {"raw", no_argument, NULL, OPT_RAW},
    {"replay-op", required_argument, NULL, OPT_REPLAY}, {"rtol", required_argument, NULL, OPT_RTOL},
    {"atol", required_argument, NULL, OPT_ATOL}, {"leak-min-bytes", required_argument, NULL, OPT_LEAK_MIN},
    {"rank", required_argument, NULL, 'r'}, {"steps", required_argument, NULL, 's'},
    {"name", required_argument, NULL, 'n'}, {"kind", required_argument, NULL, 'k'},
    {"order", required_argument, NULL, OPT_ORDER}, {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},  {"extract", no_argument, NULL, OPT_EXTRACT},
    {"ranks", required_argument, NULL, OPT_RANKS}, {"stats", required_argument, NULL, OPT_STATS},
    {"export", required_argument, NULL, OPT_EXPORT}, {"html", required_argument, NULL, OPT_HTML},
    {"threshold", required_argument, NULL, OPT_THRESHOLD}, {"mode", required_argument, NULL, OPT_FILE_MODE},
    {NULL, 0, NULL, 0},
};

static int set_mode(dump_opts *o, int mode)
{
    if (o->mode != MODE_SUMMARY && o->mode != mode)
        return usage_error("%s", "--events, --verify, --chunks, --check, --captures, --tensor, "
                                 "--replay-op, --extract, --export, --html and --compact exclude each other");
    o->mode = mode;
    return DUMP_OK;
}

/* --ranks: comma-separated ranks and ranges A-B into o->ranges. */
static bool parse_ranks(const char *s, dump_opts *o)
{
    char buf[512];
    if (snprintf(buf, sizeof(buf), "%s", s) >= (int)sizeof(buf))
        return false;
    o->nranges = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const char *dash = strchr(tok, '-');
        int64_t lo, hi;
        if (!parse_i64(tok, dash ? (size_t)(dash - tok) : strlen(tok), &lo))
            return false;
        hi = lo;
        if (dash && !parse_i64(dash + 1, strlen(dash + 1), &hi))
            return false;
        if (lo < 0 || hi < lo || hi > INT32_MAX || o->nranges == (int)(sizeof(o->ranges) / sizeof(o->ranges[0])))
            return false;
        o->ranges[o->nranges][0] = (int32_t)lo;
        o->ranges[o->nranges][1] = (int32_t)hi;
        o->nranges++;
    }
    return o->nranges > 0;
}

/* --export FORMAT OUT: FORMAT is the option's argument, OUT the next word,
 * taken from argv here (getopt has not looked at it yet). */
static int parse_export(const char *fmt, int argc, char **argv, dump_opts *o)
{
    if (!strcmp(fmt, "chrome"))
        o->export_format = EXP_CHROME;
    else if (!strcmp(fmt, "perfetto"))
        o->export_format = EXP_PERFETTO;
    else if (!strcmp(fmt, "tensorboard"))
        o->export_format = EXP_TENSORBOARD;
    else
        return usage_error("--export: FORMAT must be 'chrome', 'perfetto' or 'tensorboard', not '%s'", fmt);
    if (optind >= argc || (argv[optind][0] == '-' && argv[optind][1]))
        return usage_error("%s", "--export FORMAT needs OUT, the file to write ('-' for stdout; for tensorboard "
                                 "a directory): tfdump --export chrome OUT.json TRACE");
    if (o->export_format == EXP_TENSORBOARD && !strcmp(argv[optind], "-"))
        return usage_error("%s", "--export tensorboard needs a directory, not '-': "
                                 "tfdump --export tensorboard runs/NAME TRACE");
    o->export_out = argv[optind++];
    return set_mode(o, MODE_EXPORT);
}

/* The options that choose the mode; returns like parse_one. */
static int parse_mode(int c, const char *arg, dump_opts *o)
{
    int64_t v;
    switch (c) {
    case 'e': return set_mode(o, MODE_EVENTS);
    case OPT_VERIFY: return set_mode(o, MODE_VERIFY);
    case OPT_CHUNKS: return set_mode(o, MODE_CHUNKS);
    case OPT_CHECK: return set_mode(o, MODE_CHECK);
    case OPT_COMPACT: return set_mode(o, MODE_COMPACT);
    case OPT_HTML:
        if (!*arg)
            return usage_error("%s", "--html needs FILE, the page to write");
        o->html_out = arg;
        return set_mode(o, MODE_HTML);
    case OPT_CAPTURES: return set_mode(o, MODE_CAPTURES);
    case OPT_EXTRACT: return set_mode(o, MODE_EXTRACT);
    case OPT_TENSOR:
        if (!*arg)
            return usage_error("%s", "--tensor needs a tensor name or id");
        o->tensor = arg;
        return set_mode(o, MODE_TENSOR);
    default: /* OPT_REPLAY */
        if (!parse_i64(arg, strlen(arg), &v) || v < 0)
            return usage_error("--replay-op needs an op sequence number, not '%s'", arg);
        o->replay_seq = v;
        return set_mode(o, MODE_REPLAY);
    }
}

/* The options of one mode (--extract, --export, --tensor, --replay-op,
 * --check); returns like parse_one. */
static int parse_mode_option(int c, const char *arg, dump_opts *o)
{
    switch (c) {
    case OPT_RANKS:
        if (!*arg || !parse_ranks(arg, o))
            return usage_error("--ranks needs ranks and ranges such as 0,2,4-7, not '%s'", arg);
        o->ranks_list = arg;
        return DUMP_OK;
    case OPT_STATS:
        if (strcmp(arg, "health") && strcmp(arg, "shape"))
            return usage_error("--stats must be 'health' or 'shape', not '%s'", arg);
        o->stats_to = arg[0] == 'h' ? TFT_STATS_HEALTH : TFT_STATS_SHAPE;
        return DUMP_OK;
    case OPT_OUT: o->out = arg; return DUMP_OK;
    case OPT_FILE_MODE:
        return core_out_parse_mode(arg, &o->file_mode) == 0
                   ? DUMP_OK
                   : usage_error("--mode needs octal permission bits with the owner's read and write (0600, 0640, "
                                 "0644), not '%s'", arg);
    case OPT_RAW: o->raw = 1; return DUMP_OK;
    case OPT_RTOL:
    case OPT_ATOL: {
        char *end;
        errno = 0;
        double x = strtod(arg, &end);
        if (errno || end == arg || *end || !(x >= 0) || isinf(x))
            return usage_error("--rtol and --atol need a number >= 0, not '%s'", arg);
        *(c == OPT_RTOL ? &o->rtol : &o->atol) = x;
        return DUMP_OK;
    }
    case OPT_LEAK_MIN:
        return parse_bytes(arg, &o->leak_min_bytes)
                   ? DUMP_OK
                   : usage_error("--leak-min-bytes needs a size such as 33554432, 32M or off, not '%s'", arg);
    default: /* OPT_THRESHOLD */
        return detect_opts_set(&o->chk, arg) == 0
                   ? DUMP_OK
                   : usage_error("--threshold needs NAME=VALUE, VALUE a number >= 0 and NAME one of vocab, clip, "
                                 "min-steps, loss-drop, loss-rise, spike, growth, growth-steps, update-max, "
                                 "init-std, absmax-growth, absmax-min, collapse, softmax-max, uniform, uniform-steps, "
                                 "layer-growth, pad-id; not '%s'",
                                 arg);
    }
}

/* --json and the filters of --events; returns like parse_one. */
static int parse_filter(int c, const char *arg, dump_opts *o)
{
    int64_t v;
    switch (c) {
    case 'j': o->json = 1; return DUMP_OK;
    case 'r':
        if (!parse_i64(arg, strlen(arg), &v) || v < 0 || v > INT32_MAX)
            return usage_error("--rank needs a rank number, not '%s'", arg);
        o->rank = (int)v;
        return DUMP_OK;
    case 's':
        return parse_steps(arg, o) ? DUMP_OK
                                   : usage_error("--steps needs A:B with A <= B (or A:, :B, A), not '%s'", arg);
    case 'n': o->name_glob = arg; return DUMP_OK;
    case 'k':
        return parse_kinds(arg, o) ? DUMP_OK : usage_error("--kind: unknown record kind in '%s'", arg);
    default: /* OPT_ORDER */
        if (strcmp(arg, "step") == 0 || strcmp(arg, "time") == 0) {
            o->order = arg[0] == 't' ? TFT_ORDER_TIME : TFT_ORDER_STEP_SEQ;
            return DUMP_OK;
        }
        return usage_error("--order must be 'step' or 'time', not '%s'", arg);
    }
}

/* Handles one option (opt: as the user wrote it, for messages); returns
 * DUMP_OK, DUMP_USAGE, or -1 for "exit 0 now". */
static int parse_one(int c, const char *arg, const char *opt, dump_opts *o)
{
    switch (c) {
    case 'e': case OPT_VERIFY: case OPT_CHUNKS: case OPT_CHECK: case OPT_COMPACT: case OPT_HTML: case OPT_CAPTURES:
    case OPT_EXTRACT: case OPT_TENSOR: case OPT_REPLAY:
        return parse_mode(c, arg, o);
    case OPT_RANKS: case OPT_STATS: case OPT_OUT: case OPT_RAW: case OPT_RTOL: case OPT_ATOL:
    case OPT_LEAK_MIN: case OPT_THRESHOLD: case OPT_FILE_MODE:
        return parse_mode_option(c, arg, o);
    case 'j': case 'r': case 's': case 'n': case 'k': case OPT_ORDER:
        return parse_filter(c, arg, o);
    case 'h': dump_usage(stdout); return -1;
    case 'V': printf("tfdump (tftrace) %s (trace format %s)\n", tft_version(), tft_format_version()); return -1;
    case ':': return usage_error("option '%s' needs an argument", opt);
    default: return usage_error("unknown option '%s'", opt);
    }
}

/* Which options the command line gave, for the checks of what applies to
 * which mode. */
typedef struct given {
    bool rank, ranks, steps;
    bool filtered;       /* --name, --kind, --order */
    bool tensor_opts;    /* --out, --raw */
    bool replay_opts;    /* --rtol, --atol */
    bool check_opts;     /* --leak-min-bytes, --threshold */
    bool extract_opts;   /* --stats */
    bool file_mode;      /* --mode */
} given;

static void note_given(given *g, int c)
{
    g->rank |= c == 'r';
    g->ranks |= c == OPT_RANKS;
    g->steps |= c == 's';
    g->filtered |= c == 'n' || c == 'k' || c == OPT_ORDER;
    g->tensor_opts |= c == OPT_OUT || c == OPT_RAW;
    g->replay_opts |= c == OPT_RTOL || c == OPT_ATOL;
    g->check_opts |= c == OPT_LEAK_MIN || c == OPT_THRESHOLD;
    g->extract_opts |= c == OPT_STATS;
    g->file_mode |= c == OPT_FILE_MODE;
}

/* --extract IN OUT: its operands from argv[optind..], the options it takes. */
static int check_extract(int argc, char **argv, const given *g, dump_opts *o)
{
    if (optind != argc - 2)
        return usage_error("%s", "--extract needs IN (the trace) and OUT (a new directory)");
    o->path = argv[optind];
    o->extract_out = argv[optind + 1];
    if (o->json)
        return usage_error("%s", "--json does not apply to --extract (OUT/manifest.json describes the extract)");
    if (g->filtered && !(g->steps && !o->name_glob && !o->kinds && o->order == TFT_ORDER_STEP_SEQ))
        return usage_error("%s", "--extract takes --steps, --ranks, --rank and --stats; --name, --kind and "
                                 "--order only apply to --events");
    return DUMP_OK;
}

/* Every other mode: TRACE from argv[optind], the options that apply to it. */
static int check_mode(int argc, char **argv, const given *g, dump_opts *o)
{
    if (g->extract_opts)
        return usage_error("%s", "--stats only applies to --extract");
    if (optind != argc - 1)
        return usage_error("%s", optind >= argc ? "missing TRACE (a trace directory or a rank file)"
                                                : "give exactly one TRACE");
    o->path = argv[optind];
    bool rank_ok = o->mode == MODE_EVENTS || o->mode == MODE_CHUNKS || o->mode == MODE_CAPTURES ||
                   o->mode == MODE_TENSOR || o->mode == MODE_REPLAY || o->mode == MODE_EXPORT;
    if ((g->filtered || g->steps) && o->mode != MODE_EVENTS && (g->filtered || o->mode != MODE_EXPORT))
        return usage_error("%s", "--steps, --name, --kind and --order only apply to --events "
                                 "(--steps also to --export)");
    if (g->ranks && o->mode != MODE_EXPORT)
        return usage_error("%s", "--ranks only applies to --export and --extract (--events takes --rank R)");
    if (g->rank && !rank_ok)
        return usage_error("%s", "--rank applies to --events, --chunks, --captures, --tensor, --replay-op "
                                 "and --export");
    if (g->tensor_opts && o->mode != MODE_TENSOR)
        return usage_error("%s", "--out and --raw only apply to --tensor");
    if (g->replay_opts && o->mode != MODE_REPLAY)
        return usage_error("%s", "--rtol and --atol only apply to --replay-op");
    if (g->check_opts && o->mode != MODE_CHECK && o->mode != MODE_HTML)
        return usage_error("%s", "--leak-min-bytes and --threshold only apply to --check and --html");
    if (o->json && (o->mode == MODE_HTML || o->mode == MODE_COMPACT))
        return usage_error("--json does not apply to %s", o->mode == MODE_HTML ? "--html" : "--compact");
    if (g->file_mode && o->mode != MODE_EXPORT && !(o->mode == MODE_TENSOR && o->out))
        return usage_error("%s", "--mode applies to what --extract, --export and --tensor --out write");
    return DUMP_OK;
}

int dump_parse_args(int argc, char **argv, dump_opts *o)
{
    *o = (dump_opts){.order = TFT_ORDER_STEP_SEQ, .rank = -1, .rtol = 1e-5, .atol = 1e-7,
                     .leak_min_bytes = LEAK_EXIT_MIN_BYTES, .stats_to = -1, .chk = DETECT_OPTS_DEFAULT};
    const char *env_mode = getenv("TFT_MODE");   /* as for traces; --mode wins */
    if (env_mode && *env_mode && core_out_parse_mode(env_mode, &o->file_mode) != 0)
        return usage_error("TFT_MODE needs octal permission bits with the owner's read and write, not '%s'",
                           env_mode);
    given g = {0};
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":ejr:s:n:k:hV", long_opts, NULL)) != -1) {
        char opt[64];
        if ((c == '?' || c == ':') && optopt > 0 && optopt < 256)
            snprintf(opt, sizeof(opt), "-%c", optopt);
        else
            snprintf(opt, sizeof(opt), "%s", argv[optind - 1]);
        int e = c == OPT_EXPORT ? parse_export(optarg, argc, argv, o) : parse_one(c, optarg, opt, o);
        if (e)
            return e;
        note_given(&g, c);
    }
    return o->mode == MODE_EXTRACT ? check_extract(argc, argv, &g, o) : check_mode(argc, argv, &g, o);
}
