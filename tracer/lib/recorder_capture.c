/*
 * recorder_capture.c — the recorder's capture path (TFT_CAPTURE, tftrace
 * --capture; docs/CAPTURE.md): whole tensors of the selected ops stored as
 * CAPTURE records, and `first-divergence-of`'s test of each new tensor
 * against golden's fingerprints. recorder.c calls in here only when a
 * capture spec is armed (one test of g_rec.capture on its hot path).
 *
 * Slow path. Each recording thread keeps a cache of the tensors it
 * recorded last (id -> memory, dtype, shape), because an op's inputs were
 * recorded before the op began: when a matching op begins, every input
 * still in the cache is read from its memory then. Assumption (documented):
 * an input's memory still holds the value the op reads when the op begins
 * — true for tftrain and the GEMM interposer, which record right after
 * computing. The memory is read with process_vm_readv, so an input whose
 * memory was unmapped since is skipped instead of crashing the program.
 * Parts wait (bounded) for ring room instead of being dropped.
 */
#include "capture_ref.h"
#include "capture_spec.h"
#include "recorder_internal.h"
#include "tft.h"

#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define CAP_CACHE 1024u   /* tensors remembered per thread (8-way sets; a cache that evicts, not a map) */
#define CAP_WAYS 8u
#define CAP_DONE 64       /* tensors captured per op (dedup) */
#define CAP_OCC 2048u     /* tensor names per step (first-divergence-of) */

typedef struct cap_entry {
    uint64_t id;          /* 0 = empty */
    uint64_t name;        /* string id */
    uint64_t stamp;       /* last use, for eviction */
    const void *data;     /* host memory at recording time */
    uint64_t bytes;
    uint8_t dtype, ndim;
    int64_t shape[TFT_MAX_NDIM];
} cap_entry;

enum { CAP_NONE = 0, CAP_ON = 1, CAP_PENDING = 2 };

typedef struct cap_thread {
    cap_entry cache[CAP_CACHE];
    uint64_t clock;
    int64_t op_seq;       /* op the state below belongs to */
    int state;            /* CAP_* for op_seq */
    uint32_t pending_alts;/* CAP_PENDING: alternatives waiting for an output name */
    int n_in;             /* CAP_PENDING: the op's inputs, captured once an output matches */
    uint64_t in[64];
    int ndone;
    uint64_t done[CAP_DONE]; /* (tensor id) already captured in this op */
    int safe_read;        /* 1 process_vm_readv works, 0 not tried, -1 use memcpy */
    /* first-divergence-of: occurrences of each tensor name in the current
     * step (open addressing; a full table stops the comparison). Fixed, in
     * the thread's state, rather than a tft_u64map: the recording path
     * allocates nothing. It counts as capture_ref.c's occ_next does. */
    int64_t occ_step;
    uint64_t occ_name[CAP_OCC];
    uint32_t occ_count[CAP_OCC];
    uint32_t occ_used;
    _Alignas(8) char stage[TFT_CAPTURE_PART_MAX];
    _Alignas(8) char part[TFT_REC_MAX_BYTES];
} cap_thread;

/* This thread's capture state, allocated on first use while armed; freed
 * at the thread's exit (cap_key, created at the first use in the process,
 * as recorder_fast.c's memo key is). */
static __thread cap_thread *cap_tls __attribute__((tls_model("initial-exec")));
static pthread_key_t cap_key;
static pthread_once_t cap_key_once = PTHREAD_ONCE_INIT;

static void cap_thread_free(void *p)
{
    free(p);
    cap_tls = NULL; /* runs in the exiting thread */
}

static void cap_key_init(void) { pthread_key_create(&cap_key, cap_thread_free); }

static cap_thread *cap_state(void)
{
    if (__builtin_expect(cap_tls != NULL, 1))
        return cap_tls;
    pthread_once(&cap_key_once, cap_key_init);
    cap_tls = calloc(1, sizeof(cap_thread));
    if (cap_tls) {
        cap_tls->op_seq = TFT_SEQ_NONE;
        pthread_setspecific(cap_key, cap_tls);
    }
    return cap_tls;
}

