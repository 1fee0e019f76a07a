/*
 * devq.c — the device-statistics queue (interpose_cuda_internal.h) and the
 * CUDA plugin's registration (tft_cuda_plugin.h: libtftrace-cuda.so,
 * loaded by the CUDA driver through CUDA_INJECTION64_PATH, hands us its
 * table, whose statistics the queue launches and polls). Used by the
 * recorder (tft_tensor_dev, and the drain before a step's end and at a
 * flush) and by the CUDA interposers (cuBLAS, cuBLASLt, NCCL, the NVTX
 * step ranges); writes its records through tft_x_record (recorder_x.c).
 * Built with the CUDA toolkit's headers (TFT_HAVE_CUDA); linked with no
 * CUDA library.
 */
#include "interpose_cuda_internal.h"
#include "tft_stats.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the plugin ------------------------------------------------------------ */

static const tft_cuda_plugin *_Atomic plugin;

void tft_x_cuda_register(const tft_cuda_plugin *p)
{
    if (p && p->sz < sizeof(tft_cuda_plugin))
        return;
    atomic_store_explicit(&plugin, p, memory_order_release);
}

int devq_have_plugin(void) { return atomic_load_explicit(&plugin, memory_order_acquire) != NULL; }

/* One line on stderr, once per process (the issue asks for it; the traced
 * program's stdout is never touched). */
static void say_once(_Atomic int *said, const char *msg)
{
    if (atomic_exchange(said, 1))
        return;
    ssize_t w = write(2, msg, strlen(msg));
    (void)w;
}

void devq_note_no_plugin(void)
{
    static _Atomic int said;
    say_once(&said, "tftrace: CUDA plugin not loaded (no CUDA device or driver, or CUDA_INJECTION64_PATH "
                    "set to another tool): cuBLAS/NCCL calls are recorded without device statistics\n");
}

/* ---- the device-statistics queue -------------------------------------------- */

#define DEVQ_CAP 1024

typedef struct devq_item {
    devq_call c;
    int64_t step;     /* of the call */
    uint16_t flags;   /* the call's tensor context (TFT_TENSOR_CONTEXT) */
    uint64_t scope;   /* of the calling thread at the call */
    int mode[DEVQ_MAX_T];
    int device[DEVQ_MAX_T];
    int64_t handle[DEVQ_MAX_T]; /* plugin handle, -1 none (shape only, or done) */
    tft_stats stats[DEVQ_MAX_T];
} devq_item;

static struct {
    pthread_mutex_t mu;
    unsigned head, n;
    devq_item items[DEVQ_CAP];
} q = {.mu = PTHREAD_MUTEX_INITIALIZER};

static _Atomic int exit_hook;

/* The thread inside an open NVTX step range (the address of its own
 * `me`), 0 when no step is open. While a step is open only that thread
 * writes queued items, so that a step's GEMM records come out of one
 * thread's ring, in call order, before its STEP END — whichever thread made
 * the calls (PyTorch runs backward on a thread of its own). */
static _Atomic uintptr_t step_owner;
static __thread char me __attribute__((tls_model("initial-exec")));

static int may_write(void)
{
    uintptr_t o = atomic_load_explicit(&step_owner, memory_order_relaxed);
    return !o || o == (uintptr_t)&me || q.n > DEVQ_CAP * 3 / 4;
}

static uint64_t numel_of(const devq_tensor *t)
{
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i] > 0 ? (uint64_t)t->shape[i] : 0;
    return n;
}

static void emit_tensor(const devq_item *it, int i, int64_t seq, uint64_t *id_out)
{
    const devq_tensor *t = &it->c.t[i];
    tft_rec_tensor r;
    memset(&r, 0, sizeof(r));
    r.h.kind = TFT_REC_TENSOR;
    r.h.len = sizeof(r);
    r.h.step = it->step;
    r.h.flags = it->flags;
    r.h.seq = seq;
    r.dtype = (uint8_t)(t->dtype >= 0 ? t->dtype : TFT_U8);
    r.device_kind = TFT_DEV_CUDA;
    r.device = (int16_t)it->device[i];
    r.mode = (uint8_t)it->mode[i];
    r.ndim = (uint8_t)t->ndim;
    for (int d = 0; d < t->ndim; d++)
        r.shape[d] = t->shape[d];
    if (it->mode[i] > TFT_STATS_SHAPE)
        r.stats = it->stats[i];
    r.stats.numel = numel_of(t);
    r.id = t->id;
    *id_out = tft_x_record(TFT_X_EMIT, &r.h, t->name) == 0 ? r.id : 0;
}

