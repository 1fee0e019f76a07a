/*
 * interpose_mpi.c — LD_PRELOAD interposers for MPI (built when MPI headers
 * are found, TFT_HAVE_MPI). Shared machinery (guard, real-symbol lookup,
 * on/off decision): interpose.c. User documentation: docs/INTERPOSE.md.
 *
 * Recorded as COLLECTIVE enter/exit records (tft_coll_enter/exit):
 *  - blocking collectives: MPI_Allreduce, Bcast, Reduce, Allgather,
 *    Reduce_scatter, Reduce_scatter_block, Alltoall, Gather, Scatter,
 *    Barrier;
 *  - point-to-point: MPI_Send, Ssend, Recv, Sendrecv, Sendrecv_replace;
 *  - non-blocking forms: MPI_Iallreduce, Ibcast, Ireduce, Iallgather,
 *    Ireduce_scatter_block, Ialltoall, Ibarrier, Isend, Issend, Irecv: the
 *    ENTER at the call, the EXIT (with the result's statistics) when a
 *    completion call (MPI_Wait, Waitall, Waitany, Waitsome, Test, Testall,
 *    Testany, Testsome) finishes the request, or at MPI_Request_free
 *    (without statistics). A request never completed leaves an ENTER
 *    without EXIT: the hang signal.
 *
 * Communicators: an id from the members' world ranks and the creation
 * order, worked out once per communicator and kept as an MPI attribute
 * and, for the calls, in a table keyed by the handle (ctab);
 * the creators (MPI_Comm_split, _dup, _create, MPI_Cart_create, ...) are
 * interposed to number communicators in the order they are made, and the
 * first recorded call on one writes its COMM record (struct mcomm below).
 *
 * Sequence spaces: collectives take the communicator's sequence (the desync
 * analysis aligns it across ranks); point-to-point calls take a separate
 * one, "<communicator id>:p2p", which counts this rank's sends and
 * receives on the communicator and is not comparable across ranks (a Send
 * on one rank and a Recv on another are a legitimate difference). root
 * holds the peer, tag the message tag (-1 at the ENTER of an
 * MPI_ANY_SOURCE receive, TFT_TAG_ANY for MPI_ANY_TAG; the EXIT of a
 * receive carries the actual source, tag and count received, from the
 * status, which we supply when the caller passes MPI_STATUS(ES)_IGNORE).
 *
 * The predefined handles, datatypes and communicators the calls are on
 * (and mpi_call_fill, which puts them together) are in
 * interpose_mpi_comm.c; the non-blocking calls and their completion in
 * interpose_mpi_nb.c; what the three files share is
 * interpose_mpi_internal.h.
 */
#include "interpose_mpi_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TFT_HAVE_MPI
#include <mpi.h>

#include "tft_stats.h"

/* ---- one recorded call ---------------------------------------------------- */

static void mpi_handles(void) { pthread_once(&mpi_mh_once, mpi_handles_load); }

#define OP_TFT(a, b, c, d) c,
static const int op_tft[N_OPS] = {MPI_OPS(OP_TFT)};

int mpi_map_redop(MPI_Op op)
{
    for (int i = 0; i < N_OPS; i++)
        if (mpi_mh.op[i] && H(op) == mpi_mh.op[i])
            return op_tft[i];
    return TFT_REDOP_OTHER;
}

int mpi_rec_begin(void)
{
    if (ip_depth || rec_explicit_coll)
        return 0;
    ip_depth++;
    int saved = errno;
    int on = ip_active();
    if (on)
        mpi_handles();
    errno = saved;
    if (!on)
        ip_depth--;
    return on;
}

void mpi_rec_end(void) { ip_depth--; }


void mpi_enter(mpi_call *mc)
{
    int saved = errno;
    mc->own_op = rec_current_op() == TFT_SEQ_NONE;
    mc->t_enter = g_rec.h ? shm_stamp(g_rec.h) : 0;
    mc->token = rec_coll_enter(&mc->ci, mc->ci.name, mc->name_id, mc->t_enter);
    errno = saved;
}

