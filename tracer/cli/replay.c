/*
 * replay.c — `tftrace replay GOLDEN BAD`: re-runs both recorded programs
 * with capture armed at the point where they part, from the nearest
 * checkpoint recorded before it, checks that each replay reproduces its
 * recording, and compares the captured tensors element by element.
 *
 *   1. The point: the first divergence `tfdiff --json GOLDEN BAD` reports
 *      (else its first non-finite value), or --at step=S[,seq=Q][,name=N].
 *   2. Per side, from the trace: the traced command (manifest argv after
 *      tftrace's "--"), the working directory, the recording options
 *      (--stats, --every, --alloc-min, --step-range), and
 *      the checkpoint SAVE records of rank 0. The latest checkpoint at or
 *      before step S whose file still exists and which carries a resume
 *      recipe is used: the recipe's words are appended to the command, with
 *      {path} replaced by the checkpoint file and {scratch} by a fresh
 *      directory of this replay (so the replay never writes over the
 *      recorded run's checkpoints). Without one the command runs from the
 *      start.
 *   3. Each side runs under `tftrace --capture SPEC --until-step S`, which
 *      stops it once step S is complete (step-less programs run to the end,
 *      capturing the op at seq Q and the three after it, its consumers).
 *   4. Reproduction: `tfdiff --rtol 0 --atol 0` of the recorded trace and the
 *      replay over the steps the replay ran; any bit that differs before the
 *      divergence means the program is not deterministic, which is reported
 *      as a finding (exit 3).
 *   5. `tfdiff --tensors` of the two replays: element-wise comparison of the
 *      captured tensors.
 *
 * A trace is a program: the commands come from the manifests (and the
 * checkpoints' resume recipes), which anyone who can write the trace can
 * change. Both are shown, with their directories, and run only with --yes
 * or after a "y" on a terminal; a command whose secrets were redacted when
 * it was recorded is refused (docs/SECURITY.md).
 *
 * Output directory (-o, default replay-DATE-TIME): golden.trace, bad.trace,
 * tensors.json and replay.json (a summary of everything above).
 * Exit: 0 replayed and reproduced, 1 the tensors differ (the usual outcome:
 * this is the bug), 3 a replay did not reproduce its recording, 2 usage or
 * input errors, 4 a replay could not be run.
 */
#include "cli_internal.h"

#include "tft_format.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RP_MAX_ARGS 512

typedef struct rp_opts {
    const char *golden, *bad, *out, *at;
    double timeout;
    int from_start, quiet;
    int yes;               /* --yes: run the recorded commands without asking */
    int force;             /* --force: replace an earlier replay's traces in the output directory */
} rp_opts;

/* The point to replay to. */
typedef struct rp_point {
    int64_t step;  /* TFT_STEP_NONE: a step-less trace */
    int64_t seq;   /* -1 unknown */
    int rank;
    char tensor[256], origin[256], kind[32];
} rp_point;

/* One side (golden or bad) of the replay. */
typedef struct rp_side {
    const char *label;     /* "golden" / "bad" */
    const char *trace;     /* recorded trace */
    char cwd[1024];
    char *argv[RP_MAX_ARGS];
    int argc;
    char stats[16];
    long every;
    char alloc_min[64], step_range[256]; /* recorded options, "" = default */
    /* the checkpoint used, if any */
    int have_ckpt;
    int64_t ckpt_step;
    char ckpt_path[4096], recipe[4096];
    int64_t rec_first, rec_last; /* steps of the recording (rank 0) */
    /* results */
    char out_trace[4200];
    int run_status;
    int64_t rep_first, rep_last;
    int reproduced;        /* 1 yes, 0 no, -1 unknown */
    char repro_detail[512];
} rp_side;

static char tool_dir[PATH_MAX]; /* where tftrace lives: tfdiff is next to it */

static void rp_usage(FILE *f)
{
    fprintf(f,
            "usage: tftrace replay [options] GOLDEN.trace BAD.trace\n"
            "Re-runs the two recorded programs up to the point where they part, from the\n"
            "nearest recorded checkpoint before it, with whole-tensor capture armed there;\n"
            "checks that each replay reproduces its recording, and compares the captured\n"
            "tensors element by element (tfdiff --tensors).\n\n"
            "  --at SPEC         the point: step=S[,seq=Q][,name=TENSOR] (default: the first\n"
            "                    divergence tfdiff finds, else its first non-finite value)\n"
            "  -o, --output DIR  where the replays and reports go (default replay-DATE-TIME)\n"
            "      --from-start  ignore checkpoints: re-run both programs from the start\n"
            "      --timeout SEC end a replay after SEC seconds (default none)\n"
            "  -y, --yes         run the two recorded commands without asking. They come from\n"
            "                    the traces' manifest.json (and checkpoint resume recipes):\n"
            "                    whoever could write a trace chose them. They are shown with\n"
            "                    their directories first; without --yes a terminal asks, and\n"
            "                    anything else stops before running (exit 2)\n"
            "      --force       replace the traces an earlier replay left in the output directory\n"
            "  -q, --quiet       only the final report\n"
            "  -h, --help        this help\n\n"
            "A command recorded with secrets redacted (tftrace's default) is not run.\n\n"
            "Exit status: 0 reproduced and captured, tensors equal; 1 the captured tensors\n"
            "differ; 3 a replay did not reproduce its recording (non-determinism); 2 usage\n"
            "or input error, or the commands were not confirmed; 4 a replay could not be run.\n");
}

