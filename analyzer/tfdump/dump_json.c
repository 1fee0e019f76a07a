/*
 * dump_json.c — one JSON object per record for `tfdump --events --json`.
 *
 * Every object has rank, seq, step (null when the record has none), kind,
 * ts and name (null for kinds without a name); the other keys depend on the
 * kind (see tfdump --help and examples/sample/README.md). Integers are exact;
 * 64-bit hashes (fingerprint, communicator) are 16-hex-digit strings.
 */
#include "dump_internal.h"

#include <inttypes.h>
#include <string.h>

static void json_device(cJSON *o, int kind, int dev)
{
    char b[32];
    if (kind == TFT_DEV_CPU)
        snprintf(b, sizeof(b), "cpu");
    else if (kind == TFT_DEV_CUDA)
        snprintf(b, sizeof(b), "cuda:%d", dev);
    else
        snprintf(b, sizeof(b), "dev%d:%d", kind, dev);
    cJSON_AddStringToObject(o, "device", b);
}

static cJSON *json_stats(int mode, const tft_stats *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return o;
    core_json_u64(o, "numel", s->numel); /* valid from SHAPE on (FORMAT.md 5.4) */
    if (mode < TFT_STATS_HEALTH)
        return o;
    core_json_u64(o, "nan", s->nan);
    core_json_u64(o, "pinf", s->pinf);
    core_json_u64(o, "ninf", s->ninf);
    core_json_u64(o, "zero", s->zero);
    cJSON_AddNumberToObject(o, "min", s->min);
    cJSON_AddNumberToObject(o, "max", s->max);
    core_json_hex(o, "fingerprint", s->fingerprint);
    if (mode < TFT_STATS_FULL)
        return o;
    cJSON_AddNumberToObject(o, "mean", s->mean);
    cJSON_AddNumberToObject(o, "std", s->std);
    cJSON_AddNumberToObject(o, "l1", s->l1);
    cJSON_AddNumberToObject(o, "l2", s->l2);
    cJSON_AddNumberToObject(o, "absmax", s->absmax);
    core_json_u64(o, "over_fp16", s->over_fp16);
    core_json_u64(o, "over_bf16", s->over_bf16);
    core_json_u64(o, "under_fp16", s->under_fp16);
    return o;
}

static const char *mode_name(int mode)
{
    static const char *const n[] = {"shape", "health", "full"};
    return (mode >= 0 && mode < 3) ? n[mode] : "?";
}

static void json_tensor(cJSON *o, const tft_rec_tensor *t)
{
    core_json_u64(o, "id", t->id);
    cJSON_AddStringToObject(o, "dtype", tft_dtype_name(t->dtype));
    json_device(o, t->device_kind, t->device);
    cJSON_AddItemToObject(o, "shape", core_json_i64_array(t->shape, t->ndim));
    cJSON_AddStringToObject(o, "mode", mode_name(t->mode));
    cJSON_AddItemToObject(o, "stats", json_stats(t->mode, &t->stats));
    cJSON_AddBoolToObject(o, "has_data", (t->h.flags & TFT_TENSOR_HAS_DATA) != 0);
    /* its context (format 1.7), only when the program said it */
    if (t->h.flags & (TFT_TENSOR_TRAIN | TFT_TENSOR_EVAL))
        cJSON_AddBoolToObject(o, "training", (t->h.flags & TFT_TENSOR_TRAIN) != 0);
    if (t->h.flags & TFT_TENSOR_CONTEXT)
        cJSON_AddBoolToObject(o, "grad", !(t->h.flags & TFT_TENSOR_NO_GRAD));
}

/* A CAPTURE part: where it lies in which tensor, not its bytes. */
static void json_capture(cJSON *o, const tft_rec_capture *c)
{
    core_json_u64(o, "id", c->tensor);
    cJSON_AddStringToObject(o, "role", c->role == TFT_CAPTURE_OUTPUT  ? "output"
                                       : c->role == TFT_CAPTURE_INPUT ? "input"
                                                                      : "prior");
    cJSON_AddStringToObject(o, "dtype", tft_dtype_name(c->dtype));
    cJSON_AddItemToObject(o, "shape", core_json_i64_array(c->shape, c->ndim));
    core_json_u64(o, "total", c->total);
    core_json_u64(o, "offset", c->offset);
    core_json_u64(o, "n", c->n);
    cJSON_AddBoolToObject(o, "shuffled", (c->h.flags & TFT_CAPTURE_SHUFFLED) != 0);
}

