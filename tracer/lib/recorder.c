/*
 * recorder.c — the tft.h API's ops, tensors and collectives: op sequence
 * numbers, tensor statistics, per-communicator call numbers. What every
 * record needs (the process's and the thread's state, the thread's ring,
 * strings sent once per ring) is in recorder_state.c; the lazy set-up from
 * the environment and the exit / crash records in init.c.
 *
 * Modes: TFT_SHM=NAME (set by tftrace: attach to the collector's region),
 * TFT_OUTPUT=DIR without TFT_SHM (an in-process writer thread drains a
 * private region into DIR), or off (every call returns 0 at once).
 * Hot path (a record): a TLS lookup, a clock read, a memcpy into the ring.
 * Capture (TFT_CAPTURE, docs/CAPTURE.md) is a separate slow path behind one
 * test of g_rec.capture: recorder_capture.c. The run's other records (steps,
 * scopes, allocations, communicators, checkpoints): recorder_events.c; the
 * CUDA plugin's and the device queue's: recorder_x.c, devq.c.
 */
#include "collector.h"
#include "recorder_internal.h"
#ifdef TFT_HAVE_CUDA
#include "interpose_cuda_internal.h" /* devq_*: device tensors */
#endif
#include "tft.h"
#include "tft_stats.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define COMM_SLOTS 4096 /* communicator ids (and their point-to-point spaces) a process numbers */

static struct {
    _Atomic uint64_t comm[COMM_SLOTS];
    _Atomic uint64_t next[COMM_SLOTS];
} comms;

/* 1 between tft_coll_enter and tft_coll_exit on this thread: the program
 * records its collective itself, the MPI interposers (interpose.c) skip it. */
__thread int rec_explicit_coll __attribute__((tls_model("initial-exec")));

uint64_t tft_now_ns(void) { return tft_clock_mono_ns(); }

#define MAX_OP_ATTRS 16

/* An OP record; name_id: name's string id, interned already (0: intern it). */
static int emit_op_named(shm_ring *r, const char *name, uint64_t name_id, int kind, int n_in, const uint64_t *in,
                         int64_t seq, int n_attr, const int64_t *attrs, uint64_t ts)
{
    _Alignas(8) char buf[sizeof(tft_rec_op) + 8 * (64 + MAX_OP_ATTRS)];
    tft_rec_op *op = (tft_rec_op *)buf;
    if (n_in < 0 || n_in > 64)
        n_in = n_in < 0 ? 0 : 64;
    if (n_attr < 0 || n_attr > MAX_OP_ATTRS || !attrs)
        n_attr = 0;
    uint64_t nid = name_id ? name_id : rec_intern(r, name);
    rec_hdr_at(&op->h, TFT_REC_OP, (uint32_t)(sizeof(*op) + 8u * (unsigned)(n_in + n_attr)), seq, ts);
    rec_op_body(op, nid, rec_tls.scope_id, kind, n_in, in, n_attr, attrs);
    return ring_write(g_rec.h, r, &op->h);
}

static int emit_op_attrs(shm_ring *r, const char *name, int kind, int n_in, const uint64_t *in, int64_t seq,
                         int n_attr, const int64_t *attrs)
{
    return emit_op_named(r, name, 0, kind, n_in, in, seq, n_attr, attrs, 0);
}

static int emit_op(shm_ring *r, const char *name, int kind, int n_in, const uint64_t *in, int64_t seq)
{
    return emit_op_attrs(r, name, kind, n_in, in, seq, 0, NULL);
}

int64_t rec_op_begin_attrs(const char *name, int op_kind, int n_in, const uint64_t *in_ids, int n_attr,
                           const int64_t *attrs)
{
    if (!rec_on())
        return 0;
    if (!name)
        return -EINVAL;
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    int64_t seq = rec_next_seq();
    rec_tls.in_op = 1;
    rec_tls.op_seq = seq;
    int e = emit_op_attrs(r, name, op_kind, n_in, in_ids, seq, n_attr, attrs);
    if (__builtin_expect(g_rec.capture != NULL, 0))
        rec_capture_op_begin(r, name, seq, n_in, in_ids);
    return e ? e : seq;
}

