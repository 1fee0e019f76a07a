/*
 * export_perfetto.c — the Perfetto emitter of `tfdump --export perfetto`
 * (export_internal.h): a protobuf Trace (proto/perfetto_trace_subset.proto,
 * Perfetto's field numbers) encoded by protobuf-c.
 *
 * Streaming: a Trace is `repeated TracePacket packet = 1`, and a serialised
 * Trace holding one packet is exactly one field-1 record; the
 * concatenation of such records is the whole Trace. So every packet is
 * packed alone, straight into the output stream, as soon as the walker
 * hands over its event: memory does not grow with the trace.
 *
 * Sequences and interning: each rank is its own packet sequence
 * (trusted_packet_sequence_id = 1, 2, ...). Its first packet (the process
 * track) clears the incremental state; event names, categories and
 * annotation names are interned per sequence (iids 1, 2, ... in
 * InternedData entries of the packet that first uses them), and packets
 * that refer to them carry SEQ_NEEDS_INCREMENTAL_STATE. A rank with more
 * than EXP_INTERN_MAX distinct strings writes the rest inline.
 *
 * Mapping: ranks are process tracks, recording threads thread tracks
 * (ThreadDescriptor pid/tid as in the Chrome export), device streams and
 * the overlapping-collectives track plain child tracks, counters counter
 * tracks (UNIT_SIZE_BYTES for bytes). Slices are SLICE_BEGIN + SLICE_END
 * pairs (an open slice: SLICE_BEGIN alone), with their flows' ids in
 * flow_ids (Perfetto orients each flow by time); instants TYPE_INSTANT;
 * counters TYPE_COUNTER with counter_value (bytes) or double_counter_value.
 */
#include "export_internal.h"
#include "perfetto_trace_subset.pb-c.h"
#include "tft_u64map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EXP_INTERN_MAX (1u << 20)
#define PKT_INTERN_MAX (EXP_ARGS_MAX + 2) /* new interned entries one packet can need */

typedef Perfetto__Protos__TracePacket Packet;
typedef Perfetto__Protos__TrackEvent Event;

enum { IN_NAME = 0, IN_CAT = 1, IN_ARG = 2 };

/* A ProtobufCBuffer that appends to the output stream. */
typedef struct file_buffer {
    ProtobufCBuffer base;
    FILE *f;
    int err;
} file_buffer;

struct export_sink {
    file_buffer out;
    uint32_t seq_id;      /* the current rank's sequence */
    bool first_packet;    /* the next packet is the sequence's first */
    tft_u64map intern[3]; /* per kind: string id -> iid, for the current sequence */
    uint64_t next_iid[3];
    /* the interned entries of the packet being built */
    Perfetto__Protos__EventName names[PKT_INTERN_MAX], *pnames[PKT_INTERN_MAX];
    Perfetto__Protos__EventCategory cats[PKT_INTERN_MAX], *pcats[PKT_INTERN_MAX];
    Perfetto__Protos__DebugAnnotationName anames[PKT_INTERN_MAX], *panames[PKT_INTERN_MAX];
    size_t n_names, n_cats, n_anames;
    Perfetto__Protos__InternedData interned;
    Perfetto__Protos__DebugAnnotation ann[EXP_ARGS_MAX], *pann[EXP_ARGS_MAX];
    char hex[EXP_ARGS_MAX][17];
    uint64_t cat_iid;
};

static void fb_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
    file_buffer *fb = (file_buffer *)b;
    if (!fb->err && len && fwrite(data, 1, len, fb->f) != len)
        fb->err = errno ? errno : EIO;
}

/* Writes one packet as a Trace of one packet (one field-1 record). */
static int put(export_sink *s, Packet *p)
{
    p->has_trusted_packet_sequence_id = 1;
    p->trusted_packet_sequence_id = s->seq_id;
    if (s->n_names || s->n_cats || s->n_anames) {
        s->interned = (Perfetto__Protos__InternedData)PERFETTO__PROTOS__INTERNED_DATA__INIT;
        s->interned.n_event_names = s->n_names;
        s->interned.event_names = s->pnames;
        s->interned.n_event_categories = s->n_cats;
        s->interned.event_categories = s->pcats;
        s->interned.n_debug_annotation_names = s->n_anames;
        s->interned.debug_annotation_names = s->panames;
        p->interned_data = &s->interned;
    }
    Packet *one[1] = {p};
    Perfetto__Protos__Trace t = PERFETTO__PROTOS__TRACE__INIT;
    t.n_packet = 1;
    t.packet = one;
    perfetto__protos__trace__pack_to_buffer(&t, &s->out.base);
    s->n_names = s->n_cats = s->n_anames = 0;
    return s->out.err ? -s->out.err : 0;
}

