/*
 * dist.c — data parallelism for tftrain over MPI (when built with MPI), each
 * collective recorded through tft.h with its per-communicator sequence
 * number and result statistics. Without MPI, or with one rank, a
 * collective is the identity (and is still recorded, so traces of 1-rank
 * runs have the same op structure as N-rank ones).
 */
#include "train.h"

#include "tft.h"
#include "tft_format.h" /* tft_string_id */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifdef TFT_HAVE_MPI
#include <mpi.h>
#endif

int dist_init(dist *d, int *argc, char ***argv)
{
    memset(d, 0, sizeof(*d));
    d->world = 1;
    d->id_world = tft_string_id("MPI_COMM_WORLD", 14);
    d->id_meta = tft_string_id("tftrain.meta", 12);
#ifdef TFT_HAVE_MPI
    int inited = 0;
    if (MPI_Init(argc, argv) != MPI_SUCCESS)
        return -EIO;
    MPI_Initialized(&inited);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->world);
    MPI_Comm *w = malloc(sizeof(MPI_Comm)), *m = malloc(sizeof(MPI_Comm));
    if (!w || !m) {
        free(w);
        free(m);
        return -ENOMEM;
    }
    *w = MPI_COMM_WORLD;
    MPI_Comm_dup(MPI_COMM_WORLD, m);
    d->comm_world = w;
    d->comm_meta = m;
    (void)inited;
#else
    (void)argc;
    (void)argv;
#endif
    return 0;
}

void dist_finalize(dist *d)
{
#ifdef TFT_HAVE_MPI
    if (d->comm_meta)
        MPI_Comm_free((MPI_Comm *)d->comm_meta);
    free(d->comm_world);
    free(d->comm_meta);
    MPI_Finalize();
#endif
    memset(d, 0, sizeof(*d));
}

void dist_abort(dist *d, int code)
{
#ifdef TFT_HAVE_MPI
    if (d->world > 1)
        MPI_Abort(MPI_COMM_WORLD, code);
#endif
    (void)d;
    exit(code);
}

static int coll(dist *d, int meta, int type, void *x, size_t n, int dtype, bool mean, const char *name)
{
    tft_coll_info ci = TFT_COLL_INFO(.name = name, .comm = meta ? d->id_meta : d->id_world, .type = type,
                                     .dtype = dtype, .count = n,
                                     .redop = type == TFT_COLL_BCAST ? TFT_REDOP_NONE : TFT_REDOP_SUM,
                                     .root = type == TFT_COLL_BCAST ? 0 : -1, .rank = d->rank,
                                     .nranks = d->world);
    const rec_defer *df = rec_deferred();
    int64_t tok = 0;
    if (df)
        df->coll_enter(df->ctx, &ci);
    else
        tok = tft_coll_enter(&ci);
    int e = 0;
#ifdef TFT_HAVE_MPI
    if (d->world > 1) {
        MPI_Comm c = *(MPI_Comm *)(meta ? d->comm_meta : d->comm_world);
        MPI_Datatype dt = dtype == TFT_F64 ? MPI_DOUBLE : MPI_FLOAT;
        int r = type == TFT_COLL_BCAST ? MPI_Bcast(x, (int)n, dt, 0, c)
                                       : MPI_Allreduce(MPI_IN_PLACE, x, (int)n, dt, MPI_SUM, c);
        e = r == MPI_SUCCESS ? 0 : -EIO;
    }
#endif
    if (mean && d->world > 1 && dtype == TFT_F32) {
        float s = 1.0f / (float)d->world;
        for (size_t i = 0; i < n; i++)
            ((float *)x)[i] *= s;
    }
    if (df)
        df->coll_exit(df->ctx, &ci, x);
    else if (tok >= 0)
        tft_coll_exit(tok, &ci, x);
    return e;
}

int dist_allreduce(dist *d, int meta, float *x, size_t n, bool mean)
{
    return coll(d, meta, TFT_COLL_ALLREDUCE, x, n, TFT_F32, mean, "MPI_Allreduce");
}

int dist_allreduce_f64(dist *d, double *x, size_t n)
{
    return coll(d, 1, TFT_COLL_ALLREDUCE, x, n, TFT_F64, false, "MPI_Allreduce");
}

int dist_bcast(dist *d, float *x, size_t n)
{
    return coll(d, 0, TFT_COLL_BCAST, x, n, TFT_F32, false, "MPI_Bcast");
}

int dist_bcast_bytes(dist *d, void *buf, size_t bytes)
{
#ifdef TFT_HAVE_MPI
    if (d->world > 1 && MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, *(MPI_Comm *)d->comm_world) != MPI_SUCCESS)
        return -EIO;
#else
    (void)d;
    (void)buf;
    (void)bytes;
#endif
    return 0;
}

int dist_allreduce_raw(dist *d, int meta, void *x, size_t n, int dtype)
{
#ifdef TFT_HAVE_MPI
    if (d->world > 1) {
        MPI_Comm c = *(MPI_Comm *)(meta ? d->comm_meta : d->comm_world);
        MPI_Datatype dt = dtype == TFT_F64 ? MPI_DOUBLE : MPI_FLOAT;
        if (MPI_Allreduce(MPI_IN_PLACE, x, (int)n, dt, MPI_SUM, c) != MPI_SUCCESS)
            return -EIO;
    }
#else
    (void)d;
    (void)meta;
    (void)x;
    (void)n;
    (void)dtype;
#endif
    return 0;
}

void dist_local(dist *d, int *local_rank, int *local_size)
{
    *local_rank = 0;
    *local_size = 1;
#ifdef TFT_HAVE_MPI
    if (d->world > 1) {
        MPI_Comm node;
        if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
            MPI_Comm_rank(node, local_rank);
            MPI_Comm_size(node, local_size);
            MPI_Comm_free(&node);
        }
    }
#else
    (void)d;
#endif
}