static void say(const rp_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const rp_opts *o, const char *fmt, ...)
{
    if (o->quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("tftrace replay: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- running programs ------------------------------------------------- */

/* Runs argv in cwd (NULL = ours); stdout to *out (malloc'd, NUL-terminated)
 * when out != NULL, else inherited; stderr to errfile when given (else
 * inherited). Returns the wait status, or -1 when it could not be started. */
static int run_cmd(char *const argv[], const char *cwd, char **out, const char *errfile)
{
    int pfd[2] = {-1, -1};
    if (out && pipe(pfd) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        if (out)
            close(pfd[0]), close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        if (cwd && chdir(cwd) < 0) {
            fprintf(stderr, "tftrace replay: cannot enter %s: %s\n", cwd, strerror(errno));
            _exit(127);
        }
        if (out) {
            dup2(pfd[1], 1);
            close(pfd[0]);
            close(pfd[1]);
        }
        if (errfile) {
            int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
            if (fd >= 0)
                dup2(fd, 2);
        }
        execvp(argv[0], argv);
        fprintf(stderr, "tftrace replay: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    if (out) {
        close(pfd[1]);
        size_t cap = 1 << 16, n = 0;
        char *buf = malloc(cap);
        for (;;) {
            if (buf && n + 4096 > cap) {
                char *nb = realloc(buf, cap * 2);
                if (!nb) {
                    free(buf);
                    buf = NULL;
                } else {
                    buf = nb;
                    cap *= 2;
                }
            }
            char sink[4096];
            ssize_t k = read(pfd[0], buf ? buf + n : sink, buf ? cap - n - 1 : sizeof(sink));
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                break;
            if (buf)
                n += (size_t)k;
        }
        close(pfd[0]);
        if (buf)
            buf[n] = '\0';
        *out = buf;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return st;
}

/* A tool next to tftrace (installed), in ../analyzer (the build tree), or
 * on the PATH. A path that does not fit in buf is not a candidate. */
static void tool_path(char *buf, size_t n, const char *tool)
{
    int k = snprintf(buf, n, "%s/%s", tool_dir, tool);
    if (k >= 0 && (size_t)k < n && access(buf, X_OK) == 0)
        return;
    k = snprintf(buf, n, "%s/../analyzer/%s", tool_dir, tool);
    if (k < 0 || (size_t)k >= n || access(buf, X_OK) != 0)
        snprintf(buf, n, "%s", tool);
}

/* The output directory: created 0700, or an existing one of ours that is
 * not a symbolic link (the reports are written into it by name). */
static int out_dir(const char *dir)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        fprintf(stderr, "tftrace replay: %s: cannot create: %s\n", dir, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (lstat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid()) {
        fprintf(stderr, "tftrace replay: %s: not a directory of yours (a symbolic link, or another user's): "
                        "choose another -o\n", dir);
        return -1;
    }
    return 0;
}

/* A report file: never written through a link planted at its name. */
static FILE *fopen_out(const char *path, const char *how)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (how[0] == 'a' ? O_APPEND : O_TRUNC), 0600);
    FILE *f = fd >= 0 ? fdopen(fd, how) : NULL;
    if (!f && fd >= 0)
        close(fd);
    return f;
}

/* ---- the point ------------------------------------------------------------ */

static int parse_at(const char *spec, rp_point *p)
{
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", spec);
    int have = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        if (!eq)
            return -1;
        *eq = '\0';
        const char *v = eq + 1;
        char *end;
        if (!strcmp(t, "step")) {
            p->step = strtoll(v, &end, 10);
            if (*end || end == v || p->step < 0)
                return -1;
            have = 1;
        } else if (!strcmp(t, "seq")) {
            p->seq = strtoll(v, &end, 10);
            if (*end || end == v || p->seq < 0)
                return -1;
            have = 1;
        } else if (!strcmp(t, "name")) {
            snprintf(p->tensor, sizeof(p->tensor), "%s", v);
        } else if (!strcmp(t, "rank")) {
            p->rank = (int)strtol(v, &end, 10);
            if (*end || end == v || p->rank < 0)
                return -1;
        } else {
            return -1;
        }
    }
    snprintf(p->kind, sizeof(p->kind), "given");
    return have ? 0 : -1;
}

static int64_t json_step(const cJSON *o)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "step");
    return cJSON_IsNumber(s) ? (int64_t)s->valuedouble : TFT_STEP_NONE;
}