static int my_rank(void)
{
    const shm_proc *p = &g_rec.h->procs[g_rec.proc];
    return p->rank >= 0 ? p->rank : (int)p->index;
}

static cap_entry *cache_find(cap_thread *ct, uint64_t id)
{
    unsigned set = (unsigned)(id * 0x9E3779B97F4A7C15ull >> 40) % (CAP_CACHE / CAP_WAYS) * CAP_WAYS;
    for (unsigned w = 0; w < CAP_WAYS; w++)
        if (ct->cache[set + w].id == id)
            return &ct->cache[set + w];
    return NULL;
}

/* Remembers a recorded host tensor, evicting the least recently used of its set. */
static void cache_put(cap_thread *ct, uint64_t id, uint64_t name, int dtype, const void *data, uint64_t bytes,
                      int ndim, const int64_t *shape)
{
    unsigned set = (unsigned)(id * 0x9E3779B97F4A7C15ull >> 40) % (CAP_CACHE / CAP_WAYS) * CAP_WAYS;
    cap_entry *victim = &ct->cache[set];
    for (unsigned w = 0; w < CAP_WAYS; w++) {
        cap_entry *e = &ct->cache[set + w];
        if (e->id == 0 || e->id == id) {
            victim = e;
            break;
        }
        if (e->stamp < victim->stamp)
            victim = e;
    }
    victim->id = id;
    victim->name = name;
    victim->stamp = ++ct->clock;
    victim->data = data;
    victim->bytes = bytes;
    victim->dtype = (uint8_t)dtype;
    victim->ndim = (uint8_t)ndim;
    memset(victim->shape, 0, sizeof(victim->shape));
    memcpy(victim->shape, shape, sizeof(int64_t) * (size_t)ndim);
}

/* Copies n bytes of this process's memory at src; 0, or -EFAULT when the
 * memory is no longer mapped (process_vm_readv reports it, memcpy would
 * crash). Falls back to memcpy where process_vm_readv is not allowed. */
static int read_own(cap_thread *ct, void *dst, const void *src, size_t n)
{
    if (ct->safe_read >= 0 && n) {
        struct iovec l = {dst, n}, rm = {(void *)src, n};
        ssize_t got = process_vm_readv(getpid(), &l, 1, &rm, 1, 0);
        if (got == (ssize_t)n) {
            ct->safe_read = 1;
            return 0;
        }
        if (got >= 0 || errno == EFAULT)
            return -EFAULT;
        if (ct->safe_read == 1)
            return -EFAULT;
        ct->safe_read = -1; /* ENOSYS / EPERM (seccomp): trust the memory */
    }
    memcpy(dst, src, n);
    return 0;
}

/* Room for len bytes in r now (ring_write's test, without its drop count). */
static bool ring_room(const shm_ring *r, uint32_t len)
{
    uint64_t cap = g_rec.h->ring_bytes;
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t pos = head % cap;
    uint64_t pad = pos + len > cap ? cap - pos : 0;
    return head + pad + len - atomic_load_explicit(&r->tail, memory_order_acquire) <= cap;
}

/* ring_write that first waits up to capture_wait_ns for the collector to
 * make room (drop mode would otherwise lose big captures at once). */
