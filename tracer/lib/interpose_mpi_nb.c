/*
 * interpose_mpi_nb.c — LD_PRELOAD interposers for MPI's non-blocking calls
 * and their completion (built with TFT_HAVE_MPI; the blocking calls and
 * the communicators are in interpose_mpi.c, docs/INTERPOSE.md):
 * MPI_Iallreduce, Ibcast, Ireduce, Iallgather, Ireduce_scatter_block,
 * Ialltoall, Ibarrier, Isend, Issend, Irecv write the ENTER at the call;
 * the EXIT (with the result's statistics) follows when a completion call
 * (MPI_Wait, Waitall, Waitany, Waitsome, Test, Testall, Testany, Testsome)
 * finishes the request, or at MPI_Request_free (without statistics). A
 * request never completed leaves an ENTER without EXIT: the hang signal.
 *
 * Requests in flight live in a fixed table (request handle -> call),
 * guarded by a mutex: static, not a tft_u64map, since the interposers
 * allocate nothing inside the program's MPI calls (a full table writes
 * the EXIT at once). MPI_Request is a pointer in Open MPI and completion
 * sets the caller's handle to MPI_REQUEST_NULL, so completion wrappers copy
 * the handles before the real call and finish every request whose handle
 * became MPI_REQUEST_NULL. Persistent requests are not recorded (and not
 * confused: their handles are never in the table).
 */
#include "interpose_mpi_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifdef TFT_HAVE_MPI

/* ---- non-blocking requests ------------------------------------------------- */

enum { NB_SLOTS = 4096 }; /* power of two; one slot always stays free */

typedef struct nb_req {
    uintptr_t key;        /* RKEY of the request; 0 = free slot */
    mpi_call mc;
    const void *result;   /* buffer whose statistics the EXIT records, NULL none */
    MPI_Datatype rtype;   /* receives: element type, for MPI_Get_count */
    int recv;             /* a receive: source and count from the status */
} nb_req;

static struct {
    pthread_mutex_t lock;
    nb_req slot[NB_SLOTS];
    _Atomic int live;     /* entries in use: 0 = completion wrappers pass through */
} nb = {.lock = PTHREAD_MUTEX_INITIALIZER};

static unsigned nb_home(uintptr_t key)
{
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    return (unsigned)(h >> 40) & (NB_SLOTS - 1);
}

/* Adds (or replaces) the entry of e->key; -1 when the table is full. */
static int nb_put(const nb_req *e)
{
    int rc = -1;
    pthread_mutex_lock(&nb.lock);
    unsigned i = nb_home(e->key);
    for (unsigned n = 0; n < NB_SLOTS; n++, i = (i + 1) & (NB_SLOTS - 1)) {
        if (nb.slot[i].key == e->key) {
            nb.slot[i] = *e;
            rc = 0;
            break;
        }
        if (nb.slot[i].key == 0) {
            if (atomic_load(&nb.live) < NB_SLOTS - 1) {
                nb.slot[i] = *e;
                atomic_fetch_add(&nb.live, 1);
                rc = 0;
            }
            break;
        }
    }
    pthread_mutex_unlock(&nb.lock);
    return rc;
}

/* Removes the entry of key into *out; 0 when there was none. Linear probing
 * with backward-shift deletion: no tombstones, lookups stay short. */
static int nb_take(uintptr_t key, nb_req *out)
{
    int found = 0;
    pthread_mutex_lock(&nb.lock);
    unsigned i = nb_home(key);
    for (unsigned n = 0; n < NB_SLOTS && nb.slot[i].key; n++, i = (i + 1) & (NB_SLOTS - 1)) {
        if (nb.slot[i].key != key)
            continue;
        *out = nb.slot[i];
        found = 1;
        for (;;) {
            nb.slot[i].key = 0;
            unsigned j = i;
            for (;;) {
                j = (j + 1) & (NB_SLOTS - 1);
                if (!nb.slot[j].key)
                    goto done;
                unsigned k = nb_home(nb.slot[j].key);
                /* the entry at j may move to i when its home is not in (i, j] */
                if (i <= j ? (k <= i || k > j) : (k <= i && k > j))
                    break;
            }
            nb.slot[i] = nb.slot[j];
            i = j;
        }
    }
done:
    if (found)
        atomic_fetch_sub(&nb.live, 1);
    pthread_mutex_unlock(&nb.lock);
    return found;
}

/* After a successful non-blocking start (guard held): the ENTER now, the
 * EXIT at completion. The ENTER's implicit op ends at once, so that the
 * program's next calls are recorded as their own ops. A full table still
 * records the ENTER: the sequence numbers stay aligned across ranks. */
