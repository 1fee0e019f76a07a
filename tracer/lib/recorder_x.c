/*
 * recorder_x.c — tft_x_record, the recorder's entry for records built
 * outside it (tft_cuda_plugin.h): by the CUDA plugin (libtftrace-cuda.so:
 * CUPTI activity, device statistics), the device record queue (devq.c)
 * and the interposers' fast path (recorder_fast.c), which also read the
 * calling thread's state through it. Below all three: it needs only the
 * thread's ring and strings (recorder_state.c) and whether recording is on
 * (init.c).
 */
#include "recorder_internal.h"
#include "tft_cuda_plugin.h"

#include <errno.h>

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
        op->h.flags = (uint16_t)rec_tls.tensor_flags; /* for the tensors of the call */
        return rec_tensor_mode();
    }
    if (verb != TFT_X_EMIT ||
        (rec->kind != TFT_REC_OP && rec->kind != TFT_REC_TENSOR && rec->kind != TFT_REC_KERNEL))
        return -EINVAL;
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    int64_t step = rec->step, seq = rec->seq;
    uint16_t flags = rec->kind == TFT_REC_TENSOR ? rec->flags : 0; /* its context (devq.c) */
    if (rec->kind == TFT_REC_OP && seq == TFT_X_SEQ_NEW)
        seq = rec_next_seq();
    uint64_t nid = name ? rec_intern(r, name) : 0;
    rec_hdr(rec, rec->kind, rec->len, seq);
    rec->step = step;
    rec->flags = flags;
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