static int capture_write(shm_ring *r, const tft_rec *rec)
{
    if (!(g_rec.h->flags & SHM_NO_DROP) && !ring_room(r, rec->len)) {
        uint64_t deadline = tft_clock_mono_ns() + g_rec.capture_wait_ns;
        while (!ring_room(r, rec->len) && !atomic_load(&g_rec.h->collector_done) && tft_clock_mono_ns() < deadline) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    return ring_write(g_rec.h, r, rec);
}

typedef struct cap_src {
    uint64_t id, name;
    int dtype, ndim;
    const int64_t *shape;
    const void *data;
    uint64_t bytes;
    int role;
    bool safe;            /* read through read_own (memory not handed to us just now) */
} cap_src;

/* Writes one tensor's bytes as CAPTURE parts of op seq. A part that cannot
 * be read or written ends the capture; once a part is written (or one was
 * dropped), the parts not written count as dropped and the reader sees the
 * capture incomplete. An input unreadable from its first byte is skipped. */
static void capture_emit(shm_ring *r, cap_thread *ct, int64_t seq, const cap_src *s)
{
    tft_rec_capture *c = (tft_rec_capture *)ct->part;
    size_t esz = tft_dtype_size(s->dtype);
    uint64_t off = 0;
    bool counted = false; /* the failed part was counted by ring_write */
    do {
        uint32_t n = (uint32_t)(s->bytes - off < TFT_CAPTURE_PART_MAX ? s->bytes - off : TFT_CAPTURE_PART_MAX);
        const char *src = n ? (const char *)s->data + off : NULL;
        if (s->safe && n) {
            if (read_own(ct, ct->stage, src, n) < 0)
                break;
            src = ct->stage;
        }
        uint32_t len = (uint32_t)((sizeof(*c) + n + 7) & ~(size_t)7);
        memset(c, 0, sizeof(*c));
        rec_hdr(&c->h, TFT_REC_CAPTURE, len, seq);
        c->tensor = s->id;
        c->total = s->bytes;
        c->offset = off;
        c->n = n;
        c->role = (uint32_t)s->role;
        c->name = s->name;
        c->dtype = (uint8_t)s->dtype;
        c->ndim = (uint8_t)s->ndim;
        memcpy(c->shape, s->shape, sizeof(int64_t) * (size_t)s->ndim);
        if (n && g_rec.capture_shuffle && esz > 1 && n % esz == 0) {
            tft_capture_shuffle(c->data, src, n, esz, 0);
            c->h.flags = TFT_CAPTURE_SHUFFLED;
        } else if (n) {
            memcpy(c->data, src, n);
        }
        memset(c->data + n, 0, len - sizeof(*c) - n);
        if (capture_write(r, &c->h) < 0) {
            counted = true;
            break;
        }
        off += n;
    } while (off < s->bytes);
    if (off < s->bytes && (off || counted)) { /* a capture cut short: its lost parts count as dropped */
        uint64_t left = (s->bytes - off + TFT_CAPTURE_PART_MAX - 1) / TFT_CAPTURE_PART_MAX - counted;
        atomic_fetch_add_explicit(&r->dropped, left, memory_order_relaxed);
    }
}

/* Captures tensor id once per op (done list); false when already captured. */
static bool mark_done(cap_thread *ct, uint64_t id)
{
    for (int i = 0; i < ct->ndone; i++)
        if (ct->done[i] == id)
            return false;
    if (ct->ndone < CAP_DONE)
        ct->done[ct->ndone++] = id;
    return true;
}

static void capture_inputs(shm_ring *r, cap_thread *ct, int64_t seq, int n_in, const uint64_t *in)
{
    for (int i = 0; i < n_in; i++) {
        cap_entry *e = in[i] ? cache_find(ct, in[i]) : NULL;
        if (!e || !mark_done(ct, e->id))
            continue;
        e->stamp = ++ct->clock;
        cap_src s = {.id = e->id, .name = e->name, .dtype = e->dtype, .ndim = e->ndim, .shape = e->shape,
                     .data = e->data, .bytes = e->bytes, .role = TFT_CAPTURE_INPUT, .safe = true};
        capture_emit(r, ct, seq, &s);
    }
}

/* Which alternatives select op (name, seq) now: CAP_ON when one matches
 * fully; CAP_PENDING (with the alternatives in *pending) when some match but
 * for their name term, which an output's name may still satisfy. */
static int capture_decide(const char *name, int64_t seq, uint32_t *pending)
{
    const capspec *cs = g_rec.capture;
    int64_t step = atomic_load_explicit(&g_rec.step, memory_order_relaxed);
    int rank = my_rank();
    *pending = 0;
    for (int i = 0; i < cs->n; i++) {
        const capspec_alt *a = &cs->alt[i];
        if (a->first_divergence || !capspec_alt_pre(a, step, seq, rank))
            continue; /* first-divergence-of alternatives: first_divergence() */
        if (!a->name[0] || fnmatch(a->name, name, 0) == 0)
            return CAP_ON;
        *pending |= 1u << i;
    }
    return *pending ? CAP_PENDING : CAP_NONE;
}

void rec_capture_op_begin(shm_ring *r, const char *name, int64_t seq, int n_in, const uint64_t *in)
{
    cap_thread *ct = cap_state();
    if (!ct)
        return;
    /* the op's inputs refresh their cache entries even when not captured,
     * so long-lived inputs (parameters) stay cached */
    for (int i = 0; i < n_in && in; i++) {
        cap_entry *e = in[i] ? cache_find(ct, in[i]) : NULL;
        if (e)
            e->stamp = ++ct->clock;
    }
    ct->op_seq = seq;
    ct->ndone = 0;
    ct->n_in = 0;
    ct->state = capture_decide(name, seq, &ct->pending_alts);
    if (ct->state == CAP_ON && in) {
        capture_inputs(r, ct, seq, n_in, in);
    } else if (ct->state == CAP_PENDING ||
               (g_rec.capture_ref && !atomic_load_explicit(&g_rec.capture_ref_fired, memory_order_relaxed))) {
        /* held back: captured once an output selects the op (its name, or
         * being the first to differ from golden) */
        ct->n_in = in ? (n_in < 64 ? (n_in < 0 ? 0 : n_in) : 64) : 0;
        memcpy(ct->in, in, sizeof(uint64_t) * (size_t)ct->n_in);
    }
}

/* Occurrence number (0, 1, ...) of tensor name id within the current step on
 * this thread, counted as golden's reference counts them (capture_ref.c);
 * -1 when the table is full. */
static int64_t occurrence(cap_thread *ct, uint64_t name, int64_t step)
{
    if (ct->occ_step != step || !ct->occ_used) {
        if (ct->occ_used)
            memset(ct->occ_name, 0, sizeof(ct->occ_name));
        ct->occ_used = 0;
        ct->occ_step = step;
    }
    if (!name)
        name = 1;
    unsigned j = (unsigned)(name * 0x9E3779B97F4A7C15ull >> 52) & (CAP_OCC - 1);
    for (unsigned n = 0; n < CAP_OCC; n++, j = (j + 1) & (CAP_OCC - 1)) {
        if (ct->occ_name[j] == name)
            return ct->occ_count[j]++;
        if (!ct->occ_name[j]) {
            if (ct->occ_used + 1 >= CAP_OCC)
                return -1;
            ct->occ_name[j] = name;
            ct->occ_count[j] = 1;
            ct->occ_used++;
            return 0;
        }
    }
    return -1;
}

/* first-divergence-of: true (once per process) for the first tensor whose
 * fingerprint differs from its golden counterpart, within the step, seq,
 * rank and name terms of a first-divergence-of alternative; occ: its
 * occurrence() number. */
static bool first_divergence(const tft_rec_tensor *t, const char *name, int64_t occ)
{
    if (occ < 0 || t->mode < TFT_STATS_HEALTH || t->device_kind != TFT_DEV_CPU)
        return false;
    const capspec *cs = g_rec.capture;
    int rank = my_rank();
    bool in_scope = false;
    for (int i = 0; i < cs->n && !in_scope; i++) {
        const capspec_alt *a = &cs->alt[i];
        in_scope = a->first_divergence && capspec_alt_pre(a, t->h.step, t->h.seq, rank) &&
                   (!a->name[0] || fnmatch(a->name, name, 0) == 0);
    }
    if (!in_scope ||
        !capref_diverged(g_rec.capture_ref, rank, t->h.step, t->name, (uint32_t)occ, t->stats.fingerprint))
        return false;
    int expect = 0;
    return atomic_compare_exchange_strong(&g_rec.capture_ref_fired, &expect, 1);
}

/* A host tensor was recorded as an output of op seq: captures it when the
 * op is selected (or now becomes selected by this output's name), and
 * remembers it for later ops' inputs. Called before its TENSOR record is
 * written, so it can flag it; the parts follow that record (emit_after). */
static bool capture_output_wanted(cap_thread *ct, const char *name, int64_t seq, bool own_op)
{
    if (own_op || ct->op_seq != seq) { /* no tft_op_begin for this op: decide now */
        ct->op_seq = seq;
        ct->ndone = 0;
        ct->n_in = 0;
        ct->state = capture_decide(name, seq, &ct->pending_alts);
    }
    if (ct->state == CAP_PENDING) {
        for (int i = 0; i < g_rec.capture->n; i++)
            if ((ct->pending_alts >> i & 1u) && fnmatch(g_rec.capture->alt[i].name, name, 0) == 0)
                ct->state = CAP_ON;
        if (ct->state != CAP_ON)
            return false;
        return true; /* the pending inputs go out first: capture_output */
    }
    return ct->state == CAP_ON;
}

static void capture_output(shm_ring *r, cap_thread *ct, int64_t seq, const cap_src *s)
{
    if (ct->n_in) { /* inputs held back until an output's name selected the op */
        capture_inputs(r, ct, seq, ct->n_in, ct->in);
        ct->n_in = 0;
    }
    if (mark_done(ct, s->id))
        capture_emit(r, ct, seq, s);
}

int rec_capture_armed(void)
{
    if (!tft_enabled() || !g_rec.capture)
        return 0;
    int64_t step = atomic_load_explicit(&g_rec.step, memory_order_relaxed);
    int rank = my_rank();
    const capspec *cs = g_rec.capture;
    for (int i = 0; i < cs->n; i++) {
        const capspec_alt *a = &cs->alt[i];
        bool step_ok = !a->has_step || (step != TFT_STEP_NONE && step >= a->step_lo && step <= a->step_hi);
        if (step_ok && (!a->has_rank || a->rank == rank))
            return 1;
    }
    return 0;
}

void rec_capture_prior(uint64_t id, const char *name, int dtype, const void *data, int ndim,
                       const int64_t *shape)
{
    int64_t seq = rec_current_op();
    if (!tft_enabled() || !g_rec.capture || seq == TFT_SEQ_NONE || !cap_tls || cap_tls->op_seq != seq ||
        cap_tls->state != CAP_ON || ndim < 0 || ndim > TFT_MAX_NDIM || tft_dtype_size(dtype) == 0)
        return;
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && numel > UINT64_MAX / (uint64_t)shape[i] / 8))
            return;
        numel *= (uint64_t)shape[i];
    }
    shm_ring *r = rec_ring();
    if (!r || (numel && !data))
        return;
    cap_src s = {.id = id, .name = rec_intern(r, name), .dtype = dtype, .ndim = ndim, .shape = shape, .data = data,
                 .bytes = numel * tft_dtype_size(dtype), .role = TFT_CAPTURE_PRIOR, .safe = false};
    capture_emit(r, cap_tls, seq, &s);
}