/* The largest collective result, in bytes, that gets FULL statistics;
 * larger ones get HEALTH (fingerprint, counts, min, max): FULL runs at
 * ~17 GB/s here even on the cache-hot buffer MPI just wrote, slower than
 * a DRAM read (19.6 GB/s), and added 62 µs to an 83 µs 1 MiB broadcast;
 * HEALTH runs at ~25 GB/s and keeps what tfdump --check and tfdiff compare
 * across ranks and runs (the fingerprint of every result). TFT_COLL_FULL_KB
 * (KiB, default 64; "all": FULL at every size) — docs/INTERPOSE.md. */
static uint64_t coll_full_max(void)
{
    static _Atomic uint64_t max; /* the limit + 1; 0: not read yet (a race reads it twice) */
    uint64_t m = atomic_load_explicit(&max, memory_order_relaxed);
    if (__builtin_expect(m == 0, 0)) {
        const char *s = getenv("TFT_COLL_FULL_KB");
        char *end = NULL;
        long long kb = s && *s ? strtoll(s, &end, 10) : 64;
        if (s && !strcmp(s, "all"))
            m = UINT64_MAX;
        else if (s && *s && (*end || kb < 0 || kb > (1ll << 40)))
            m = (64u << 10) + 1; /* malformed: the default, never an error in the traced job */
        else
            m = ((uint64_t)kb << 10) + 1;
        atomic_store_explicit(&max, m, memory_order_relaxed);
    }
    return m - 1;
}

/* The TENSOR record of mc's result (its statistics capped at mc->smax,
 * and at HEALTH above coll_full_max); returns its id, 0 when none was made. */
static uint64_t result_tensor(const mpi_call *mc, const void *result, uint64_t ts)
{
    if (!result || mc->smax < 0 || !mc->ci.count)
        return 0;
    int mode = rec_tensor_mode();
    mode = mode < mc->smax ? mode : mc->smax;
    if (mode == TFT_STATS_FULL && mc->ci.count * tft_dtype_size(mc->ci.dtype) > coll_full_max())
        mode = TFT_STATS_HEALTH;
    tft_stats st;
    if (mode <= TFT_STATS_SHAPE || tft_stats_compute(mc->ci.dtype, result, (size_t)mc->ci.count, mode, &st) != 0) {
        memset(&st, 0, sizeof(st));
        mode = TFT_STATS_SHAPE;
    }
    return rec_tensor_named(mc->ci.name, mc->name_id, mc->ci.dtype, mc->ci.count, &st, mode, ts);
}

/* What tft_coll_exit writes, with the result's statistics chosen here
 * (bytes get no moments) and the enter time this call noted (no search
 * of the thread's pending collectives). Capture keeps the recorder's own
 * path: it stores the result's bytes with the tensor. */
void mpi_exit(mpi_call *mc, const void *result)
{
    if (mc->token < 0)
        return;
    int saved = errno;
    shm_ring *r;
    if (__builtin_expect(g_rec.capture != NULL, 0) || !g_rec.h || !(r = rec_ring())) {
        tft_coll_exit(mc->token, &mc->ci, mc->smax >= 0 ? result : NULL);
    } else {
        const tft_coll_info *ci = &mc->ci;
        tft_rec_collective c;
        uint64_t now = shm_stamp(g_rec.h); /* the call's end: before the result's statistics */
        uint64_t rid = result_tensor(mc, result, now);
        uint64_t name = rec_intern_id(r, ci->name, mc->name_id);
        memset(&c, 0, sizeof(c));
        rec_hdr_at(&c.h, TFT_REC_COLLECTIVE, sizeof(c), rec_current_op(), now);
        c.h.flags = TFT_COLL_FLAG_EXIT;
        c.comm = ci->comm;
        c.coll_seq = (uint64_t)mc->token;
        c.count = ci->count;
        c.t_enter = mc->t_enter;
        c.t_exit = c.h.ts;
        c.result = rid;
        c.name = name;
        c.type = (uint16_t)ci->type;
        c.dtype = (uint8_t)ci->dtype;
        c.redop = (uint8_t)ci->redop;
        c.root = ci->root;
        c.rank = ci->rank;
        c.nranks = ci->nranks;
        c.tag = ci->type == TFT_COLL_SEND || ci->type == TFT_COLL_RECV ? ci->tag : TFT_TAG_NONE;
        ring_write(g_rec.h, r, &c.h);
        rec_explicit_coll = 0;
    }
    if (mc->own_op)
        tft_op_end();
    errno = saved;
}