int64_t tft_op_begin(const char *name, int op_kind, int n_in, const uint64_t *in_ids)
{
    return rec_op_begin_attrs(name, op_kind, n_in, in_ids, 0, NULL);
}

void tft_op_end(void) { rec_tls.in_op = 0; }

uint64_t tft_last_tensor_id(void) { return rec_tls.last_tensor; }


/* Checks a tensor's description (as tft_tensor documents it); *numel gets
 * its element count. 0 or -EINVAL. */
static int tensor_numel(const char *name, int dtype, int ndim, const int64_t *shape, uint64_t *numel)
{
    if (!name || ndim < 0 || ndim > TFT_MAX_NDIM || (ndim && !shape) || tft_dtype_size(dtype) == 0)
        return -EINVAL;
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && n > UINT64_MAX / (uint64_t)shape[i]))
            return -EINVAL;
        n *= (uint64_t)shape[i];
    }
    *numel = n;
    return 0;
}

/* The op a tensor recorded now belongs to: the current one, or (outside an
 * op bracket, *own_op set) a new op named like the tensor, written now. */
static int64_t tensor_op(shm_ring *r, const char *name, bool *own_op)
{
    *own_op = !rec_tls.in_op;
    if (!*own_op)
        return rec_tls.op_seq;
    int64_t seq = rec_next_seq();
    emit_op(r, name, TFT_OP_RUNTIME, 0, NULL, seq);
    return seq;
}

static uint64_t next_tensor_id(void)
{
    return atomic_fetch_add_explicit(&g_rec.tensor_id, 1, memory_order_relaxed) + 1;
}

/* Fills the rest of TENSOR record t of op seq (its statistics and mode are
 * the caller's): header, id (0: a new one; it becomes this thread's last
 * tensor), name, dtype, device, shape. */
static void tensor_fill_named(shm_ring *r, tft_rec_tensor *t, int64_t seq, uint64_t id, const char *name,
                              uint64_t name_id, int dtype, int ndim, const int64_t *shape, int device_kind,
                              int device, uint64_t ts)
{
    t->name = name_id ? rec_intern_id(r, name, name_id) : rec_intern(r, name);
    rec_hdr_at(&t->h, TFT_REC_TENSOR, sizeof(*t), seq, ts);
    t->h.flags = (uint16_t)rec_tls.tensor_flags;
    t->id = id ? id : next_tensor_id();
    t->dtype = (uint8_t)dtype;
    t->device_kind = (uint8_t)device_kind;
    t->device = (int16_t)device;
    t->ndim = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    rec_tls.last_tensor = t->id;
}

static void tensor_fill(shm_ring *r, tft_rec_tensor *t, int64_t seq, uint64_t id, const char *name, int dtype,
                        int ndim, const int64_t *shape, int device_kind, int device)
{
    tensor_fill_named(r, t, seq, id, name, 0, dtype, ndim, shape, device_kind, device, 0);
}

/* rec_capture_tensor for a tensor that may be strided: a captured tensor
 * is stored dense, so a strided one is copied first (the capture path is
 * the slow one already); without memory its record goes out uncaptured. */
static int capture_tensor(shm_ring *r, tft_rec_tensor *t, const char *name, const void *data, int ndim,
                          const int64_t *shape, const int64_t *strides, uint64_t numel, bool own_op)
{
    if (!strides)
        return rec_capture_tensor(r, t, name, data, numel, own_op);
    void *dense = rec_strided_dense_copy(data, t->dtype, ndim, shape, strides, numel);
    if (!dense)
        return ring_write(g_rec.h, r, &t->h);
    int rc = rec_capture_tensor(r, t, name, dense, numel, own_op);
    free(dense);
    return rc;
}

/* Records one tensor of the current op (or as its own op); statistics of
 * host memory per the recording mode, shape only for a device tensor.
 * strides: NULL for dense row-major data, else per dimension in elements
 * (a host tensor read in place, recorder_strided.c). */
