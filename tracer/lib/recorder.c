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
 * test of g_rec.capture: recorder_capture.c.
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

enum { ST_UNINIT = 0, ST_OFF = 1, ST_ON = 2 };
#define MAX_SCOPE 512
#define MAX_PENDING_COLL 64
#define COMM_SLOTS 4096 /* communicator ids (and their point-to-point spaces) a process numbers */

struct rec_global g_rec = {.step = TFT_STEP_NONE};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

typedef struct pending_coll {
    uint64_t comm, coll_seq, t_enter;
} pending_coll;

/* What a thread needs only once it uses scopes or collectives: mapped at
 * its first use (tls_cold()) and unmapped when the thread ends, so that
 * libtftrace.so's initial-exec thread-local block stays small (about 100
 * bytes in all) and the library can be dlopen()ed into a running program
 * such as Python: glibc keeps only about 1.6 KiB of static TLS for
 * libraries loaded after start. */
typedef struct tls_cold {
    int scope_len, depth;
    int scope_lens[32];
    char scope[MAX_SCOPE];
    pending_coll pending[MAX_PENDING_COLL];
    unsigned npending;
} tls_cold;

/* What every record of a thread needs: thread-local, no allocation. */
typedef struct tls_state {
    shm_ring *ring;
    uint32_t gen;           /* g_rec.gen when the ring was claimed */
    uint32_t thread_index;  /* this thread's number (kept when it claims a ring again) */
    uint32_t has_index;
    int in_op;
    int64_t op_seq;
    uint64_t last_tensor;
    uint64_t scope_id;      /* string id of the scope path, 0 none */
    tls_cold *cold;         /* NULL until the thread's first scope or collective */
} tls_state;

static __thread tls_state tls __attribute__((tls_model("initial-exec")));

/* The thread's cold state, mapped (zeroed) at first use with mmap, which
 * neither allocates through the interposed malloc nor takes a lock; NULL
 * when the mapping fails (scopes and collective enter times are then not
 * recorded for the thread). */
