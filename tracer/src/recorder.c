/*
 * recorder.c — the tft.h API: lazy initialisation from the environment,
 * per-thread rings, op sequence numbers, tensor statistics, and the process
 * exit / crash records.
 *
 * Modes: TFT_SHM=NAME (set by tftrace: attach to the collector's region),
 * TFT_OUTPUT=DIR without TFT_SHM (an in-process writer thread drains a
 * private region into DIR), or off (every call returns 0 at once).
 * Hot path (a record): a TLS lookup, a clock read, a memcpy into the ring.
 */
#include "collector.h"
#include "recorder_internal.h"
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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { ST_UNINIT = 0, ST_OFF = 1, ST_ON = 2 };
#define MAX_SCOPE 512
#define MAX_PENDING_COLL 64
#define COMM_SLOTS 256

struct rec_global g_rec = {.step = TFT_STEP_NONE};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

typedef struct pending_coll {
    uint64_t comm, coll_seq, t_enter;
} pending_coll;

typedef struct tls_state {
    shm_ring *ring;
    uint32_t gen;           /* g_rec.gen when the ring was claimed */
    int in_op;
    int64_t op_seq;
    uint64_t last_tensor;
    uint64_t scope_id;      /* string id of the scope path, 0 none */
    int scope_len, depth;
    int scope_lens[32];
    char scope[MAX_SCOPE];
    pending_coll pending[MAX_PENDING_COLL];
    unsigned npending;
} tls_state;

static __thread tls_state tls __attribute__((tls_model("initial-exec")));
static pthread_key_t ring_key;

/* 1 between tft_coll_enter and tft_coll_exit on this thread: the program
 * records its collective itself, the MPI interposers (interpose.c) skip it. */
__thread int rec_explicit_coll __attribute__((tls_model("initial-exec")));

static struct {
    _Atomic uint64_t comm[COMM_SLOTS];
    _Atomic uint64_t next[COMM_SLOTS];
} comms;

uint64_t tft_now_ns(void) { return shm_now_ns(); }

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

static void ring_retire(void *p)
{
    shm_ring *r = p;
    if (r && g_rec.h)
        atomic_store_explicit(&r->state, RING_RETIRED, memory_order_release);
}

void rec_thread_key_init(void) { pthread_key_create(&ring_key, ring_retire); }

static shm_ring *my_ring(void)
{
    uint32_t gen = atomic_load_explicit(&g_rec.gen, memory_order_relaxed);
    if (__builtin_expect(tls.ring != NULL && tls.gen == gen, 1))
        return tls.ring;
    tls.ring = ring_claim(g_rec.h, g_rec.proc, (int32_t)syscall(SYS_gettid));
    tls.gen = gen;
    if (tls.ring)
        pthread_setspecific(ring_key, tls.ring);
    return tls.ring;
}

static void rec_hdr(tft_rec *h, uint16_t kind, uint32_t len, int64_t seq)
{
    h->kind = kind;
    h->flags = 0;
    h->len = len;
    h->ts = shm_stamp(g_rec.h);
    h->step = atomic_load_explicit(&g_rec.step, memory_order_relaxed);
    h->seq = seq;
}