static void call_enter(mpi_call *mc) { mpi_enter(mc); }

/* Records the exit with the result buffer (NULL: no statistics). */
static void call_exit(mpi_call *mc, const void *result) { mpi_exit(mc, result); }

/* call_exit, then releases the guard. */
static void call_end(mpi_call *mc, const void *result)
{
    call_exit(mc, result);
    mpi_rec_end();
}

/* Guard + fill + enter for a collective; returns 1 when call_end must follow. */
static int coll_begin(mpi_call *mc, const char *name, int type, MPI_Comm comm, MPI_Datatype dt, int count,
                      const MPI_Op *op, int root)
{
    if (!mpi_rec_begin())
        return 0;
    mpi_call_fill(mc, name, type, comm, dt, mpi_count(count), op ? mpi_map_redop(*op) : TFT_REDOP_NONE, root, 0,
                  TFT_TAG_NONE);
    call_enter(mc);
    return 1;
}

/* The same for a point-to-point call with peer (MPI_ANY_SOURCE: recorded
 * as -1 until the status tells). Sends and receives from MPI_PROC_NULL
 * move no data and are not recorded. */
static int p2p_begin(mpi_call *mc, const char *name, int type, MPI_Comm comm, MPI_Datatype dt, int count,
                     int peer, int tag)
{
    if (peer == MPI_PROC_NULL || !mpi_rec_begin())
        return 0;
    mpi_call_fill(mc, name, type, comm, dt, mpi_count(count), TFT_REDOP_NONE, peer == MPI_ANY_SOURCE ? -1 : peer, 1,
                  mpi_tag(tag));
    call_enter(mc);
    return 1;
}

/* ---- blocking collectives ------------------------------------------------- */

typedef int (*allreduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
typedef int (*bcast_fn)(void *, int, MPI_Datatype, int, MPI_Comm);
typedef int (*reduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm);
typedef int (*allgather_fn)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
typedef int (*gather_fn)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm);
typedef int (*redscat_fn)(const void *, void *, const int *, MPI_Datatype, MPI_Op, MPI_Comm);
typedef int (*redscat_block_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
typedef int (*barrier_fn)(MPI_Comm);

TFT_INTERPOSE int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                MPI_Comm comm)
{
    REAL(allreduce_fn, "MPI_Allreduce");
    mpi_call mc;
    if (!coll_begin(&mc, "MPI_Allreduce", TFT_COLL_ALLREDUCE, comm, datatype, count, &op, -1))
        return fn(sendbuf, recvbuf, count, datatype, op, comm);
    int rc = fn(sendbuf, recvbuf, count, datatype, op, comm);
    call_end(&mc, rc == MPI_SUCCESS ? recvbuf : NULL);
    return rc;
}

TFT_INTERPOSE int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    REAL(bcast_fn, "MPI_Bcast");
    mpi_call mc;
    if (!coll_begin(&mc, "MPI_Bcast", TFT_COLL_BCAST, comm, datatype, count, NULL, root))
        return fn(buffer, count, datatype, root, comm);
    int rc = fn(buffer, count, datatype, root, comm);
    call_end(&mc, rc == MPI_SUCCESS ? buffer : NULL);
    return rc;
}

TFT_INTERPOSE int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                             MPI_Comm comm)
{
    REAL(reduce_fn, "MPI_Reduce");
    mpi_call mc;
    if (!coll_begin(&mc, "MPI_Reduce", TFT_COLL_REDUCE, comm, datatype, count, &op, root))
        return fn(sendbuf, recvbuf, count, datatype, op, root, comm);
    int rc = fn(sendbuf, recvbuf, count, datatype, op, root, comm);
    call_end(&mc, rc == MPI_SUCCESS && mc.ci.rank == root ? recvbuf : NULL);
    return rc;
}

