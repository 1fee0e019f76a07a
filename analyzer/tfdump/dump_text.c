/*
 * dump_text.c — one compact text line per record for `tfdump --events`:
 *
 *   r0 s3 q17 tensor L0.qkv f32[4,64,768] nan=0 min=-1.2 max=3.4 mean=0.01 fp=9f2c...
 *
 * "r" rank, "s" step, "q" op sequence number ("-" when the record has none),
 * the kind, then kind-specific fields. Strings without a definition print as
 * #<16 hex>. Every field read here was bounds-checked by the reader
 * (tft_rec_check), so only kind-specific enumerations are range-checked.
 */
#include "dump_internal.h"

#include <inttypes.h>
#include <string.h>

const char *dump_rec_name(const tft_rec *rec, const tft_reader *r, char buf[18])
{
    const tft_rec_kind_info *k = tft_rec_kind(rec->kind);
    if (!k || k->label < 0)
        return NULL;
    uint64_t ids[TFT_REC_STRINGS];
    tft_rec_string_ids(rec, ids);
    return core_rec_string(r, ids[k->label], buf);
}

const char *dump_rec_kind_label(uint16_t kind, char buf[24])
{
    if (kind != TFT_REC_STRING && tft_rec_kind(kind))
        return tft_rec_kind_name(kind);
    snprintf(buf, 24, "unknown(%u)", (unsigned)kind);
    return buf;
}

/* Text of string id `id` for a text line: "-" for none, #<hex> when
 * undefined; control characters (a newline would split the line) show as
 * \xNN and very long texts are cut. Valid until the call after next. */
static const char *txt(const tft_reader *r, uint64_t id)
{
    static char bufs[2][512];
    static int turn;
    char hb[18];
    const char *s = core_rec_string(r, id, hb);
    if (!s)
        return "-";
    char *out = bufs[turn ^= 1];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && n + 5 < sizeof(bufs[0]); p++) {
        if (*p < 0x20 || *p == 0x7f)
            n += (size_t)snprintf(out + n, 5, "\\x%02x", *p);
        else
            out[n++] = (char)*p;
    }
    out[n] = '\0';
    return out;
}

static void print_device(FILE *f, int kind, int dev)
{
    if (kind == TFT_DEV_CPU)
        fputs("cpu", f);
    else if (kind == TFT_DEV_CUDA)
        fprintf(f, "cuda:%d", dev);
    else
        fprintf(f, "dev%d:%d", kind, dev);
}

static void print_stats(FILE *f, int mode, const tft_stats *s)
{
    if (mode < TFT_STATS_HEALTH)
        return;
    fprintf(f, " nan=%" PRIu64, s->nan);
    if (s->pinf || s->ninf)
        fprintf(f, " inf=+%" PRIu64 "/-%" PRIu64, s->pinf, s->ninf);
    fprintf(f, " zero=%" PRIu64 " min=%.5g max=%.5g", s->zero, s->min, s->max);
    if (mode >= TFT_STATS_FULL) {
        fprintf(f, " mean=%.5g std=%.5g absmax=%.5g", s->mean, s->std, s->absmax);
        if (s->over_fp16)
            fprintf(f, " over_fp16=%" PRIu64, s->over_fp16);
        if (s->over_bf16)
            fprintf(f, " over_bf16=%" PRIu64, s->over_bf16);
        if (s->under_fp16)
            fprintf(f, " under_fp16=%" PRIu64, s->under_fp16);
    }
    fprintf(f, " fp=%016" PRIx64, s->fingerprint);
}