static void json_str(const cJSON *o, const char *key, char *out, size_t n)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsString(s))
        snprintf(out, n, "%s", s->valuestring);
}

/* The first divergence (or first non-finite value) tfdiff reports.
 * Returns 1 found, 0 none, -1 error (message printed). */
static int find_point(const rp_opts *o, rp_point *p)
{
    char tfdiff[PATH_MAX + 16];
    tool_path(tfdiff, sizeof(tfdiff), "tfdiff");
    char *argv[] = {tfdiff, "--json", (char *)o->golden, (char *)o->bad, NULL};
    char *out = NULL;
    int st = run_cmd(argv, NULL, &out, NULL);
    if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) > 1 || !out) {
        fprintf(stderr, "tftrace replay: tfdiff could not compare %s and %s (see its message above)\n",
                o->golden, o->bad);
        free(out);
        return -1;
    }
    cJSON *j = cJSON_Parse(out);
    free(out);
    if (!j) {
        fprintf(stderr, "tftrace replay: tfdiff printed no JSON\n");
        return -1;
    }
    int found = 0;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "first_divergence");
    const char *kind = "divergence";
    if (!cJSON_IsObject(d)) {
        d = cJSON_GetObjectItemCaseSensitive(j, "first_nonfinite");
        kind = "nonfinite";
    }
    if (cJSON_IsObject(d)) {
        found = 1;
        p->step = json_step(d);
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(d, "seq");
        p->seq = cJSON_IsNumber(q) ? (int64_t)q->valuedouble : -1;
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(d, "rank");
        p->rank = cJSON_IsNumber(r) ? (int)r->valuedouble : 0;
        json_str(d, "tensor", p->tensor, sizeof(p->tensor));
        snprintf(p->kind, sizeof(p->kind), "%s", kind);
        const cJSON *org = cJSON_GetObjectItemCaseSensitive(j, "origin");
        if (cJSON_IsObject(org) && json_step(org) == p->step)
            json_str(org, "tensor", p->origin, sizeof(p->origin));
    }
    cJSON_Delete(j);
    return found;
}

/* The capture spec for the point: the diverging tensor (and the origin's)
 * at its step, with `tokens` of that step for the structural summary
 * (padding); step-less traces capture the op by seq. */
static void capture_spec(const rp_point *p, char *buf, size_t n)
{
    if (p->step == TFT_STEP_NONE) { /* the op and the next few, which consume it */
        long long q = p->seq >= 0 ? p->seq : 0;
        snprintf(buf, n, "seq=%lld:%lld", q, q + 3);
        return;
    }
    int k = snprintf(buf, n, "step=%lld", (long long)p->step);
    if (p->seq >= 0 && !p->tensor[0])
        k += snprintf(buf + k, n - (size_t)k, ",seq=%lld", (long long)p->seq);
    if (p->tensor[0])
        k += snprintf(buf + k, n - (size_t)k, ",name=%s", p->tensor);
    if (p->origin[0] && strcmp(p->origin, p->tensor))
        k += snprintf(buf + k, n - (size_t)k, ";step=%lld,name=%s", (long long)p->step, p->origin);
    snprintf(buf + k, n - (size_t)k, ";step=%lld,name=tokens", (long long)p->step);
}

/* ---- one side ------------------------------------------------------------- */

static void side_free(rp_side *s)
{
    for (int i = 0; i < s->argc; i++)
        free(s->argv[i]);
    s->argc = 0;
}

static int side_add(rp_side *s, const char *word)
{
    if (s->argc >= RP_MAX_ARGS - 1)
        return -1;
    s->argv[s->argc++] = strdup(word);
    s->argv[s->argc] = NULL;
    return 0;
}

/* Reads the manifest: the command after tftrace's "--" (the whole argv for
 * a trace written in-process, without the launcher), cwd, options. */