/* Sends the text of a string once per ring; returns its id (0 for NULL). */
static uint64_t intern(shm_ring *r, const char *s)
{
    if (!s)
        return 0;
    size_t n = strnlen(s, 1024);
    uint64_t id = tft_string_id(s, n);
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

static int64_t next_seq(void)
{
    return atomic_fetch_add_explicit(&g_rec.seq, 1, memory_order_relaxed);
}

static int emit_op(shm_ring *r, const char *name, int kind, int n_in, const uint64_t *in, int64_t seq)
{
    _Alignas(8) char buf[sizeof(tft_rec_op) + 8 * 64];
    tft_rec_op *op = (tft_rec_op *)buf;
    if (n_in < 0 || n_in > 64)
        n_in = n_in < 0 ? 0 : 64;
    uint64_t nid = intern(r, name);
    rec_hdr(&op->h, TFT_REC_OP, (uint32_t)(sizeof(*op) + 8u * (unsigned)n_in), seq);
    op->name = nid;
    op->scope = tls.scope_id;
    op->op_kind = (uint16_t)kind;
    op->n_in = (uint8_t)n_in;
    op->n_out = 0;
    op->n_attr = 0;
    memset(op->pad, 0, sizeof(op->pad));
    for (int i = 0; i < n_in; i++)
        op->ids[i] = in ? in[i] : 0;
    return ring_write(g_rec.h, r, &op->h);
}

int64_t tft_op_begin(const char *name, int op_kind, int n_in, const uint64_t *in_ids)
{
    if (!on())
        return 0;
    if (!name)
        return -EINVAL;
    shm_ring *r = my_ring();
    if (!r)
        return -ENOSPC;
    int64_t seq = next_seq();
    tls.in_op = 1;
    tls.op_seq = seq;
    int e = emit_op(r, name, op_kind, n_in, in_ids, seq);
    return e ? e : seq;
}

void tft_op_end(void) { tls.in_op = 0; }

uint64_t tft_last_tensor_id(void) { return tls.last_tensor; }

static int tensor_mode(void)
{
    int64_t step = atomic_load_explicit(&g_rec.step, memory_order_relaxed);
    if (g_rec.every > 1 && step != TFT_STEP_NONE && step % g_rec.every != 0)
        return TFT_STATS_SHAPE;
    return g_rec.mode;
}

/* Records one tensor of the current op (or as its own op). */
static int record_tensor(const char *name, int dtype, const void *data, int ndim, const int64_t *shape,
                         int device_kind, int device, uint64_t *id_out)
{
    if (!name || ndim < 0 || ndim > TFT_MAX_NDIM || (ndim && !shape) || tft_dtype_size(dtype) == 0)
        return -EINVAL;
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && numel > UINT64_MAX / (uint64_t)shape[i]))
            return -EINVAL;
        numel *= (uint64_t)shape[i];
    }
    if (numel && !data)
        return -EINVAL;
    shm_ring *r = my_ring();
    if (!r)
        return -ENOSPC;
    int64_t seq = tls.in_op ? tls.op_seq : next_seq();
    if (!tls.in_op)
        emit_op(r, name, TFT_OP_RUNTIME, 0, NULL, seq);
    tft_rec_tensor t;
    memset(&t, 0, sizeof(t));
    int mode = device_kind == TFT_DEV_CPU ? tensor_mode() : TFT_STATS_SHAPE;
    if (mode > TFT_STATS_SHAPE)
        tft_stats_compute(dtype, data, (size_t)numel, mode, &t.stats);
    t.stats.numel = numel;
    t.name = intern(r, name);
    rec_hdr(&t.h, TFT_REC_TENSOR, sizeof(t), seq);
    t.id = atomic_fetch_add_explicit(&g_rec.tensor_id, 1, memory_order_relaxed) + 1;
    t.dtype = (uint8_t)dtype;
    t.device_kind = (uint8_t)device_kind;
    t.device = (int16_t)device;
    t.mode = (uint8_t)mode;
    t.ndim = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++)
        t.shape[i] = shape[i];
    tls.last_tensor = t.id;
    if (id_out)
        *id_out = t.id;
    return ring_write(g_rec.h, r, &t.h);
}

int tft_tensor(const char *name, tft_dtype dtype, const void *data, int ndim, const int64_t *shape)
{
    if (!on())
        return 0;
    return record_tensor(name, (int)dtype, data, ndim, shape, TFT_DEV_CPU, -1, NULL);
}

