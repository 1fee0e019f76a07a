/*
 * recorder_coll.c — collectives and communicators in the tft.h API:
 * tft_coll_enter/exit (and the MPI interposers' rec_coll_enter), a COLLECTIVE
 * ENTER and EXIT per call with the communicator's own sequence number, the
 * implicit op around a call made outside one, and tft_comm_define's COMM
 * record. The thread's open collectives live in its cold state
 * (recorder_internal.h).
 */
#include "recorder_internal.h"
#include "interpose_internal.h" /* rec_explicit_coll */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define COMM_SLOTS 4096 /* communicator ids (and their point-to-point spaces) a process numbers */

static struct {
    _Atomic uint64_t comm[COMM_SLOTS];
    _Atomic uint64_t next[COMM_SLOTS];
} comms;

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
    if (!rec_on())
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
    if (!rec_tls.in_op) {
        int64_t seq = rec_next_seq();
        rec_emit_op_named(r, name, nid, TFT_OP_COLLECTIVE, 0, NULL, seq, 0, NULL, now);
        rec_tls.in_op = 2; /* implicit op: ends at tft_coll_exit */
        rec_tls.op_seq = seq;
    }
    uint64_t cs = comm_next_seq(ci->comm);
    tft_rec_collective c;
    fill_coll(&c, ci, cs, rec_tls.op_seq, nid, now);
    c.h.flags = TFT_COLL_FLAG_ENTER;
    c.t_enter = c.h.ts;
    rec_explicit_coll = 1;
    tls_cold *cold = rec_cold_state();
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
    if (!rec_on())
        return 0;
    tft_coll_info buf;
    const tft_coll_info *ci = coll_info_in(caller_ci, &buf);
    if (!ci || token < 0)
        return -EINVAL;
    shm_ring *r = rec_ring();
    if (!r)
        return -ENOSPC;
    uint64_t t_enter = 0;
    for (unsigned i = 0; rec_tls.cold && i < MAX_PENDING_COLL; i++)
        if (rec_tls.cold->pending[i].comm == ci->comm && rec_tls.cold->pending[i].coll_seq == (uint64_t)token)
            t_enter = rec_tls.cold->pending[i].t_enter;
    if (ci->t_enter)
        t_enter = stamp_of_ns(ci->t_enter);
    const char *name = ci->name ? ci->name : tft_coll_type_name(ci->type);
    uint64_t rid = 0;
    if (result && ci->count) {
        int64_t shape[1] = {(int64_t)ci->count};
        rec_record_tensor(name, ci->dtype, result, 1, shape, TFT_DEV_CPU, -1, &rid);
    }
    tft_rec_collective c;
    fill_coll(&c, ci, (uint64_t)token, rec_tls.in_op ? rec_tls.op_seq : TFT_SEQ_NONE, rec_intern(r, name), 0);
    c.h.flags = TFT_COLL_FLAG_EXIT;
    c.t_enter = t_enter;
    c.t_exit = c.h.ts;
    c.result = rid;
    int e = ring_write(g_rec.h, r, &c.h);
    rec_explicit_coll = 0;
    if (rec_tls.in_op == 2)
        rec_tls.in_op = 0;
    return e;
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