static void text_tensor(FILE *f, const tft_rec_tensor *t, const tft_reader *r)
{
    fprintf(f, " %s %s[", txt(r, t->name), tft_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim; i++)
        fprintf(f, "%s%" PRId64, i ? "," : "", t->shape[i]);
    fprintf(f, "] id=%" PRIu64 " ", t->id);
    print_device(f, t->device_kind, t->device);
    print_stats(f, t->mode, &t->stats);
    if (t->h.flags & TFT_TENSOR_HAS_DATA)
        fputs(" captured", f);
    if (t->h.flags & (TFT_TENSOR_TRAIN | TFT_TENSOR_EVAL))   /* its context (format 1.7) */
        fputs(t->h.flags & TFT_TENSOR_TRAIN ? " train" : " eval", f);
    if (t->h.flags & TFT_TENSOR_NO_GRAD)
        fputs(" no_grad", f);
}

/* r0 s2 q17 capture L0.qkv output id=41 bytes 65392..130784/786432 */
static void text_capture(FILE *f, const tft_rec_capture *c, const tft_reader *r)
{
    static const char *const roles[] = {"output", "input", "prior"};
    fprintf(f, " %s %s id=%" PRIu64 " %s bytes %" PRIu64 "..%" PRIu64 "/%" PRIu64, txt(r, c->name),
            c->role <= TFT_CAPTURE_PRIOR ? roles[c->role] : "?", c->tensor, tft_dtype_name(c->dtype), c->offset,
            c->offset + c->n, c->total);
}

static void print_ids(FILE *f, const char *label, const uint64_t *ids, int n, int is_signed)
{
    fprintf(f, " %s=[", label);
    for (int i = 0; i < n; i++) {
        if (is_signed)
            fprintf(f, "%s%" PRId64, i ? "," : "", (int64_t)ids[i]);
        else
            fprintf(f, "%s%" PRIu64, i ? "," : "", ids[i]);
    }
    fputc(']', f);
}

static void text_op(FILE *f, const tft_rec_op *o, const tft_reader *r)
{
    fprintf(f, " %s %s", txt(r, o->name), tft_op_kind_name(o->op_kind));
    if (o->scope)
        fprintf(f, " scope=%s", txt(r, o->scope));
    print_ids(f, "in", o->ids, o->n_in, 0);
    print_ids(f, "out", o->ids + o->n_in, o->n_out, 0);
    if (o->n_attr)
        print_ids(f, "attrs", o->ids + o->n_in + o->n_out, o->n_attr, 1);
}

static void text_collective(FILE *f, const tft_rec_collective *c, const tft_reader *r)
{
    bool enter = (c->h.flags & (TFT_COLL_FLAG_ENTER | TFT_COLL_FLAG_EXIT)) == TFT_COLL_FLAG_ENTER;
    fprintf(f, " %s %s%s comm=%016" PRIx64 " cseq=%" PRIu64 " count=%" PRIu64 " %s %s",
            txt(r, c->name), tft_coll_type_name(c->type), enter ? " enter" : "", c->comm, c->coll_seq,
            c->count, tft_dtype_name(c->dtype), tft_redop_name(c->redop));
    if (c->root >= 0)
        fprintf(f, " root=%d", c->root);
    fprintf(f, " rank=%d/%d", c->rank, c->nranks);
    int32_t tag = c->type == TFT_COLL_SEND || c->type == TFT_COLL_RECV ? tft_rec_coll_tag(c) : TFT_TAG_NONE;
    if (tag == TFT_TAG_ANY)
        fputs(" tag=any", f);
    else if (tag != TFT_TAG_NONE)
        fprintf(f, " tag=%d", (int)tag);
    if (!enter && c->t_exit >= c->t_enter)
        fprintf(f, " dur=%.3fus", (double)(c->t_exit - c->t_enter) / 1e3);
    if (c->result)
        fprintf(f, " result=%" PRIu64, c->result);
}

/* "comm MPI_Comm_split comm=... rank=1/2 order=0 parent=... members={1,3}";
 * an intercommunicator's members are its local group, then "|", the remote
 * group (FORMAT.md 5.15); long lists are cut. */
