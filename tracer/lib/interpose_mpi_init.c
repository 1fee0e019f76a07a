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
 * untouched. Every process of the job takes part or none does: they share
 * their environment (TFT_OUTPUT, TFT_RUN_ID, the launcher's variables), so
 * they take the same branch.
 */
#include "interpose_mpi_internal.h"
#include "tft.h"

#include <dlfcn.h>

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

static MPI_Datatype byte_type(void)
{
#ifdef OPEN_MPI
    void *b = dlsym(RTLD_DEFAULT, "ompi_mpi_byte");
    return b ? (MPI_Datatype)b : (MPI_Datatype)ip_real("ompi_mpi_byte");
#else
    return MPI_BYTE;
#endif
}

/* Rank 0's run id for everyone (see the file comment). */
static void agree_run_id(void)
{
    uint8_t id[16];
    ip_depth++;
    tft_enabled(); /* starts the recorder (the in-process writer) if no call did yet */
    if (rec_inproc_run_id_private(id)) {
        dup_fn dup = (dup_fn)ip_real("MPI_Comm_dup");
        free_fn cfree = (free_fn)ip_real("MPI_Comm_free");
        bcast_fn bcast = (bcast_fn)ip_real("MPI_Bcast");
        MPI_Comm c, w = world();
        if (dup && cfree && bcast && w && dup(w, &c) == MPI_SUCCESS) {
            if (bcast(id, 16, byte_type(), 0, c) == MPI_SUCCESS)
                rec_inproc_adopt_run_id(id, 2000);
            cfree(&c);
        }
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
        agree_run_id();
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
        agree_run_id();
    return rc;
}

#endif /* TFT_HAVE_MPI */