static int record_tensor(const char *name, int dtype, const void *data, int ndim, const int64_t *shape,
                         const int64_t *strides, int device_kind, int device, uint64_t *id_out)
{
    uint64_t numel;
    if (tensor_numel(name, dtype, ndim, shape, &numel) < 0 || (numel && !data))
        return -EINVAL;
    if (strides && (numel == 0 || ndim == 0 || rec_strides_dense(ndim, shape, strides)))
        strides = NULL;
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    bool own_op;
    int64_t seq = tensor_op(r, name, &own_op);
    tft_rec_tensor t;
    memset(&t, 0, sizeof(t));
    int mode = device_kind == TFT_DEV_CPU ? rec_tensor_mode() : TFT_STATS_SHAPE;
    if (mode > TFT_STATS_SHAPE && !strides)
        tft_stats_compute(dtype, data, (size_t)numel, mode, &t.stats);
    else if (mode > TFT_STATS_SHAPE && rec_stats_strided(data, dtype, ndim, shape, strides, numel, mode, &t.stats))
        mode = TFT_STATS_SHAPE; /* no memory for the rare dense copy: shape and dtype only */
    t.stats.numel = numel;
    t.mode = (uint8_t)mode;
    tensor_fill(r, &t, seq, 0, name, dtype, ndim, shape, device_kind, device);
    if (id_out)
        *id_out = t.id;
    if (__builtin_expect(g_rec.capture != NULL, 0) && device_kind == TFT_DEV_CPU)
        return capture_tensor(r, &t, name, data, ndim, shape, strides, numel, own_op);
    return ring_write(g_rec.h, r, &t.h);
}

int tft_tensor(const char *name, tft_dtype dtype, const void *data, int ndim, const int64_t *shape)
{
    if (!rec_on())
        return 0;
    return record_tensor(name, (int)dtype, data, ndim, shape, NULL, TFT_DEV_CPU, -1, NULL);
}

int tft_tensor_strided(const char *name, tft_dtype dtype, const void *data, int ndim, const int64_t *shape,
                       const int64_t *strides)
{
    if (!rec_on())
        return 0;
    if (!strides || ndim < 0 || ndim > TFT_MAX_NDIM)
        return -EINVAL;
    for (int d = 0; d < ndim; d++)
        if (strides[d] < 0)
            return -EINVAL;
    return record_tensor(name, (int)dtype, data, ndim, shape, strides, TFT_DEV_CPU, -1, NULL);
}

/* Zeroes the fields of s that mode does not carry (tft_stats validity). */
static void stats_trim(tft_stats *s, int mode)
{
    if (mode >= TFT_STATS_FULL)
        return;
    if (mode <= TFT_STATS_SHAPE) {
        memset(s, 0, sizeof(*s));
        return;
    }
    s->over_fp16 = s->over_bf16 = s->under_fp16 = 0;
    s->mean = s->std = s->l1 = s->l2 = s->absmax = 0;
}

int tft_tensor_stats(const char *name, tft_dtype dtype, int ndim, const int64_t *shape, const tft_stats *stats,
                     int stats_mode, int device)
{
    if (!rec_on())
        return 0;
    uint64_t numel;
    if (tensor_numel(name, (int)dtype, ndim, shape, &numel) < 0 || !stats || stats_mode < TFT_STATS_SHAPE ||
        stats_mode > TFT_STATS_FULL || device < -1 || device > INT16_MAX)
        return -EINVAL;
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    bool own_op;
    int64_t seq = tensor_op(r, name, &own_op);
    tft_rec_tensor t;
    memset(&t, 0, sizeof(t));
    int mode = rec_tensor_mode();
    t.mode = (uint8_t)(mode < stats_mode ? mode : stats_mode);
    t.stats = *stats;
    stats_trim(&t.stats, t.mode);
    t.stats.numel = numel;
    tensor_fill(r, &t, seq, 0, name, (int)dtype, ndim, shape, device >= 0 ? TFT_DEV_CUDA : TFT_DEV_CPU, device);
    return ring_write(g_rec.h, r, &t.h);
}

uint64_t rec_tensor_named(const char *name, uint64_t name_id, int dtype, uint64_t numel, const tft_stats *st,
                          int mode, uint64_t ts)
{
    shm_ring *r = rec_ring();
    if (!r)
        return 0;
    bool own_op;
    int64_t seq = tensor_op(r, name, &own_op);
    tft_rec_tensor t;
    memset(&t, 0, sizeof(t));
    t.mode = (uint8_t)mode;
    t.stats = *st;
    stats_trim(&t.stats, t.mode);
    t.stats.numel = numel;
    int64_t shape[1] = {(int64_t)numel};
    tensor_fill_named(r, &t, seq, 0, name, name_id, dtype, 1, shape, TFT_DEV_CPU, -1, ts);
    return ring_write(g_rec.h, r, &t.h) == 0 ? t.id : 0;
}