static void nb_start(mpi_call *mc, MPI_Request req, const void *result, MPI_Datatype rtype, int recv)
{
    int saved = errno;
    mpi_enter(mc);
    mc->own_op = 0; /* the op of the ENTER ends now, the EXIT's is its own */
    tft_op_end();
    rec_explicit_coll = 0;
    if (mc->token >= 0) {
        nb_req e = {.key = RKEY(req), .mc = *mc, .result = result, .rtype = rtype, .recv = recv};
        if (e.key == mpi_req_null() || nb_put(&e) != 0)
            mpi_exit(mc, NULL); /* nothing will complete it */
    }
    errno = saved;
}

/* The request that was key completed (ok: successfully; st: its status or
 * NULL): records its EXIT. Guard held. */
static void nb_finish(uintptr_t key, const MPI_Status *st, int ok)
{
    nb_req e;
    if (!key || key == mpi_req_null() || !nb_take(key, &e))
        return;
    int saved = errno;
    mpi_call *mc = &e.mc;
    if (e.recv && ok)
        mpi_recv_status(mc, st, e.rtype);
    const void *res = ok && mc->smax >= 0 && mc->ci.count ? e.result : NULL;
    if (res) { /* the statistics belong to an op at the completion point */
        tft_op_begin(mc->ci.name, TFT_OP_COLLECTIVE, 0, NULL);
        mpi_exit(mc, res);
        tft_op_end();
    } else {
        mpi_exit(mc, NULL);
    }
    rec_explicit_coll = 0;
    errno = saved;
}

/* Guard for a completion wrapper: nothing to do while no request is ours. */
static int nb_begin(void) { return atomic_load_explicit(&nb.live, memory_order_relaxed) > 0 && mpi_rec_begin(); }

/* Copies of the caller's request handles (completion turns them into
 * MPI_REQUEST_NULL) and, when the caller ignores statuses, ours. */
typedef struct req_snap {
    uintptr_t *old;
    MPI_Status *st;       /* statuses to pass to the real call */
    int own_st;           /* st was allocated here */
    uintptr_t old_small[16];
    MPI_Status st_small[16];
} req_snap;

/* 0 on success; -1 (nothing allocated) when memory is short. nst: number of
 * statuses the call may write (0: the call takes none). */
static int snap_take(req_snap *s, int n, const MPI_Request *reqs, MPI_Status *user_st, int nst)
{
    int saved = errno; /* a failing malloc sets it */
    s->old = n <= 16 ? s->old_small : malloc((size_t)n * sizeof(*s->old));
    s->st = user_st;
    s->own_st = 0;
    if (nst > 0 && user_st == MPI_STATUSES_IGNORE) {
        s->st = nst <= 16 ? s->st_small : malloc((size_t)nst * sizeof(*s->st));
        s->own_st = s->st && s->st != s->st_small;
    }
    if (!s->old || (nst > 0 && !s->st)) {
        if (s->old != s->old_small)
            free(s->old);
        if (s->own_st)
            free(s->st);
        errno = saved;
        return -1;
    }
    for (int i = 0; i < n; i++)
        s->old[i] = RKEY(reqs[i]);
    errno = saved;
    return 0;
}

static void snap_free(req_snap *s)
{
    if (s->old != s->old_small)
        free(s->old);
    if (s->own_st)
        free(s->st);
}

/* Whether the status of one completed request reports success. */
static int status_ok(int rc, const MPI_Status *st)
{
    return rc == MPI_SUCCESS || (rc == MPI_ERR_IN_STATUS && st && st->MPI_ERROR == MPI_SUCCESS);
}

/* Requests i in [0, n) whose handle became MPI_REQUEST_NULL finished;
 * statuses per request index (st may be NULL). */
static void snap_finish_all(const req_snap *s, int n, const MPI_Request *reqs, const MPI_Status *st, int rc)
{
    uintptr_t null = mpi_req_null();
    for (int i = 0; i < n; i++)
        if (s->old[i] != null && RKEY(reqs[i]) == null)
            nb_finish(s->old[i], st ? &st[i] : NULL, status_ok(rc, st ? &st[i] : NULL));
}

/* ---- non-blocking starts -------------------------------------------------- */

typedef int (*iallreduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *);
typedef int (*ibcast_fn)(void *, int, MPI_Datatype, int, MPI_Comm, MPI_Request *);
typedef int (*ireduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm, MPI_Request *);
typedef int (*iallgather_fn)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm,
                             MPI_Request *);
typedef int (*iredscat_block_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *);
typedef int (*ibarrier_fn)(MPI_Comm, MPI_Request *);
typedef int (*isend_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);
typedef int (*irecv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *);

