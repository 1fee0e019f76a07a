/*
 * recorder_internal.h — what the parts of the recorder share: the
 * process-wide recording state and the calling thread's, with the ring and
 * strings every record needs (recorder_state.c), its set-up (init.c), its
 * API (recorder.c, with the records besides ops, tensors and collectives
 * in recorder_events.c), its capture path (recorder_capture.c), and the
 * entries the interposers use. Calls go one way: recorder_state.c calls
 * none of the others, init.c only recorder_state.c, the rest both (their
 * calls of malloc and mmap aside, which reach the allocation interposers
 * when libtftrace is preloaded).
 */
#ifndef TFT_RECORDER_INTERNAL_H
#define TFT_RECORDER_INTERNAL_H

#include "shm_internal.h"
#include "tft.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

enum { ST_UNINIT = 0, ST_OFF = 1, ST_ON = 2 };
#define MAX_SCOPE 512
#define MAX_PENDING_COLL 64

struct rec_global {
    _Atomic int state;            /* ST_UNINIT / ST_OFF / ST_ON */
    shm_hdr *h;                   /* the mapped region */
    size_t bytes;
    uint32_t proc;                /* our slot in h->procs */
    int mode;                     /* enum tft_stats_mode */
    int every;                    /* statistics every N steps (1 = all) */
    _Atomic int64_t step;         /* current step, TFT_STEP_NONE before the first */
    _Atomic int64_t seq;          /* next op sequence number */
    _Atomic uint64_t tensor_id;   /* last tensor id handed out */
    _Atomic uint32_t gen;         /* bumped in a forked child: rings are re-claimed */
    _Atomic uint32_t next_thread; /* thread numbers handed out with rings (THREAD records) */
    _Atomic int exit_recorded;
    const struct capspec *capture;/* TFT_CAPTURE parsed, NULL = no capture (the hot path's one test) */
    uint64_t capture_wait_ns;     /* longest wait for ring room per capture part (TFT_CAPTURE_WAIT_MS) */
    int capture_shuffle;          /* byte-shuffle capture parts (TFT_CAPTURE_SHUFFLE, default 1) */
    const struct capref *capture_ref; /* first-divergence-of: golden's fingerprints (TFT_CAPTURE_REF) */
    _Atomic int capture_ref_fired;    /* the first divergence was captured: no more */
};

extern struct rec_global g_rec __attribute__((visibility("hidden")));

void rec_init(void);                 /* pthread_once target */
extern pthread_once_t rec_init_once __attribute__((visibility("hidden"))); /* runs rec_init */

/* 1 when recording is on: the first call of any thread initialises it. */
static inline int rec_on(void)
{
    int s = atomic_load_explicit(&g_rec.state, memory_order_acquire);
    if (__builtin_expect(s == ST_ON, 1))
        return 1;
    if (s == ST_UNINIT) {
        pthread_once(&rec_init_once, rec_init);
        return atomic_load_explicit(&g_rec.state, memory_order_acquire) == ST_ON;
    }
    return 0;
}

/* ---- the calling thread's state (recorder_state.c) ------------------------- */

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
    uint32_t tensor_flags;  /* TFT_TENSOR_CONTEXT bits stamped on its tensors (tft_tensor_context) */
    tls_cold *cold;         /* NULL until the thread's first scope or collective */
} tls_state;

extern __thread tls_state rec_tls __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* The thread's cold state, mapped (zeroed) at first use with mmap, which
 * neither allocates through the interposed malloc nor takes a lock; NULL
 * when the mapping fails (scopes and collective enter times are then not
 * recorded for the thread). */
