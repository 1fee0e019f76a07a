/*
 * tfdiff_mpi.c — the MPI transport of tfdiff --mpi (tfdiff_mpi.h). Only
 * process 0 receives; every other process sends its jobs' results and
 * extracts in job order, so a receive order in job order never waits on a
 * send that comes later (MPI keeps the order of messages between two
 * processes on one tag). Messages carry plain bytes: every process runs
 * the same tfdiff binary.
 */
#include "tfdiff_mpi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TFT_HAVE_MPI
#include <mpi.h>
#endif

enum { TAG_RESULT = 1, TAG_EXTRACT = 2, PIECE = 1 << 20 };

/* Launched by mpirun/srun: the launchers' environment says so. */
static int launched_size(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"};
    for (size_t k = 0; k < sizeof(vars) / sizeof(vars[0]); k++) {
        const char *v = getenv(vars[k]);
        if (v && atoi(v) > 0)
            return atoi(v);
    }
    return getenv("PMIX_RANK") || getenv("PMI_RANK") ? 2 : 0;
}

int tfdiff_mpi_start(tfdiff_mpi *mp, int *argc, char ***argv)
{
    *mp = (tfdiff_mpi){.me = 0, .nproc = 1, .local = 1};
    int size = launched_size();
    if (size <= 0)
        return 0;
#ifdef TFT_HAVE_MPI
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "tfdiff: --mpi: MPI_Init failed\n");
        return -1;
    }
    mp->on = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &mp->me);
    MPI_Comm_size(MPI_COMM_WORLD, &mp->nproc);
    const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    mp->local = ls && atoi(ls) > 0 ? atoi(ls) : 1;
    return 0;
#else
    (void)argc;
    (void)argv;
    if (size > 1) {
        fprintf(stderr, "tfdiff: --mpi: this tfdiff was built without MPI; run it as one process\n");
        return -1;
    }
    return 0;
#endif
}

void tfdiff_mpi_end(tfdiff_mpi *mp)
{
#ifdef TFT_HAVE_MPI
    if (mp->on)
        MPI_Finalize();
#endif
    mp->on = false;
}

int tfdiff_mpi_agree(const tfdiff_mpi *mp, int e)
{
#ifdef TFT_HAVE_MPI
    int all = e;
    if (mp->on)
        MPI_Allreduce(&e, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
#else
    (void)mp;
    return e;
#endif
}

int tfdiff_mpi_bcast_int(const tfdiff_mpi *mp, int v)
{
#ifdef TFT_HAVE_MPI
    if (mp->on)
        MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
#else
    (void)mp;
#endif
    return v;
}

int tfdiff_mpi_move(const tfdiff_mpi *mp, int owner, void *p, size_t n)
{
#ifdef TFT_HAVE_MPI
    if (!mp->on || owner == 0 || (mp->me != 0 && mp->me != owner))
        return 0;
    for (size_t k = 0; k < n; k += PIECE) {
        int c = (int)(n - k < PIECE ? n - k : PIECE);
        int rc = mp->me == owner ? MPI_Send((char *)p + k, c, MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD)
                                 : MPI_Recv((char *)p + k, c, MPI_BYTE, owner, TAG_RESULT, MPI_COMM_WORLD,
                                            MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return -EIO;
    }
    return 0;
#else
    (void)mp;
    (void)owner;
    (void)p;
    (void)n;
    return 0;
#endif
}

#ifdef TFT_HAVE_MPI
static int send_piece(void *ctx, const void *p, size_t n)
{
    (void)ctx;
    return MPI_Send(p, (int)n, MPI_BYTE, 0, TAG_EXTRACT, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -EIO;
}
#endif

int tfdiff_mpi_move_extract(const tfdiff_mpi *mp, int owner, diff_spill *sp, int ri)
{
#ifdef TFT_HAVE_MPI
    if (!mp->on || owner == 0 || (mp->me != 0 && mp->me != owner))
        return 0;
    uint64_t total = core_spill_bytes(sp, ri);
    if (mp->me == owner) {
        if (MPI_Send(&total, 1, MPI_UINT64_T, 0, TAG_EXTRACT, MPI_COMM_WORLD) != MPI_SUCCESS)
            return -EIO;
        return core_spill_export(sp, ri, send_piece, NULL);
    }
    if (MPI_Recv(&total, 1, MPI_UINT64_T, owner, TAG_EXTRACT, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return -EIO;
    static char buf[PIECE]; /* process 0 receives on its main thread only */
    int e = 0;
    for (uint64_t got = 0; got < total;) { /* errors: still take every piece, or the sender waits */
        MPI_Status st;
        int n = 0;
        MPI_Probe(owner, TAG_EXTRACT, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &n);
        if (n <= 0 || n > PIECE) {
            e = -EIO;
            break;
        }
        if (MPI_Recv(buf, n, MPI_BYTE, owner, TAG_EXTRACT, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            e = -EIO;
            break;
        }
        if (!e)
            e = core_spill_import(sp, ri, buf, (size_t)n);
        got += (uint64_t)n;
    }
    return e;
#else
    (void)mp;
    (void)owner;
    (void)sp;
    (void)ri;
    return 0;
#endif
}