/* The count recorded is the per-rank recvcount; the result gets no
 * statistics (it is nranks x recvcount elements). */
TFT_INTERPOSE int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                                MPI_Datatype recvtype, MPI_Comm comm)
{
    REAL(allgather_fn, "MPI_Allgather");
    mpi_call mc;
    if (!coll_begin(&mc, "MPI_Allgather", TFT_COLL_ALLGATHER, comm, recvtype, recvcount, NULL, -1))
        return fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    int rc = fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    call_end(&mc, NULL);
    return rc;
}

/* As MPI_Allgather: the per-peer recvcount, no statistics. */
TFT_INTERPOSE int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                               MPI_Datatype recvtype, MPI_Comm comm)
{
    REAL(allgather_fn, "MPI_Alltoall");
    mpi_call mc;
    if (!coll_begin(&mc, "MPI_Alltoall", TFT_COLL_ALLTOALL, comm, recvtype, recvcount, NULL, -1))
        return fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    int rc = fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    call_end(&mc, NULL);
    return rc;
}

/* The count recorded is the sum of recvcounts (equal on all ranks; a rank's
 * own share may legitimately differ from its peers'); no statistics. */
TFT_INTERPOSE int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype,
                                     MPI_Op op, MPI_Comm comm)
{
    REAL(redscat_fn, "MPI_Reduce_scatter");
    if (!mpi_rec_begin())
        return fn(sendbuf, recvbuf, recvcounts, datatype, op, comm);
    mpi_call mc;
    int size = mpi_comm_size(comm);
    uint64_t total = 0;
    for (int i = 0; recvcounts && i < size; i++)
        total += mpi_count(recvcounts[i]);
    mpi_call_fill(&mc, "MPI_Reduce_scatter", TFT_COLL_REDUCE_SCATTER, comm, datatype, total, mpi_map_redop(op), -1, 0,
                  TFT_TAG_NONE);
    call_enter(&mc);
    int rc = fn(sendbuf, recvbuf, recvcounts, datatype, op, comm);
    call_end(&mc, NULL);
    return rc;
}

TFT_INTERPOSE int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
                                           MPI_Op op, MPI_Comm comm)
{
    REAL(redscat_block_fn, "MPI_Reduce_scatter_block");
    mpi_call mc;
    if (!coll_begin(&mc, "MPI_Reduce_scatter_block", TFT_COLL_REDUCE_SCATTER, comm, datatype, recvcount, &op,
                    -1))
        return fn(sendbuf, recvbuf, recvcount, datatype, op, comm);
    int rc = fn(sendbuf, recvbuf, recvcount, datatype, op, comm);
    call_end(&mc, rc == MPI_SUCCESS ? recvbuf : NULL);
    return rc;
}

/* Gather: the count and type every rank sends (the root's own receive
 * arguments when it gathers in place); no statistics. */
TFT_INTERPOSE int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                             MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    REAL(gather_fn, "MPI_Gather");
    if (!mpi_rec_begin())
        return fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    mpi_call mc;
    int in_place = sendbuf == MPI_IN_PLACE && mpi_comm_rank(comm) == root;
    mpi_call_fill(&mc, "MPI_Gather", TFT_COLL_GATHER, comm, in_place ? recvtype : sendtype,
                  mpi_count(in_place ? recvcount : sendcount), TFT_REDOP_NONE, root, 0, TFT_TAG_NONE);
    call_enter(&mc);
    int rc = fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    call_end(&mc, NULL);
    return rc;
}

/* Scatter: the count and type every rank receives, with their statistics
 * (the root's send arguments when it keeps its share in place). */
