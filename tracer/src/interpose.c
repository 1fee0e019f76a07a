/*
 * interpose.c — LD_PRELOAD interposers of libtftrace.so for unmodified
 * programs: cblas_sgemm/dgemm (shapes and statistics of A, B and C) and,
 * when built with MPI headers (TFT_HAVE_MPI), the blocking MPI collectives
 * MPI_Allreduce, MPI_Bcast, MPI_Reduce, MPI_Allgather and MPI_Barrier.
 *
 * Each wrapper calls the real function with the caller's arguments and
 * returns its result unchanged; errno is preserved across our recording.
 * When the real function cannot be found the BLAS wrappers do nothing and
 * the MPI wrappers return MPI_ERR_OTHER. libtftrace is never linked against
 * BLAS or MPI: real functions and MPI's predefined handles are looked up at
 * run time, so the library loads into any process.
 *
 * Recording is skipped (the call passes straight through) when:
 *  - recording is off (no tftrace, no TFT_OUTPUT);
 *  - we are already inside an interposer on this thread (re-entry guard:
 *    the real library or the recorder calling an interposed function);
 *  - an MPI call happens between the program's own tft_coll_enter and
 *    tft_coll_exit (it records its collectives itself);
 *  - the main program is itself linked with libtftrace (tftrain): it
 *    records what it computes, and interposing would double the records.
 *    TFT_INTERPOSE=1 forces the interposers on, TFT_INTERPOSE=0 off.
 *
 * Limits: one process-wide decision (made at the first interposed call);
 * MPI handles of a libmpi loaded by dlopen after that call are not seen.
 */
#include "interpose_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Depth of interposer frames on this thread; > 0 means "pass through". */
static __thread int ip_depth __attribute__((tls_model("initial-exec")));

enum { IP_UNKNOWN = 0, IP_OFF = 1, IP_ON = 2 };
static _Atomic int ip_mode;

/* ---- real-symbol lookup -------------------------------------------------- */

#define MAX_OBJS 512

typedef struct obj_list {
    const char *names[MAX_OBJS]; /* dlpi_name of each loaded object, owned by ld.so */
    int n;
} obj_list;

static int collect_obj(struct dl_phdr_info *info, size_t size, void *arg)
{
    obj_list *l = arg;
    if (info->dlpi_name && info->dlpi_name[0] && l->n < MAX_OBJS)
        l->names[l->n++] = info->dlpi_name;
    return 0;
}

/* Searches every loaded object's own scope, for symbols of libraries loaded
 * with dlopen(RTLD_LOCAL) that RTLD_NEXT cannot see. Skips libtftrace. */
static void *walk_loaded(const char *name)
{
    Dl_info self;
    if (!dladdr((void *)ip_real, &self))
        return NULL;
    obj_list *l = malloc(sizeof(*l));
    if (!l)
        return NULL;
    l->n = 0;
    dl_iterate_phdr(collect_obj, l);
    void *found = NULL;
    for (int i = 0; i < l->n && !found; i++) {
        void *h = dlopen(l->names[i], RTLD_NOLOAD | RTLD_LAZY);
        if (!h)
            continue;
        void *p = dlsym(h, name);
        Dl_info where;
        if (p && dladdr(p, &where) && where.dli_fbase != self.dli_fbase)
            found = p;
        dlclose(h); /* drops the reference RTLD_NOLOAD took; the object stays */
    }
    free(l);
    return found;
}

void *ip_real(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    return p ? p : walk_loaded(name);
}

/* Cached ip_real; a miss is retried on the next call (the library may be
 * loaded later). */
static void *real_of(void *_Atomic *cache, const char *name)
{
    void *p = atomic_load_explicit(cache, memory_order_acquire);
    if (!p) {
        p = ip_real(name);
        atomic_store_explicit(cache, p, memory_order_release);
    }
    return p;
}

/* ---- whether to record --------------------------------------------------- */

