/*
 * recorder_fast_internal.h — the interposers' record path
 * (recorder_fast.c): ops and tensors written with string ids cached per
 * call site, one clock read per op and its tensor, statistics of inputs
 * reused while their bytes are unchanged. The records, their order and
 * their contents are what tft_op_begin/tft_tensor write (recorder.c); only
 * the time stamps differ by the nanoseconds saved.
 *
 * Not for a capture: while one is armed (g_rec.capture) rec_fast_begin
 * refuses and the caller takes recorder.c's path, whose op bracket the
 * capture needs.
 */
#ifndef TFT_RECORDER_FAST_INTERNAL_H
#define TFT_RECORDER_FAST_INTERNAL_H

#include "shm_internal.h"
#include "tft.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* A name an interposer writes at one place of its code, with its string id
 * computed at the first use (FORMAT.md: XXH3-64 of the text, the same in
 * every process). Static storage, one per call site. */
typedef struct rec_site_name {
    const char *text;
    _Atomic uint64_t id; /* 0 until the first use */
} rec_site_name;
#define REC_SITE_NAME(s) {(s), 0}

/* What one interposed call records with: the thread's ring, its scope path
 * id, the statistics mode a tensor recorded now gets. Valid for one call
 * on the thread that began it. */
typedef struct rec_fast {
    shm_ring *ring;
    uint64_t scope;
    int mode; /* enum tft_stats_mode */
} rec_fast;

/* 0 and *f set when this thread is to record now through this path;
 * -1 when not: recording off, a capture armed (use tft.h), no ring free. */
int rec_fast_begin(rec_fast *f);

/* n's string id; its STRING record is sent first when this ring has not
 * carried it yet (as recorder_state.c's rec_intern does). */
uint64_t rec_fast_name(const rec_fast *f, rec_site_name *n);

/* A record time stamp (the units of rec_hdr's: TSC ticks or ns). */
uint64_t rec_fast_stamp(void);

/* An OP record named name (a rec_fast_name id), stamped ts, with n_in
 * input tensor ids (<= 64) and n_attr attributes (<= 16); *seq gets its
 * sequence number. Returns 0, or -ENOSPC when the ring had no room
 * (dropped and counted; the seq is used up, as in tft_op_begin). */
int rec_fast_op(const rec_fast *f, uint64_t name, int op_kind, int n_in, const uint64_t *in, int n_attr,
                const int64_t *attrs, uint64_t ts, int64_t *seq);

/* A host TENSOR record of op seq: dtype, shape (ndim <= TFT_MAX_NDIM, the
 * caller checked it), statistics *st of mode (st NULL or mode shape: numel
 * only). Returns the tensor's id, 0 when the ring had no room (the id is
 * used up, as in tft_tensor). */
uint64_t rec_fast_tensor(const rec_fast *f, int64_t seq, uint64_t name, int dtype, int ndim,
                         const int64_t *shape, int mode, const tft_stats *st, uint64_t ts);

/* Statistics (mode > shape) of numel elements of dtype at data, exactly
 * what tft_stats_compute gives. key: the address the caller's buffer has
 * (data itself, or the original of a packed copy), NULL for no memo. With
 * a key, the last statistics computed for the same key, dtype, numel and
 * mode are reused when the bytes hash to their fingerprint (an XXH3-64 pass
 * instead of the statistics; equal XXH3-64 = identical bytes, FORMAT.md
 * 5.4); a key whose bytes change every time stops being hashed after one
 * miss, until a computed fingerprint shows a repeat. Per thread: no lock;
 * the memo is mapped at the thread's first use and unmapped at its exit. */
void rec_fast_stats(const void *key, int dtype, const void *data, size_t numel, int mode, tft_stats *out);

#endif