/* Fills mc for a non-blocking collective (guard held). */
static void icoll_fill(mpi_call *mc, const char *name, int type, MPI_Comm comm, MPI_Datatype dt, int count,
                       const MPI_Op *op, int root)
{
    mpi_call_fill(mc, name, type, comm, dt, mpi_count(count), op ? mpi_map_redop(*op) : TFT_REDOP_NONE, root, 0,
                  TFT_TAG_NONE);
}

TFT_INTERPOSE int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                 MPI_Comm comm, MPI_Request *request)
{
    REAL(iallreduce_fn, "MPI_Iallreduce");
    if (!mpi_rec_begin())
        return fn(sendbuf, recvbuf, count, datatype, op, comm, request);
    int rc = fn(sendbuf, recvbuf, count, datatype, op, comm, request);
    if (rc == MPI_SUCCESS && request) {
        mpi_call mc;
        icoll_fill(&mc, "MPI_Iallreduce", TFT_COLL_ALLREDUCE, comm, datatype, count, &op, -1);
        nb_start(&mc, *request, recvbuf, datatype, 0);
    }
    mpi_rec_end();
    return rc;
}

TFT_INTERPOSE int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request)
{
    REAL(ibcast_fn, "MPI_Ibcast");
    if (!mpi_rec_begin())
        return fn(buffer, count, datatype, root, comm, request);
    int rc = fn(buffer, count, datatype, root, comm, request);
    if (rc == MPI_SUCCESS && request) {
        mpi_call mc;
        icoll_fill(&mc, "MPI_Ibcast", TFT_COLL_BCAST, comm, datatype, count, NULL, root);
        nb_start(&mc, *request, buffer, datatype, 0);
    }
    mpi_rec_end();
    return rc;
}

TFT_INTERPOSE int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                              MPI_Comm comm, MPI_Request *request)
{
    REAL(ireduce_fn, "MPI_Ireduce");
    if (!mpi_rec_begin())
        return fn(sendbuf, recvbuf, count, datatype, op, root, comm, request);
    int rc = fn(sendbuf, recvbuf, count, datatype, op, root, comm, request);
    if (rc == MPI_SUCCESS && request) {
        mpi_call mc;
        icoll_fill(&mc, "MPI_Ireduce", TFT_COLL_REDUCE, comm, datatype, count, &op, root);
        nb_start(&mc, *request, mc.ci.rank == root ? recvbuf : NULL, datatype, 0);
    }
    mpi_rec_end();
    return rc;
}

static int iallgather_common(iallgather_fn fn, const char *name, int type, const void *sendbuf, int sendcount,
                             MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                             MPI_Comm comm, MPI_Request *request)
{
    if (!mpi_rec_begin())
        return fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
    int rc = fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
    if (rc == MPI_SUCCESS && request) {
        mpi_call mc;
        icoll_fill(&mc, name, type, comm, recvtype, recvcount, NULL, -1);
        nb_start(&mc, *request, NULL, recvtype, 0);
    }
    mpi_rec_end();
    return rc;
}

TFT_INTERPOSE int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                                 MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    REAL(iallgather_fn, "MPI_Iallgather");
    return iallgather_common(fn, "MPI_Iallgather", TFT_COLL_ALLGATHER, sendbuf, sendcount, sendtype, recvbuf,
                             recvcount, recvtype, comm, request);
}

TFT_INTERPOSE int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                                MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    REAL(iallgather_fn, "MPI_Ialltoall");
    return iallgather_common(fn, "MPI_Ialltoall", TFT_COLL_ALLTOALL, sendbuf, sendcount, sendtype, recvbuf,
                             recvcount, recvtype, comm, request);
}

TFT_INTERPOSE int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
                                            MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    REAL(iredscat_block_fn, "MPI_Ireduce_scatter_block");
    if (!mpi_rec_begin())
        return fn(sendbuf, recvbuf, recvcount, datatype, op, comm, request);
    int rc = fn(sendbuf, recvbuf, recvcount, datatype, op, comm, request);
    if (rc == MPI_SUCCESS && request) {
        mpi_call mc;
        icoll_fill(&mc, "MPI_Ireduce_scatter_block", TFT_COLL_REDUCE_SCATTER, comm, datatype, recvcount, &op, -1);
        nb_start(&mc, *request, recvbuf, datatype, 0);
    }
    mpi_rec_end();
    return rc;
}