/* The iid of text in index kind, added to the packet being built when new;
 * 0 when the index is full (the caller writes the text inline). */
static uint64_t intern(export_sink *s, int kind, const char *text)
{
    uint64_t key = tft_string_id(text, strlen(text));
    void *v;
    int rc = tft_u64map_insert(&s->intern[kind], key, NULL, NULL, &v);
    if (rc < 0)
        return 0;
    if (rc == 0)
        return *(uint64_t *)v;
    uint64_t iid = s->next_iid[kind]++;
    *(uint64_t *)v = iid;
    char *name = (char *)text; /* protobuf-c's field type; only read */
    if (kind == IN_NAME) {
        Perfetto__Protos__EventName *e = &s->names[s->n_names];
        *e = (Perfetto__Protos__EventName)PERFETTO__PROTOS__EVENT_NAME__INIT;
        e->has_iid = 1, e->iid = iid, e->name = name;
        s->pnames[s->n_names++] = e;
    } else if (kind == IN_CAT) {
        Perfetto__Protos__EventCategory *e = &s->cats[s->n_cats];
        *e = (Perfetto__Protos__EventCategory)PERFETTO__PROTOS__EVENT_CATEGORY__INIT;
        e->has_iid = 1, e->iid = iid, e->name = name;
        s->pcats[s->n_cats++] = e;
    } else {
        Perfetto__Protos__DebugAnnotationName *e = &s->anames[s->n_anames];
        *e = (Perfetto__Protos__DebugAnnotationName)PERFETTO__PROTOS__DEBUG_ANNOTATION_NAME__INIT;
        e->has_iid = 1, e->iid = iid, e->name = name;
        s->panames[s->n_anames++] = e;
    }
    return iid;
}

static void event_init(export_sink *s, Packet *p, Event *e, uint64_t ts, const export_track *t, int type)
{
    *p = (Packet)PERFETTO__PROTOS__TRACE_PACKET__INIT;
    *e = (Event)PERFETTO__PROTOS__TRACK_EVENT__INIT;
    p->has_timestamp = 1;
    p->timestamp = ts;
    p->track_event = e;
    p->has_sequence_flags = 1;
    p->sequence_flags = PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_NEEDS_INCREMENTAL_STATE;
    e->has_type = 1;
    e->type = (Perfetto__Protos__TrackEvent__Type)type;
    e->has_track_uuid = 1;
    e->track_uuid = t->uuid;
    (void)s;
}

static void event_names(export_sink *s, Event *e, const char *name, const char *cat)
{
    uint64_t iid = intern(s, IN_NAME, name);
    if (iid) {
        e->has_name_iid = 1;
        e->name_iid = iid;
    } else {
        e->name = (char *)name;
    }
    s->cat_iid = intern(s, IN_CAT, cat);
    if (s->cat_iid) {
        e->n_category_iids = 1;
        e->category_iids = &s->cat_iid;
    }
}

static void event_args(export_sink *s, Event *e, const export_arg *a, int n)
{
    for (int i = 0; i < n; i++) {
        Perfetto__Protos__DebugAnnotation *d = &s->ann[i];
        *d = (Perfetto__Protos__DebugAnnotation)PERFETTO__PROTOS__DEBUG_ANNOTATION__INIT;
        uint64_t iid = intern(s, IN_ARG, a[i].key);
        if (iid) {
            d->has_name_iid = 1;
            d->name_iid = iid;
        } else {
            d->name = (char *)a[i].key;
        }
        switch (a[i].type) {
        case EXP_ARG_INT: d->has_int_value = 1, d->int_value = a[i].v.i; break;
        case EXP_ARG_UINT: d->has_uint_value = 1, d->uint_value = a[i].v.u; break;
        case EXP_ARG_DOUBLE: d->has_double_value = 1, d->double_value = a[i].v.d; break;
        case EXP_ARG_HEX:
            snprintf(s->hex[i], sizeof(s->hex[i]), "%016llx", (unsigned long long)a[i].v.u);
            d->string_value = s->hex[i];
            break;
        default: d->string_value = (char *)a[i].v.s; break;
        }
        s->pann[i] = d;
    }
    e->n_debug_annotations = (size_t)n;
    e->debug_annotations = n ? s->pann : NULL;
}

static int p_begin(export_sink *s, const export_run_info *run)
{
    (void)s, (void)run;
    return 0;
}