/* The TENSOR record of a host tensor while capture is armed: flagged and
 * followed by its parts when its op is selected; remembered for later ops. */
int rec_capture_tensor(shm_ring *r, tft_rec_tensor *t, const char *name, const void *data, uint64_t numel,
                           bool own_op)
{
    cap_thread *ct = cap_state();
    size_t esz = tft_dtype_size(t->dtype);
    if (!ct || numel > UINT64_MAX / esz)
        return ring_write(g_rec.h, r, &t->h);
    bool want = capture_output_wanted(ct, name, t->h.seq, own_op);
    /* every host tensor counts as an occurrence of its name, captured by
     * another alternative or not: golden's reference counts them all */
    int64_t occ = g_rec.capture_ref && !atomic_load_explicit(&g_rec.capture_ref_fired, memory_order_relaxed)
                      ? occurrence(ct, t->name, t->h.step)
                      : -1;
    if (!want && occ >= 0 && first_divergence(t, name, occ)) {
        ct->state = CAP_ON; /* this op: its held-back inputs, this output and the rest */
        want = true;
    }
    if (want)
        t->h.flags |= TFT_TENSOR_HAS_DATA;
    int e = ring_write(g_rec.h, r, &t->h);
    if (want) {
        cap_src s = {.id = t->id, .name = t->name, .dtype = t->dtype, .ndim = t->ndim, .shape = t->shape,
                     .data = data, .bytes = numel * esz, .role = TFT_CAPTURE_OUTPUT, .safe = false};
        capture_output(r, ct, t->h.seq, &s);
    }
    cache_put(ct, t->id, t->name, t->dtype, data, numel * esz, t->ndim, t->shape);
    return e;
}