TFT_INTERPOSE int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                              MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    REAL(gather_fn, "MPI_Scatter");
    if (!mpi_rec_begin())
        return fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    mpi_call mc;
    int in_place = recvbuf == MPI_IN_PLACE && mpi_comm_rank(comm) == root;
    mpi_call_fill(&mc, "MPI_Scatter", TFT_COLL_SCATTER, comm, in_place ? sendtype : recvtype,
                  mpi_count(in_place ? sendcount : recvcount), TFT_REDOP_NONE, root, 0, TFT_TAG_NONE);
    call_enter(&mc);
    int rc = fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    call_end(&mc, rc == MPI_SUCCESS && !in_place ? recvbuf : NULL);
    return rc;
}

TFT_INTERPOSE int MPI_Barrier(MPI_Comm comm)
{
    REAL(barrier_fn, "MPI_Barrier");
    mpi_call mc;
    if (!coll_begin(&mc, "MPI_Barrier", TFT_COLL_BARRIER, comm, (MPI_Datatype)0, 0, NULL, -1))
        return fn(comm);
    int rc = fn(comm);
    call_end(&mc, NULL);
    return rc;
}

/* ---- blocking point-to-point ---------------------------------------------- */

typedef int (*send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*recv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
typedef int (*sendrecv_fn)(const void *, int, MPI_Datatype, int, int, void *, int, MPI_Datatype, int, int,
                           MPI_Comm, MPI_Status *);
typedef int (*sendrecv_replace_fn)(void *, int, MPI_Datatype, int, int, int, int, MPI_Comm, MPI_Status *);

static int send_common(send_fn fn, const char *name, const void *buf, int count, MPI_Datatype dt, int dest,
                       int tag, MPI_Comm comm)
{
    mpi_call mc;
    if (!p2p_begin(&mc, name, TFT_COLL_SEND, comm, dt, count, dest, tag))
        return fn(buf, count, dt, dest, tag, comm);
    int rc = fn(buf, count, dt, dest, tag, comm);
    call_end(&mc, NULL);
    return rc;
}

TFT_INTERPOSE int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
    REAL(send_fn, "MPI_Send");
    return send_common(fn, "MPI_Send", buf, count, datatype, dest, tag, comm);
}

TFT_INTERPOSE int MPI_Ssend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)
{
    REAL(send_fn, "MPI_Ssend");
    return send_common(fn, "MPI_Ssend", buf, count, datatype, dest, tag, comm);
}

TFT_INTERPOSE int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    REAL(recv_fn, "MPI_Recv");
    mpi_call mc;
    if (!p2p_begin(&mc, "MPI_Recv", TFT_COLL_RECV, comm, datatype, count, source, tag))
        return fn(buf, count, datatype, source, tag, comm, status);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = fn(buf, count, datatype, source, tag, comm, st);
    if (rc == MPI_SUCCESS)
        mpi_recv_status(&mc, st, datatype);
    call_end(&mc, rc == MPI_SUCCESS ? buf : NULL);
    return rc;
}

/* One SEND and one RECV record (either side to MPI_PROC_NULL: not recorded),
 * sharing one op. */
typedef struct sendrecv_rec {
    mpi_call s, r;
    int has_s, has_r;
} sendrecv_rec;

static int sendrecv_begin(sendrecv_rec *x, const char *name, MPI_Comm comm, MPI_Datatype stype, int scount,
                          int dest, int stag, MPI_Datatype rtype, int rcount, int source, int rtag)
{
    x->has_s = dest != MPI_PROC_NULL;
    x->has_r = source != MPI_PROC_NULL;
    if ((!x->has_s && !x->has_r) || !mpi_rec_begin())
        return 0;
    if (x->has_s)
        mpi_call_fill(&x->s, name, TFT_COLL_SEND, comm, stype, mpi_count(scount), TFT_REDOP_NONE, dest, 1,
                      mpi_tag(stag));
    if (x->has_r)
        mpi_call_fill(&x->r, name, TFT_COLL_RECV, comm, rtype, mpi_count(rcount), TFT_REDOP_NONE,
                      source == MPI_ANY_SOURCE ? -1 : source, 1, mpi_tag(rtag));
    if (x->has_s)
        call_enter(&x->s);
    if (x->has_r)
        call_enter(&x->r);
    return 1;
}