TFT_INTERPOSE int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
    REAL(ibarrier_fn, "MPI_Ibarrier");
    if (!mpi_rec_begin())
        return fn(comm, request);
    int rc = fn(comm, request);
    if (rc == MPI_SUCCESS && request) {
        mpi_call mc;
        icoll_fill(&mc, "MPI_Ibarrier", TFT_COLL_BARRIER, comm, (MPI_Datatype)0, 0, NULL, -1);
        nb_start(&mc, *request, NULL, (MPI_Datatype)0, 0);
    }
    mpi_rec_end();
    return rc;
}

static int isend_common(isend_fn fn, const char *name, const void *buf, int count, MPI_Datatype dt, int dest,
                        int tag, MPI_Comm comm, MPI_Request *request)
{
    if (dest == MPI_PROC_NULL || !mpi_rec_begin())
        return fn(buf, count, dt, dest, tag, comm, request);
    int rc = fn(buf, count, dt, dest, tag, comm, request);
    if (rc == MPI_SUCCESS && request) {
        mpi_call mc;
        mpi_call_fill(&mc, name, TFT_COLL_SEND, comm, dt, mpi_count(count), TFT_REDOP_NONE, dest, 1, mpi_tag(tag));
        nb_start(&mc, *request, NULL, dt, 0);
    }
    mpi_rec_end();
    return rc;
}

TFT_INTERPOSE int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                            MPI_Request *request)
{
    REAL(isend_fn, "MPI_Isend");
    return isend_common(fn, "MPI_Isend", buf, count, datatype, dest, tag, comm, request);
}

TFT_INTERPOSE int MPI_Issend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                             MPI_Request *request)
{
    REAL(isend_fn, "MPI_Issend");
    return isend_common(fn, "MPI_Issend", buf, count, datatype, dest, tag, comm, request);
}

TFT_INTERPOSE int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                            MPI_Request *request)
{
    REAL(irecv_fn, "MPI_Irecv");
    if (source == MPI_PROC_NULL || !mpi_rec_begin())
        return fn(buf, count, datatype, source, tag, comm, request);
    int rc = fn(buf, count, datatype, source, tag, comm, request);
    if (rc == MPI_SUCCESS && request) {
        mpi_call mc;
        mpi_call_fill(&mc, "MPI_Irecv", TFT_COLL_RECV, comm, datatype, mpi_count(count), TFT_REDOP_NONE,
                      source == MPI_ANY_SOURCE ? -1 : source, 1, mpi_tag(tag));
        nb_start(&mc, *request, buf, datatype, 1);
    }
    mpi_rec_end();
    return rc;
}

/* ---- completion ----------------------------------------------------------- */

typedef int (*wait_fn)(MPI_Request *, MPI_Status *);
typedef int (*test_fn)(MPI_Request *, int *, MPI_Status *);
typedef int (*waitall_fn)(int, MPI_Request *, MPI_Status *);
typedef int (*testall_fn)(int, MPI_Request *, int *, MPI_Status *);
typedef int (*waitany_fn)(int, MPI_Request *, int *, MPI_Status *);
typedef int (*testany_fn)(int, MPI_Request *, int *, int *, MPI_Status *);
typedef int (*waitsome_fn)(int, MPI_Request *, int *, int *, MPI_Status *);
typedef int (*request_free_fn)(MPI_Request *);

/* One request: finished when its handle became MPI_REQUEST_NULL. */
static void finish_one(uintptr_t old, const MPI_Request *req, const MPI_Status *st, int rc)
{
    if (old != mpi_req_null() && RKEY(*req) == mpi_req_null())
        nb_finish(old, st, rc == MPI_SUCCESS);
}

TFT_INTERPOSE int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    REAL(wait_fn, "MPI_Wait");
    if (!request || !nb_begin())
        return fn(request, status);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    uintptr_t old = RKEY(*request);
    int rc = fn(request, st);
    finish_one(old, request, st, rc);
    mpi_rec_end();
    return rc;
}

TFT_INTERPOSE int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    REAL(test_fn, "MPI_Test");
    if (!request || !nb_begin())
        return fn(request, flag, status);
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    uintptr_t old = RKEY(*request);
    int rc = fn(request, flag, st);
    finish_one(old, request, st, rc);
    mpi_rec_end();
    return rc;
}

TFT_INTERPOSE int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status *array_of_statuses)
{
    REAL(waitall_fn, "MPI_Waitall");
    req_snap s;
    if (count <= 0 || !array_of_requests || !nb_begin())
        return fn(count, array_of_requests, array_of_statuses);
    if (snap_take(&s, count, array_of_requests, array_of_statuses, count)) {
        mpi_rec_end();
        return fn(count, array_of_requests, array_of_statuses);
    }
    int rc = fn(count, array_of_requests, s.st);
    snap_finish_all(&s, count, array_of_requests, s.st, rc);
    snap_free(&s);
    mpi_rec_end();
    return rc;
}