static void text_comm(FILE *f, const tft_rec_comm *c, const tft_reader *r)
{
    enum { SHOWN = 64 };
    fprintf(f, " %s comm=%016" PRIx64 " rank=%d/%d order=%u", txt(r, c->name), c->comm, c->rank, c->size,
            c->order);
    if (c->parent)
        fprintf(f, " parent=%016" PRIx64, c->parent);
    if (c->h.flags & TFT_COMM_FLAG_INTER)
        fputs(" inter", f);
    if (!c->n_members)
        return;
    fputs(" members={", f);
    bool inter = (c->h.flags & TFT_COMM_FLAG_INTER) != 0;
    for (uint32_t i = 0; i < c->n_members && i < SHOWN; i++)
        fprintf(f, "%s%d", !i ? "" : inter && c->size >= 0 && i == (uint32_t)c->size ? "|" : ",", (int)c->members[i]);
    fputs(c->n_members > SHOWN ? ",...}" : "}", f);
}

static void text_alloc(FILE *f, const tft_rec_alloc *a, const tft_reader *r)
{
    fprintf(f, " ptr=0x%" PRIx64 " bytes=%" PRIu64 " site=%s ", a->ptr, a->bytes,
            txt(r, a->site));
    print_device(f, a->device_kind, a->device);
    if (a->stream)
        fprintf(f, " stream=0x%" PRIx64, a->stream);
}

static void text_free(FILE *f, const tft_rec_free *x)
{
    fprintf(f, " ptr=0x%" PRIx64 " bytes=%" PRIu64 " ", x->ptr, x->bytes);
    print_device(f, x->device_kind, x->device);
}

static void text_kernel(FILE *f, const tft_rec_kernel *k, const tft_reader *r)
{
    fprintf(f, " %s %s grid=[%u,%u,%u] block=[%u,%u,%u] dev=%d stream=0x%" PRIx64 " corr=%" PRIu64,
            txt(r, k->name), tft_op_kind_name((int)k->kind), k->grid[0], k->grid[1],
            k->grid[2], k->block[0], k->block[1], k->block[2], k->device, k->stream, k->corr);
    if (k->end >= k->start)
        fprintf(f, " dur=%.3fus", (double)(k->end - k->start) / 1e3);
}

const char *dump_proc_event_name(uint32_t e)
{
    static const char *const n[] = {"start", "exit", "rss"};
    return e < 3 ? n[e] : "?";
}

static void text_process(FILE *f, const tft_rec_process *p)
{
    fprintf(f, " %s pid=%d", dump_proc_event_name(p->event), p->pid);
    if (p->event == TFT_PROC_EXIT && p->signal)
        fprintf(f, " signal=%d", p->signal);
    else if (p->event == TFT_PROC_EXIT)
        fprintf(f, " code=%d", p->exit_code);
    if (p->rss)
        fprintf(f, " rss=%" PRIu64, p->rss);
}

/* A STACK record (FORMAT.md §5.16): who, the summary, then the frames
 * indented on the lines that follow. */
static void text_stack(FILE *f, const tft_rec_stack *s, const tft_reader *r)
{
    fprintf(f, " pid=%d tid=%d%s comm=%s: %s", (int)s->pid, (int)s->tid,
            s->h.flags & TFT_STACK_FLAG_MAIN ? " main" : "", txt(r, s->comm), txt(r, s->summary));
    const char *fr = s->frames ? tft_reader_string(r, s->frames) : NULL;
    for (const char *p = fr; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        fprintf(f, "\n      %.*s", (int)n, p);
        p = e ? e + 1 : p + n;
    }
    if (s->note)
        fprintf(f, "\n      (%s)", txt(r, s->note));
}

/* A kind without a case below: a kind this build does not know shows its
 * length; a known one (a new kind no case was written for yet) its
 * strings, by their fields' names (the table of kinds, tft_rec_kind). */
