/*
 * recorder.c — the tft.h API: lazy initialisation from the environment,
 * per-thread rings, op sequence numbers, tensor statistics, and the process
 * exit / crash records.
 *
 * Modes: TFT_SHM=NAME (set by tftrace: attach to the collector's region),
 * TFT_OUTPUT=DIR without TFT_SHM (an in-process writer thread drains a
 * private region into DIR), or off (every call returns 0 at once).
 * Hot path (a record): a TLS lookup, a clock read, a memcpy into the ring.
 * Capture (TFT_CAPTURE, docs/CAPTURE.md) is a separate slow path behind one
 * test of g_rec.capture: recorder_capture.c. Collectives and communicators
 * (tft_coll_enter/exit, tft_comm_define): recorder_coll.c.
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

struct rec_global g_rec = {.step = TFT_STEP_NONE};

pthread_once_t rec_init_once = PTHREAD_ONCE_INIT;

__thread tls_state rec_tls __attribute__((tls_model("initial-exec")));

static pthread_key_t ring_key;

/* 1 between tft_coll_enter and tft_coll_exit on this thread: the program
 * records its collective itself, the MPI interposers (interpose.c) skip it. */
__thread int rec_explicit_coll __attribute__((tls_model("initial-exec")));

uint64_t tft_now_ns(void) { return tft_clock_mono_ns(); }

int tft_enabled(void) { return rec_on(); }

/* Thread exit (runs in the exiting thread): the collector drains the ring
 * and hands it to another thread, so this thread lets go of it. A record
 * made later in its exit (a destructor of a later key, a free) claims a
 * fresh ring, retired in turn. */
static void ring_retire(void *p)
{
    shm_ring *r = p;
    if (r == rec_tls.ring)
        rec_tls.ring = NULL;
    if (rec_tls.cold) { /* a later record of the exit maps a fresh one, unmapped with its ring */
        munmap(rec_tls.cold, sizeof(tls_cold));
        rec_tls.cold = NULL;
    }
    if (r && g_rec.h)
        atomic_store_explicit(&r->state, RING_RETIRED, memory_order_release);
}

void rec_thread_key_init(void)
{
    pthread_key_create(&ring_key, ring_retire);
    rec_capture_key_init();
}

shm_ring *rec_ring(void)
{
    uint32_t gen = atomic_load_explicit(&g_rec.gen, memory_order_relaxed);
    if (__builtin_expect(rec_tls.ring != NULL && rec_tls.gen == gen, 1))
        return rec_tls.ring;
    if (!rec_tls.has_index || rec_tls.gen != gen) { /* a forked child numbers its threads afresh */
        rec_tls.thread_index = atomic_fetch_add_explicit(&g_rec.next_thread, 1, memory_order_relaxed);
        rec_tls.has_index = 1;
    }
    char name[17] = "";
    prctl(PR_GET_NAME, name, 0, 0, 0); /* async-signal-safe: a crash handler may get here */
    rec_tls.ring = ring_claim(g_rec.h, g_rec.proc, (int32_t)syscall(SYS_gettid), rec_tls.thread_index, name);
    rec_tls.gen = gen;
    if (rec_tls.ring)
        pthread_setspecific(ring_key, rec_tls.ring);
    return rec_tls.ring;
}

/* Sends the n bytes of s as STRING record id unless this ring's sent-ids
 * table shows it was; returns id. */
uint64_t rec_intern_as(shm_ring *r, const char *s, size_t n, uint64_t id)
{
    uint64_t *slot = &r->sent_ids[id & (SHM_SENT_IDS - 1)];
    if (*slot == id)
        return id;
    _Alignas(8) char buf[sizeof(tft_rec_string) + 1032];
    tft_rec_string *rs = (tft_rec_string *)buf;
    uint32_t len = (uint32_t)((sizeof(*rs) + n + 7) & ~(size_t)7);
    memset(buf + len - 8, 0, 8);
    rec_hdr(&rs->h, TFT_REC_STRING, len, TFT_SEQ_NONE);
    rs->id = id;
    rs->n = (uint32_t)n;
    rs->pad = 0;
    memcpy(rs->text, s, n);
    if (ring_write(g_rec.h, r, &rs->h) == 0)
        *slot = id;
    return id;
}

/* Not inlined: inlined into tft_scope_push, GCC takes the 1024 bound on its
 * 512-byte buffer for an overread (-Wstringop-overread). */
__attribute__((noinline)) uint64_t rec_intern(shm_ring *r, const char *s)
{
    if (!s)
        return 0;
    size_t n = strnlen(s, 1024);
    return rec_intern_as(r, s, n, tft_string_id(s, n));
}

#define MAX_OP_ATTRS 16