static int side_manifest(rp_side *s)
{
    char path[4200], err[256] = "";
    snprintf(path, sizeof(path), "%s/manifest.json", s->trace);
    tft_manifest m;
    if (tft_manifest_read(path, &m, err, sizeof(err)) < 0) {
        fprintf(stderr, "tftrace replay: %s: cannot read the manifest%s%s\n", path, err[0] ? ": " : "", err);
        return -1;
    }
    int from = 0;
    for (int i = 0; i < m.argc; i++)
        if (!strcmp(m.argv[i], "--")) {
            from = i + 1;
            break;
        }
    if (from == 0 && m.argc > 0 && strstr(m.argv[0], "tftrace"))
        from = m.argc; /* a launcher command line without "--": nothing to run */
    for (int k = 0; k < m.nredacted; k++) {
        int i = m.redacted[k];
        if (i < from || i >= m.argc)
            continue;
        fprintf(stderr, "tftrace replay: %s: the recorded command had a secret-looking value redacted (argument "
                        "%d: %s), so it cannot be re-run as recorded; record with tftrace --no-redact, or re-run it "
                        "by hand\n", path, i - from, m.argv[i]);
        tft_manifest_free(&m);
        return -1;
    }
    for (int i = from; i < m.argc; i++)
        side_add(s, m.argv[i]);
    snprintf(s->cwd, sizeof(s->cwd), "%s", m.cwd[0] ? m.cwd : ".");
    snprintf(s->stats, sizeof(s->stats), "full");
    s->every = 1;
    if (m.options_json) {
        cJSON *oj = cJSON_Parse(m.options_json);
        json_str(oj, "stats", s->stats, sizeof(s->stats));
        json_str(oj, "alloc_min", s->alloc_min, sizeof(s->alloc_min));
        json_str(oj, "step_range", s->step_range, sizeof(s->step_range));
        const cJSON *ev = cJSON_GetObjectItemCaseSensitive(oj, "every");
        if (cJSON_IsNumber(ev) && ev->valuedouble >= 1)
            s->every = (long)ev->valuedouble;
        cJSON_Delete(oj);
    }
    tft_manifest_free(&m);
    if (s->argc == 0) {
        fprintf(stderr, "tftrace replay: %s: the manifest records no command to run\n", s->trace);
        return -1;
    }
    return 0;
}