static int emit_step(int64_t step, uint32_t phase)
{
    shm_ring *r = my_ring();
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

int tft_step_end(int64_t step)
{
    if (!on())
        return 0;
    return emit_step(step, TFT_STEP_END);
}

void tft_scope_push(const char *name)
{
    if (!on() || !name)
        return;
    if (tls.depth < 32)
        tls.scope_lens[tls.depth] = tls.scope_len;
    tls.depth++;
    int n = snprintf(tls.scope + tls.scope_len, MAX_SCOPE - (size_t)tls.scope_len, "%s%s",
                     tls.scope_len ? "/" : "", name);
    if (n > 0)
        tls.scope_len = tls.scope_len + n < MAX_SCOPE ? tls.scope_len + n : MAX_SCOPE - 1;
    shm_ring *r = my_ring();
    tls.scope_id = r ? intern(r, tls.scope) : 0;
}

void tft_scope_pop(void)
{
    if (!on() || tls.depth == 0)
        return;
    tls.depth--;
    tls.scope_len = tls.depth < 32 ? tls.scope_lens[tls.depth] : tls.scope_len;
    tls.scope[tls.scope_len] = '\0';
    shm_ring *r = my_ring();
    tls.scope_id = (tls.scope_len && r) ? intern(r, tls.scope) : 0;
}

static int emit_alloc(const void *ptr, size_t bytes, int dev_kind, int device, const char *site)
{
    shm_ring *r = my_ring();
    if (!r)
        return -ENOSPC;
    tft_rec_alloc a;
    memset(&a, 0, sizeof(a));
    a.site = intern(r, site ? site : "?");
    rec_hdr(&a.h, TFT_REC_ALLOC, sizeof(a), tls.in_op ? tls.op_seq : TFT_SEQ_NONE);
    a.ptr = (uint64_t)(uintptr_t)ptr;
    a.bytes = bytes;
    a.device_kind = (uint8_t)dev_kind;
    a.device = (int16_t)device;
    return ring_write(g_rec.h, r, &a.h);
}

static int emit_free(const void *ptr, int dev_kind, int device)
{
    shm_ring *r = my_ring();
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

/* Next per-communicator sequence number (lock-free open addressing). */
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

static void fill_coll(tft_rec_collective *c, const tft_coll_info *ci, uint64_t coll_seq, int64_t seq,
                      uint64_t name_id)
{
    memset(c, 0, sizeof(*c));
    rec_hdr(&c->h, TFT_REC_COLLECTIVE, sizeof(*c), seq);
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
}

int64_t tft_coll_enter(const tft_coll_info *ci)
{
    if (!on())
        return 0;
    if (!ci || ci->sz < sizeof(tft_coll_info))
        return -EINVAL;
    shm_ring *r = my_ring();
    if (!r)
        return -ENOSPC;
    const char *name = ci->name ? ci->name : tft_coll_type_name(ci->type);
    if (!tls.in_op) {
        int64_t seq = next_seq();
        emit_op(r, name, TFT_OP_COLLECTIVE, 0, NULL, seq);
        tls.in_op = 2; /* implicit op: ends at tft_coll_exit */
        tls.op_seq = seq;
    }
    uint64_t cs = comm_next_seq(ci->comm);
    tft_rec_collective c;
    fill_coll(&c, ci, cs, tls.op_seq, intern(r, name));
    c.h.flags = TFT_COLL_FLAG_ENTER;
    c.t_enter = c.h.ts;
    rec_explicit_coll = 1;
    pending_coll *p = &tls.pending[tls.npending++ % MAX_PENDING_COLL];
    *p = (pending_coll){ci->comm, cs, c.t_enter};
    ring_write(g_rec.h, r, &c.h);
    return (int64_t)cs;
}

int tft_coll_exit(int64_t token, const tft_coll_info *ci, const void *result)
{
    if (!on())
        return 0;
    if (!ci || ci->sz < sizeof(tft_coll_info) || token < 0)
        return -EINVAL;
    shm_ring *r = my_ring();
    if (!r)
        return -ENOSPC;
    uint64_t t_enter = 0;
    for (unsigned i = 0; i < MAX_PENDING_COLL; i++)
        if (tls.pending[i].comm == ci->comm && tls.pending[i].coll_seq == (uint64_t)token)
            t_enter = tls.pending[i].t_enter;
    const char *name = ci->name ? ci->name : tft_coll_type_name(ci->type);
    uint64_t rid = 0;
    if (result && ci->count) {
        int64_t shape[1] = {(int64_t)ci->count};
        record_tensor(name, ci->dtype, result, 1, shape, TFT_DEV_CPU, -1, &rid);
    }
    tft_rec_collective c;
    fill_coll(&c, ci, (uint64_t)token, tls.in_op ? tls.op_seq : TFT_SEQ_NONE, intern(r, name));
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

int tft_checkpoint(int action, int64_t step, const char *path, const char *recipe)
{
    if (!on())
        return 0;
    shm_ring *r = my_ring();
    if (!r)
        return -ENOSPC;
    tft_rec_checkpoint c;
    memset(&c, 0, sizeof(c));
    c.path = intern(r, path ? path : "");
    c.recipe = intern(r, recipe);
    rec_hdr(&c.h, TFT_REC_CHECKPOINT, sizeof(c), TFT_SEQ_NONE);
    c.h.step = step;
    c.action = (uint32_t)action;
    return ring_write(g_rec.h, r, &c.h);
}

int tft_flush(void)
{
    if (!on())
        return 0;
    return rec_inproc_flush(1000);
}

/* Writes the exit (or fatal signal) of this process. Async-signal-safe:
 * only the lock-free ring write. */
void rec_record_exit(int code, int sig)
{
    if (atomic_load(&g_rec.state) != ST_ON || atomic_exchange(&g_rec.exit_recorded, 1))
        return;
    shm_ring *r = my_ring();
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