static tls_cold *cold_state(void)
{
    if (__builtin_expect(tls.cold != NULL, 1))
        return tls.cold;
    void *p = mmap(NULL, sizeof(tls_cold), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    tls.cold = p;
    return tls.cold;
}
static pthread_key_t ring_key;

/* 1 between tft_coll_enter and tft_coll_exit on this thread: the program
 * records its collective itself, the MPI interposers (interpose.c) skip it. */
__thread int rec_explicit_coll __attribute__((tls_model("initial-exec")));

static struct {
    _Atomic uint64_t comm[COMM_SLOTS];
    _Atomic uint64_t next[COMM_SLOTS];
} comms;

uint64_t tft_now_ns(void) { return tft_clock_mono_ns(); }

static inline int on(void)
{
    int s = atomic_load_explicit(&g_rec.state, memory_order_acquire);
    if (__builtin_expect(s == ST_ON, 1))
        return 1;
    if (s == ST_UNINIT) {
        pthread_once(&init_once, rec_init);
        return atomic_load_explicit(&g_rec.state, memory_order_acquire) == ST_ON;
    }
    return 0;
}

int tft_enabled(void) { return on(); }

/* Thread exit (runs in the exiting thread): the collector drains the ring
 * and hands it to another thread, so this thread lets go of it. A record
 * made later in its exit (a destructor of a later key, a free) claims a
 * fresh ring, retired in turn. */
static void ring_retire(void *p)
{
    shm_ring *r = p;
    if (r == tls.ring)
        tls.ring = NULL;
    if (tls.cold) { /* a later record of the exit maps a fresh one, unmapped with its ring */
        munmap(tls.cold, sizeof(tls_cold));
        tls.cold = NULL;
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
    if (__builtin_expect(tls.ring != NULL && tls.gen == gen, 1))
        return tls.ring;
    if (!tls.has_index || tls.gen != gen) { /* a forked child numbers its threads afresh */
        tls.thread_index = atomic_fetch_add_explicit(&g_rec.next_thread, 1, memory_order_relaxed);
        tls.has_index = 1;
    }
    char name[17] = "";
    prctl(PR_GET_NAME, name, 0, 0, 0); /* async-signal-safe: a crash handler may get here */
    tls.ring = ring_claim(g_rec.h, g_rec.proc, (int32_t)syscall(SYS_gettid), tls.thread_index, name);
    tls.gen = gen;
    if (tls.ring)
        pthread_setspecific(ring_key, tls.ring);
    return tls.ring;
}

/* rec_hdr with the time stamp ts (0: now): the records one call writes at
 * one moment (a collective's OP and ENTER; its result and EXIT) share one
 * clock read. */
void rec_hdr_at(tft_rec *h, uint16_t kind, uint32_t len, int64_t seq, uint64_t ts)
{
    h->kind = kind;
    h->flags = 0;
    h->len = len;
    h->ts = ts ? ts : shm_stamp(g_rec.h);
    h->step = atomic_load_explicit(&g_rec.step, memory_order_relaxed);
    h->seq = seq;
}

void rec_hdr(tft_rec *h, uint16_t kind, uint32_t len, int64_t seq) { rec_hdr_at(h, kind, len, seq, 0); }

/* Sends the n bytes of s as STRING record id unless this ring's sent-ids
 * table shows it was; returns id. */
static uint64_t intern_as(shm_ring *r, const char *s, size_t n, uint64_t id)
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
    return intern_as(r, s, n, tft_string_id(s, n));
}

uint64_t rec_intern_id(shm_ring *r, const char *s, uint64_t id)
{
    uint64_t *slot = &r->sent_ids[id & (SHM_SENT_IDS - 1)];
    if (__builtin_expect(*slot == id, 1))
        return id;
    return intern_as(r, s, strnlen(s, 1024), id);
}

static int64_t next_seq(void)
{
    return atomic_fetch_add_explicit(&g_rec.seq, 1, memory_order_relaxed);
}

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
    rec_op_body(op, nid, tls.scope_id, kind, n_in, in, n_attr, attrs);
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
    if (!on())
        return 0;
    if (!name)
        return -EINVAL;
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    int64_t seq = next_seq();
    tls.in_op = 1;
    tls.op_seq = seq;
    int e = emit_op_attrs(r, name, op_kind, n_in, in_ids, seq, n_attr, attrs);
    if (__builtin_expect(g_rec.capture != NULL, 0))
        rec_capture_op_begin(r, name, seq, n_in, in_ids);
    return e ? e : seq;
}

int64_t tft_op_begin(const char *name, int op_kind, int n_in, const uint64_t *in_ids)
{
    return rec_op_begin_attrs(name, op_kind, n_in, in_ids, 0, NULL);
}

void tft_op_end(void) { tls.in_op = 0; }

uint64_t tft_last_tensor_id(void) { return tls.last_tensor; }

int64_t rec_current_op(void) { return tls.in_op ? tls.op_seq : TFT_SEQ_NONE; }

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
    *own_op = !tls.in_op;
    if (!*own_op)
        return tls.op_seq;
    int64_t seq = next_seq();
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
    tls.last_tensor = t->id;
}

static void tensor_fill(shm_ring *r, tft_rec_tensor *t, int64_t seq, uint64_t id, const char *name, int dtype,
                        int ndim, const int64_t *shape, int device_kind, int device)
{
    tensor_fill_named(r, t, seq, id, name, 0, dtype, ndim, shape, device_kind, device, 0);
}

/* Records one tensor of the current op (or as its own op); statistics of
 * host memory per the recording mode, shape only for a device tensor. */
static int record_tensor(const char *name, int dtype, const void *data, int ndim, const int64_t *shape,
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
    if (!on())
        return 0;
    return record_tensor(name, (int)dtype, data, ndim, shape, TFT_DEV_CPU, -1, NULL);
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
    if (!on())
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
    if (!on())
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
        tls.last_tensor = id;
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
    return record_tensor(name, (int)dtype, dev_ptr, ndim, shape, TFT_DEV_CUDA, device, NULL);
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
    if (!on())
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
    if (!on())
        return 0;
    drain_device_records();
    return emit_step(step, TFT_STEP_END);
}

