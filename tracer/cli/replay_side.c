/*
 * replay_side.c — one side (golden or bad) of `tftrace replay`, from its
 * recording: the command the manifest recorded (refused when a secret
 * was redacted from it), its directory and recording options, the latest
 * usable checkpoint before the point with its resume recipe, the command
 * the replay will run, and the side's part of replay.json.
 */
#include "replay_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int64_t rp_json_step(const cJSON *o)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "step");
    return cJSON_IsNumber(s) ? (int64_t)s->valuedouble : TFT_STEP_NONE;
}

void rp_json_str(const cJSON *o, const char *key, char *out, size_t n)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsString(s))
        snprintf(out, n, "%s", s->valuestring);
}

void rp_side_free(rp_side *s)
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
int rp_side_manifest(rp_side *s)
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
        rp_json_str(oj, "stats", s->stats, sizeof(s->stats));
        rp_json_str(oj, "alloc_min", s->alloc_min, sizeof(s->alloc_min));
        rp_json_str(oj, "step_range", s->step_range, sizeof(s->step_range));
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
int rp_side_checkpoints(rp_side *s, int rank, int64_t step)
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

/* The command a side will run: the recorded one with the recipe's words. */
int rp_side_prepare(const rp_opts *o, rp_side *s)
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

int64_t rp_steps_run(const rp_side *s)
{
    return s->rep_first == TFT_STEP_NONE ? 0 : s->rep_last - s->rep_first + 1;
}

cJSON *rp_side_json(const rp_side *s)
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
    cJSON_AddNumberToObject(o, "steps_executed", (double)rp_steps_run(s));
    if (s->rec_first != TFT_STEP_NONE)
        cJSON_AddNumberToObject(o, "steps_recorded", (double)(s->rec_last - s->rec_first + 1));
    if (s->reproduced < 0)
        cJSON_AddNullToObject(o, "reproduced");
    else
        cJSON_AddBoolToObject(o, "reproduced", s->reproduced);
    cJSON_AddStringToObject(o, "detail", s->repro_detail);
    return o;
}