int tft_tensor_dev(const char *name, tft_dtype dtype, const void *dev_ptr, int ndim, const int64_t *shape,
                   int device, void *stream)
{
    if (!rec_on())
        return 0;
    uint64_t numel;
    if (tensor_numel(name, (int)dtype, ndim, shape, &numel) < 0 || (numel && !dev_ptr) || device < 0 ||
        device > INT16_MAX)
        return -EINVAL;
#ifdef TFT_HAVE_CUDA
    if (numel && rec_tensor_mode() > TFT_STATS_SHAPE && devq_have_plugin()) {
        shm_ring *r = rec_ring();
        if (!r)
            return -ENOSPC;
        bool own_op;
        int64_t seq = tensor_op(r, name, &own_op);
        uint64_t id = next_tensor_id();
        rec_tls.last_tensor = id;
        ip_depth++; /* the queue's own allocations are not the program's */
        int e = devq_submit_tensor(name, (int)dtype, dev_ptr, ndim, shape, numel, device, stream, seq, id);
        ip_depth--;
        if (e != -ENODEV)
            return e;
        /* the plugin could not take it: shape only, now */
        tft_rec_tensor t;
        memset(&t, 0, sizeof(t));
        t.stats.numel = numel;
        tensor_fill(r, &t, seq, id, name, (int)dtype, ndim, shape, TFT_DEV_CUDA, device);
        return ring_write(g_rec.h, r, &t.h);
    }
#endif
    (void)stream;
    return record_tensor(name, (int)dtype, dev_ptr, ndim, shape, NULL, TFT_DEV_CUDA, device, NULL);
}

/* Next per-communicator sequence number (lock-free open addressing, insert
 * only: any thread may number a call, so not a tft_u64map). */
static uint64_t comm_next_seq(uint64_t comm)
{
    uint64_t key = comm ? comm : 1;
    for (unsigned i = 0; i < COMM_SLOTS; i++) {
        unsigned s = (unsigned)((key + i) % COMM_SLOTS);
        uint64_t cur = atomic_load(&comms.comm[s]);
        if (cur == 0) {
            uint64_t zero = 0;
            if (atomic_compare_exchange_strong(&comms.comm[s], &zero, key) || zero == key)
                return atomic_fetch_add(&comms.next[s], 1);
            continue;
        }
        if (cur == key)
            return atomic_fetch_add(&comms.next[s], 1);
    }
    return 0;
}

/* The caller's tft_coll_info as this library's version of it: the prefix
 * ci->sz covers (any sz from TFT_COLL_INFO_V1_SZ on: an older caller's
 * smaller struct, or a newer one's larger), the fields beyond it defaulted
 * (tag: none). Nothing past ci->sz is read. Returns out, or NULL for a NULL
 * or too small ci. */
static const tft_coll_info *coll_info_in(const tft_coll_info *ci, tft_coll_info *out)
{
    if (!ci || ci->sz < TFT_COLL_INFO_V1_SZ)
        return NULL;
    *out = TFT_COLL_INFO(.tag = TFT_TAG_NONE);
    memcpy(out, ci, ci->sz < sizeof(*out) ? ci->sz : sizeof(*out));
    out->sz = sizeof(*out);
    return out;
}

/* ci: as coll_info_in made it. */
static void fill_coll(tft_rec_collective *c, const tft_coll_info *ci, uint64_t coll_seq, int64_t seq,
                      uint64_t name_id, uint64_t ts)
{
    memset(c, 0, sizeof(*c));
    rec_hdr_at(&c->h, TFT_REC_COLLECTIVE, sizeof(*c), seq, ts);
    c->comm = ci->comm;
    c->coll_seq = coll_seq;
    c->count = ci->count;
    c->name = name_id;
    c->type = (uint16_t)ci->type;
    c->dtype = (uint8_t)ci->dtype;
    c->redop = (uint8_t)ci->redop;
    c->root = ci->root;
    c->rank = ci->rank;
    c->nranks = ci->nranks;
    bool p2p = ci->type == TFT_COLL_SEND || ci->type == TFT_COLL_RECV;
    c->tag = p2p ? ci->tag : TFT_TAG_NONE;
}