void tft_scope_push(const char *name)
{
    tls_cold *c;
    if (!on() || !name || !(c = cold_state()))
        return;
    if (c->depth < 32)
        c->scope_lens[c->depth] = c->scope_len;
    c->depth++;
    int n = snprintf(c->scope + c->scope_len, MAX_SCOPE - (size_t)c->scope_len, "%s%s", c->scope_len ? "/" : "",
                     name);
    if (n > 0)
        c->scope_len = c->scope_len + n < MAX_SCOPE ? c->scope_len + n : MAX_SCOPE - 1;
    shm_ring *r = rec_ring();
    tls.scope_id = r ? rec_intern(r, c->scope) : 0;
}

void tft_scope_pop(void)
{
    tls_cold *c = tls.cold;
    if (!on() || !c || c->depth == 0)
        return;
    c->depth--;
    c->scope_len = c->depth < 32 ? c->scope_lens[c->depth] : c->scope_len;
    c->scope[c->scope_len] = '\0';
    shm_ring *r = rec_ring();
    tls.scope_id = (c->scope_len && r) ? rec_intern(r, c->scope) : 0;
}

static int emit_alloc(const void *ptr, size_t bytes, int dev_kind, int device, const char *site)
{
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    tft_rec_alloc a;
    memset(&a, 0, sizeof(a));
    a.site = rec_intern(r, site ? site : "?");
    rec_hdr(&a.h, TFT_REC_ALLOC, sizeof(a), tls.in_op ? tls.op_seq : TFT_SEQ_NONE);
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
    rec_hdr(&f.h, TFT_REC_FREE, sizeof(f), tls.in_op ? tls.op_seq : TFT_SEQ_NONE);
    f.ptr = (uint64_t)(uintptr_t)ptr;
    f.device_kind = (uint8_t)dev_kind;
    f.device = (int16_t)device;
    return ring_write(g_rec.h, r, &f.h);
}

int tft_alloc(const void *ptr, size_t bytes, const char *site)
{
    return on() ? emit_alloc(ptr, bytes, TFT_DEV_CPU, -1, site) : 0;
}

int tft_free(const void *ptr) { return on() ? emit_free(ptr, TFT_DEV_CPU, -1) : 0; }

int tft_alloc_dev(const void *ptr, size_t bytes, int device, const char *site)
{
    return on() ? emit_alloc(ptr, bytes, TFT_DEV_CUDA, device, site) : 0;
}

int tft_free_dev(const void *ptr, int device) { return on() ? emit_free(ptr, TFT_DEV_CUDA, device) : 0; }

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