/* The receive's exit first: it carries the statistics of the op. */
static void sendrecv_end(sendrecv_rec *x, int rc, const void *rbuf, const MPI_Status *st, MPI_Datatype rtype)
{
    if (x->has_r) {
        if (rc == MPI_SUCCESS)
            mpi_recv_status(&x->r, st, rtype);
        call_exit(&x->r, rc == MPI_SUCCESS ? rbuf : NULL);
    }
    if (x->has_s)
        call_exit(&x->s, NULL);
    mpi_rec_end();
}

TFT_INTERPOSE int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf,
                               int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    REAL(sendrecv_fn, "MPI_Sendrecv");
    sendrecv_rec x;
    if (!sendrecv_begin(&x, "MPI_Sendrecv", comm, sendtype, sendcount, dest, sendtag, recvtype, recvcount, source,
                        recvtag))
        return fn(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                  comm, status);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = fn(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm,
                st);
    sendrecv_end(&x, rc, recvbuf, st, recvtype);
    return rc;
}

TFT_INTERPOSE int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source,
                                       int recvtag, MPI_Comm comm, MPI_Status *status)
{
    REAL(sendrecv_replace_fn, "MPI_Sendrecv_replace");
    sendrecv_rec x;
    if (!sendrecv_begin(&x, "MPI_Sendrecv_replace", comm, datatype, count, dest, sendtag, datatype, count, source,
                        recvtag))
        return fn(buf, count, datatype, dest, sendtag, source, recvtag, comm, status);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = fn(buf, count, datatype, dest, sendtag, source, recvtag, comm, st);
    sendrecv_end(&x, rc, buf, st, datatype);
    return rc;
}

/* ---- communicator creation ------------------------------------------------ */

typedef int (*split_fn)(MPI_Comm, int, int, MPI_Comm *);
typedef int (*split_type_fn)(MPI_Comm, int, int, MPI_Info, MPI_Comm *);
typedef int (*dup_fn)(MPI_Comm, MPI_Comm *);
typedef int (*dup_info_fn)(MPI_Comm, MPI_Info, MPI_Comm *);
typedef int (*create_fn)(MPI_Comm, MPI_Group, MPI_Comm *);
typedef int (*create_group_fn)(MPI_Comm, MPI_Group, int, MPI_Comm *);
typedef int (*cart_create_fn)(MPI_Comm, int, const int[], const int[], int, MPI_Comm *);
typedef int (*cart_sub_fn)(MPI_Comm, const int[], MPI_Comm *);
typedef int (*graph_create_fn)(MPI_Comm, int, const int[], const int[], int, MPI_Comm *);
typedef int (*dist_graph_adj_fn)(MPI_Comm, int, const int[], const int[], int, const int[], const int[], MPI_Info,
                                 int, MPI_Comm *);
typedef int (*dist_graph_fn)(MPI_Comm, int, const int[], const int[], const int[], const int[], MPI_Info, int,
                             MPI_Comm *);
typedef int (*intercomm_create_fn)(MPI_Comm, int, MPI_Comm, int, int, MPI_Comm *);
typedef int (*intercomm_merge_fn)(MPI_Comm, int, MPI_Comm *);

/* After a creator returned rc with *out made from parent: numbers the new
 * communicator now, in the order its members make it (see struct mcomm),
 * and remembers what made it. MPI_COMM_NULL (a rank left out) is not one. */
static void created(int rc, const MPI_Comm *out, const char *made_by, MPI_Comm parent)
{
    if (rc != MPI_SUCCESS || !out || H(*out) == mpi_mh.comm_null || !mpi_rec_begin())
        return;
    mpi_comm_made(*out, made_by, parent);
    mpi_rec_end();
}

TFT_INTERPOSE int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    REAL(split_fn, "MPI_Comm_split");
    int rc = fn(comm, color, key, newcomm);
    created(rc, newcomm, "MPI_Comm_split", comm);
    return rc;
}

TFT_INTERPOSE int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm)
{
    REAL(split_type_fn, "MPI_Comm_split_type");
    int rc = fn(comm, split_type, key, info, newcomm);
    created(rc, newcomm, "MPI_Comm_split_type", comm);
    return rc;
}