int64_t tft_coll_enter(const tft_coll_info *caller_ci)
{
    if (!rec_on())
        return 0;
    tft_coll_info buf;
    const tft_coll_info *ci = coll_info_in(caller_ci, &buf);
    if (!ci)
        return -EINVAL;
    return rec_coll_enter(ci, ci->name ? ci->name : tft_coll_type_name(ci->type), 0, 0);
}

int64_t rec_coll_enter(const tft_coll_info *ci, const char *name, uint64_t name_id, uint64_t ts)
{
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    uint64_t nid = name_id ? rec_intern_id(r, name, name_id) : rec_intern(r, name);
    uint64_t now = ts ? ts : shm_stamp(g_rec.h);
    if (!rec_tls.in_op) {
        int64_t seq = rec_next_seq();
        emit_op_named(r, name, nid, TFT_OP_COLLECTIVE, 0, NULL, seq, 0, NULL, now);
        rec_tls.in_op = 2; /* implicit op: ends at tft_coll_exit */
        rec_tls.op_seq = seq;
    }
    uint64_t cs = comm_next_seq(ci->comm);
    tft_rec_collective c;
    fill_coll(&c, ci, cs, rec_tls.op_seq, nid, now);
    c.h.flags = TFT_COLL_FLAG_ENTER;
    c.t_enter = c.h.ts;
    rec_explicit_coll = 1;
    tls_cold *cold = rec_cold_state();
    if (cold)
        cold->pending[cold->npending++ % MAX_PENDING_COLL] = (pending_coll){ci->comm, cs, c.t_enter};
    ring_write(g_rec.h, r, &c.h);
    return (int64_t)cs;
}

/* A CLOCK_MONOTONIC time (tft_now_ns) in the units of record stamps (raw
 * TSC ticks when the region uses them; the collector converts back). */
static uint64_t stamp_of_ns(uint64_t ns)
{
    const shm_hdr *h = g_rec.h;
    if (!h || !(h->flags & SHM_TSC) || h->ns_per_tick <= 0)
        return ns;
    double t = (double)h->tsc0 + ((double)ns - (double)h->ns0) / h->ns_per_tick;
    return t > 0 ? (uint64_t)t : 1;
}

int tft_coll_exit(int64_t token, const tft_coll_info *caller_ci, const void *result)
{
    if (!rec_on())
        return 0;
    tft_coll_info buf;
    const tft_coll_info *ci = coll_info_in(caller_ci, &buf);
    if (!ci || token < 0)
        return -EINVAL;
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    uint64_t t_enter = 0;
    for (unsigned i = 0; rec_tls.cold && i < MAX_PENDING_COLL; i++)
        if (rec_tls.cold->pending[i].comm == ci->comm && rec_tls.cold->pending[i].coll_seq == (uint64_t)token)
            t_enter = rec_tls.cold->pending[i].t_enter;
    if (ci->t_enter)
        t_enter = stamp_of_ns(ci->t_enter);
    const char *name = ci->name ? ci->name : tft_coll_type_name(ci->type);
    uint64_t rid = 0;
    if (result && ci->count) {
        int64_t shape[1] = {(int64_t)ci->count};
        record_tensor(name, ci->dtype, result, 1, shape, NULL, TFT_DEV_CPU, -1, &rid);
    }
    tft_rec_collective c;
    fill_coll(&c, ci, (uint64_t)token, rec_tls.in_op ? rec_tls.op_seq : TFT_SEQ_NONE, rec_intern(r, name), 0);
    c.h.flags = TFT_COLL_FLAG_EXIT;
    c.t_enter = t_enter;
    c.t_exit = c.h.ts;
    c.result = rid;
    int e = ring_write(g_rec.h, r, &c.h);
    rec_explicit_coll = 0;
    if (rec_tls.in_op == 2)
        rec_tls.in_op = 0;
    return e;
}