/* 1 when the main program has libtftrace among its DT_NEEDED entries. */
static int main_needs_tftrace(struct dl_phdr_info *info, size_t size, void *arg)
{
    int *linked = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
            continue;
        const ElfW(Dyn) *dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        uintptr_t strtab = 0;
        for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++)
            if (d->d_tag == DT_STRTAB)
                strtab = (uintptr_t)d->d_un.d_ptr;
        if (!strtab)
            break;
        /* ld.so relocates d_ptr in place on most targets; not on some. */
        if (strtab < info->dlpi_addr)
            strtab += info->dlpi_addr;
        for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++)
            if (d->d_tag == DT_NEEDED && strstr((const char *)strtab + d->d_un.d_val, "libtftrace"))
                *linked = 1;
        break;
    }
    return 1; /* the main program comes first: stop there */
}

static int decide_mode(void)
{
    const char *v = getenv("TFT_INTERPOSE");
    if (v && !strcmp(v, "0"))
        return IP_OFF;
    if (v && !strcmp(v, "1"))
        return IP_ON;
    int linked = 0;
    dl_iterate_phdr(main_needs_tftrace, &linked);
    return linked ? IP_OFF : IP_ON;
}

/* Called with ip_depth > 0. */
static int ip_active(void)
{
    int m = atomic_load_explicit(&ip_mode, memory_order_relaxed);
    if (m == IP_UNKNOWN) {
        m = decide_mode();
        atomic_store_explicit(&ip_mode, m, memory_order_relaxed);
    }
    return m == IP_ON && tft_enabled();
}

/* ---- CBLAS --------------------------------------------------------------- */

enum { CBLAS_ROW_MAJOR = 101, CBLAS_COL_MAJOR = 102, CBLAS_NO_TRANS = 111 };

/* Records a rows x cols matrix stored with leading dimension ld (row-major
 * view: ld elements between row starts); returns its tensor id, 0 if not
 * recorded (bad dimensions, no memory). Packs rows when ld != cols. */
static uint64_t record_matrix(const char *name, int dtype, size_t esz, const void *p, int rows, int cols,
                              int ld)
{
    if (rows < 0 || cols < 0 || ld < (cols > 1 ? cols : 1) || (!p && rows && cols))
        return 0;
    int64_t shape[2] = {rows, cols};
    if (ld == cols || rows <= 1) {
        return tft_tensor(name, (tft_dtype)dtype, p, 2, shape) == 0 ? tft_last_tensor_id() : 0;
    }
    size_t row_bytes = (size_t)cols * esz;
    char *buf = malloc((size_t)rows * row_bytes);
    if (!buf)
        return 0;
    for (int r = 0; r < rows; r++)
        memcpy(buf + (size_t)r * row_bytes, (const char *)p + (size_t)r * (size_t)ld * esz, row_bytes);
    int e = tft_tensor(name, (tft_dtype)dtype, buf, 2, shape);
    free(buf);
    return e == 0 ? tft_last_tensor_id() : 0;
}

typedef struct gemm_args {
    const char *name, *name_a, *name_b;
    int dtype;
    size_t esz;
    int order, ta, tb, m, n, k;
    const void *a, *b, *c;
    int lda, ldb, ldc;
} gemm_args;

/* One op: A and B as their own tensors (inputs), then the op with C as its
 * output. Shapes are the matrices as stored, in a row-major view: a
 * column-major M x N C is recorded as [N, M]. */
static void record_gemm(const gemm_args *g)
{
    if (g->order != CBLAS_ROW_MAJOR && g->order != CBLAS_COL_MAJOR)
        return;
    int col = g->order == CBLAS_COL_MAJOR;
    int ta = g->ta != CBLAS_NO_TRANS, tb = g->tb != CBLAS_NO_TRANS;
    /* op(A) is M x K, op(B) is K x N, C is M x N. */
    int a_rows = (ta ^ col) ? g->k : g->m, a_cols = (ta ^ col) ? g->m : g->k;
    int b_rows = (tb ^ col) ? g->n : g->k, b_cols = (tb ^ col) ? g->k : g->n;
    int c_rows = col ? g->n : g->m, c_cols = col ? g->m : g->n;
    uint64_t in[2];
    in[0] = record_matrix(g->name_a, g->dtype, g->esz, g->a, a_rows, a_cols, g->lda);
    in[1] = record_matrix(g->name_b, g->dtype, g->esz, g->b, b_rows, b_cols, g->ldb);
    if (tft_op_begin(g->name, TFT_OP_GEMM, 2, in) < 0)
        return;
    record_matrix(g->name, g->dtype, g->esz, g->c, c_rows, c_cols, g->ldc);
    tft_op_end();
}