/* A checkpoint path as the replay (in the recorded cwd) sees it. */
static int ckpt_exists(const rp_side *s, const char *path)
{
    char full[8200];
    if (path[0] == '/')
        snprintf(full, sizeof(full), "%s", path);
    else
        snprintf(full, sizeof(full), "%s/%s", s->cwd, path);
    struct stat sb;
    return stat(full, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Scans rank `rank` of the recording: its step range and the latest usable
 * checkpoint saved at or before `step`. */
static int side_checkpoints(rp_side *s, int rank, int64_t step)
{
    tft_trace *t = tft_trace_open(s->trace, NULL);
    if (!t) {
        fprintf(stderr, "tftrace replay: %s: cannot open: %s\n", s->trace, strerror(errno));
        return -1;
    }
    int idx = 0;
    for (int i = 0; i < tft_trace_nranks(t); i++)
        if (tft_trace_rank_id(t, i) == rank)
            idx = i;
    s->rec_first = s->rec_last = TFT_STEP_NONE;
    tft_reader *r = tft_trace_nranks(t) > 0 ? tft_trace_reader(t, idx) : NULL;
    const tft_rec *rec;
    while (r && tft_reader_next(r, &rec) == 1) {
        if (rec->kind == TFT_REC_STEP && rec->step != TFT_STEP_NONE) {
            if (s->rec_first == TFT_STEP_NONE || rec->step < s->rec_first)
                s->rec_first = rec->step;
            if (s->rec_last == TFT_STEP_NONE || rec->step > s->rec_last)
                s->rec_last = rec->step;
        }
        if (rec->kind != TFT_REC_CHECKPOINT || rec->len < sizeof(tft_rec_checkpoint))
            continue;
        const tft_rec_checkpoint *c = (const tft_rec_checkpoint *)rec;
        if (c->action != TFT_CKPT_SAVE || step == TFT_STEP_NONE || c->h.step > step || !c->recipe)
            continue;
        const char *path = tft_reader_string(r, c->path), *recipe = tft_reader_string(r, c->recipe);
        if (!path || !recipe || !recipe[0] || !ckpt_exists(s, path))
            continue;
        if (!s->have_ckpt || c->h.step >= s->ckpt_step) {
            s->have_ckpt = 1;
            s->ckpt_step = c->h.step;
            snprintf(s->ckpt_path, sizeof(s->ckpt_path), "%s", path);
            snprintf(s->recipe, sizeof(s->recipe), "%s", recipe);
        }
    }
    tft_trace_close(t);
    return 0;
}

/* Appends the recipe's words with {path} and {scratch} filled in. */
static int apply_recipe(rp_side *s, const char *scratch)
{
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", s->recipe);
    int used_path = 0;
    for (char *save = NULL, *w = strtok_r(buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        char word[8400];
        const char *p;
        if ((p = strstr(w, "{path}"))) {
            snprintf(word, sizeof(word), "%.*s%s%s", (int)(p - w), w, s->ckpt_path, p + 6);
            used_path = 1;
        } else if ((p = strstr(w, "{scratch}"))) {
            snprintf(word, sizeof(word), "%.*s%s%s", (int)(p - w), w, scratch, p + 9);
        } else {
            snprintf(word, sizeof(word), "%s", w);
        }
        if (side_add(s, word) < 0)
            return -1;
    }
    /* an old-style recipe ("--resume DIR"): the latest checkpoint in DIR is
     * not necessarily the one before the point — use the file itself */
    if (!used_path && s->argc >= 2 && !strcmp(s->argv[s->argc - 2], "--resume")) {
        free(s->argv[s->argc - 1]);
        s->argv[s->argc - 1] = strdup(s->ckpt_path);
    }
    return 0;
}

/* Steps present in a trace's rank `rank`. */
static void trace_steps(const char *trace, int rank, int64_t *first, int64_t *last)
{
    *first = *last = TFT_STEP_NONE;
    tft_trace *t = tft_trace_open(trace, NULL);
    if (!t)
        return;
    for (int i = 0; i < tft_trace_nranks(t); i++) {
        if (tft_trace_rank_id(t, i) != rank)
            continue;
        tft_reader *r = tft_trace_reader(t, i);
        const tft_rec *rec;
        while (tft_reader_next(r, &rec) == 1)
            if (rec->step != TFT_STEP_NONE) {
                if (*first == TFT_STEP_NONE || rec->step < *first)
                    *first = rec->step;
                if (*last == TFT_STEP_NONE || rec->step > *last)
                    *last = rec->step;
            }
    }
    tft_trace_close(t);
}

/* The command a side will run: the recorded one with the recipe's words. */
static int side_prepare(const rp_opts *o, rp_side *s)
{
    char scratch[4200];
    snprintf(scratch, sizeof(scratch), "%s/%s.scratch", o->out, s->label);
    mkdir(scratch, 0700);
    if (s->have_ckpt && apply_recipe(s, scratch) < 0)
        return -1;
    snprintf(s->out_trace, sizeof(s->out_trace), "%s/%s.trace", o->out, s->label);
    struct stat sb;
    if (!o->force && lstat(s->out_trace, &sb) == 0) {
        fprintf(stderr, "tftrace replay: %s exists (an earlier replay?): pass --force to replace it, or choose "
                        "another -o\n", s->out_trace);
        return -1;
    }
    return 0;
}

/* One word as a shell would need it to mean itself: 'it''s' quoting when it
 * holds anything but [A-Za-z0-9_./:=@%+,-]. */
static void print_word(FILE *f, const char *w)
{
    if (*w && strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=@%+,-") == strlen(w)) {
        fputs(w, f);
        return;
    }
    fputc('\'', f);
    for (; *w; w++) {
        if (*w == '\'')
            fputs("'\\''", f);
        else if ((unsigned char)*w < 0x20 || *w == 0x7f)
            fprintf(f, "'$'\\x%02x''", (unsigned char)*w); /* a control character shown, not obeyed */
        else
            fputc(*w, f);
    }
    fputc('\'', f);
}

/* Shows what will run and asks: --yes, or "y" on a terminal. Returns 0 to
 * go on. */
static int confirm(const rp_opts *o, const rp_side side[2])
{
    fprintf(stderr, "tftrace replay: these commands come from the traces (manifest.json%s) and will run as "
                    "uid %d:\n", side[0].have_ckpt || side[1].have_ckpt ? " and a checkpoint's resume recipe" : "",
            (int)geteuid());
    for (int i = 0; i < 2; i++) {
        fprintf(stderr, "  %s (%s), in ", side[i].label, side[i].trace);
        print_word(stderr, side[i].cwd);
        fprintf(stderr, ":\n   ");
        for (int k = 0; k < side[i].argc; k++) {
            fputc(' ', stderr);
            print_word(stderr, side[i].argv[k]);
        }
        fputc('\n', stderr);
    }
    if (o->yes)
        return 0;
    if (!isatty(STDIN_FILENO)) {
        fprintf(stderr, "tftrace replay: not run: a command read from a trace runs only with --yes, or after a "
                        "'y' typed on a terminal\n");
        return -1;
    }
    fprintf(stderr, "Run them? [y/N] ");
    char ans[64] = "";
    if (!fgets(ans, sizeof(ans), stdin) || (strcmp(ans, "y\n") && strcmp(ans, "yes\n") && strcmp(ans, "Y\n"))) {
        fprintf(stderr, "tftrace replay: not confirmed: nothing was run\n");
        return -1;
    }
    return 0;
}

static int run_side(const rp_opts *o, rp_side *s, const rp_point *p, const char *spec)
{
    char self[PATH_MAX + 16], errlog[4300];
    snprintf(errlog, sizeof(errlog), "%s/%s.log", o->out, s->label);
    tool_path(self, sizeof(self), "tftrace");
    char until[32], timeout[32], every[32];
    snprintf(until, sizeof(until), "%lld", (long long)p->step);
    snprintf(timeout, sizeof(timeout), "%g", o->timeout);
    snprintf(every, sizeof(every), "%ld", s->every);
    char *argv[RP_MAX_ARGS + 32];
    int n = 0;
    argv[n++] = self;
    argv[n++] = "-q";
    if (o->force)
        argv[n++] = "--force";
    argv[n++] = "-o";
    argv[n++] = s->out_trace;
    argv[n++] = "--capture";
    argv[n++] = (char *)spec;
    argv[n++] = "--stats";
    argv[n++] = s->stats;
    argv[n++] = "--every";
    argv[n++] = every;
    if (p->step != TFT_STEP_NONE) {
        argv[n++] = "--until-step";
        argv[n++] = until;
    }
    if (o->timeout > 0) {
        argv[n++] = "--timeout";
        argv[n++] = timeout;
    }
    if (s->alloc_min[0]) {
        argv[n++] = "--alloc-min";
        argv[n++] = s->alloc_min;
    }
    if (s->step_range[0]) {
        argv[n++] = "--step-range";
        argv[n++] = s->step_range;
    }
    argv[n++] = "--";
    for (int i = 0; i < s->argc; i++)
        argv[n++] = s->argv[i];
    argv[n] = NULL;
    if (!o->quiet) {
        fprintf(stderr, "tftrace replay: %s: ", s->label);
        if (s->have_ckpt)
            fprintf(stderr, "from checkpoint %s (step %lld)", s->ckpt_path, (long long)s->ckpt_step);
        else
            fprintf(stderr, "from the start");
        fprintf(stderr, ", in %s:", s->cwd);
        for (int i = 0; i < s->argc; i++)
            fprintf(stderr, " %s", s->argv[i]);
        fprintf(stderr, "\n");
    }
    /* the program's stdout would mix with our report: it goes to the log */
    char *junk = NULL;
    s->run_status = run_cmd(argv, s->cwd, &junk, errlog);
    if (junk) {
        FILE *f = fopen_out(errlog, "a");
        if (f) {
            fputs(junk, f);
            fclose(f);
        }
    }
    free(junk);
    if (s->run_status < 0) {
        fprintf(stderr, "tftrace replay: %s: could not start %s\n", s->label, self);
        return -1;
    }
    trace_steps(s->out_trace, p->rank, &s->rep_first, &s->rep_last);
    /* stopped after step S: what it began of S + 1 does not count */
    if (p->step != TFT_STEP_NONE && s->rep_last != TFT_STEP_NONE && s->rep_last > p->step)
        s->rep_last = p->step;
    struct stat sb;
    char man[4300];
    snprintf(man, sizeof(man), "%s/manifest.json", s->out_trace);
    if (stat(man, &sb) < 0) {
        fprintf(stderr, "tftrace replay: %s: the replay wrote no trace (see %s)\n", s->label, errlog);
        return -1;
    }
    return 0;
}

/* Recorded vs replayed, bit for bit, over the steps the replay ran. */
static void check_reproduced(const rp_opts *o, rp_side *s, const rp_point *p)
{
    char tfdiff[PATH_MAX + 16], steps[64];
    tool_path(tfdiff, sizeof(tfdiff), "tfdiff");
    char *argv[16];
    int n = 0;
    argv[n++] = tfdiff;
    argv[n++] = "--json";
    argv[n++] = "--rtol";
    argv[n++] = "0";
    argv[n++] = "--atol";
    argv[n++] = "0";
    if (s->rep_first != TFT_STEP_NONE) {
        snprintf(steps, sizeof(steps), "%lld:%lld", (long long)s->rep_first, (long long)s->rep_last);
        argv[n++] = "--steps";
        argv[n++] = steps;
    }
    argv[n++] = (char *)s->trace;
    argv[n++] = s->out_trace;
    argv[n] = NULL;
    char *out = NULL;
    int st = run_cmd(argv, NULL, &out, "/dev/null");
    s->reproduced = -1;
    cJSON *j = out ? cJSON_Parse(out) : NULL;
    free(out);
    if (st < 0 || !j) {
        snprintf(s->repro_detail, sizeof(s->repro_detail), "could not compare the replay with %s", s->trace);
        cJSON_Delete(j);
        return;
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "first_divergence");
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(j, "ranks");
    double compared = 0;
    const cJSON *rk;
    cJSON_ArrayForEach(rk, ranks)
    {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(rk, "compared");
        if (cJSON_IsNumber(c))
            compared += c->valuedouble;
    }
    if (cJSON_IsObject(d)) {
        char t[256] = "?";
        json_str(d, "tensor", t, sizeof(t));
        int64_t ds = json_step(d);
        s->reproduced = 0;
        snprintf(s->repro_detail, sizeof(s->repro_detail),
                 "NOT reproduced: the replay differs from the recording at step %lld, tensor %s "
                 "(the program is not deterministic)",
                 (long long)ds, t);
    } else if (compared == 0) {
        snprintf(s->repro_detail, sizeof(s->repro_detail), "nothing to compare: the replay recorded no tensors");
    } else {
        s->reproduced = 1;
        snprintf(s->repro_detail, sizeof(s->repro_detail),
                 "reproduced: %.0f tensors bit-identical to the recording", compared);
    }
    (void)o;
    (void)p;
    cJSON_Delete(j);
}

static int64_t steps_run(const rp_side *s)
{
    return s->rep_first == TFT_STEP_NONE ? 0 : s->rep_last - s->rep_first + 1;
}

static cJSON *side_json(const rp_side *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "recorded", s->trace);
    cJSON_AddStringToObject(o, "replay", s->out_trace);
    cJSON *cmd = cJSON_AddArrayToObject(o, "command");
    for (int i = 0; i < s->argc; i++)
        cJSON_AddItemToArray(cmd, cJSON_CreateString(s->argv[i]));
    cJSON_AddStringToObject(o, "cwd", s->cwd);
    if (s->have_ckpt) {
        cJSON_AddStringToObject(o, "checkpoint", s->ckpt_path);
        cJSON_AddNumberToObject(o, "checkpoint_step", (double)s->ckpt_step);
    } else {
        cJSON_AddNullToObject(o, "checkpoint");
    }
    if (s->rep_first != TFT_STEP_NONE) {
        cJSON *a = cJSON_AddArrayToObject(o, "steps_replayed");
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)s->rep_first));
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)s->rep_last));
    } else {
        cJSON_AddNullToObject(o, "steps_replayed");
    }
    cJSON_AddNumberToObject(o, "steps_executed", (double)steps_run(s));
    if (s->rec_first != TFT_STEP_NONE)
        cJSON_AddNumberToObject(o, "steps_recorded", (double)(s->rec_last - s->rec_first + 1));
    if (s->reproduced < 0)
        cJSON_AddNullToObject(o, "reproduced");
    else
        cJSON_AddBoolToObject(o, "reproduced", s->reproduced);
    cJSON_AddStringToObject(o, "detail", s->repro_detail);
    return o;
}

