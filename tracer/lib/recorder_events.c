/*
 * recorder_events.c — the tft.h records besides ops, tensors and
 * collectives (recorder.c): step boundaries, scopes, host and device
 * allocations, communicators (COMM records), checkpoints and flush. Each
 * is one record built on the stack and written to the calling thread's
 * ring through the helpers of recorder_internal.h. The process's exit:
 * init.c; the records the CUDA plugin completes: recorder_x.c.
 */
#include "recorder_internal.h"
#ifdef TFT_HAVE_CUDA
#include "interpose_cuda_internal.h" /* devq_*: device tensors */
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* A COMM record (FORMAT.md 5.15). Up to COMM_STACK_MEMBERS members the
 * record is built on the stack; a larger one is allocated (once per
 * communicator, never on a collective's path). */
#define COMM_STACK_MEMBERS 64
int tft_comm_define(const tft_comm_info *caller_ci)
{
    if (!rec_on())
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

void tft_tensor_context(unsigned flags)
{
    rec_tls.tensor_flags = flags & TFT_TENSOR_CONTEXT;
}

int tft_exception(const char *type, const char *message, const char *where, const char *frames)
{
    if (!rec_on())
        return 0;
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    tft_rec_exception x;
    memset(&x, 0, sizeof(x));
    x.type = rec_intern(r, type ? type : "");
    x.message = rec_intern(r, message ? message : "");
    x.where = rec_intern(r, where);
    x.frames = rec_intern(r, frames);
    rec_hdr(&x.h, TFT_REC_EXCEPTION, sizeof(x), TFT_SEQ_NONE);
    return ring_write(g_rec.h, r, &x.h);
}

int tft_flush(void)
{
    if (!rec_on())
        return 0;
    drain_device_records();
    return rec_inproc_flush(1000);
}