static cJSON *json_id_array(const uint64_t *ids, int n, int is_signed)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
        char b[24];
        if (is_signed)
            snprintf(b, sizeof(b), "%" PRId64, (int64_t)ids[i]);
        else
            snprintf(b, sizeof(b), "%" PRIu64, ids[i]);
        cJSON_AddItemToArray(a, cJSON_CreateRaw(b));
    }
    return a;
}

static void json_op(cJSON *o, const tft_rec_op *op, const tft_reader *r)
{
    char b[18];
    cJSON_AddStringToObject(o, "op_kind", tft_op_kind_name(op->op_kind));
    dump_json_str_or_null(o, "scope", core_rec_string(r, op->scope, b));
    cJSON_AddItemToObject(o, "inputs", json_id_array(op->ids, op->n_in, 0));
    cJSON_AddItemToObject(o, "outputs", json_id_array(op->ids + op->n_in, op->n_out, 0));
    cJSON_AddItemToObject(o, "attrs", json_id_array(op->ids + op->n_in + op->n_out, op->n_attr, 1));
}

/* The collective's rank within its communicator is "comm_rank": "rank" is
 * the rank file's rank on every event. */
/* ENTER: written as the rank entered the call (no t_exit, no result yet);
 * otherwise the record describes the finished call. */
static const char *coll_phase(const tft_rec_collective *c)
{
    uint16_t f = c->h.flags & (TFT_COLL_FLAG_ENTER | TFT_COLL_FLAG_EXIT);
    return f == TFT_COLL_FLAG_ENTER ? "enter" : "exit";
}

static void json_collective(cJSON *o, const tft_rec_collective *c)
{
    cJSON_AddStringToObject(o, "phase", coll_phase(c));
    core_json_hex(o, "comm", c->comm);
    core_json_u64(o, "coll_seq", c->coll_seq);
    cJSON_AddStringToObject(o, "type", tft_coll_type_name(c->type));
    core_json_u64(o, "count", c->count);
    cJSON_AddStringToObject(o, "dtype", tft_dtype_name(c->dtype));
    cJSON_AddStringToObject(o, "op", tft_redop_name(c->redop));
    cJSON_AddNumberToObject(o, "root", c->root);
    cJSON_AddNumberToObject(o, "comm_rank", c->rank);
    cJSON_AddNumberToObject(o, "nranks", c->nranks);
    bool p2p = c->type == TFT_COLL_SEND || c->type == TFT_COLL_RECV; /* a collective's tag means nothing */
    cJSON_AddNumberToObject(o, "tag", p2p ? tft_rec_coll_tag(c) : TFT_TAG_NONE); /* -1 none, -2 any */
    core_json_u64(o, "t_enter", c->t_enter);
    core_json_u64(o, "t_exit", c->t_exit);
    if (c->result)
        core_json_u64(o, "result", c->result);
    else
        cJSON_AddNullToObject(o, "result");
}

/* A communicator (FORMAT.md 5.15): "members" null when the record lists
 * none; an intercommunicator's are its local group, then its remote group. */
static void json_comm(cJSON *o, const tft_rec_comm *c)
{
    core_json_hex(o, "comm", c->comm);
    if (c->parent)
        core_json_hex(o, "parent", c->parent);
    else
        cJSON_AddNullToObject(o, "parent");
    cJSON_AddNumberToObject(o, "comm_rank", c->rank);
    cJSON_AddNumberToObject(o, "size", c->size);
    cJSON_AddNumberToObject(o, "order", c->order);
    cJSON_AddBoolToObject(o, "inter", (c->h.flags & TFT_COMM_FLAG_INTER) != 0);
    if (!c->n_members) {
        cJSON_AddNullToObject(o, "members");
        return;
    }
    cJSON *m = cJSON_AddArrayToObject(o, "members");
    for (uint32_t i = 0; m && i < c->n_members; i++)
        cJSON_AddItemToArray(m, cJSON_CreateNumber(c->members[i]));
}

