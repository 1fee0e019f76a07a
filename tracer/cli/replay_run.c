/*
 * replay_run.c — what `tftrace replay` runs: child processes (tftrace,
 * tfdiff and the recorded commands) with their output captured, the
 * commands shown and confirmed before anything runs, each side replayed
 * under `tftrace --capture --until-step`, and the replay checked bit for
 * bit against its recording.
 */
#include "replay_internal.h"

#include "tft_escape.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


/* Runs argv in cwd (NULL = ours); stdout to *out (malloc'd, NUL-terminated)
 * when out != NULL, else inherited; stderr to errfile when given (else
 * inherited). Returns the wait status, or -1 when it could not be started. */
int rp_run_cmd(char *const argv[], const char *cwd, char **out, const char *errfile)
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
void rp_tool_path(char *buf, size_t n, const char *tool)
{
    char tool_dir[PATH_MAX]; /* where tftrace lives: tfdiff is next to it */
    if (cli_exe_dir(tool_dir, sizeof(tool_dir)) < 0)
        snprintf(tool_dir, sizeof(tool_dir), ".");
    int k = snprintf(buf, n, "%s/%s", tool_dir, tool);
    if (k >= 0 && (size_t)k < n && access(buf, X_OK) == 0)
        return;
    k = snprintf(buf, n, "%s/../analyzer/%s", tool_dir, tool);
    if (k < 0 || (size_t)k >= n || access(buf, X_OK) != 0)
        snprintf(buf, n, "%s", tool);
}

/* The output directory: created 0700, or an existing one of ours that is
 * not a symbolic link (the reports are written into it by name). */
int rp_out_dir(const char *dir)
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
FILE *rp_fopen_out(const char *path, const char *how)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (how[0] == 'a' ? O_APPEND : O_TRUNC), 0600);
    FILE *f = fd >= 0 ? fdopen(fd, how) : NULL;
    if (!f && fd >= 0)
        close(fd);
    return f;
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

/* One word as a shell would need it to mean itself: 'it''s' quoting when it
 * holds anything but [A-Za-z0-9_./:=@%+,-]. */
static void print_word(FILE *f, const char *w)
{
    if (*w && strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=@%+,-") == strlen(w)) {
        fputs(w, f);
        return;
    }
    fputc('\'', f);
    const unsigned char *p = (const unsigned char *)w;
    size_t left = strlen(w);
    while (left) {
        uint32_t cp = 0;
        int len = tft_utf8_next(p, left, &cp);
        if (len <= 0 || tft_escape_cp(cp, false)) {
            /* a control, a bidirectional override or a byte that is not UTF-8:
             * shown as bash's $'\xHH' of each of its bytes, never obeyed */
            int n = len > 0 ? len : 1;
            fputs("'$'", f);
            for (int i = 0; i < n; i++)
                fprintf(f, "\\x%02x", p[i]);
            fputs("''", f);
            len = n;
        }
        else if (*p == '\'')
            fputs("'\\''", f);
        else
            fwrite(p, 1, (size_t)len, f);
        p += len;
        left -= (size_t)len;
    }
    fputc('\'', f);
}

/* Shows what will run and asks: --yes, or "y" on a terminal. Returns 0 to
 * go on. */
int rp_confirm(const rp_opts *o, const rp_side side[2])
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

/* The tftrace command line that replays side s into argv (RP_MAX_ARGS +
 * 32 entries), whose words point into self (tftrace's path), num (three
 * numbers' text, filled here), s and spec. */
static void side_argv(const rp_opts *o, rp_side *s, const rp_point *p, const char *spec, char *self,
                      char num[3][32], char **argv)
{
    char *until = num[0], *timeout = num[1], *every = num[2];
    snprintf(until, 32, "%lld", (long long)p->step);
    snprintf(timeout, 32, "%g", o->timeout);
    snprintf(every, 32, "%ld", s->every);
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
}

int rp_run_side(const rp_opts *o, rp_side *s, const rp_point *p, const char *spec)
{
    char self[PATH_MAX + 16], errlog[4300], num[3][32];
    snprintf(errlog, sizeof(errlog), "%s/%s.log", o->out, s->label);
    rp_tool_path(self, sizeof(self), "tftrace");
    char *argv[RP_MAX_ARGS + 32];
    side_argv(o, s, p, spec, self, num, argv);
    if (!o->quiet) {
        fprintf(stderr, "tftrace replay: %s: ", s->label);
        if (s->have_ckpt) {
            fprintf(stderr, "from checkpoint ");
            print_word(stderr, s->ckpt_path);
            fprintf(stderr, " (step %lld)", (long long)s->ckpt_step);
        }
        else
            fprintf(stderr, "from the start");
        fprintf(stderr, ", in ");
        print_word(stderr, s->cwd);
        fputc(':', stderr);
        for (int i = 0; i < s->argc; i++) {
            fputc(' ', stderr);
            print_word(stderr, s->argv[i]);
        }
        fprintf(stderr, "\n");
    }
    /* the program's stdout would mix with our report: it goes to the log */
    char *junk = NULL;
    s->run_status = rp_run_cmd(argv, s->cwd, &junk, errlog);
    if (junk) {
        FILE *f = rp_fopen_out(errlog, "a");
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
void rp_check_reproduced(rp_side *s)
{
    char tfdiff[PATH_MAX + 16], steps[64];
    rp_tool_path(tfdiff, sizeof(tfdiff), "tfdiff");
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
    int st = rp_run_cmd(argv, NULL, &out, "/dev/null");
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
        rp_json_str(d, "tensor", t, sizeof(t));
        int64_t ds = rp_json_step(d);
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
    cJSON_Delete(j);
}
