/*
 * recorder_state.c — the state every record needs, below the rest of the
 * recorder (recorder_internal.h): the process's (g_rec) and the calling
 * thread's (rec_tls, its ring claimed at its first record and let go at
 * its exit), the interposers' re-entry guard, which the recorder raises
 * too (ip_depth), the STRING records that send a text once per ring
 * (rec_intern), and the op the thread is inside. Nothing here sets up
 * recording or calls the API above it: init.c sets g_rec up, recorder.c,
 * recorder_events.c, recorder_capture.c and recorder_fast.c write the
 * records.
 */
#include "interpose_internal.h" /* ip_depth */
#include "recorder_internal.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

struct rec_global g_rec = {.step = TFT_STEP_NONE};

__thread tls_state rec_tls __attribute__((tls_model("initial-exec")));

/* Depth of interposer frames on this thread; > 0 means "pass through". */
__thread int ip_depth __attribute__((tls_model("initial-exec")));

static pthread_key_t ring_key;

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

void rec_thread_key_init(void) { pthread_key_create(&ring_key, ring_retire); }

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

/* intern_as for rec_intern_id's slow path (recorder_internal.h), under its
 * exported name: an alias, not a wrapper, so that the callers in other
 * files (recorder.c, the interposers) reach the body with one call, as
 * recorder.c's did when intern_as was its own; rec_intern keeps the static
 * one, which the compiler may call more cheaply. */
uint64_t rec_intern_as(shm_ring *r, const char *s, size_t n, uint64_t id) __attribute__((alias("intern_as")));

/* Not inlined: inlined into tft_scope_push, GCC takes the 1024 bound on its
 * 512-byte buffer for an overread (-Wstringop-overread). */
__attribute__((noinline)) uint64_t rec_intern(shm_ring *r, const char *s)
{
    if (!s)
        return 0;
    size_t n = strnlen(s, 1024);
    return intern_as(r, s, n, tft_string_id(s, n));
}

int64_t rec_current_op(void) { return rec_tls.in_op ? rec_tls.op_seq : TFT_SEQ_NONE; }