static void json_ptr(cJSON *o, uint64_t ptr)
{
    char b[24];
    snprintf(b, sizeof(b), "0x%" PRIx64, ptr);
    cJSON_AddStringToObject(o, "ptr", b);
}

static void json_alloc(cJSON *o, const tft_rec_alloc *a, const tft_reader *r)
{
    char b[18];
    json_ptr(o, a->ptr);
    core_json_u64(o, "bytes", a->bytes);
    dump_json_str_or_null(o, "site", core_rec_string(r, a->site, b));
    json_device(o, a->device_kind, a->device);
    core_json_u64(o, "stream", a->stream);
}

static void json_free(cJSON *o, const tft_rec_free *x)
{
    json_ptr(o, x->ptr);
    core_json_u64(o, "bytes", x->bytes);
    json_device(o, x->device_kind, x->device);
}

static void json_kernel(cJSON *o, const tft_rec_kernel *k)
{
    uint64_t grid[3] = {k->grid[0], k->grid[1], k->grid[2]};
    uint64_t block[3] = {k->block[0], k->block[1], k->block[2]};
    cJSON_AddStringToObject(o, "op_kind", tft_op_kind_name((int)k->kind));
    core_json_u64(o, "start", k->start);
    core_json_u64(o, "end", k->end);
    core_json_u64(o, "stream", k->stream);
    core_json_u64(o, "corr", k->corr);
    cJSON_AddItemToObject(o, "grid", json_id_array(grid, 3, 0));
    cJSON_AddItemToObject(o, "block", json_id_array(block, 3, 0));
    json_device(o, TFT_DEV_CUDA, k->device); /* kernels run on a device */
}

static void json_process(cJSON *o, const tft_rec_process *p)
{
    bool is_exit = p->event == TFT_PROC_EXIT;
    cJSON_AddStringToObject(o, "event", dump_proc_event_name(p->event));
    cJSON_AddNumberToObject(o, "pid", p->pid);
    if (is_exit && !p->signal)
        cJSON_AddNumberToObject(o, "code", p->exit_code);
    else
        cJSON_AddNullToObject(o, "code");
    if (is_exit && p->signal)
        cJSON_AddNumberToObject(o, "signal", p->signal);
    else
        cJSON_AddNullToObject(o, "signal");
    core_json_u64(o, "rss", p->rss);
}

/* A STACK record (FORMAT.md §5.16); frames as an array of their lines. */
static void json_stack(cJSON *o, const tft_rec_stack *s, const tft_reader *r)
{
    char b[18];
    cJSON_AddNumberToObject(o, "pid", s->pid);
    cJSON_AddNumberToObject(o, "tid", s->tid);
    cJSON_AddBoolToObject(o, "main", (s->h.flags & TFT_STACK_FLAG_MAIN) != 0);
    cJSON_AddStringToObject(o, "snapshot", s->source == 1 ? "on-cpu" : s->source == 2 ? "off-cpu" : "running");
    dump_json_str_or_null(o, "comm", core_rec_string(r, s->comm, b));
    dump_json_str_or_null(o, "summary", core_rec_string(r, s->summary, b));
    cJSON *fa = cJSON_AddArrayToObject(o, "frames");
    const char *fr = s->frames ? tft_reader_string(r, s->frames) : NULL;
    for (const char *p = fr; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), p);
        cJSON_AddItemToArray(fa, cJSON_CreateString(line));
        p = e ? e + 1 : p + n;
    }
    dump_json_str_or_null(o, "note", core_rec_string(r, s->note, b));
}

/* A known kind that has no case of its own (a new one): each of its
 * string fields by the table's name, as the text listing shows them. */
static void json_strings(cJSON *o, const tft_rec *rec, const tft_reader *r)
{
    const tft_rec_kind_info *k = tft_rec_kind(rec->kind);
    uint64_t ids[TFT_REC_STRINGS];
    int n = tft_rec_string_ids(rec, ids);
    char buf[18];
    for (int i = 0; i < n; i++)
        dump_json_str_or_null(o, k->string_field[i], core_rec_string(r, ids[i], buf));
}