/* An OP record with n_in inputs and n_attr attributes; returns its seq. */
static int64_t emit_op(const devq_item *it, const char *name, int kind, int n_in, const uint64_t *in, int n_attr,
                       const int64_t *attr)
{
    _Alignas(8) char buf[sizeof(tft_rec_op) + 8 * (DEVQ_MAX_T + 12)];
    tft_rec_op *op = (tft_rec_op *)buf;
    memset(buf, 0, sizeof(buf));
    op->h.kind = TFT_REC_OP;
    op->h.len = (uint32_t)(sizeof(*op) + 8u * (unsigned)(n_in + n_attr));
    op->h.step = it->step;
    op->h.seq = TFT_X_SEQ_NEW;
    op->scope = it->scope;
    op->op_kind = (uint16_t)kind;
    op->n_in = (uint8_t)n_in;
    op->n_attr = (uint8_t)n_attr;
    for (int i = 0; i < n_in; i++)
        op->ids[i] = in[i];
    if (n_attr)
        memcpy(&op->ids[n_in], attr, 8u * (unsigned)n_attr);
    return tft_x_record(TFT_X_EMIT, &op->h, name) == 0 ? op->h.seq : TFT_SEQ_NONE;
}

static void emit_item(const devq_item *it)
{
    const devq_call *c = &it->c;
    if (c->kind == DEVQ_RESULT) {
        uint64_t id;
        emit_tensor(it, 0, c->seq, &id);
        return;
    }
    uint64_t in[DEVQ_MAX_T] = {0};
    int n_in = c->nt - 1;
    for (int i = 0; i < n_in; i++) {
        int64_t s = emit_op(it, c->t[i].name, TFT_OP_RUNTIME, 0, NULL, 0, NULL);
        emit_tensor(it, i, s, &in[i]);
    }
    int64_t s = emit_op(it, c->op_name, c->op_kind, n_in, in, c->n_attr, c->attr);
    uint64_t id;
    emit_tensor(it, c->nt - 1, s, &id);
}

/* Writes item it and lets go of what it owns. */
static void emit_release(devq_item *it)
{
    emit_item(it);
    for (int i = 0; i < it->c.nt; i++) {
        free(it->c.t[i].owned);
        it->c.t[i].owned = NULL;
    }
}

/* 1 when every tensor of it has its statistics (or will get none). */
static int item_ready(devq_item *it, const tft_cuda_plugin *p)
{
    int ready = 1;
    for (int i = 0; i < it->c.nt; i++) {
        if (it->handle[i] < 0)
            continue;
        int rc = p ? p->stats_poll(it->handle[i], &it->stats[i]) : -ENODEV;
        if (rc == 0) {
            ready = 0;
            break; /* FIFO: later handles are not polled before this one */
        }
        it->handle[i] = -1;
        if (rc < 0)
            it->mode[i] = TFT_STATS_SHAPE;
    }
    return ready;
}

static long wait_limit_ms(void)
{
    static long lim = -1;
    if (lim < 0) {
        const char *v = getenv("TFT_CUDA_WAIT_MS");
        char *end;
        long x = v && *v ? strtol(v, &end, 10) : -1;
        lim = (x >= 0 && v && !*end) ? x : 10000;
    }
    return lim;
}

/* Writes the ready items at the head. With wait, sleeps between polls until
 * the queue is empty or the wait limit passed. Called with q.mu held; the
 * lock is released while sleeping. */
static void drain_locked(int wait)
{
    const tft_cuda_plugin *p = atomic_load_explicit(&plugin, memory_order_acquire);
    long waited_us = 0, limit_us = wait ? wait_limit_ms() * 1000 : 0;
    while (q.n) {
        devq_item *it = &q.items[q.head];
        if (!item_ready(it, p)) {
            if (waited_us >= limit_us)
                return;
            pthread_mutex_unlock(&q.mu);
            nanosleep(&(struct timespec){0, 50000}, NULL);
            waited_us += 50;
            pthread_mutex_lock(&q.mu);
            continue;
        }
        emit_release(it);
        q.head = (q.head + 1) % DEVQ_CAP;
        q.n--;
    }
}

