/*
 * compare_stash.c — a side's recording threads and the stash of records
 * that arrived before their step was complete (compare_internal.h;
 * compare_threads.c says why a step of several threads must be gathered).
 * A step is complete when nothing of it can follow in the file: a SYNC
 * watermark above it, the end of the file, ALIGN_STASH_MAX bytes held, or,
 * for a step-less window while one thread alone records ops, that thread
 * past it.
 *
 * The stash is one byte buffer of entries (a stash_hdr, then the record),
 * in file order; taking a step moves the entries kept down in place.
 */
#include "compare_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

align_thread *compare_side_thread(align_side *s, uint32_t key)
{
    for (size_t i = 0; i < s->n_threads; i++)
        if (s->threads[i].key == key)
            return &s->threads[i];
    if (s->n_threads == ALIGN_MAX_THREADS)
        return &s->threads[ALIGN_MAX_THREADS - 1];
    if (!s->threads) {
        s->threads = calloc(ALIGN_MAX_THREADS, sizeof *s->threads);
        if (!s->threads)
            return NULL;
    }
    align_thread *t = &s->threads[s->n_threads++];
    *t = (align_thread){.key = key, .last_step = TFT_STEP_NONE, .last_op = -1};
    return t;
}

typedef struct stash_hdr {
    uint32_t key;
    uint32_t pad;
} stash_hdr;

int compare_stash_push(align_side *s, const tft_rec *rec, uint32_t key)
{
    size_t need = sizeof(stash_hdr) + rec->len;
    if (s->stash_len + need > s->stash_cap) {
        size_t nc = s->stash_cap ? s->stash_cap : 1u << 16;
        while (nc < s->stash_len + need)
            nc *= 2;
        unsigned char *p = realloc(s->stash, nc);
        if (!p)
            return -ENOMEM;
        s->stash = p;
        s->stash_cap = nc;
    }
    stash_hdr h = {key, 0};
    memcpy(s->stash + s->stash_len, &h, sizeof h);
    memcpy(s->stash + s->stash_len + sizeof h, rec, rec->len);
    s->stash_len += need;
    return 0;
}

static const tft_rec *stash_rec(const align_side *s, size_t off)
{
    return (const tft_rec *)(s->stash + off + sizeof(stash_hdr));
}

bool compare_stash_min_step(const align_side *s, int64_t *step)
{
    bool any = false;
    for (size_t off = 0; off < s->stash_len; off += sizeof(stash_hdr) + stash_rec(s, off)->len) {
        int64_t st = stash_rec(s, off)->step;
        if (!any || st < *step)
            *step = st;
        any = true;
    }
    return any;
}

/* A SYNC watermark is the only sound sign that a step is complete: a
 * thread not seen yet (its ring drained later) may still bring records of
 * it, so "every thread seen is past it" is not. SYNC comes with steps;
 * step-less windows (by seq) are complete once the one thread that records
 * ops is past them — with several such threads only at the end or the
 * memory bound (their windows are a limit: docs/TFDIFF.md). Records
 * without steps come only before the first step, so any SYNC closes every
 * window. */
bool compare_side_step_complete(const align_side *s, int64_t step)
{
    if (s->eof || s->stash_len > ALIGN_STASH_MAX)
        return true;
    if (s->sync_step != TFT_STEP_NONE && s->sync_step > step)
        return true;
    if (!CORE_IS_STEPLESS(step) || s->op_threads != 1)
        return false;
    for (size_t i = 0; i < s->n_threads; i++)
        if (s->threads[i].ops)
            return s->threads[i].last_step != TFT_STEP_NONE && s->threads[i].last_step > step;
    return false;
}

int compare_stash_take(align_side *s, int64_t step, int (*take)(void *ctx, const tft_rec *rec, uint32_t key), void *ctx)
{
    size_t keep = 0; /* entries kept are moved down to here, in order */
    int rc = 0;
    for (size_t off = 0; off < s->stash_len;) {
        stash_hdr h;
        memcpy(&h, s->stash + off, sizeof h);
        const tft_rec *rec = stash_rec(s, off);
        size_t n = sizeof h + rec->len;
        if (rec->step <= step) {
            if (rc == 0)
                rc = take(ctx, rec, h.key);
        } else {
            if (keep != off)
                memmove(s->stash + keep, s->stash + off, n);
            keep += n;
        }
        off += n;
    }
    s->stash_len = keep;
    return rc;
}