static inline tls_cold *rec_cold_state(void)
{
    if (__builtin_expect(rec_tls.cold != NULL, 1))
        return rec_tls.cold;
    void *p = mmap(NULL, sizeof(tls_cold), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    rec_tls.cold = p;
    return rec_tls.cold;
}

/* The next op sequence number of the process. */
static inline int64_t rec_next_seq(void) { return atomic_fetch_add_explicit(&g_rec.seq, 1, memory_order_relaxed); }

void rec_thread_key_init(void);
void rec_record_exit(int code, int sig);
int rec_inproc_flush(int timeout_ms); /* in-process mode: drain and seal now */

/* ---- one run id per job (runid.c, init.c; docs/MULTINODE.md) --------------- */

/* The job's run id from the launcher's environment (runid.c lists the
 * sources in order): 1 with id set and src naming the source, 0 when none
 * (src "random", or "mpi" for TFT_RUN_ID=mpi). */
int rec_job_run_id(uint8_t id[16], char *src, size_t n);
/* 1 when this process records in-process with a run id of its own (no job
 * identity in its environment): MPI_Init's interposer then agrees on rank
 * 0's. Its current id into id. */
int rec_inproc_run_id_private(uint8_t id[16]);
/* Adopts the job's run id: the writer thread rewrites the headers of the
 * rank files already open and uses it for the manifest. Waits up to
 * timeout_ms. 0 or -errno. */
int rec_inproc_adopt_run_id(const uint8_t id[16], int timeout_ms);
/* The MPI estimate of this process's clock offset against rank ref's
 * (CLOCK_REALTIME difference, error bound in ns), for its manifest
 * fragment (interpose_mpi_init.c). The last call wins. */
void rec_inproc_set_clock(int64_t offset_ns, uint64_t error_ns, int ref, int64_t anchor_ns);
/* 1 when this process records with the in-process writer. */
int rec_inproc_active(void);

/* ---- record building (recorder_state.c, recorder.c) ----------------------- */

/* The calling thread's ring (claimed on first use), NULL when none is free. */
shm_ring *rec_ring(void);
/* A record header with time stamp ts (shm_stamp units; 0: now): kind, len,
 * the current step, seq; the records one call writes at one moment share
 * one clock read. Inline: every record's path. */
static inline void rec_hdr_at(tft_rec *h, uint16_t kind, uint32_t len, int64_t seq, uint64_t ts)
{
    h->kind = kind;
    h->flags = 0;
    h->len = len;
    h->ts = ts ? ts : shm_stamp(g_rec.h);
    h->step = atomic_load_explicit(&g_rec.step, memory_order_relaxed);
    h->seq = seq;
}
/* The same, stamped now. */
static inline void rec_hdr(tft_rec *h, uint16_t kind, uint32_t len, int64_t seq) { rec_hdr_at(h, kind, len, seq, 0); }
/* Sends the text of a string once per ring; returns its id (0 for NULL). */
uint64_t rec_intern(shm_ring *r, const char *s);
/* Sends the n bytes of s as STRING record id unless this ring's sent-ids
 * table shows it was; returns id. */
uint64_t rec_intern_as(shm_ring *r, const char *s, size_t n, uint64_t id);
/* rec_intern of a string whose id the caller knows (tft_string_id of its
 * strnlen(s, 1024) bytes, cached by an interposer per call name): the
 * length and the hash are skipped unless the text must be sent. */
static inline uint64_t rec_intern_id(shm_ring *r, const char *s, uint64_t id)
{
    uint64_t *slot = &r->sent_ids[id & (SHM_SENT_IDS - 1)];
    if (__builtin_expect(*slot == id, 1))
        return id;
    return rec_intern_as(r, s, strnlen(s, 1024), id);
}
/* tft_coll_enter for the interposers: ci complete (as coll_info_in makes
 * it), name its call name, name_id name's string id (0: intern it here),
 * ts the ENTER's time stamp (shm_stamp; 0: now). */
int64_t rec_coll_enter(const tft_coll_info *ci, const char *name, uint64_t name_id, uint64_t ts);
/* A TENSOR record of numel elements (shape [numel]) in the current op (its
 * own op outside any) with statistics st already computed in mode; name_id
 * as for rec_intern_id; ts its time stamp (shm_stamp; 0: now). Returns the
 * tensor's id, 0 when none was written. */
uint64_t rec_tensor_named(const char *name, uint64_t name_id, int dtype, uint64_t numel, const tft_stats *st,
                          int mode, uint64_t ts);
/* The op the calling thread is inside (tft_op_begin .. tft_op_end, or a
 * collective's implicit op), TFT_SEQ_NONE outside any. */
int64_t rec_current_op(void);
/* Fills an OP record's body after its header: name and scope ids, kind,
 * n_in input ids (0 where in is NULL) then n_attr attributes; the caller
 * has clamped the counts to what its buffer holds. Shared by recorder.c and
 * the interposers' fast path (recorder_fast.c). */
static inline void rec_op_body(tft_rec_op *op, uint64_t name, uint64_t scope, int kind, int n_in,
                               const uint64_t *in, int n_attr, const int64_t *attrs)
{
    op->name = name;
    op->scope = scope;
    op->op_kind = (uint16_t)kind;
    op->n_in = (uint8_t)n_in;
    op->n_out = 0;
    op->n_attr = (uint8_t)n_attr;
    memset(op->pad, 0, sizeof(op->pad));
    for (int i = 0; i < n_in; i++)
        op->ids[i] = in ? in[i] : 0;
    for (int i = 0; i < n_attr; i++)
        op->ids[n_in + i] = (uint64_t)attrs[i];
}

/* ---- strided host tensors (recorder_strided.c) ---------------------------- */

/* 1 when strides (elements) describe dense row-major memory of shape. */
int rec_strides_dense(int ndim, const int64_t *shape, const int64_t *strides);
/* Statistics of a strided tensor (numel > 0, ndim >= 1), bit for bit those
 * of its dense copy; 0 or a negative errno (*out zeroed). */
int rec_stats_strided(const void *data, int dtype, int ndim, const int64_t *shape, const int64_t *strides,
                      uint64_t numel, int mode, tft_stats *out);
/* A malloc'd dense row-major copy of a strided tensor, or NULL. */
void *rec_strided_dense_copy(const void *data, int dtype, int ndim, const int64_t *shape, const int64_t *strides,
                             uint64_t numel);

/* ---- capture (recorder_capture.c), reached only while g_rec.capture ------- */

/* Op seq (name, n_in inputs in) began on this thread: decides whether it is
 * captured and captures the inputs it already can. */
void rec_capture_op_begin(shm_ring *r, const char *name, int64_t seq, int n_in, const uint64_t *in);
/* Writes the TENSOR record t of a host tensor (numel elements at data,
 * own_op: the tensor is its own op) while capture is armed: flagged and
 * followed by its CAPTURE parts when its op is selected; remembered for the
 * inputs of later ops. Returns ring_write's result for t. */
int rec_capture_tensor(shm_ring *r, tft_rec_tensor *t, const char *name, const void *data, uint64_t numel,
                       bool own_op);

/* ---- for the interposers (interpose.c) ----------------------------------- */

/* tft_op_begin with n_attr int64 attributes (at most 16) in the OP record. */
int64_t rec_op_begin_attrs(const char *name, int op_kind, int n_in, const uint64_t *in_ids, int n_attr,
                           const int64_t *attrs);
/* 1 when a capture spec is armed and could match an op of the current step
 * (cheap: step and rank terms only); the caller then keeps what a capture
 * needs that the op will overwrite (a GEMM's C when beta != 0). */
int rec_capture_armed(void);
/* The statistics mode a tensor recorded now gets (TFT_STATS_SHAPE between
 * TFT_EVERY steps). Inline: every tensor's path. */
static inline int rec_tensor_mode(void)
{
    int64_t step = atomic_load_explicit(&g_rec.step, memory_order_relaxed);
    if (g_rec.every > 1 && step != TFT_STEP_NONE && step % g_rec.every != 0)
        return TFT_STATS_SHAPE;
    return g_rec.mode;
}
/* Inside an op being captured: stores data (ndim/shape/dtype like
 * tft_tensor, host memory) as the PRIOR value of output tensor `id` of the
 * current op (FORMAT.md 5.12, role 2). No-op otherwise. */
void rec_capture_prior(uint64_t id, const char *name, int dtype, const void *data, int ndim,
                       const int64_t *shape);

#endif