/* The same for tft_comm_info (from TFT_COMM_INFO_V1_SZ on). */
static const tft_comm_info *comm_info_in(const tft_comm_info *ci, tft_comm_info *out)
{
    if (!ci || ci->sz < TFT_COMM_INFO_V1_SZ)
        return NULL;
    *out = TFT_COMM_INFO();
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
    if (!on())
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
    if (!tls.in_op) {
        int64_t seq = next_seq();
        emit_op_named(r, name, nid, TFT_OP_COLLECTIVE, 0, NULL, seq, 0, NULL, now);
        tls.in_op = 2; /* implicit op: ends at tft_coll_exit */
        tls.op_seq = seq;
    }
    uint64_t cs = comm_next_seq(ci->comm);
    tft_rec_collective c;
    fill_coll(&c, ci, cs, tls.op_seq, nid, now);
    c.h.flags = TFT_COLL_FLAG_ENTER;
    c.t_enter = c.h.ts;
    rec_explicit_coll = 1;
    tls_cold *cold = cold_state();
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
    if (!on())
        return 0;
    tft_coll_info buf;
    const tft_coll_info *ci = coll_info_in(caller_ci, &buf);
    if (!ci || token < 0)
        return -EINVAL;
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    uint64_t t_enter = 0;
    for (unsigned i = 0; tls.cold && i < MAX_PENDING_COLL; i++)
        if (tls.cold->pending[i].comm == ci->comm && tls.cold->pending[i].coll_seq == (uint64_t)token)
            t_enter = tls.cold->pending[i].t_enter;
    if (ci->t_enter)
        t_enter = stamp_of_ns(ci->t_enter);
    const char *name = ci->name ? ci->name : tft_coll_type_name(ci->type);
    uint64_t rid = 0;
    if (result && ci->count) {
        int64_t shape[1] = {(int64_t)ci->count};
        record_tensor(name, ci->dtype, result, 1, shape, TFT_DEV_CPU, -1, &rid);
    }
    tft_rec_collective c;
    fill_coll(&c, ci, (uint64_t)token, tls.in_op ? tls.op_seq : TFT_SEQ_NONE, rec_intern(r, name), 0);
    c.h.flags = TFT_COLL_FLAG_EXIT;
    c.t_enter = t_enter;
    c.t_exit = c.h.ts;
    c.result = rid;
    int e = ring_write(g_rec.h, r, &c.h);
    rec_explicit_coll = 0;
    if (tls.in_op == 2)
        tls.in_op = 0;
    return e;
}

/* A COMM record (FORMAT.md 5.15). Up to COMM_STACK_MEMBERS members the
 * record is built on the stack; a larger one is allocated (once per
 * communicator, never on a collective's path). */
#define COMM_STACK_MEMBERS 64
int tft_comm_define(const tft_comm_info *caller_ci)
{
    if (!on())
        return 0;
    tft_comm_info buf;
    const tft_comm_info *ci = comm_info_in(caller_ci, &buf);
    if (!ci || !ci->comm || ci->n_members < 0 || (ci->n_members > 0 && !ci->members))
        return -EINVAL;
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    size_t n = ci->n_members <= (int)TFT_COMM_MAX_MEMBERS ? (size_t)ci->n_members : 0;
    uint32_t len = (uint32_t)((sizeof(tft_rec_comm) + 4 * n + 7) & ~(size_t)7);
    _Alignas(8) char small[sizeof(tft_rec_comm) + 4 * COMM_STACK_MEMBERS];
    tft_rec_comm *c = len <= sizeof(small) ? (tft_rec_comm *)small : malloc(len);
    if (!c)
        return -ENOMEM;
    memset(c, 0, len);
    uint64_t name = rec_intern(r, ci->name);
    rec_hdr(&c->h, TFT_REC_COMM, len, TFT_SEQ_NONE);
    _Static_assert(TFT_COMM_INTER == TFT_COMM_FLAG_INTER, "tft.h's flag is the record's");
    c->h.flags = (uint16_t)(ci->flags & TFT_COMM_INTER);
    c->comm = ci->comm;
    c->name = name;
    c->parent = ci->parent;
    c->rank = ci->rank;
    c->size = ci->size;
    c->order = ci->order;
    c->n_members = (uint32_t)n;
    if (n)
        memcpy(c->members, ci->members, 4 * n);
    int e = ring_write(g_rec.h, r, &c->h);
    if ((char *)c != small)
        free(c);
    return e;
}

int tft_checkpoint(int action, int64_t step, const char *path, const char *recipe)
{
    if (!on())
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
    if (!on())
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
 * tft_cuda_plugin.h. The thread's op bracket (tls.in_op) is left alone, so
 * a program's own tft_op_begin ... tft_op_end is never split. */
int64_t tft_x_record(int verb, tft_rec *rec, const char *name)
{
    if (!on() || !rec)
        return 0;
    if (verb == TFT_X_STATE) {
        tft_rec_op *op = (tft_rec_op *)rec;
        op->h.step = atomic_load_explicit(&g_rec.step, memory_order_relaxed);
        op->h.seq = tls.in_op ? tls.op_seq : TFT_SEQ_NONE;
        op->scope = tls.scope_id;
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
        seq = next_seq();
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
