/*
 * interpose.c — LD_PRELOAD interposers of libtftrace.so for unmodified
 * programs: the shared machinery (real-symbol lookup, the re-entry guard,
 * the on/off decision) and cblas_sgemm/dgemm (shapes and statistics of A,
 * B and C). MPI: interpose_mpi.c.
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
__thread int ip_depth __attribute__((tls_model("initial-exec")));

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
void *ip_real_cached(void *_Atomic *cache, const char *name)
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
int ip_active(void)
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
    sgemm_fn fn = (sgemm_fn)ip_real_cached(&real, "cblas_sgemm");
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
    dgemm_fn fn = (dgemm_fn)ip_real_cached(&real, "cblas_dgemm");
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
