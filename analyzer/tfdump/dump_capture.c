/*
 * dump_capture.c — `tfdump --captures` (one line per captured tensor) and
 * `tfdump --tensor NAME|ID [--out FILE.npy]` (one captured tensor's
 * summary, written as .npy). The captures come from capture.h (core_capture_list),
 * which assembles the CAPTURE parts of every rank file; memory is the
 * captured tensors' bytes (--tensor) or their metadata (--captures).
 */
#include "core_capture.h"
#include "dump_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define LIST_IN_ERROR 20 /* captured tensors named when the one asked for is missing */

static void shape_text(const core_capture_tensor *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%" PRId64, i ? "," : "", t->shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

/* --tensor: only the captures the name or id asks for keep their bytes. */
static int want_tensor(void *ctx, const core_capture_tensor *t)
{
    const dump_opts *o = ctx;
    return (o->rank < 0 || t->rank == o->rank) && core_capture_find(t, 1, o->tensor) == 0;
}

/* Loads the captures of the trace (of rank o->rank when given), the bytes
 * of those --tensor asks for when with_data. */
static int load(dump_trace *d, const dump_opts *o, int with_data, core_capture_tensor **t, size_t *n)
{
    char err[512];
    if (core_capture_list_want(o->path, with_data ? want_tensor : core_capture_want_none, (void *)o, t, n, dump_log_fn, &d->log,
                      err, sizeof(err)) < 0) {
        dump_err("%s", err);
        return DUMP_USAGE;
    }
    if (o->rank < 0)
        return DUMP_OK;
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        if ((*t)[i].rank == o->rank)
            (*t)[k++] = (*t)[i];
        else
            free((*t)[i].data);
    }
    *n = k;
    return DUMP_OK;
}

static cJSON *cap_json(const core_capture_tensor *t)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "rank", t->rank);
    if (t->step == TFT_STEP_NONE)
        cJSON_AddNullToObject(o, "step");
    else
        core_json_i64(o, "step", t->step);
    core_json_i64(o, "seq", t->seq);
    cJSON_AddStringToObject(o, "role", core_capture_role_name(t->role));
    core_json_u64(o, "id", t->id);
    cJSON_AddStringToObject(o, "name", t->name);
    dump_json_str_or_null(o, "op", t->op_name[0] ? t->op_name : NULL);
    cJSON_AddStringToObject(o, "dtype", tft_dtype_name(t->dtype));
    cJSON_AddItemToObject(o, "shape", core_json_i64_array(t->shape, t->ndim));
    core_json_u64(o, "bytes", t->bytes);
    core_json_u64(o, "present", t->present);
    core_json_u64(o, "parts", t->parts);
    cJSON_AddBoolToObject(o, "complete", t->complete);
    return o;
}

static void cap_line(const core_capture_tensor *t)
{
    char shape[256], step[24] = "-";
    shape_text(t, shape, sizeof(shape));
    if (t->step != TFT_STEP_NONE)
        snprintf(step, sizeof(step), "%" PRId64, t->step);
    printf("r%d s%s q%" PRId64 " %-6s %s %s%s id=%" PRIu64 " op=%s %" PRIu64 " bytes", t->rank, step, t->seq,
           core_capture_role_name(t->role), t->name, tft_dtype_name(t->dtype), shape, t->id,
           t->op_name[0] ? t->op_name : "?", t->bytes);
    if (!t->complete)
        printf(" INCOMPLETE (%" PRIu64 " of %" PRIu64 " bytes)", t->present, t->bytes);
    putchar('\n');
}

int dump_captures(dump_trace *d, const dump_opts *o)
{
    core_capture_tensor *t;
    size_t n;
    int st = load(d, o, 0, &t, &n);
    if (st)
        return st;
    uint64_t bytes = 0, incomplete = 0;
    for (size_t i = 0; i < n && dump_out_ok(); i++) {
        bytes += t[i].bytes;
        incomplete += !t[i].complete;
        if (!o->json) {
            cap_line(&t[i]);
            continue;
        }
        cJSON *j = cap_json(&t[i]);
        if (!j || !dump_out_json_line(j)) {
            cJSON_Delete(j);
            break;
        }
        cJSON_Delete(j);
    }
    if (!o->json)
        printf("%zu captured tensor%s, %" PRIu64 " bytes%s\n", n, n == 1 ? "" : "s", bytes,
               incomplete ? " (some incomplete: parts were dropped)" : "");
    core_capture_free(t, n);
    return DUMP_OK;
}

/* "no captured tensor X" with what the trace does hold. */
static void not_found(const dump_opts *o, const core_capture_tensor *t, size_t n)
{
    if (n == 0) {
        dump_err("%s: no captured tensors%s (record with tftrace --capture SPEC)", o->path,
                 o->rank >= 0 ? " in this rank" : "");
        return;
    }
    dump_err("%s: no captured tensor '%s'; captured (first %d of %zu):", o->path, o->tensor, LIST_IN_ERROR, n);
    for (size_t i = 0; i < n && i < LIST_IN_ERROR; i++) {
        char step[32] = "";
        if (t[i].step != TFT_STEP_NONE)
            snprintf(step, sizeof(step), "@%" PRId64, t[i].step);
        fprintf(stderr, "  %s%s (id %" PRIu64 ", %s of op %" PRId64 ", rank %d)\n", t[i].name, step, t[i].id,
                core_capture_role_name(t[i].role), t[i].seq, t[i].rank);
    }
}