static int rp_parse(int argc, char **argv, rp_opts *o)
{
    static const struct option lo[] = {{"at", 1, 0, 'a'},         {"output", 1, 0, 'o'},
                                       {"from-start", 0, 0, 'f'}, {"timeout", 1, 0, 't'},
                                       {"quiet", 0, 0, 'q'},      {"help", 0, 0, 'h'},
                                       {"yes", 0, 0, 'y'},        {"force", 0, 0, 'F'},
                                       {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:qhy", lo, NULL)) != -1) {
        switch (c) {
        case 'y': o->yes = 1; break;
        case 'F': o->force = 1; break;
        case 'a': o->at = optarg; break;
        case 'o': o->out = optarg; break;
        case 'f': o->from_start = 1; break;
        case 'q': o->quiet = 1; break;
        case 't': {
            char *end;
            o->timeout = strtod(optarg, &end);
            if (*end || end == optarg || o->timeout < 0)
                return fprintf(stderr, "tftrace replay: --timeout needs seconds >= 0, got '%s'\n", optarg), 2;
            break;
        }
        case 'h': rp_usage(stdout); exit(0);
        default: fprintf(stderr, "Try 'tftrace replay --help'.\n"); return 2;
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "tftrace replay: needs two traces, GOLDEN and BAD\n");
        rp_usage(stderr);
        return 2;
    }
    o->golden = argv[optind];
    o->bad = argv[optind + 1];
    return 0;
}

int replay_main(int argc, char **argv)
{
    if (cli_exe_dir(tool_dir, sizeof(tool_dir)) < 0)
        snprintf(tool_dir, sizeof(tool_dir), ".");
    rp_opts o = {0};
    int e = rp_parse(argc, argv, &o);
    if (e)
        return e;
    char outbuf[4096];
    if (!o.out) {
        cli_fresh_name(outbuf, sizeof(outbuf), "replay", "");
        o.out = outbuf;
    }
    rp_point p = {.step = TFT_STEP_NONE, .seq = -1};
    if (o.at) {
        if (parse_at(o.at, &p) < 0) {
            fprintf(stderr, "tftrace replay: --at needs step=S[,seq=Q][,name=TENSOR][,rank=R], got '%s'\n", o.at);
            return 2;
        }
    } else {
        int f = find_point(&o, &p);
        if (f < 0)
            return 2;
        if (f == 0) {
            printf("tftrace replay: %s and %s do not diverge: nothing to replay\n", o.golden, o.bad);
            return 0;
        }
    }
    rp_side side[2] = {{.label = "golden", .trace = o.golden}, {.label = "bad", .trace = o.bad}};
    int rc = 0;
    for (int i = 0; i < 2 && !rc; i++) {
        if (side_manifest(&side[i]) < 0 || side_checkpoints(&side[i], p.rank, p.step) < 0)
            rc = 2;
        if (o.from_start)
            side[i].have_ckpt = 0;
    }
    if (!rc && out_dir(o.out) < 0)
        rc = 2;
    if (rc) {
        side_free(&side[0]);
        side_free(&side[1]);
        return rc;
    }
    char spec[1200];
    capture_spec(&p, spec, sizeof(spec));
    if (p.step != TFT_STEP_NONE)
        say(&o, "the runs part at step %lld (rank %d, %s%s%s); capturing %s", (long long)p.step, p.rank, p.kind,
            p.tensor[0] ? ", " : "", p.tensor, spec);
    else
        say(&o, "the runs part at op seq %lld (rank %d, %s %s); capturing %s", (long long)p.seq, p.rank, p.kind,
            p.tensor, spec);
    for (int i = 0; i < 2 && !rc; i++)
        if (side_prepare(&o, &side[i]) < 0)
            rc = 2;
    if (!rc && confirm(&o, side) < 0)
        rc = 2;
    if (rc) {
        side_free(&side[0]);
        side_free(&side[1]);
        return rc;
    }
    for (int i = 0; i < 2 && !rc; i++) {
        if (run_side(&o, &side[i], &p, spec) < 0)
            rc = 4;
        else
            check_reproduced(&o, &side[i], &p);
    }
    /* the tensors */
    char tensors_json[4300];
    snprintf(tensors_json, sizeof(tensors_json), "%s/tensors.json", o.out);
    int tensors_rc = -1;
    cJSON *tj = NULL;
    if (!rc) {
        char tfdiff[PATH_MAX + 16];
        tool_path(tfdiff, sizeof(tfdiff), "tfdiff");
        char *jargv[] = {tfdiff, "--tensors", "--json", side[0].out_trace, side[1].out_trace, NULL};
        char *out = NULL;
        int st = run_cmd(jargv, NULL, &out, NULL);
        tensors_rc = st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (out) {
            FILE *f = fopen_out(tensors_json, "w");
            if (f) {
                fputs(out, f);
                fclose(f);
            }
            tj = cJSON_Parse(out);
        }
        free(out);
    }
    /* the report */
    cJSON *rep = cJSON_CreateObject();
    cJSON *pt = cJSON_AddObjectToObject(rep, "point");
    if (p.step == TFT_STEP_NONE)
        cJSON_AddNullToObject(pt, "step");
    else
        cJSON_AddNumberToObject(pt, "step", (double)p.step);
    if (p.seq >= 0)
        cJSON_AddNumberToObject(pt, "seq", (double)p.seq);
    cJSON_AddNumberToObject(pt, "rank", p.rank);
    cJSON_AddStringToObject(pt, "tensor", p.tensor);
    cJSON_AddStringToObject(pt, "found_by", p.kind);
    cJSON_AddStringToObject(rep, "capture", spec);
    cJSON_AddItemToObject(rep, "golden", side_json(&side[0]));
    cJSON_AddItemToObject(rep, "bad", side_json(&side[1]));
    cJSON_AddItemToObject(rep, "tensors", tj ? tj : cJSON_CreateNull());
    char *txt = cJSON_Print(rep);
    char path[4300];
    snprintf(path, sizeof(path), "%s/replay.json", o.out);
    FILE *f = fopen_out(path, "w");
    if (f && txt) {
        fputs(txt, f);
        fputc('\n', f);
    }
    if (f)
        fclose(f);
    free(txt);
    cJSON_Delete(rep);

    if (!rc) {
        for (int i = 0; i < 2; i++) {
            const rp_side *s = &side[i];
            if (s->rep_first != TFT_STEP_NONE)
                printf("%-6s replayed %lld step%s (%lld..%lld)", s->label, (long long)steps_run(s),
                       steps_run(s) == 1 ? "" : "s", (long long)s->rep_first, (long long)s->rep_last);
            else
                printf("%-6s replayed the whole run (no steps)", s->label);
            if (s->have_ckpt)
                printf(" from checkpoint %s", s->ckpt_path);
            else
                printf(" from the start");
            if (s->rec_first != TFT_STEP_NONE)
                printf(" of %lld recorded", (long long)(s->rec_last - s->rec_first + 1));
            printf("; %s\n", s->repro_detail);
        }
        printf("captured tensors compared in %s (tfdiff --tensors %s %s)\n", tensors_json, side[0].out_trace,
               side[1].out_trace);
        fflush(stdout);
        char tfdiff[PATH_MAX + 16];
        tool_path(tfdiff, sizeof(tfdiff), "tfdiff");
        char *targv[] = {tfdiff, "--tensors", side[0].out_trace, side[1].out_trace, NULL};
        run_cmd(targv, NULL, NULL, NULL);
        printf("report: %s\n", path);
        if (side[0].reproduced == 0 || side[1].reproduced == 0)
            rc = 3;
        else if (tensors_rc == 1)
            rc = 1;
        else if (tensors_rc != 0)
            rc = 4;
    }
    side_free(&side[0]);
    side_free(&side[1]);
    return rc;
}
