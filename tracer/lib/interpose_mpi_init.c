/*
 * interpose_mpi_init.c — MPI_Init and MPI_Init_thread: where a job's
 * processes that record in-process without a job identity in their
 * environment agree on one run id (docs/MULTINODE.md, "One run id").
 *
 * After the real call, a process recording in-process with a run id of its
 * own (rec_inproc_run_id_private) duplicates MPI_COMM_WORLD, takes rank 0's
 * id by MPI_Bcast on the duplicate, frees it, and adopts the id: the writer
 * thread rewrites the header of a rank file already open (records made
 * before MPI_Init) and the manifest fragment carries it. The calls go to
 * MPI directly (ip_real) with the interposers' guard held: nothing is
 * recorded, and the program's communicators and sequence numbers are
 * untouched. Every process in which libtftrace is loaded takes part,
 * recording or not (after_init), so the processes of a job need not share
 * their environment; a job in which only some processes load libtftrace
 * must set TFT_MPI_INIT_SYNC=0 on those.
 *
 * On the same duplicate, processes recording in-process estimate their
 * clock's offset against rank 0's (clock_sync; TFT_CLOCK_SYNC=0 skips it),
 * kept in their manifest fragments for the analyses that compare times
 * across hosts.
 */
#include "interpose_mpi_internal.h"
#include "tft.h"

#include "collector.h" /* clock_realtime_ns */

#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef TFT_HAVE_MPI

typedef int (*init_fn)(int *, char ***);
typedef int (*init_thread_fn)(int *, char ***, int, int *);
typedef int (*dup_fn)(MPI_Comm, MPI_Comm *);
typedef int (*free_fn)(MPI_Comm *);
typedef int (*bcast_fn)(void *, int, MPI_Datatype, int, MPI_Comm);

static MPI_Comm world(void)
{
#ifdef OPEN_MPI
    void *w = dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world");
    return w ? (MPI_Comm)w : (MPI_Comm)ip_real("ompi_mpi_comm_world");
#else
    return MPI_COMM_WORLD;
#endif
}

static MPI_Op bor_op(void)
{
#ifdef OPEN_MPI
    void *o = dlsym(RTLD_DEFAULT, "ompi_mpi_op_bor");
    return o ? (MPI_Op)o : (MPI_Op)ip_real("ompi_mpi_op_bor");
#else
    return MPI_BOR;
#endif
}

static MPI_Datatype byte_type(void)
{
#ifdef OPEN_MPI
    void *b = dlsym(RTLD_DEFAULT, "ompi_mpi_byte");
    return b ? (MPI_Datatype)b : (MPI_Datatype)ip_real("ompi_mpi_byte");
#else
    return MPI_BYTE;
#endif
}

typedef int (*rank_fn)(MPI_Comm, int *);
typedef int (*send_fn)(const void *, int, MPI_Datatype, int, int, MPI_Comm);
typedef int (*recv_fn)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *);
typedef int (*allreduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);

/* The real MPI calls this file makes, NULL-checked together. */
typedef struct mpi_fns {
    dup_fn dup;
    free_fn cfree;
    bcast_fn bcast;
    rank_fn rank, size;
    send_fn send;
    recv_fn recv;
    allreduce_fn allreduce;
    MPI_Datatype byte;
    MPI_Op bor;
} mpi_fns;

static bool fns_load(mpi_fns *f)
{
    f->dup = (dup_fn)ip_real("MPI_Comm_dup");
    f->cfree = (free_fn)ip_real("MPI_Comm_free");
    f->bcast = (bcast_fn)ip_real("MPI_Bcast");
    f->rank = (rank_fn)ip_real("MPI_Comm_rank");
    f->size = (rank_fn)ip_real("MPI_Comm_size");
    f->send = (send_fn)ip_real("MPI_Send");
    f->recv = (recv_fn)ip_real("MPI_Recv");
    f->allreduce = (allreduce_fn)ip_real("MPI_Allreduce");
    f->byte = byte_type();
    f->bor = bor_op();
    return f->dup && f->cfree && f->bcast && f->rank && f->size && f->send && f->recv && f->allreduce && f->byte &&
           f->bor;
}

enum { CLOCK_ROUNDS = 8, TAG_PING = 0x7f01, TAG_PONG = 0x7f02, TAG_RESULT = 0x7f03 };

/* Rank 0's side with peer r: CLOCK_ROUNDS ping-pongs, the one with the
 * shortest round trip kept. The peer read its clock between our two
 * readings, so its offset is within half the round trip of the estimate
 * that puts its reading in the middle. out: {offset, error}. */