/* Whether the captured bytes are those the recorder computed statistics
 * on: 1 same fingerprint, 0 different (the memory changed between the
 * recording and the capture, e.g. an input updated in place), -1 unknown. */
static int data_matches(const core_capture_tensor *t)
{
    if (!t->data || t->stats_mode < TFT_STATS_HEALTH)
        return -1;
    return XXH3_64bits(t->data, (size_t)t->bytes) == t->stats.fingerprint;
}

static void tensor_text(const core_capture_tensor *t, int match)
{
    char shape[256];
    shape_text(t, shape, sizeof(shape));
    printf("tensor    %s (id %" PRIu64 ", rank %d)\n", t->name, t->id, t->rank);
    printf("captured  %s of op %" PRId64 " '%s'%s%s", core_capture_role_name(t->role), t->seq,
           t->op_name[0] ? t->op_name : "?", t->op_kind >= 0 ? " " : "",
           t->op_kind >= 0 ? tft_op_kind_name(t->op_kind) : "");
    if (t->step != TFT_STEP_NONE)
        printf(" at step %" PRId64, t->step);
    printf("\ndtype     %s\nshape     %s\n", tft_dtype_name(t->dtype), shape);
    printf("bytes     %" PRIu64 " (%s, %u part%s)\n", t->bytes,
           t->complete ? "complete" : "INCOMPLETE: parts were dropped or damaged", t->parts,
           t->parts == 1 ? "" : "s");
    if (t->stats_mode >= TFT_STATS_HEALTH) {
        const tft_stats *s = &t->stats;
        printf("stats     numel=%" PRIu64 " nan=%" PRIu64 " inf=%" PRIu64 " min=%.6g max=%.6g", s->numel, s->nan,
               s->pinf + s->ninf, s->min, s->max);
        if (t->stats_mode >= TFT_STATS_FULL)
            printf(" mean=%.6g std=%.6g", s->mean, s->std);
        printf(" (recorded)\n");
    }
    if (match == 1)
        printf("data      fingerprint %016" PRIx64 " = the recorded tensor's\n", t->stats.fingerprint);
    else if (match == 0)
        printf("data      fingerprint differs from the recorded tensor's: its memory changed between\n"
               "          the recording and the capture (an input updated in place before op %" PRId64 ")\n",
               t->seq);
}

/* What --out wrote for a dtype numpy lacks ("" for the others). */
static const char *npy_note(int dtype, int raw)
{
    switch (dtype) {
    case TFT_BF16: return raw ? " (bf16 as raw bits, '<u2')" : " (bf16 as float32, '<f4')";
    case TFT_F8E4M3: return raw ? " (f8e4m3 as raw bits, '|u1')" : " (f8e4m3 as float32, '<f4')";
    case TFT_F8E5M2: return raw ? " (f8e5m2 as raw bits, '|u1')" : " (f8e5m2 as float32, '<f4')";
    default: return "";
    }
}

int dump_tensor(dump_trace *d, const dump_opts *o)
{
    core_capture_tensor *t;
    size_t n;
    int st = load(d, o, 1, &t, &n);
    if (st)
        return st;
    int i = core_capture_find(t, n, o->tensor);
    if (i < 0) {
        not_found(o, t, n);
        core_capture_free(t, n);
        return DUMP_USAGE;
    }
    const core_capture_tensor *c = &t[i];
    int match = data_matches(c);
    char err[512] = "";
    int bad = 0;
    if (o->out) {
        if (!c->complete) {
            snprintf(err, sizeof(err), "%s: not written: tensor %s is incomplete (%" PRIu64 " of %" PRIu64
                     " bytes captured; parts were dropped or lost to damage; record with --no-drop "
                     "or a larger --ring-kb)", o->out, c->name, c->present, c->bytes);
            bad = 1;
        } else {
            bad = core_capture_write_npy(c, o->out, !o->raw, o->file_mode, err, sizeof(err)) < 0;
        }
    }
    if (o->json) {
        cJSON *j = cap_json(c);
        if (j) {
            if (match < 0)
                cJSON_AddNullToObject(j, "data_matches_stats");
            else
                cJSON_AddBoolToObject(j, "data_matches_stats", match);
            dump_json_str_or_null(j, "npy", o->out && !bad ? o->out : NULL);
            dump_out_json_line(j);
            cJSON_Delete(j);
        }
    } else {
        tensor_text(c, match);
        if (o->out && !bad)
            printf("wrote     %s%s\n", o->out, npy_note(c->dtype, o->raw));
    }
    if (bad)
        dump_err("%s", err);
    core_capture_free(t, n);
    return bad ? DUMP_USAGE : DUMP_OK;
}