TFT_INTERPOSE int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    REAL(dup_fn, "MPI_Comm_dup");
    int rc = fn(comm, newcomm);
    created(rc, newcomm, "MPI_Comm_dup", comm);
    return rc;
}

TFT_INTERPOSE int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
    REAL(dup_info_fn, "MPI_Comm_dup_with_info");
    int rc = fn(comm, info, newcomm);
    created(rc, newcomm, "MPI_Comm_dup_with_info", comm);
    return rc;
}

TFT_INTERPOSE int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    REAL(create_fn, "MPI_Comm_create");
    int rc = fn(comm, group, newcomm);
    created(rc, newcomm, "MPI_Comm_create", comm);
    return rc;
}

TFT_INTERPOSE int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm)
{
    REAL(create_group_fn, "MPI_Comm_create_group");
    int rc = fn(comm, group, tag, newcomm);
    created(rc, newcomm, "MPI_Comm_create_group", comm);
    return rc;
}

TFT_INTERPOSE int MPI_Cart_create(MPI_Comm old_comm, int ndims, const int dims[], const int periods[], int reorder,
                                  MPI_Comm *comm_cart)
{
    REAL(cart_create_fn, "MPI_Cart_create");
    int rc = fn(old_comm, ndims, dims, periods, reorder, comm_cart);
    created(rc, comm_cart, "MPI_Cart_create", old_comm);
    return rc;
}

TFT_INTERPOSE int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *new_comm)
{
    REAL(cart_sub_fn, "MPI_Cart_sub");
    int rc = fn(comm, remain_dims, new_comm);
    created(rc, new_comm, "MPI_Cart_sub", comm);
    return rc;
}

TFT_INTERPOSE int MPI_Graph_create(MPI_Comm comm_old, int nnodes, const int index[], const int edges[], int reorder,
                                   MPI_Comm *comm_graph)
{
    REAL(graph_create_fn, "MPI_Graph_create");
    int rc = fn(comm_old, nnodes, index, edges, reorder, comm_graph);
    created(rc, comm_graph, "MPI_Graph_create", comm_old);
    return rc;
}

TFT_INTERPOSE int MPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[], const int sourceweights[],
                                                 int outdegree, const int destinations[], const int destweights[],
                                                 MPI_Info info, int reorder, MPI_Comm *comm_dist_graph)
{
    REAL(dist_graph_adj_fn, "MPI_Dist_graph_create_adjacent");
    int rc = fn(comm_old, indegree, sources, sourceweights, outdegree, destinations, destweights, info, reorder,
                comm_dist_graph);
    created(rc, comm_dist_graph, "MPI_Dist_graph_create_adjacent", comm_old);
    return rc;
}

TFT_INTERPOSE int MPI_Dist_graph_create(MPI_Comm comm_old, int n, const int nodes[], const int degrees[], const int targets[],
                                        const int weights[], MPI_Info info, int reorder, MPI_Comm *newcomm)
{
    REAL(dist_graph_fn, "MPI_Dist_graph_create");
    int rc = fn(comm_old, n, nodes, degrees, targets, weights, info, reorder, newcomm);
    created(rc, newcomm, "MPI_Dist_graph_create", comm_old);
    return rc;
}

TFT_INTERPOSE int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm bridge_comm, int remote_leader, int tag,
                                       MPI_Comm *newintercomm)
{
    REAL(intercomm_create_fn, "MPI_Intercomm_create");
    int rc = fn(local_comm, local_leader, bridge_comm, remote_leader, tag, newintercomm);
    created(rc, newintercomm, "MPI_Intercomm_create", local_comm);
    return rc;
}

TFT_INTERPOSE int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm)
{
    REAL(intercomm_merge_fn, "MPI_Intercomm_merge");
    int rc = fn(intercomm, high, newintracomm);
    created(rc, newintracomm, "MPI_Intercomm_merge", intercomm);
    return rc;
}

#endif /* TFT_HAVE_MPI */