static void clock_probe(const mpi_fns *f, MPI_Comm c, int r, int64_t out[2])
{
    uint64_t best = UINT64_MAX;
    out[0] = 0;
    out[1] = -1;
    for (int k = 0; k < CLOCK_ROUNDS; k++) {
        uint64_t t0 = clock_realtime_ns(), tr = 0;
        if (f->send(&t0, 8, f->byte, r, TAG_PING, c) != MPI_SUCCESS ||
            f->recv(&tr, 8, f->byte, r, TAG_PONG, c, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
        uint64_t t1 = clock_realtime_ns(), rtt = t1 - t0;
        if (rtt < best) {
            best = rtt;
            out[0] = (int64_t)(tr - (t0 + rtt / 2));
            out[1] = (int64_t)(rtt / 2 + 1);
        }
    }
}

/* This host's realtime minus monotonic now (realtime as the estimate read
 * it): readers anchor the estimate on the monotonic clock with it, so a
 * realtime step before or after the estimate does not move it. */
static int64_t clock_anchor(void)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    uint64_t rt = clock_realtime_ns();
    clock_gettime(CLOCK_MONOTONIC, &b);
    uint64_t m0 = (uint64_t)a.tv_sec * 1000000000u + (uint64_t)a.tv_nsec;
    uint64_t m1 = (uint64_t)b.tv_sec * 1000000000u + (uint64_t)b.tv_nsec;
    return (int64_t)(rt - (m0 + (m1 - m0) / 2));
}

/* Each rank's CLOCK_REALTIME offset against rank 0's, measured by rank 0
 * with ping-pongs on the private communicator c, told to each rank, kept
 * for its manifest fragment (docs/MULTINODE.md, "Clocks across hosts"). */
static void clock_sync(const mpi_fns *f, MPI_Comm c, int keep)
{
    int me = -1, n = 0;
    if (f->rank(c, &me) != MPI_SUCCESS || f->size(c, &n) != MPI_SUCCESS)
        return;
    int64_t res[2] = {0, 0};
    if (me == 0) {
        for (int r = 1; r < n; r++) {
            int64_t o[2];
            clock_probe(f, c, r, o);
            f->send(o, 16, f->byte, r, TAG_RESULT, c);
        }
    } else {
        for (int k = 0; k < CLOCK_ROUNDS; k++) {
            uint64_t x;
            if (f->recv(&x, 8, f->byte, 0, TAG_PING, c, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                return;
            x = clock_realtime_ns();
            f->send(&x, 8, f->byte, 0, TAG_PONG, c);
        }
        if (f->recv(res, 16, f->byte, 0, TAG_RESULT, c, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
    }
    if (keep && res[1] >= 0)
        rec_inproc_set_clock(res[0], (uint64_t)res[1], 0, clock_anchor());
}

enum { WANT_RUN_ID = 1, WANT_CLOCKS = 2 };

/* What the job agrees on after MPI_Init (see the file comment). Every
 * process that runs this takes part in the same calls, whether it records
 * or not: what is done is decided by all of them together (a bitwise or of
 * what each wants), so a job whose processes differ in their environment
 * (one node without TFT_OUTPUT) does not hang in a collective some of its
 * processes never call. TFT_MPI_INIT_SYNC=0, on every process, skips it. */
static void after_init(void)
{
    uint8_t id[16];
    mpi_fns f;
    MPI_Comm c, w;
    const char *off = getenv("TFT_MPI_INIT_SYNC");
    if (off && !strcmp(off, "0"))
        return;
    ip_depth++;
    tft_enabled(); /* starts the recorder (the in-process writer) if no call did yet */
    int priv = rec_inproc_run_id_private(id);
    const char *cs = getenv("TFT_CLOCK_SYNC");
    int clocks = rec_inproc_active() && !(cs && !strcmp(cs, "0"));
    unsigned char want = (unsigned char)((priv ? WANT_RUN_ID : 0) | (clocks ? WANT_CLOCKS : 0)), all = 0;
    if (fns_load(&f) && (w = world()) && f.dup(w, &c) == MPI_SUCCESS) {
        if (f.allreduce(&want, &all, 1, f.byte, f.bor, c) == MPI_SUCCESS) {
            if ((all & WANT_RUN_ID) && f.bcast(id, 16, f.byte, 0, c) == MPI_SUCCESS && priv)
                rec_inproc_adopt_run_id(id, 2000);
            if (all & WANT_CLOCKS)
                clock_sync(&f, c, clocks);
        }
        f.cfree(&c);
    }
    ip_depth--;
}

TFT_INTERPOSE int MPI_Init(int *argc, char ***argv)
{
    static void *_Atomic cache;
    init_fn fn = (init_fn)ip_real_cached(&cache, "MPI_Init");
    if (!fn)
        return MPI_ERR_INTERN;
    int rc = fn(argc, argv);
    if (rc == MPI_SUCCESS)
        after_init();
    return rc;
}

TFT_INTERPOSE int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    static void *_Atomic cache;
    init_thread_fn fn = (init_thread_fn)ip_real_cached(&cache, "MPI_Init_thread");
    if (!fn)
        return MPI_ERR_INTERN;
    int rc = fn(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        after_init();
    return rc;
}

#endif /* TFT_HAVE_MPI */