TFT_INTERPOSE int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag, MPI_Status array_of_statuses[])
{
    REAL(testall_fn, "MPI_Testall");
    req_snap s;
    if (count <= 0 || !array_of_requests || !nb_begin())
        return fn(count, array_of_requests, flag, array_of_statuses);
    if (snap_take(&s, count, array_of_requests, array_of_statuses, count)) {
        mpi_rec_end();
        return fn(count, array_of_requests, flag, array_of_statuses);
    }
    int rc = fn(count, array_of_requests, flag, s.st);
    snap_finish_all(&s, count, array_of_requests, s.st, rc);
    snap_free(&s);
    mpi_rec_end();
    return rc;
}

/* Waitany/Testany: the one request at *index finished (if any). */
static void finish_index(const req_snap *s, int count, const MPI_Request *reqs, int index, const MPI_Status *st,
                         int rc)
{
    if (index >= 0 && index < count && index != MPI_UNDEFINED)
        finish_one(s->old[index], &reqs[index], st, rc);
}

TFT_INTERPOSE int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status)
{
    REAL(waitany_fn, "MPI_Waitany");
    req_snap s;
    if (count <= 0 || !array_of_requests || !index || !nb_begin())
        return fn(count, array_of_requests, index, status);
    if (snap_take(&s, count, array_of_requests, NULL, 0)) {
        mpi_rec_end();
        return fn(count, array_of_requests, index, status);
    }
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = fn(count, array_of_requests, index, st);
    finish_index(&s, count, array_of_requests, *index, st, rc);
    snap_free(&s);
    mpi_rec_end();
    return rc;
}

TFT_INTERPOSE int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag, MPI_Status *status)
{
    REAL(testany_fn, "MPI_Testany");
    req_snap s;
    if (count <= 0 || !array_of_requests || !index || !nb_begin())
        return fn(count, array_of_requests, index, flag, status);
    if (snap_take(&s, count, array_of_requests, NULL, 0)) {
        mpi_rec_end();
        return fn(count, array_of_requests, index, flag, status);
    }
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = fn(count, array_of_requests, index, flag, st);
    finish_index(&s, count, array_of_requests, *index, st, rc);
    snap_free(&s);
    mpi_rec_end();
    return rc;
}

/* Waitsome/Testsome: statuses follow the order of indices[]. */
static void finish_some(const req_snap *s, int count, const MPI_Request *reqs, const int *outcount,
                        const int *indices, const MPI_Status *st, int rc)
{
    if (!outcount || *outcount == MPI_UNDEFINED || !indices)
        return;
    for (int k = 0; k < *outcount && k < count; k++) {
        int i = indices[k];
        if (i >= 0 && i < count && s->old[i] != mpi_req_null() && RKEY(reqs[i]) == mpi_req_null())
            nb_finish(s->old[i], &st[k], status_ok(rc, &st[k]));
    }
}

/* MPI_Waitsome and MPI_Testsome (one prototype) around the real fn. */
static int some_common(waitsome_fn fn, int incount, MPI_Request *reqs, int *outcount, int *indices,
                       MPI_Status *statuses)
{
    req_snap s;
    if (incount <= 0 || !reqs || !nb_begin())
        return fn(incount, reqs, outcount, indices, statuses);
    if (snap_take(&s, incount, reqs, statuses, incount)) {
        mpi_rec_end();
        return fn(incount, reqs, outcount, indices, statuses);
    }
    int rc = fn(incount, reqs, outcount, indices, s.st);
    finish_some(&s, incount, reqs, outcount, indices, s.st, rc);
    snap_free(&s);
    mpi_rec_end();
    return rc;
}

TFT_INTERPOSE int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[],
                               MPI_Status array_of_statuses[])
{
    REAL(waitsome_fn, "MPI_Waitsome");
    return some_common(fn, incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
}

TFT_INTERPOSE int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[],
                               MPI_Status array_of_statuses[])
{
    REAL(waitsome_fn, "MPI_Testsome");
    return some_common(fn, incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
}

/* The program stops tracking the request: its EXIT now, without statistics
 * (the operation may still be in flight). */
TFT_INTERPOSE int MPI_Request_free(MPI_Request *request)
{
    REAL(request_free_fn, "MPI_Request_free");
    if (!request || !nb_begin())
        return fn(request);
    uintptr_t old = RKEY(*request);
    int rc = fn(request);
    if (rc == MPI_SUCCESS)
        nb_finish(old, NULL, 0);
    mpi_rec_end();
    return rc;
}

#endif /* TFT_HAVE_MPI */
