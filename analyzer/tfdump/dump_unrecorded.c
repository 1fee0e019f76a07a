/*
 * dump_unrecorded.c — every mode of tfdump on a trace that recorded
 * nothing: a directory with a manifest and no rank file (the command died
 * before its first record: `tftrace -- sh -c 'kill -9 $$'`). The summary
 * shows what the manifest knows (the JSON summary with zero counts and
 * "recorded": false); --verify checks the manifest lists no rank file;
 * --check has nothing to check; the other modes say so on stderr.
 */
#include "core_common.h"
#include "dump_summary_internal.h"
#include "tft_usercmd.h"

#include <stdio.h>
#include <stdlib.h>

/* "killed by signal 9 (status 137)", "code 0", "unknown (...)". */
static void run_exit_text(const tft_manifest *m, char *buf, size_t n)
{
    int code, sig;
    if (!core_manifest_exit(m, &code, &sig))
        snprintf(buf, n, "unknown (the run did not finish: manifest not final)");
    else if (sig)
        snprintf(buf, n, "killed by signal %d (status %d)", sig, m->exit_status);
    else
        snprintf(buf, n, "code %d", code);
}

/* Why nothing was recorded: "no rank file: ...". */
static void unrecorded_why(const tft_manifest *m, char *buf, size_t n)
{
    if (m->nranks)
        snprintf(buf, n, "no rank file, though manifest.json lists %d (%s%s): lost", m->nranks, m->ranks[0].file,
                 m->nranks > 1 ? ", ..." : "");
    else if (tft_user_switch(m->argc, m->argv))
        snprintf(buf, n, "no rank file: the command switches user (%s), and the recorder is not loaded into, or "
                 "cannot write from, a program that runs as another user; run tftrace as that user instead "
                 "(runuser -u USER -- tftrace -o DIR -- CMD)", tft_user_switch(m->argc, m->argv));
    else
        snprintf(buf, n, "no rank file: the command ended before its first record");
}

static void unrecorded_text(dump_trace *d, const dump_opts *o)
{
    const tft_manifest *m = &d->manifest;
    char buf[320];
    uint64_t ns;
    printf("trace        %s\n", o->path);
    dump_text_manifest(m);
    if (core_manifest_duration(m, &ns))
        printf("duration     %.3f s\n", (double)ns * 1e-9);
    run_exit_text(m, buf, sizeof(buf));
    printf("exit         %s\n", buf);
    dump_procs_text(o->path);
    unrecorded_why(m, buf, sizeof(buf));
    printf("recorded     nothing (%s)\n", buf);
}

/* One line for stderr in the modes that have nothing to show. */
static void unrecorded_note(dump_trace *d, const dump_opts *o)
{
    char ex[96], why[320];
    run_exit_text(&d->manifest, ex, sizeof(ex));
    unrecorded_why(&d->manifest, why, sizeof(why));
    dump_err("%s: nothing was recorded (%s); exit: %s", o->path, why, ex);
}

static int unrecorded_verify(dump_trace *d, const dump_opts *o)
{
    const tft_manifest *m = &d->manifest;
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddBoolToObject(j, "ok", m->nranks == 0);
        cJSON_AddStringToObject(j, "integrity", m->nranks ? "damaged" : "complete");
        cJSON_AddArrayToObject(j, "files");
        cJSON *pr = cJSON_AddArrayToObject(j, "problems");
        for (int k = 0; pr && k < m->nranks && k < DUMP_LOG_KEEP; k++) {
            char msg[600];
            snprintf(msg, sizeof(msg), "%s/%s: listed in manifest.json for rank %d but missing; that rank's "
                     "records are lost", o->path, m->ranks[k].file, m->ranks[k].rank);
            cJSON_AddItemToArray(pr, cJSON_CreateString(msg));
        }
        core_json_u64(j, "problems_not_shown", m->nranks > DUMP_LOG_KEEP ? (uint64_t)(m->nranks - DUMP_LOG_KEEP) : 0);
        dump_json_run(j, m, false);
        int status = DUMP_OK;
        dump_print_json(j, &status);
        cJSON_Delete(j);
        if (status)
            return status;
    } else if (m->nranks) {
        for (int k = 0; k < m->nranks; k++)
            printf("%s/%s: listed in manifest.json for rank %d but missing; that rank's records are lost\n", o->path,
                   m->ranks[k].file, m->ranks[k].rank);
        printf("FAILED: %s: 0 rank files, %d listed in manifest.json are missing\n", o->path, m->nranks);
    } else {
        printf("OK: %s: no rank files, none listed in manifest.json: nothing was recorded\n", o->path);
    }
    return m->nranks ? DUMP_FINDINGS : DUMP_OK;
}

static int unrecorded_check(dump_trace *d, const dump_opts *o)
{
    char ex[96], why[320], msg[512];
    run_exit_text(&d->manifest, ex, sizeof(ex));
    unrecorded_why(&d->manifest, why, sizeof(why));
    snprintf(msg, sizeof(msg), "nothing to check: nothing was recorded (%s); exit: %s", why, ex);
    if (!o->json) {
        printf("%s\n", msg);
        return DUMP_FINDINGS;
    }
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNullToObject(j, "first_nonfinite");
    cJSON_AddArrayToObject(j, "leaks");
    cJSON_AddArrayToObject(j, "desync");
    dump_json_run(j, &d->manifest, false);
    cJSON_AddStringToObject(j, "unrecorded", msg);
    bool ok = dump_out_json_line(j);
    cJSON_Delete(j);
    return ok ? DUMP_FINDINGS : DUMP_USAGE;
}

int dump_unrecorded(dump_trace *d, const dump_opts *o)
{
    int status = DUMP_OK;
    switch (o->mode) {
    case MODE_SUMMARY:
        if (o->json) {
            trace_sum s = {.step_first = TFT_STEP_NONE, .step_last = TFT_STEP_NONE};
            s.by_kind = calloc(KINDS, sizeof(*s.by_kind));
            cJSON *j = s.by_kind ? dump_summary_json(d, o, &s) : NULL;
            dump_print_json(j, &status);
            cJSON_Delete(j);
            free(s.by_kind);
        } else {
            unrecorded_text(d, o);
        }
        return status;
    case MODE_VERIFY: return unrecorded_verify(d, o);
    case MODE_CHECK: return unrecorded_check(d, o);
    case MODE_HTML: return dump_html(d, o);
    case MODE_TENSOR:
    case MODE_REPLAY: unrecorded_note(d, o); return DUMP_USAGE;
    default: unrecorded_note(d, o); return DUMP_OK; /* --events, --chunks, --captures: nothing to list */
    }
}