void devq_drain(int wait)
{
    if (!atomic_load_explicit(&exit_hook, memory_order_relaxed))
        return; /* nothing was ever queued */
    int saved = errno;
    pthread_mutex_lock(&q.mu);
    if (wait || may_write())
        drain_locked(wait);
    pthread_mutex_unlock(&q.mu);
    errno = saved;
}

static void drain_at_exit(void)
{
    ip_depth++;
    devq_drain(1);
    ip_depth--;
}

void cuda_step_boundary(int begin)
{
    devq_drain(1);
    atomic_store_explicit(&step_owner, begin ? (uintptr_t)&me : 0, memory_order_relaxed);
    const tft_cuda_plugin *p = atomic_load_explicit(&plugin, memory_order_acquire);
    if (p && p->activity_flush)
        p->activity_flush();
}

void devq_submit(const devq_call *c, void *stream, int device)
{
    int saved = errno;
    _Alignas(8) char sbuf[sizeof(tft_rec_op)];
    tft_rec_op *st = (tft_rec_op *)sbuf;
    memset(sbuf, 0, sizeof(sbuf));
    int mode = (int)tft_x_record(TFT_X_STATE, &st->h, NULL);
    const tft_cuda_plugin *p = atomic_load_explicit(&plugin, memory_order_acquire);
    if (!p && mode > TFT_STATS_SHAPE)
        devq_note_no_plugin();

    pthread_mutex_lock(&q.mu);
    if (q.n == DEVQ_CAP)
        drain_locked(1);
    devq_item *it = q.n < DEVQ_CAP ? &q.items[(q.head + q.n) % DEVQ_CAP] : NULL;
    devq_item spill; /* the queue stayed full past the wait limit: shapes only, now */
    if (!it)
        it = &spill;
    memset(it, 0, sizeof(*it));
    it->c = *c;
    it->step = st->h.step;
    it->flags = st->h.flags;
    it->scope = st->scope;
    int pending = 0;
    for (int i = 0; i < c->nt; i++) {
        const devq_tensor *t = &c->t[i];
        it->handle[i] = -1;
        it->device[i] = -1;
        it->mode[i] = TFT_STATS_SHAPE;
        if (!p || it == &spill || mode <= TFT_STATS_SHAPE || !t->mem.ptr || t->dtype < 0)
            continue;
        int64_t h = p->stats_launch(&t->mem, mode, stream, &it->device[i]);
        if (device >= 0)
            it->device[i] = device;
        if (h >= 0) {
            it->handle[i] = h;
            it->mode[i] = mode;
            pending = 1;
        }
    }
    if (it == &spill || (q.n == 0 && !pending && may_write())) {
        emit_release(it);
    } else {
        q.n++;
        if (may_write())
            drain_locked(0);
    }
    pthread_mutex_unlock(&q.mu);
    /* After the first launch: the plugin's cudart registers its exit
     * handler then, and ours, registered later, runs before it. */
    if (!atomic_exchange(&exit_hook, 1))
        atexit(drain_at_exit);
    errno = saved;
}

int devq_submit_tensor(const char *name, int dtype, const void *ptr, int ndim, const int64_t *shape,
                       uint64_t numel, int device, void *stream, int64_t seq, uint64_t id)
{
    if (!devq_have_plugin() || ndim > TFT_MAX_NDIM)
        return -ENODEV;
    devq_call c;
    memset(&c, 0, sizeof(c));
    c.kind = DEVQ_RESULT;
    c.seq = seq;
    c.nt = 1;
    devq_tensor *t = &c.t[0];
    t->owned = strdup(name);
    if (!t->owned)
        return -ENODEV;
    t->name = t->owned;
    t->id = id;
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    t->mem = (tft_cuda_tensor){.ptr = ptr, .dtype = dtype, .rows = numel, .cols = 1, .ld = numel, .batch = 1,
                               .stride = 0};
    devq_submit(&c, stream, device);
    return 0;
}