static int p_process(export_sink *s, const export_process *p)
{
    s->seq_id = p->seq_id;
    for (int k = 0; k < 3; k++) {
        tft_u64map_clear(&s->intern[k]);
        s->next_iid[k] = 1;
    }
    Packet pk = PERFETTO__PROTOS__TRACE_PACKET__INIT;
    Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
    Perfetto__Protos__ProcessDescriptor pd = PERFETTO__PROTOS__PROCESS_DESCRIPTOR__INIT;
    pd.has_pid = 1;
    pd.pid = p->pid;
    pd.process_name = (char *)p->name;
    td.has_uuid = 1;
    td.uuid = p->uuid;
    td.name = (char *)p->name;
    td.process = &pd;
    pk.track_descriptor = &td;
    pk.has_sequence_flags = 1;
    pk.sequence_flags = PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED;
    pk.has_first_packet_on_sequence = 1;
    pk.first_packet_on_sequence = 1;
    return put(s, &pk);
}

static int p_track(export_sink *s, const export_track *t)
{
    Packet pk = PERFETTO__PROTOS__TRACE_PACKET__INIT;
    Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
    Perfetto__Protos__ThreadDescriptor thd = PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT;
    Perfetto__Protos__CounterDescriptor cd = PERFETTO__PROTOS__COUNTER_DESCRIPTOR__INIT;
    td.has_uuid = 1;
    td.uuid = t->uuid;
    td.has_parent_uuid = 1;
    td.parent_uuid = t->parent;
    td.name = (char *)t->name;
    if (t->kind == EXP_TRACK_THREAD) {
        thd.has_pid = 1, thd.pid = t->pid;
        thd.has_tid = 1, thd.tid = t->tid;
        thd.thread_name = (char *)t->name;
        td.thread = &thd;
    } else if (t->kind == EXP_TRACK_COUNTER) {
        if (t->bytes) {
            cd.has_unit = 1;
            cd.unit = PERFETTO__PROTOS__COUNTER_DESCRIPTOR__UNIT__UNIT_SIZE_BYTES;
        }
        td.counter = &cd;
    }
    pk.track_descriptor = &td;
    return put(s, &pk);
}

static int p_slice(export_sink *s, const export_slice *sl)
{
    Packet pk;
    Event e;
    event_init(s, &pk, &e, sl->ts, sl->track, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN);
    event_names(s, &e, sl->name, sl->cat);
    event_args(s, &e, sl->args, sl->nargs);
    uint64_t *flows = NULL;
    size_t nf = sl->n_out + sl->n_in;
    if (nf) {
        flows = malloc(nf * sizeof(uint64_t));
        if (!flows)
            return -ENOMEM;
        if (sl->n_out)
            memcpy(flows, sl->flow_out, sl->n_out * sizeof(uint64_t));
        if (sl->n_in)
            memcpy(flows + sl->n_out, sl->flow_in, sl->n_in * sizeof(uint64_t));
        e.n_flow_ids = nf;
        e.flow_ids = flows;
    }
    int rc = put(s, &pk);
    free(flows);
    if (rc || sl->open)
        return rc;
    event_init(s, &pk, &e, sl->ts + sl->dur, sl->track, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END);
    pk.has_sequence_flags = 0;
    return put(s, &pk);
}

static int p_instant(export_sink *s, const export_instant *in)
{
    Packet pk;
    Event e;
    event_init(s, &pk, &e, in->ts, in->track, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT);
    event_names(s, &e, in->name, in->cat);
    event_args(s, &e, in->args, in->nargs);
    return put(s, &pk);
}

static int p_counter(export_sink *s, const export_track *t, uint64_t ts, double v)
{
    Packet pk;
    Event e;
    event_init(s, &pk, &e, ts, t, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER);
    pk.has_sequence_flags = 0;
    if (t->bytes && v >= 0 && v < 9.2e18) {
        e.has_counter_value = 1;
        e.counter_value = (int64_t)v;
    } else {
        e.has_double_counter_value = 1;
        e.double_counter_value = v;
    }
    return put(s, &pk);
}

static int p_end(export_sink *s)
{
    if (fflush(s->out.f) != 0 || ferror(s->out.f))
        return -(errno ? errno : EIO);
    return s->out.err ? -s->out.err : 0;
}

static void p_free(export_sink *s)
{
    if (!s)
        return;
    for (int k = 0; k < 3; k++)
        tft_u64map_free(&s->intern[k]);
    free(s);
}

static const export_ops perfetto_ops = {p_begin, p_process, p_track, p_slice, p_instant, p_counter, p_end, p_free};

export_sink *export_perfetto_new(FILE *f, const export_ops **ops)
{
    export_sink *s = calloc(1, sizeof(*s));
    if (!s) {
        errno = ENOMEM;
        return NULL;
    }
    s->out.base = (ProtobufCBuffer){.append = fb_append};
    s->out.f = f;
    for (int k = 0; k < 3; k++)
        tft_u64map_init(&s->intern[k], &(tft_u64map_opts){.vsize = sizeof(uint64_t), .max_n = EXP_INTERN_MAX});
    *ops = &perfetto_ops;
    return s;
}