/* An OP record; name_id: name's string id, interned already (0: intern it). */
int rec_emit_op_named(shm_ring *r, const char *name, uint64_t name_id, int kind, int n_in, const uint64_t *in,
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
    return rec_emit_op_named(r, name, 0, kind, n_in, in, seq, n_attr, attrs, 0);
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

int64_t rec_current_op(void) { return rec_tls.in_op ? rec_tls.op_seq : TFT_SEQ_NONE; }

static int tensor_mode(void)
{
    int64_t step = atomic_load_explicit(&g_rec.step, memory_order_relaxed);
    if (g_rec.every > 1 && step != TFT_STEP_NONE && step % g_rec.every != 0)
        return TFT_STATS_SHAPE;
    return g_rec.mode;
}

int rec_tensor_mode(void) { return tensor_mode(); }

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

/* Records one tensor of the current op (or as its own op); statistics of
 * host memory per the recording mode, shape only for a device tensor. */
int rec_record_tensor(const char *name, int dtype, const void *data, int ndim, const int64_t *shape,
                      int device_kind, int device, uint64_t *id_out)
{
    uint64_t numel;
    if (tensor_numel(name, dtype, ndim, shape, &numel) < 0 || (numel && !data))
        return -EINVAL;
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    bool own_op;
    int64_t seq = tensor_op(r, name, &own_op);
    tft_rec_tensor t;
    memset(&t, 0, sizeof(t));
    int mode = device_kind == TFT_DEV_CPU ? tensor_mode() : TFT_STATS_SHAPE;
    if (mode > TFT_STATS_SHAPE)
        tft_stats_compute(dtype, data, (size_t)numel, mode, &t.stats);
    t.stats.numel = numel;
    t.mode = (uint8_t)mode;
    tensor_fill(r, &t, seq, 0, name, dtype, ndim, shape, device_kind, device);
    if (id_out)
        *id_out = t.id;
    if (__builtin_expect(g_rec.capture != NULL, 0) && device_kind == TFT_DEV_CPU)
        return rec_capture_tensor(r, &t, name, data, numel, own_op);
    return ring_write(g_rec.h, r, &t.h);
}

int tft_tensor(const char *name, tft_dtype dtype, const void *data, int ndim, const int64_t *shape)
{
    if (!rec_on())
        return 0;
    return rec_record_tensor(name, (int)dtype, data, ndim, shape, TFT_DEV_CPU, -1, NULL);
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
    int mode = tensor_mode();
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
    if (numel && tensor_mode() > TFT_STATS_SHAPE && devq_have_plugin()) {
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
    return rec_record_tensor(name, (int)dtype, dev_ptr, ndim, shape, TFT_DEV_CUDA, device, NULL);
}

static int emit_step(int64_t step, uint32_t phase)
{
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    tft_rec_step s;
    rec_hdr(&s.h, TFT_REC_STEP, sizeof(s), TFT_SEQ_NONE);
    s.h.step = step;
    s.phase = phase;
    s.pad = 0;
    return ring_write(g_rec.h, r, &s.h);
}

int tft_step_begin(int64_t step)
{
    if (!rec_on())
        return 0;
    atomic_store_explicit(&g_rec.step, step, memory_order_relaxed);
    return emit_step(step, TFT_STEP_BEGIN);
}

/* Device tensors still waiting for their statistics (tft_tensor_dev) are
 * written first, so that a step's records precede its end. */
static void drain_device_records(void)
{
#ifdef TFT_HAVE_CUDA
    ip_depth++;
    devq_drain(1);
    ip_depth--;
#endif
}

int tft_step_end(int64_t step)
{
    if (!rec_on())
        return 0;
    drain_device_records();
    return emit_step(step, TFT_STEP_END);
}

void tft_scope_push(const char *name)
{
    tls_cold *c;
    if (!rec_on() || !name || !(c = rec_cold_state()))
        return;
    if (c->depth < 32)
        c->scope_lens[c->depth] = c->scope_len;
    c->depth++;
    int n = snprintf(c->scope + c->scope_len, MAX_SCOPE - (size_t)c->scope_len, "%s%s", c->scope_len ? "/" : "",
                     name);
    if (n > 0)
        c->scope_len = c->scope_len + n < MAX_SCOPE ? c->scope_len + n : MAX_SCOPE - 1;
    shm_ring *r = rec_ring();
    rec_tls.scope_id = r ? rec_intern(r, c->scope) : 0;
}

void tft_scope_pop(void)
{
    tls_cold *c = rec_tls.cold;
    if (!rec_on() || !c || c->depth == 0)
        return;
    c->depth--;
    c->scope_len = c->depth < 32 ? c->scope_lens[c->depth] : c->scope_len;
    c->scope[c->scope_len] = '\0';
    shm_ring *r = rec_ring();
    rec_tls.scope_id = (c->scope_len && r) ? rec_intern(r, c->scope) : 0;
}

static int emit_alloc(const void *ptr, size_t bytes, int dev_kind, int device, const char *site)
{
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    tft_rec_alloc a;
    memset(&a, 0, sizeof(a));
    a.site = rec_intern(r, site ? site : "?");
    rec_hdr(&a.h, TFT_REC_ALLOC, sizeof(a), rec_tls.in_op ? rec_tls.op_seq : TFT_SEQ_NONE);
    a.ptr = (uint64_t)(uintptr_t)ptr;
    a.bytes = bytes;
    a.device_kind = (uint8_t)dev_kind;
    a.device = (int16_t)device;
    return ring_write(g_rec.h, r, &a.h);
}

static int emit_free(const void *ptr, int dev_kind, int device)
{
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    tft_rec_free f;
    memset(&f, 0, sizeof(f));
    rec_hdr(&f.h, TFT_REC_FREE, sizeof(f), rec_tls.in_op ? rec_tls.op_seq : TFT_SEQ_NONE);
    f.ptr = (uint64_t)(uintptr_t)ptr;
    f.device_kind = (uint8_t)dev_kind;
    f.device = (int16_t)device;
    return ring_write(g_rec.h, r, &f.h);
}

int tft_alloc(const void *ptr, size_t bytes, const char *site)
{
    return rec_on() ? emit_alloc(ptr, bytes, TFT_DEV_CPU, -1, site) : 0;
}

int tft_free(const void *ptr) { return rec_on() ? emit_free(ptr, TFT_DEV_CPU, -1) : 0; }

int tft_alloc_dev(const void *ptr, size_t bytes, int device, const char *site)
{
    return rec_on() ? emit_alloc(ptr, bytes, TFT_DEV_CUDA, device, site) : 0;
}

int tft_free_dev(const void *ptr, int device) { return rec_on() ? emit_free(ptr, TFT_DEV_CUDA, device) : 0; }

int tft_checkpoint(int action, int64_t step, const char *path, const char *recipe)
{
    if (!rec_on())
        return 0;
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    tft_rec_checkpoint c;
    memset(&c, 0, sizeof(c));
    c.path = rec_intern(r, path ? path : "");
    c.recipe = rec_intern(r, recipe);
    rec_hdr(&c.h, TFT_REC_CHECKPOINT, sizeof(c), TFT_SEQ_NONE);
    c.h.step = step;
    c.action = (uint32_t)action;
    return ring_write(g_rec.h, r, &c.h);
}

int tft_flush(void)
{
    if (!rec_on())
        return 0;
    drain_device_records();
    return rec_inproc_flush(1000);
}

/* Writes the exit (or fatal signal) of this process. Async-signal-safe:
 * only the lock-free ring write. */
void rec_record_exit(int code, int sig)
{
    if (atomic_load(&g_rec.state) != ST_ON || atomic_exchange(&g_rec.exit_recorded, 1))
        return;
    shm_ring *r = rec_ring();
    if (!r)
        return;
    tft_rec_process p;
    memset(&p, 0, sizeof(p));
    rec_hdr(&p.h, TFT_REC_PROCESS, sizeof(p), TFT_SEQ_NONE);
    p.event = TFT_PROC_EXIT;
    p.pid = (int32_t)getpid();
    p.exit_code = code;
    p.signal = sig;
    ring_write(g_rec.h, r, &p.h);
}

/* ---- the CUDA side (interpose_cuda.c, the libtftrace-cuda plugin) -------- */

/* Included here, at its one user, so that this section stays one block. */
#include "tft_cuda_plugin.h"

/* Records whose contents arrive after their call (device statistics copied
 * back, CUPTI activity) or on another thread: the contract is in
 * tft_cuda_plugin.h. The thread's op bracket (rec_tls.in_op) is left alone, so
 * a program's own tft_op_begin ... tft_op_end is never split. */
int64_t tft_x_record(int verb, tft_rec *rec, const char *name)
{
    if (!rec_on() || !rec)
        return 0;
    if (verb == TFT_X_STATE) {
        tft_rec_op *op = (tft_rec_op *)rec;
        op->h.step = atomic_load_explicit(&g_rec.step, memory_order_relaxed);
        op->h.seq = rec_tls.in_op ? rec_tls.op_seq : TFT_SEQ_NONE;
        op->scope = rec_tls.scope_id;
        return tensor_mode();
    }
    if (verb != TFT_X_EMIT ||
        (rec->kind != TFT_REC_OP && rec->kind != TFT_REC_TENSOR && rec->kind != TFT_REC_KERNEL))
        return -EINVAL;
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    int64_t step = rec->step, seq = rec->seq;
    if (rec->kind == TFT_REC_OP && seq == TFT_X_SEQ_NEW)
        seq = rec_next_seq();
    uint64_t nid = name ? rec_intern(r, name) : 0;
    rec_hdr(rec, rec->kind, rec->len, seq);
    rec->step = step;
    if (rec->kind == TFT_REC_OP && name) {
        ((tft_rec_op *)rec)->name = nid;
    } else if (rec->kind == TFT_REC_TENSOR) {
        tft_rec_tensor *t = (tft_rec_tensor *)rec;
        if (!t->id)
            t->id = atomic_fetch_add_explicit(&g_rec.tensor_id, 1, memory_order_relaxed) + 1;
        if (name)
            t->name = nid;
    } else if (rec->kind == TFT_REC_KERNEL && name) {
        ((tft_rec_kernel *)rec)->name = nid;
    }
    return ring_write(g_rec.h, r, rec);
}