static void text_other(FILE *f, const tft_rec *rec, const tft_reader *r)
{
    const tft_rec_kind_info *k = tft_rec_kind(rec->kind);
    if (!k) {
        fprintf(f, " len=%u", rec->len);
        return;
    }
    uint64_t ids[TFT_REC_STRINGS];
    int n = tft_rec_string_ids(rec, ids);
    for (int i = 0; i < n; i++)
        if (ids[i])
            fprintf(f, " %s=%s", k->string_field[i], txt(r, ids[i]));
}

static void text_body(FILE *f, const tft_rec *rec, const tft_reader *r)
{
    switch (rec->kind) {
    case TFT_REC_STEP:
        fputs(((const tft_rec_step *)rec)->phase == TFT_STEP_END ? " end" : " begin", f);
        break;
    case TFT_REC_OP: text_op(f, (const tft_rec_op *)rec, r); break;
    case TFT_REC_TENSOR: text_tensor(f, (const tft_rec_tensor *)rec, r); break;
    case TFT_REC_ALLOC: text_alloc(f, (const tft_rec_alloc *)rec, r); break;
    case TFT_REC_FREE: text_free(f, (const tft_rec_free *)rec); break;
    case TFT_REC_COLLECTIVE: text_collective(f, (const tft_rec_collective *)rec, r); break;
    case TFT_REC_KERNEL: text_kernel(f, (const tft_rec_kernel *)rec, r); break;
    case TFT_REC_CHECKPOINT: {
        const tft_rec_checkpoint *c = (const tft_rec_checkpoint *)rec;
        fprintf(f, " %s path=%s", c->action == TFT_CKPT_RESUME ? "resume" : "save",
                txt(r, c->path));
        if (c->recipe)
            fprintf(f, " recipe=%s", txt(r, c->recipe));
        break;
    }
    case TFT_REC_PROCESS: text_process(f, (const tft_rec_process *)rec); break;
    case TFT_REC_CAPTURE: text_capture(f, (const tft_rec_capture *)rec, r); break;
    case TFT_REC_COMM: text_comm(f, (const tft_rec_comm *)rec, r); break;
    case TFT_REC_DROPPED: {
        const tft_rec_dropped *d = (const tft_rec_dropped *)rec;
        fprintf(f, " count=%" PRIu64 " reason=%s", d->count, core_drop_reason_name(d->reason));
        break;
    }
    case TFT_REC_THREAD: {
        const tft_rec_thread *t = (const tft_rec_thread *)rec;
        fprintf(f, " %s index=%u tid=%d", t->event == TFT_THREAD_END ? "end" : "switch", t->index, (int)t->tid);
        if (t->name)
            fprintf(f, " name=%s", txt(r, t->name));
        break;
    }
    case TFT_REC_SYNC: fputs(" (no earlier step follows)", f); break;
    case TFT_REC_STACK: text_stack(f, (const tft_rec_stack *)rec, r); break;
    case TFT_REC_CLOCK: {
        const tft_rec_clock *c = (const tft_rec_clock *)rec;
        fprintf(f, " realtime=%" PRIu64 " ntp=%s maxerror=%" PRIu64 "us", c->realtime_ns,
                c->ntp == TFT_NTP_SYNCED ? "synced" : c->ntp == TFT_NTP_UNSYNCED ? "unsynced" : "unknown",
                c->maxerror_ns / 1000);
        break;
    }
    default: text_other(f, rec, r); break;
    }
}

void dump_rec_text(FILE *f, const tft_rec *rec, int rank, const tft_reader *r)
{
    char kb[24];
    fprintf(f, "r%d s", rank);
    if (rec->step == TFT_STEP_NONE)
        fputc('-', f);
    else
        fprintf(f, "%" PRId64, rec->step);
    fputs(" q", f);
    if (rec->seq == TFT_SEQ_NONE)
        fputc('-', f);
    else
        fprintf(f, "%" PRId64, rec->seq);
    fprintf(f, " %s", dump_rec_kind_label(rec->kind, kb));
    text_body(f, rec, r);
    fputc('\n', f);
}