/* After the real gemm ran inside our guard: record it (when active) with
 * the caller's errno preserved, then leave the guard. */
static void after_gemm(const gemm_args *g)
{
    int saved = errno;
    if (ip_active())
        record_gemm(g);
    errno = saved;
    ip_depth--;
}

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int,
                         float, float *, int);
typedef void (*dgemm_fn)(int, int, int, int, int, int, double, const double *, int, const double *, int,
                         double, double *, int);

void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    static void *_Atomic real;
    sgemm_fn fn = (sgemm_fn)real_of(&real, "cblas_sgemm");
    if (!fn)
        return;
    if (ip_depth) {
        fn(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    ip_depth++;
    fn(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    after_gemm(&(gemm_args){"cblas_sgemm", "cblas_sgemm.A", "cblas_sgemm.B", TFT_F32, sizeof(float),
                             order, transa, transb, m, n, k, a, b, c, lda, ldb, ldc});
}

void cblas_dgemm(int order, int transa, int transb, int m, int n, int k, double alpha, const double *a,
                 int lda, const double *b, int ldb, double beta, double *c, int ldc)
{
    static void *_Atomic real;
    dgemm_fn fn = (dgemm_fn)real_of(&real, "cblas_dgemm");
    if (!fn)
        return;
    if (ip_depth) {
        fn(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    ip_depth++;
    fn(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    after_gemm(&(gemm_args){"cblas_dgemm", "cblas_dgemm.A", "cblas_dgemm.B", TFT_F64, sizeof(double),
                             order, transa, transb, m, n, k, a, b, c, lda, ldb, ldc});
}

/* ---- MPI ----------------------------------------------------------------- */
#ifdef TFT_HAVE_MPI
#include <mpi.h>

/* Open MPI's predefined handles are addresses of objects in libmpi; we look
 * them up instead of referencing them, so that libtftrace has no undefined
 * data symbols. MPICH's are integer constants. */
#ifdef OPEN_MPI
static struct {
    _Atomic int ready;
    void *world, *f32, *f64, *i32, *sum, *prod, *min, *max;
} mh;

/* RTLD_DEFAULT first: a program's copy relocation of a handle object (as
 * non-PIC code referencing MPI_INT makes) is the address everyone uses, and
 * RTLD_NEXT would find libmpi's original instead. */
static void *handle_sym(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    return p ? p : ip_real(name);
}

static void mpi_handles(void)
{
    if (atomic_load_explicit(&mh.ready, memory_order_acquire))
        return;
    mh.world = handle_sym("ompi_mpi_comm_world");
    mh.f32 = handle_sym("ompi_mpi_float");
    mh.f64 = handle_sym("ompi_mpi_double");
    mh.i32 = handle_sym("ompi_mpi_int");
    mh.sum = handle_sym("ompi_mpi_op_sum");
    mh.prod = handle_sym("ompi_mpi_op_prod");
    mh.min = handle_sym("ompi_mpi_op_min");
    mh.max = handle_sym("ompi_mpi_op_max");
    atomic_store_explicit(&mh.ready, 1, memory_order_release);
}
#define H_WORLD mh.world
#define H_F32 mh.f32
#define H_F64 mh.f64
#define H_I32 mh.i32
#define H_SUM mh.sum
#define H_PROD mh.prod
#define H_MIN mh.min
#define H_MAX mh.max
#define H(x) ((void *)(x))
#else
static void mpi_handles(void) {}
#define H_WORLD MPI_COMM_WORLD
#define H_F32 MPI_FLOAT
#define H_F64 MPI_DOUBLE
#define H_I32 MPI_INT
#define H_SUM MPI_SUM
#define H_PROD MPI_PROD
#define H_MIN MPI_MIN
#define H_MAX MPI_MAX
#define H(x) (x)
#endif

typedef int (*comm_int_fn)(MPI_Comm, int *);
typedef int (*type_size_fn)(MPI_Datatype, int *);

static int comm_query(const char *fn_name, void *_Atomic *cache, MPI_Comm comm, int dflt)
{
    comm_int_fn fn = (comm_int_fn)real_of(cache, fn_name);
    int v;
    return fn && fn(comm, &v) == MPI_SUCCESS ? v : dflt;
}

/* A communicator id equal on all its ranks. MPI_COMM_WORLD: the id tftrain
 * uses for it. Others: the Fortran handle and size — an approximation that
 * holds when the ranks create their communicators in the same order (the
 * usual case); MPI has no portable cross-rank communicator identity. */
static uint64_t comm_id(MPI_Comm comm, int size)
{
    if (H(comm) == H_WORLD)
        return tft_string_id("MPI_COMM_WORLD", 14);
    long f = -1;
#ifdef MPI_Comm_c2f
    f = (long)MPI_Comm_c2f(comm);
#else
    static void *_Atomic c2f;
    MPI_Fint (*fn)(MPI_Comm) = (MPI_Fint(*)(MPI_Comm))real_of(&c2f, "MPI_Comm_c2f");
    if (fn)
        f = (long)fn(comm);
#endif
    char buf[64];
    int n = snprintf(buf, sizeof(buf), "MPI_Comm:%ld:%d", f, size);
    return tft_string_id(buf, (size_t)n);
}

static int map_dtype(MPI_Datatype dt)
{
    if (H(dt) == H_F32)
        return TFT_F32;
    if (H(dt) == H_F64)
        return TFT_F64;
    if (H(dt) == H_I32)
        return TFT_I32;
    return -1;
}

static int map_redop(MPI_Op op)
{
    if (H(op) == H_SUM)
        return TFT_REDOP_SUM;
    if (H(op) == H_PROD)
        return TFT_REDOP_PROD;
    if (H(op) == H_MIN)
        return TFT_REDOP_MIN;
    if (H(op) == H_MAX)
        return TFT_REDOP_MAX;
    return TFT_REDOP_OTHER;
}

typedef struct coll_call {
    tft_coll_info ci;
    int64_t token;
    int stats;        /* the dtype maps to ours: the result gets statistics */
} coll_call;

/* Decides whether to record this call and records its enter; returns 1 when
 * coll_end must follow the real call. Leaves errno as it found it. */
static int coll_begin(coll_call *cc, const char *name, int type, MPI_Comm comm, MPI_Datatype dt, int count,
                      const MPI_Op *op, int root)
{
    if (ip_depth || rec_explicit_coll)
        return 0;
    ip_depth++;
    int saved = errno;
    if (!ip_active()) {
        errno = saved;
        ip_depth--;
        return 0;
    }
    mpi_handles();
    int redop = op ? map_redop(*op) : TFT_REDOP_NONE;
    static void *_Atomic rank_fn;
    static void *_Atomic size_fn;
    static void *_Atomic tsize_fn;
    int size = comm_query("MPI_Comm_size", &size_fn, comm, -1);
    int dtype = type == TFT_COLL_BARRIER ? TFT_U8 : map_dtype(dt);
    uint64_t n = count > 0 ? (uint64_t)count : 0;
    cc->stats = dtype >= 0;
    if (dtype < 0) { /* an MPI type we have no tft_dtype for: count bytes */
        type_size_fn ts = (type_size_fn)real_of(&tsize_fn, "MPI_Type_size");
        int bytes = 1;
        if (ts && ts(dt, &bytes) != MPI_SUCCESS)
            bytes = 1;
        dtype = TFT_U8;
        n *= (uint64_t)(bytes > 0 ? bytes : 1);
    }
    cc->ci = TFT_COLL_INFO(.name = name, .comm = comm_id(comm, size), .type = type, .dtype = dtype,
                           .count = type == TFT_COLL_BARRIER ? 0 : n, .redop = redop, .root = root,
                           .rank = comm_query("MPI_Comm_rank", &rank_fn, comm, -1), .nranks = size);
    cc->token = tft_coll_enter(&cc->ci);
    errno = saved;
    return 1;
}

/* Records the exit with the result buffer (NULL: no statistics). */
static void coll_end(coll_call *cc, const void *result)
{
    int saved = errno;
    if (cc->token >= 0)
        tft_coll_exit(cc->token, &cc->ci, cc->stats ? result : NULL);
    errno = saved;
    ip_depth--;
}

typedef int (*allreduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
typedef int (*bcast_fn)(void *, int, MPI_Datatype, int, MPI_Comm);
typedef int (*reduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm);
typedef int (*allgather_fn)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
typedef int (*barrier_fn)(MPI_Comm);

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm)
{
    static void *_Atomic real;
    allreduce_fn fn = (allreduce_fn)real_of(&real, "MPI_Allreduce");
    if (!fn)
        return MPI_ERR_OTHER;
    coll_call cc;
    if (!coll_begin(&cc, "MPI_Allreduce", TFT_COLL_ALLREDUCE, comm, datatype, count, &op, -1))
        return fn(sendbuf, recvbuf, count, datatype, op, comm);
    int rc = fn(sendbuf, recvbuf, count, datatype, op, comm);
    coll_end(&cc, rc == MPI_SUCCESS ? recvbuf : NULL);
    return rc;
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    static void *_Atomic real;
    bcast_fn fn = (bcast_fn)real_of(&real, "MPI_Bcast");
    if (!fn)
        return MPI_ERR_OTHER;
    coll_call cc;
    if (!coll_begin(&cc, "MPI_Bcast", TFT_COLL_BCAST, comm, datatype, count, NULL, root))
        return fn(buffer, count, datatype, root, comm);
    int rc = fn(buffer, count, datatype, root, comm);
    coll_end(&cc, rc == MPI_SUCCESS ? buffer : NULL);
    return rc;
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm)
{
    static void *_Atomic real;
    reduce_fn fn = (reduce_fn)real_of(&real, "MPI_Reduce");
    if (!fn)
        return MPI_ERR_OTHER;
    coll_call cc;
    if (!coll_begin(&cc, "MPI_Reduce", TFT_COLL_REDUCE, comm, datatype, count, &op, root))
        return fn(sendbuf, recvbuf, count, datatype, op, root, comm);
    int rc = fn(sendbuf, recvbuf, count, datatype, op, root, comm);
    coll_end(&cc, rc == MPI_SUCCESS && cc.ci.rank == root ? recvbuf : NULL);
    return rc;
}

/* The count recorded is the per-rank recvcount; the result gets no
 * statistics (it is nranks x recvcount elements). */
int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm)
{
    static void *_Atomic real;
    allgather_fn fn = (allgather_fn)real_of(&real, "MPI_Allgather");
    if (!fn)
        return MPI_ERR_OTHER;
    coll_call cc;
    if (!coll_begin(&cc, "MPI_Allgather", TFT_COLL_ALLGATHER, comm, recvtype, recvcount, NULL, -1))
        return fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    int rc = fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    coll_end(&cc, NULL);
    return rc;
}

int MPI_Barrier(MPI_Comm comm)
{
    static void *_Atomic real;
    barrier_fn fn = (barrier_fn)real_of(&real, "MPI_Barrier");
    if (!fn)
        return MPI_ERR_OTHER;
    coll_call cc;
    if (!coll_begin(&cc, "MPI_Barrier", TFT_COLL_BARRIER, comm, (MPI_Datatype)0, 0, NULL, -1))
        return fn(comm);
    int rc = fn(comm);
    coll_end(&cc, NULL);
    return rc;
}
#endif /* TFT_HAVE_MPI */