static void json_body(cJSON *o, const tft_rec *rec, const tft_reader *r)
{
    char b[18];
    switch (rec->kind) {
    case TFT_REC_STEP:
        cJSON_AddStringToObject(o, "phase", ((const tft_rec_step *)rec)->phase == TFT_STEP_END ? "end" : "begin");
        break;
    case TFT_REC_OP: json_op(o, (const tft_rec_op *)rec, r); break;
    case TFT_REC_TENSOR: json_tensor(o, (const tft_rec_tensor *)rec); break;
    case TFT_REC_ALLOC: json_alloc(o, (const tft_rec_alloc *)rec, r); break;
    case TFT_REC_FREE: json_free(o, (const tft_rec_free *)rec); break;
    case TFT_REC_COLLECTIVE: json_collective(o, (const tft_rec_collective *)rec); break;
    case TFT_REC_KERNEL: json_kernel(o, (const tft_rec_kernel *)rec); break;
    case TFT_REC_CHECKPOINT: {
        const tft_rec_checkpoint *c = (const tft_rec_checkpoint *)rec;
        cJSON_AddStringToObject(o, "action", c->action == TFT_CKPT_RESUME ? "resume" : "save");
        dump_json_str_or_null(o, "path", core_rec_string(r, c->path, b));
        dump_json_str_or_null(o, "recipe", core_rec_string(r, c->recipe, b));
        break;
    }
    case TFT_REC_PROCESS: json_process(o, (const tft_rec_process *)rec); break;
    case TFT_REC_CAPTURE: json_capture(o, (const tft_rec_capture *)rec); break;
    case TFT_REC_COMM: json_comm(o, (const tft_rec_comm *)rec); break;
    case TFT_REC_DROPPED: {
        const tft_rec_dropped *d = (const tft_rec_dropped *)rec;
        core_json_u64(o, "count", d->count);
        cJSON_AddStringToObject(o, "reason", core_drop_reason_name(d->reason));
        break;
    }
    case TFT_REC_THREAD: {
        const tft_rec_thread *t = (const tft_rec_thread *)rec;
        cJSON_AddStringToObject(o, "event", t->event == TFT_THREAD_END ? "end" : "switch");
        cJSON_AddNumberToObject(o, "index", t->index);
        cJSON_AddNumberToObject(o, "tid", t->tid);
        break;
    }
    case TFT_REC_SYNC: break; /* the watermark is the record's step */
    case TFT_REC_STACK: json_stack(o, (const tft_rec_stack *)rec, r); break;
    case TFT_REC_CLOCK: {
        const tft_rec_clock *c = (const tft_rec_clock *)rec;
        core_json_u64(o, "realtime_ns", c->realtime_ns);
        cJSON_AddStringToObject(o, "ntp", c->ntp == TFT_NTP_SYNCED     ? "synced"
                                          : c->ntp == TFT_NTP_UNSYNCED ? "unsynced"
                                                                       : "unknown");
        core_json_u64(o, "maxerror_ns", c->maxerror_ns);
        core_json_u64(o, "esterror_ns", c->esterror_ns);
        break;
    }
    default: /* a kind this build does not know: its length; a known one without a case: its strings */
        if (!tft_rec_kind(rec->kind))
            cJSON_AddNumberToObject(o, "len", rec->len);
        else
            json_strings(o, rec, r);
        break;
    }
}

cJSON *dump_rec_json(const tft_rec *rec, int rank, const tft_reader *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    char kb[24], nb[18];
    cJSON_AddNumberToObject(o, "rank", rank);
    if (rec->seq == TFT_SEQ_NONE)
        cJSON_AddNullToObject(o, "seq");
    else
        core_json_i64(o, "seq", rec->seq);
    if (rec->step == TFT_STEP_NONE)
        cJSON_AddNullToObject(o, "step");
    else
        core_json_i64(o, "step", rec->step);
    cJSON_AddStringToObject(o, "kind", dump_rec_kind_label(rec->kind, kb));
    core_json_u64(o, "ts", rec->ts);
    dump_json_str_or_null(o, "name", dump_rec_name(rec, r, nb));
    json_body(o, rec, r);
    return o;
}
