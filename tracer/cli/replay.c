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
#include "replay_internal.h"

#include "tft_escape.h"

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
    char msg[4096], esc[4096 * 3];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* names and paths from the traces: escaped (tft_escape.h) */
    fprintf(stderr, "tftrace replay: %s\n", tft_escape_str(msg, esc, sizeof(esc)));
}

/* ---- running programs ------------------------------------------------- */

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

/* The first divergence (or first non-finite value) tfdiff reports.
 * Returns 1 found, 0 none, -1 error (message printed). */
static int find_point(const rp_opts *o, rp_point *p)
{
    char tfdiff[PATH_MAX + 16];
    rp_tool_path(tfdiff, sizeof(tfdiff), "tfdiff");
    char *argv[] = {tfdiff, "--json", (char *)o->golden, (char *)o->bad, NULL};
    char *out = NULL;
    int st = rp_run_cmd(argv, NULL, &out, NULL);
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
        p->step = rp_json_step(d);
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(d, "seq");
        p->seq = cJSON_IsNumber(q) ? (int64_t)q->valuedouble : -1;
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(d, "rank");
        p->rank = cJSON_IsNumber(r) ? (int)r->valuedouble : 0;
        rp_json_str(d, "tensor", p->tensor, sizeof(p->tensor));
        snprintf(p->kind, sizeof(p->kind), "%s", kind);
        const cJSON *org = cJSON_GetObjectItemCaseSensitive(j, "origin");
        if (cJSON_IsObject(org) && rp_json_step(org) == p->step)
            rp_json_str(org, "tensor", p->origin, sizeof(p->origin));
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

/* The point to replay to: --at, else the first divergence tfdiff finds.
 * 1 found; 0 the traces do not diverge (said on stdout); -1 an error
 * (message printed). */
static int replay_point(const rp_opts *o, rp_point *p)
{
    if (o->at) {
        if (parse_at(o->at, p) < 0) {
            fprintf(stderr, "tftrace replay: --at needs step=S[,seq=Q][,name=TENSOR][,rank=R], got '%s'\n", o->at);
            return -1;
        }
        return 1;
    }
    int f = find_point(o, p);
    if (f == 0)
        printf("tftrace replay: %s and %s do not diverge: nothing to replay\n", o->golden, o->bad);
    return f;
}

/* Both sides up to their confirmed commands: the manifests, the
 * checkpoints before the point, the output directory, the capture spec
 * (into spec, n bytes), the commands shown and confirmed. 0, or the exit
 * status 2 (a message printed). */
static int replay_setup(const rp_opts *o, const rp_point *p, rp_side side[2], char *spec, size_t n)
{
    int rc = 0;
    for (int i = 0; i < 2 && !rc; i++) {
        if (rp_side_manifest(&side[i]) < 0 || rp_side_checkpoints(&side[i], p->rank, p->step) < 0)
            rc = 2;
        if (o->from_start)
            side[i].have_ckpt = 0;
    }
    if (rc || rp_out_dir(o->out) < 0)
        return 2;
    capture_spec(p, spec, n);
    if (p->step != TFT_STEP_NONE)
        say(o, "the runs part at step %lld (rank %d, %s%s%s); capturing %s", (long long)p->step, p->rank, p->kind,
            p->tensor[0] ? ", " : "", p->tensor, spec);
    else
        say(o, "the runs part at op seq %lld (rank %d, %s %s); capturing %s", (long long)p->seq, p->rank, p->kind,
            p->tensor, spec);
    for (int i = 0; i < 2; i++)
        if (rp_side_prepare(o, &side[i]) < 0)
            return 2;
    return rp_confirm(o, side) < 0 ? 2 : 0;
}

/* `tfdiff --tensors --json` of the two replays, saved as tensors_json:
 * its report parsed (NULL when none) and its exit status in *status (-1
 * unknown). */
static cJSON *replay_tensors(const rp_side side[2], const char *tensors_json, int *status)
{
    char tfdiff[PATH_MAX + 16];
    rp_tool_path(tfdiff, sizeof(tfdiff), "tfdiff");
    char *jargv[] = {tfdiff, "--tensors", "--json", (char *)side[0].out_trace, (char *)side[1].out_trace, NULL};
    char *out = NULL;
    int st = rp_run_cmd(jargv, NULL, &out, NULL);
    *status = st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    cJSON *tj = NULL;
    if (out) {
        FILE *f = rp_fopen_out(tensors_json, "w");
        if (f) {
            fputs(out, f);
            fclose(f);
        }
        tj = cJSON_Parse(out);
    }
    free(out);
    return tj;
}

/* replay.json at path: the point, the capture spec, each side, and the
 * tensors' comparison tj (NULL: none), which the report takes over. */
static void replay_report(const rp_point *p, const char *spec, const rp_side side[2], cJSON *tj, const char *path)
{
    cJSON *rep = cJSON_CreateObject();
    cJSON *pt = cJSON_AddObjectToObject(rep, "point");
    if (p->step == TFT_STEP_NONE)
        cJSON_AddNullToObject(pt, "step");
    else
        cJSON_AddNumberToObject(pt, "step", (double)p->step);
    if (p->seq >= 0)
        cJSON_AddNumberToObject(pt, "seq", (double)p->seq);
    cJSON_AddNumberToObject(pt, "rank", p->rank);
    cJSON_AddStringToObject(pt, "tensor", p->tensor);
    cJSON_AddStringToObject(pt, "found_by", p->kind);
    cJSON_AddStringToObject(rep, "capture", spec);
    cJSON_AddItemToObject(rep, "golden", rp_side_json(&side[0]));
    cJSON_AddItemToObject(rep, "bad", rp_side_json(&side[1]));
    cJSON_AddItemToObject(rep, "tensors", tj ? tj : cJSON_CreateNull());
    char *txt = cJSON_Print(rep);
    FILE *f = rp_fopen_out(path, "w");
    if (f && txt) {
        fputs(txt, f);
        fputc('\n', f);
    }
    if (f)
        fclose(f);
    free(txt);
    cJSON_Delete(rep);
}

/* What the replays found, on stdout, then tfdiff --tensors' own table.
 * Returns the exit status (replay_tensors' status in tensors_rc). */
static int replay_outcome(const rp_side side[2], const char *tensors_json, const char *report, int tensors_rc)
{
    for (int i = 0; i < 2; i++) {
        const rp_side *s = &side[i];
        if (s->rep_first != TFT_STEP_NONE)
            printf("%-6s replayed %lld step%s (%lld..%lld)", s->label, (long long)rp_steps_run(s),
                   rp_steps_run(s) == 1 ? "" : "s", (long long)s->rep_first, (long long)s->rep_last);
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
    rp_tool_path(tfdiff, sizeof(tfdiff), "tfdiff");
    char *targv[] = {tfdiff, "--tensors", (char *)side[0].out_trace, (char *)side[1].out_trace, NULL};
    rp_run_cmd(targv, NULL, NULL, NULL);
    printf("report: %s\n", report);
    if (side[0].reproduced == 0 || side[1].reproduced == 0)
        return 3;
    if (tensors_rc == 1)
        return 1;
    return tensors_rc != 0 ? 4 : 0;
}

int replay_main(int argc, char **argv)
{
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
    int f = replay_point(&o, &p);
    if (f <= 0)
        return f < 0 ? 2 : 0;
    rp_side side[2] = {{.label = "golden", .trace = o.golden}, {.label = "bad", .trace = o.bad}};
    char spec[1200];
    int rc = replay_setup(&o, &p, side, spec, sizeof(spec));
    if (rc)
        goto out;
    for (int i = 0; i < 2 && !rc; i++) {
        if (rp_run_side(&o, &side[i], &p, spec) < 0)
            rc = 4;
        else
            rp_check_reproduced(&side[i]);
    }
    char tensors_json[4300], report[4300];
    snprintf(tensors_json, sizeof(tensors_json), "%s/tensors.json", o.out);
    snprintf(report, sizeof(report), "%s/replay.json", o.out);
    int tensors_rc = -1;
    cJSON *tj = rc ? NULL : replay_tensors(side, tensors_json, &tensors_rc);
    replay_report(&p, spec, side, tj, report);
    if (!rc)
        rc = replay_outcome(side, tensors_json, report, tensors_rc);
out:
    rp_side_free(&side[0]);
    rp_side_free(&side[1]);
    return rc;
}
