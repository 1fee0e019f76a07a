/*
 * interpose.c — LD_PRELOAD interposers of libtftrace.so for unmodified
 * programs: the shared machinery (real-symbol lookup, the re-entry guard,
 * the on/off decision) and cblas_sgemm/dgemm (shapes and statistics of A,
 * B and C; the call's arguments as op attributes, so `tfdump --replay-op`
 * can re-run a captured gemm). MPI: interpose_mpi.c.
 *
 * Records: through recorder_fast.c (string ids cached per interposer, the
 * statistics memo for inputs; docs/INTERPOSE.md "Cost"), except under a
 * capture, which goes through tft.h: the same records either way
 * (tests/tracer/interpose, gemm-sites).
 *
 * Capture (tftrace --capture): A and B stay readable until the gemm op has
 * begun (their inputs are read then), and when beta != 0 a copy of C taken
 * before the call is stored as the op's PRIOR capture; that copy is made
 * only while a capture spec could match the current step.
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
#include "recorder_fast_internal.h"
#include "recorder_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ip_real_cached's miss: looks name up and caches what it found (NULL:
 * looked up again next time, the library may be loaded later). */
void *ip_real_fill(void *_Atomic *cache, const char *name)
{
    void *p = ip_real(name);
    atomic_store_explicit(cache, p, memory_order_release);
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

/* The mode decided while the process is still single-threaded: read
 * lazily, getenv in an interposed call (a BLAS thread's mmap) could run
 * while the main thread's MPI_Init calls setenv, which moves environ under
 * it (a SIGSEGV seen in tftrain under OpenMPI with OpenBLAS's threads). */
__attribute__((constructor)) static void ip_mode_init(void)
{
    int saved = errno;
    if (atomic_load_explicit(&ip_mode, memory_order_relaxed) == IP_UNKNOWN)
        atomic_store_explicit(&ip_mode, decide_mode(), memory_order_relaxed);
    errno = saved;
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

/* 1 when an index argument fits the int our records use (ILP64 flavours
 * pass int64_t; a call whose dimensions do not fit runs unrecorded). */
static inline int fits_int(int64_t v) { return v >= INT_MIN && v <= INT_MAX; }

enum { CBLAS_ROW_MAJOR = 101, CBLAS_COL_MAJOR = 102, CBLAS_NO_TRANS = 111 };

/* The names one interposed BLAS function writes: the op (and its output
 * tensor) and its inputs. An op's name depends on the function alone, not
 * on who called it, so each interposer is one call site: the string ids
 * are computed at its first recorded call and reused (rec_site_name). */
typedef struct blas_site {
    rec_site_name op, in0, in1;
} blas_site;

#define BLAS_SITE(fn, in0, in1) {REC_SITE_NAME(fn), REC_SITE_NAME(fn "." in0), REC_SITE_NAME(fn "." in1)}
static blas_site site_sgemm = BLAS_SITE("cblas_sgemm", "A", "B");
static blas_site site_dgemm = BLAS_SITE("cblas_dgemm", "A", "B");
static blas_site site_ssyrk = {REC_SITE_NAME("cblas_ssyrk"), REC_SITE_NAME("cblas_ssyrk.A"), REC_SITE_NAME(NULL)};
static blas_site site_dsyrk = {REC_SITE_NAME("cblas_dsyrk"), REC_SITE_NAME("cblas_dsyrk.A"), REC_SITE_NAME(NULL)};
static blas_site site_sgemv = BLAS_SITE("cblas_sgemv", "A", "x");
static blas_site site_dgemv = BLAS_SITE("cblas_dgemv", "A", "x");

/* 1 when a rows x cols matrix at p with leading dimension ld (row-major
 * view: ld elements between row starts) can be recorded. */
static int matrix_ok(const void *p, int rows, int cols, int ld)
{
    return rows >= 0 && cols >= 0 && ld >= (cols > 1 ? cols : 1) && p;
}

/* The matrix (see matrix_ok) as dense rows: p itself when ld == cols,
 * else a packed copy in *packed (the caller frees it). NULL when the
 * dimensions are bad or memory is short. */
static const void *dense_matrix(size_t esz, const void *p, int rows, int cols, int ld, void **packed)
{
    *packed = NULL;
    if (!matrix_ok(p, rows, cols, ld))
        return NULL;
    if (ld == cols || rows <= 1)
        return p;
    size_t row_bytes = (size_t)cols * esz;
    char *buf = malloc((size_t)rows * row_bytes + 1);
    if (!buf)
        return NULL;
    for (int r = 0; r < rows; r++)
        memcpy(buf + (size_t)r * row_bytes, (const char *)p + (size_t)r * (size_t)ld * esz, row_bytes);
    *packed = buf;
    return buf;
}

/* A strided vector's len elements (BLAS: a negative increment walks the
 * storage backwards) can be recorded. */
static int vector_ok(const void *v, int len, int inc) { return len >= 0 && inc != 0 && v; }

/* The vector's elements in their logical order, dense; *keep gets the copy. */
static const void *dense_vector(size_t esz, const void *v, int len, int inc, void **keep)
{
    *keep = NULL;
    if (!vector_ok(v, len, inc))
        return NULL;
    if (inc == 1 || len <= 1)
        return v;
    char *d = malloc((size_t)len * esz + 1);
    if (!d)
        return NULL;
    size_t step = (size_t)(inc < 0 ? -(long)inc : inc);
    for (size_t i = 0; i < (size_t)len; i++) {
        size_t src = inc > 0 ? i : (size_t)len - 1 - i;
        memcpy(d + i * esz, (const char *)v + src * step * esz, esz);
    }
    *keep = d;
    return d;
}

static void free_if(void *p)
{
    if (p) /* free(NULL) would still cost an interposed call */
        free(p);
}

static int64_t f64_bits(double v)
{
    int64_t b;
    memcpy(&b, &v, sizeof(b));
    return b;
}

/* Whether a BLAS op's inputs are recorded as tensors of their own: for
 * their fingerprints (the origin analysis) or for capture; in shape mode
 * neither applies and the op's attributes carry their shapes. */
static int inputs_wanted(void) { return rec_tensor_mode() > TFT_STATS_SHAPE || rec_capture_armed(); }

/* ---- the fast path (recorder_fast.c): no capture armed --------------------
 * The same records as the tft.h path below, in the same order: an input is
 * an op of its own (kind runtime, named like it, no inputs) and its tensor,
 * as tft_tensor records a tensor outside an op; the call is an op with the
 * inputs' ids and its attributes, then its output tensor. Shape mode reads
 * no data (nothing to pack or copy); an input's statistics are reused while
 * its bytes are unchanged (rec_fast_stats, keyed by the caller's address). */

static uint64_t shape_numel(int ndim, const int64_t *shape)
{
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (uint64_t)shape[i];
    return n;
}

/* Statistics of the dense data d when the mode has any, else NULL. */
static const tft_stats *fast_stats(const rec_fast *f, int dtype, const void *d, const void *key, int ndim,
                                   const int64_t *shape, tft_stats *st)
{
    if (f->mode <= TFT_STATS_SHAPE)
        return NULL;
    rec_fast_stats(key, dtype, d, (size_t)shape_numel(ndim, shape), f->mode, st);
    return st;
}

/* Input tensor `name` (dense data d, key the caller's address); its id, 0
 * if not recorded. */
static uint64_t fast_input(const rec_fast *f, rec_site_name *name, int dtype, const void *d, const void *key,
                           int ndim, const int64_t *shape)
{
    tft_stats st;
    const tft_stats *s = fast_stats(f, dtype, d, key, ndim, shape, &st);
    uint64_t nid = rec_fast_name(f, name);
    uint64_t ts = rec_fast_stamp();
    int64_t seq;
    rec_fast_op(f, nid, TFT_OP_RUNTIME, 0, NULL, 0, NULL, ts, &seq); /* lost or not, the tensor follows */
    return rec_fast_tensor(f, seq, nid, dtype, ndim, shape, f->mode, s, ts);
}

static uint64_t fast_input_matrix(const rec_fast *f, rec_site_name *name, int dtype, size_t esz, const void *p,
                                  int rows, int cols, int ld, void **keep)
{
    const void *d = dense_matrix(esz, p, rows, cols, ld, keep);
    return d ? fast_input(f, name, dtype, d, p, 2, (const int64_t[]){rows, cols}) : 0;
}

static uint64_t fast_input_vector(const rec_fast *f, rec_site_name *name, int dtype, size_t esz, const void *v,
                                  int len, int inc, void **keep)
{
    const void *d = dense_vector(esz, v, len, inc, keep);
    return d ? fast_input(f, name, dtype, d, v, 1, (const int64_t[]){len}) : 0;
}

/* The call's op (kind gemm) and, when out_ok, its output tensor of dense
 * data d (read only for statistics). */
static void fast_op_output(const rec_fast *f, rec_site_name *name, int n_in, const uint64_t *in, int n_attr,
                           const int64_t *attrs, int out_ok, int dtype, const void *d, int ndim,
                           const int64_t *shape)
{
    tft_stats st;
    const tft_stats *s = out_ok ? fast_stats(f, dtype, d, NULL, ndim, shape, &st) : NULL;
    uint64_t nid = rec_fast_name(f, name);
    uint64_t ts = rec_fast_stamp();
    int64_t seq;
    if (rec_fast_op(f, nid, TFT_OP_GEMM, n_in, in, n_attr, attrs, ts, &seq) == 0 && out_ok)
        rec_fast_tensor(f, seq, nid, dtype, ndim, shape, f->mode, s, ts);
}

/* An output matrix for fast_op_output: *d its dense rows (a packed copy in
 * *keep when statistics must read a padded one); 0 when not recordable. */
static int fast_output_matrix(const rec_fast *f, size_t esz, const void *p, int rows, int cols, int ld,
                              const void **d, void **keep)
{
    *keep = NULL;
    *d = f->mode > TFT_STATS_SHAPE ? dense_matrix(esz, p, rows, cols, ld, keep)
                                   : (matrix_ok(p, rows, cols, ld) ? p : NULL);
    return *d != NULL;
}

/* ---- GEMM ------------------------------------------------------------------ */

typedef struct gemm_args {
    blas_site *site;
    int dtype;
    size_t esz;
    int order, ta, tb, m, n, k;
    const void *a, *b, *c;
    int lda, ldb, ldc;
    double alpha, beta;
} gemm_args;

/* The operands' shapes as stored, in a row-major view: a column-major
 * M x N C is [N, M]. op(A) is M x K, op(B) is K x N, C is M x N. */
typedef struct gemm_dims {
    int a_rows, a_cols, b_rows, b_cols, c_rows, c_cols;
} gemm_dims;

static void gemm_dims_of(const gemm_args *g, gemm_dims *d)
{
    int col = g->order == CBLAS_COL_MAJOR;
    int ta = g->ta != CBLAS_NO_TRANS, tb = g->tb != CBLAS_NO_TRANS;
    d->a_rows = (ta ^ col) ? g->k : g->m;
    d->a_cols = (ta ^ col) ? g->m : g->k;
    d->b_rows = (tb ^ col) ? g->n : g->k;
    d->b_cols = (tb ^ col) ? g->k : g->n;
    d->c_rows = col ? g->n : g->m;
    d->c_cols = col ? g->m : g->n;
}

/* Before the real gemm: when beta != 0 and a capture could select this op,
 * a dense copy of C as it is now (its prior value, which the op reads),
 * else NULL. Called inside our guard. */
static void *gemm_prior(const gemm_args *g)
{
    if (g->beta == 0 || !ip_active() || !rec_capture_armed())
        return NULL;
    gemm_dims dm;
    gemm_dims_of(g, &dm);
    void *packed;
    const void *d = dense_matrix(g->esz, g->c, dm.c_rows, dm.c_cols, g->ldc, &packed);
    if (!d || packed)
        return packed;
    size_t bytes = (size_t)dm.c_rows * (size_t)dm.c_cols * g->esz;
    void *copy = malloc(bytes + 1);
    if (copy)
        memcpy(copy, d, bytes);
    return copy;
}

static void gemm_fast(const rec_fast *f, const gemm_args *g, const gemm_dims *dm, const int64_t *attrs)
{
    void *ka = NULL, *kb = NULL, *kc = NULL;
    uint64_t in[2] = {0, 0};
    int inputs = f->mode > TFT_STATS_SHAPE;
    if (inputs) {
        in[0] = fast_input_matrix(f, &g->site->in0, g->dtype, g->esz, g->a, dm->a_rows, dm->a_cols, g->lda, &ka);
        in[1] = fast_input_matrix(f, &g->site->in1, g->dtype, g->esz, g->b, dm->b_rows, dm->b_cols, g->ldb, &kb);
    }
    const void *cd;
    int out_ok = fast_output_matrix(f, g->esz, g->c, dm->c_rows, dm->c_cols, g->ldc, &cd, &kc);
    fast_op_output(f, &g->site->op, inputs ? 2 : 0, in, 12, attrs, out_ok, g->dtype, cd, 2,
                   (const int64_t[]){dm->c_rows, dm->c_cols});
    free_if(ka);
    free_if(kb);
    free_if(kc);
}

/* Records a matrix through tft.h (see dense_matrix); returns its tensor id,
 * 0 if not recorded. A packed copy is handed to the caller in *keep, to be
 * freed after the op: a capture of the op reads its inputs' memory when it
 * begins. */
static uint64_t record_matrix(const char *name, int dtype, size_t esz, const void *p, int rows, int cols,
                              int ld, void **keep)
{
    const void *d = dense_matrix(esz, p, rows, cols, ld, keep);
    if (!d)
        return 0;
    int64_t shape[2] = {rows, cols};
    return tft_tensor(name, (tft_dtype)dtype, d, 2, shape) == 0 ? tft_last_tensor_id() : 0;
}

/* Through tft.h, for a capture: the op bracket makes the capture read A
 * and B when the op begins; c0 (C before the call, or NULL) is stored as
 * the op's prior value. */
static void gemm_slow(const gemm_args *g, const gemm_dims *dm, const int64_t *attrs, const void *c0)
{
    void *ka = NULL, *kb = NULL, *kc = NULL;
    uint64_t in[2] = {0, 0};
    int inputs = inputs_wanted();
    if (inputs) {
        in[0] = record_matrix(g->site->in0.text, g->dtype, g->esz, g->a, dm->a_rows, dm->a_cols, g->lda, &ka);
        in[1] = record_matrix(g->site->in1.text, g->dtype, g->esz, g->b, dm->b_rows, dm->b_cols, g->ldb, &kb);
    }
    const char *name = g->site->op.text;
    if (rec_op_begin_attrs(name, TFT_OP_GEMM, inputs ? 2 : 0, in, 12, attrs) >= 0) {
        uint64_t cid = record_matrix(name, g->dtype, g->esz, g->c, dm->c_rows, dm->c_cols, g->ldc, &kc);
        if (c0 && cid)
            rec_capture_prior(cid, name, g->dtype, c0, 2, (const int64_t[]){dm->c_rows, dm->c_cols});
        tft_op_end();
    }
    free_if(ka);
    free_if(kb);
    free_if(kc);
}

/* One op: A and B as their own tensors (inputs), then the op with C as its
 * output and the call's arguments as attributes (FORMAT.md 5.3). Shapes
 * are the matrices as stored, in a row-major view. c0: C before the call
 * (gemm_prior) or NULL. */
static void record_gemm(const gemm_args *g, const void *c0)
{
    if (g->order != CBLAS_ROW_MAJOR && g->order != CBLAS_COL_MAJOR)
        return;
    gemm_dims dm;
    gemm_dims_of(g, &dm);
    const int64_t attrs[12] = {g->m, g->n, g->k, g->ta != CBLAS_NO_TRANS, g->tb != CBLAS_NO_TRANS, g->dtype,
                               g->order == CBLAS_COL_MAJOR, g->lda, g->ldb, g->ldc, f64_bits(g->alpha),
                               f64_bits(g->beta)};
    rec_fast f;
    if (!c0 && rec_fast_begin(&f) == 0) /* c0 only under a capture, which the fast path leaves to tft.h */
        gemm_fast(&f, g, &dm, attrs);
    else
        gemm_slow(g, &dm, attrs, c0);
}

/* After the real gemm ran inside our guard: record it (when active) with
 * the caller's errno preserved, then leave the guard. */
static void after_gemm(const gemm_args *g, void *c0)
{
    int saved = errno;
    if (ip_active())
        record_gemm(g, c0);
    free_if(c0);
    errno = saved;
    ip_depth--;
}

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int,
                         float, float *, int);
typedef void (*dgemm_fn)(int, int, int, int, int, int, double, const double *, int, const double *, int,
                         double, double *, int);

#define GEMM_BODY(FN_T, SYM, SITE, DT, T)                                                                     \
    static void *_Atomic real;                                                                                \
    FN_T fn = (FN_T)ip_real_cached(&real, SYM);                                                               \
    if (!fn)                                                                                                  \
        return;                                                                                               \
    if (ip_depth || !(fits_int(m) && fits_int(n) && fits_int(k) && fits_int(lda) && fits_int(ldb) &&          \
                      fits_int(ldc))) {                                                                       \
        fn(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);                              \
        return;                                                                                               \
    }                                                                                                         \
    ip_depth++;                                                                                               \
    gemm_args g = {&SITE,     DT,       sizeof(T), order,    transa,   transb, (int)m, (int)n, (int)k, a, b,   \
                   c,         (int)lda, (int)ldb,  (int)ldc, alpha,    beta};                                   \
    void *c0 = NULL;                                                                                          \
    if (beta != 0) { /* C is read: a capture may want its prior value */                                      \
        int saved = errno;                                                                                    \
        c0 = gemm_prior(&g);                                                                                  \
        errno = saved;                                                                                        \
    }                                                                                                         \
    fn(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);                                  \
    after_gemm(&g, c0);

void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    GEMM_BODY(sgemm_fn, "cblas_sgemm", site_sgemm, TFT_F32, float)
}

void cblas_dgemm(int order, int transa, int transb, int m, int n, int k, double alpha, const double *a,
                 int lda, const double *b, int ldb, double beta, double *c, int ldc)
{
    GEMM_BODY(dgemm_fn, "cblas_dgemm", site_dgemm, TFT_F64, double)
}

/* ---- the other CBLAS calls numpy's matmul reaches ---------------------------
 * np.dot(a, a.T) computes a symmetric product with ?syrk (only one triangle
 * of C is written; numpy mirrors it); a matrix times a vector is ?gemv.
 * Each is one op like a GEMM: the inputs as their own tensors (when they
 * carry statistics or a capture), the result as its output, the call's
 * arguments as attributes. */

enum { CBLAS_UPPER = 121, CBLAS_LOWER = 122 };

typedef struct syrk_args {
    blas_site *site;
    int dtype;
    size_t esz;
    int order, uplo, trans, n, k;
    const void *a, *c;
    int lda, ldc;
    double alpha, beta;
} syrk_args;

#define TRI_STACK_BYTES 4096 /* a triangle this small is built on the stack */

/* C as recorded: the n x n matrix with the triangle the call wrote and
 * zeros in the other, whose contents the call leaves undefined (numpy's
 * output buffer is not even initialised: recording it would make
 * fingerprints random). Into buf when it fits (n*n*esz <= TRI_STACK_BYTES),
 * else allocated (*alloc, the caller frees it); NULL when memory is short. */
static char *syrk_triangle(const syrk_args *g, char *buf, char **alloc)
{
    int col = g->order == CBLAS_COL_MAJOR;
    /* in the stored (row-major) view a column-major upper triangle is lower */
    int upper_view = (g->uplo == CBLAS_UPPER) ^ col;
    size_t n = (size_t)g->n;
    char *tri = buf;
    *alloc = NULL;
    if (n * n * g->esz <= TRI_STACK_BYTES)
        memset(buf, 0, n * n * g->esz);
    else if (!(tri = *alloc = calloc(n * n + 1, g->esz)))
        return NULL;
    for (size_t r = 0; r < n; r++) {
        size_t c0 = upper_view ? r : 0, c1 = upper_view ? n : r + 1;
        memcpy(tri + (r * n + c0) * g->esz, (const char *)g->c + (r * (size_t)g->ldc + c0) * g->esz,
               (c1 - c0) * g->esz);
    }
    return tri;
}

/* C = alpha op(A) op(A)^T + beta C, op(A) n x k; C as syrk_triangle. */
static void record_syrk(const syrk_args *g)
{
    if ((g->order != CBLAS_ROW_MAJOR && g->order != CBLAS_COL_MAJOR) ||
        (g->uplo != CBLAS_UPPER && g->uplo != CBLAS_LOWER) || g->n < 0 || g->k < 0 ||
        g->ldc < (g->n > 1 ? g->n : 1) || (g->n && !g->c))
        return;
    int col = g->order == CBLAS_COL_MAJOR, tr = g->trans != CBLAS_NO_TRANS;
    int a_rows = (tr ^ col) ? g->k : g->n, a_cols = (tr ^ col) ? g->n : g->k;
    const int64_t attrs[10] = {g->n, g->k, g->uplo == CBLAS_UPPER, tr, g->dtype, col, g->lda, g->ldc,
                               f64_bits(g->alpha), f64_bits(g->beta)};
    const int64_t shape[2] = {g->n, g->n};
    void *ka = NULL;
    char *alloc = NULL, *tri = NULL;
    _Alignas(8) char buf[TRI_STACK_BYTES];
    uint64_t in[1] = {0};
    rec_fast f;
    if (rec_fast_begin(&f) == 0) {
        int inputs = f.mode > TFT_STATS_SHAPE;
        if (inputs)
            in[0] = fast_input_matrix(&f, &g->site->in0, g->dtype, g->esz, g->a, a_rows, a_cols, g->lda, &ka);
        /* shape mode reads no data: no triangle */
        if (!inputs || (tri = syrk_triangle(g, buf, &alloc)))
            fast_op_output(&f, &g->site->op, inputs ? 1 : 0, in, 10, attrs, 1, g->dtype, tri, 2, shape);
    } else {
        int inputs = inputs_wanted();
        if (inputs)
            in[0] = record_matrix(g->site->in0.text, g->dtype, g->esz, g->a, a_rows, a_cols, g->lda, &ka);
        tri = syrk_triangle(g, buf, &alloc);
        if (tri && rec_op_begin_attrs(g->site->op.text, TFT_OP_GEMM, inputs ? 1 : 0, in, 10, attrs) >= 0) {
            tft_tensor(g->site->op.text, (tft_dtype)g->dtype, tri, 2, shape);
            tft_op_end();
        }
    }
    free_if(alloc);
    free_if(ka);
}

typedef void (*ssyrk_fn)(int, int, int, int, int, float, const float *, int, float, float *, int);
typedef void (*dsyrk_fn)(int, int, int, int, int, double, const double *, int, double, double *, int);

/* Runs the real call inside our guard, then records it (when active) with
 * errno preserved. */
#define SYRK_BODY(FN_T, SYM, SITE, DT, T)                                                                      \
    static void *_Atomic real;                                                                                 \
    FN_T fn = (FN_T)ip_real_cached(&real, SYM);                                                                \
    if (!fn)                                                                                                   \
        return;                                                                                                \
    if (ip_depth || !(fits_int(n) && fits_int(k) && fits_int(lda) && fits_int(ldc))) {                         \
        fn(order, uplo, trans, n, k, alpha, a, lda, beta, c, ldc);                                             \
        return;                                                                                                \
    }                                                                                                          \
    ip_depth++;                                                                                                \
    fn(order, uplo, trans, n, k, alpha, a, lda, beta, c, ldc);                                                 \
    int saved = errno;                                                                                         \
    if (ip_active())                                                                                           \
        record_syrk(&(syrk_args){&SITE, DT, sizeof(T), order, uplo, trans, (int)n, (int)k, a, c, (int)lda,    \
                                 (int)ldc, alpha, beta});                                                     \
    errno = saved;                                                                                             \
    ip_depth--;

void cblas_ssyrk(int order, int uplo, int trans, int n, int k, float alpha, const float *a, int lda, float beta,
                 float *c, int ldc)
{
    SYRK_BODY(ssyrk_fn, "cblas_ssyrk", site_ssyrk, TFT_F32, float)
}

void cblas_dsyrk(int order, int uplo, int trans, int n, int k, double alpha, const double *a, int lda,
                 double beta, double *c, int ldc)
{
    SYRK_BODY(dsyrk_fn, "cblas_dsyrk", site_dsyrk, TFT_F64, double)
}

typedef struct gemv_args {
    blas_site *site;
    int dtype;
    size_t esz;
    int order, trans, m, n;
    const void *a, *x, *y;
    int lda, incx, incy;
    double alpha, beta;
} gemv_args;

static uint64_t record_vector(const char *name, int dtype, size_t esz, const void *v, int len, int inc)
{
    void *keep;
    const void *d = dense_vector(esz, v, len, inc, &keep);
    int64_t shape[1] = {len};
    uint64_t id = d && tft_tensor(name, (tft_dtype)dtype, d, 1, shape) == 0 ? tft_last_tensor_id() : 0;
    free_if(keep);
    return id;
}

/* y = alpha op(A) x + beta y, A m x n. */
static void record_gemv(const gemv_args *g)
{
    if ((g->order != CBLAS_ROW_MAJOR && g->order != CBLAS_COL_MAJOR) || g->m < 0 || g->n < 0)
        return;
    int col = g->order == CBLAS_COL_MAJOR, tr = g->trans != CBLAS_NO_TRANS;
    int a_rows = col ? g->n : g->m, a_cols = col ? g->m : g->n;
    int xlen = tr ? g->m : g->n, ylen = tr ? g->n : g->m;
    const int64_t attrs[10] = {g->m, g->n, tr, g->dtype, col, g->lda, g->incx, g->incy, f64_bits(g->alpha),
                               f64_bits(g->beta)};
    void *ka = NULL, *kx = NULL, *ky = NULL;
    uint64_t in[2] = {0, 0};
    rec_fast f;
    if (rec_fast_begin(&f) == 0) {
        int inputs = f.mode > TFT_STATS_SHAPE;
        if (inputs) {
            in[0] = fast_input_matrix(&f, &g->site->in0, g->dtype, g->esz, g->a, a_rows, a_cols, g->lda, &ka);
            in[1] = fast_input_vector(&f, &g->site->in1, g->dtype, g->esz, g->x, xlen, g->incx, &kx);
        }
        const void *yd = inputs ? dense_vector(g->esz, g->y, ylen, g->incy, &ky)
                                : (vector_ok(g->y, ylen, g->incy) ? g->y : NULL);
        fast_op_output(&f, &g->site->op, inputs ? 2 : 0, in, 10, attrs, yd != NULL, g->dtype, yd, 1,
                       (const int64_t[]){ylen});
    } else {
        int inputs = inputs_wanted();
        if (inputs) {
            in[0] = record_matrix(g->site->in0.text, g->dtype, g->esz, g->a, a_rows, a_cols, g->lda, &ka);
            in[1] = record_vector(g->site->in1.text, g->dtype, g->esz, g->x, xlen, g->incx);
        }
        if (rec_op_begin_attrs(g->site->op.text, TFT_OP_GEMM, inputs ? 2 : 0, in, 10, attrs) >= 0) {
            record_vector(g->site->op.text, g->dtype, g->esz, g->y, ylen, g->incy);
            tft_op_end();
        }
    }
    free_if(ka);
    free_if(kx);
    free_if(ky);
}

typedef void (*sgemv_fn)(int, int, int, int, float, const float *, int, const float *, int, float, float *, int);
typedef void (*dgemv_fn)(int, int, int, int, double, const double *, int, const double *, int, double, double *,
                         int);

#define GEMV_BODY(FN_T, SYM, SITE, DT, T)                                                                     \
    static void *_Atomic real;                                                                                \
    FN_T fn = (FN_T)ip_real_cached(&real, SYM);                                                               \
    if (!fn)                                                                                                  \
        return;                                                                                               \
    if (ip_depth ||                                                                                           \
        !(fits_int(m) && fits_int(n) && fits_int(lda) && fits_int(incx) && fits_int(incy))) {                \
        fn(order, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);                                        \
        return;                                                                                               \
    }                                                                                                         \
    ip_depth++;                                                                                               \
    fn(order, trans, m, n, alpha, a, lda, x, incx, beta, y, incy);                                            \
    int saved = errno;                                                                                        \
    if (ip_active())                                                                                          \
        record_gemv(&(gemv_args){&SITE, DT, sizeof(T), order, trans, (int)m, (int)n, a, x, y, (int)lda,       \
                                 (int)incx, (int)incy, alpha, beta});                                         \
    errno = saved;                                                                                            \
    ip_depth--;

void cblas_sgemv(int order, int trans, int m, int n, float alpha, const float *a, int lda, const float *x,
                 int incx, float beta, float *y, int incy)
{
    GEMV_BODY(sgemv_fn, "cblas_sgemv", site_sgemv, TFT_F32, float)
}

void cblas_dgemv(int order, int trans, int m, int n, double alpha, const double *a, int lda, const double *x,
                 int incx, double beta, double *y, int incy)
{
    GEMV_BODY(dgemv_fn, "cblas_dgemv", site_dgemv, TFT_F64, double)
}

/* ---- the flavours wheels ship ------------------------------------------------
 * numpy's PyPI wheels link scipy-openblas64 (ILP64: every index argument an
 * int64_t, names scipy_cblas_sgemm64_ ...), older ones openblas64_
 * (cblas_sgemm64_ ...), SciPy's scipy-openblas32 (LP64, scipy_cblas_sgemm
 * ...). Each is recorded exactly as cblas_sgemm & co. are, under the same
 * op names, so a trace of Debian's numpy and one of PyPI's compare. The
 * real function is looked up under the flavour's own name. */

#define TFT_STR_(x) #x
#define TFT_STR(x) TFT_STR_(x)

#define CBLAS_FLAVOUR(PRE, SUF, I)                                                                             \
    typedef void (*PRE##sgemm##SUF##fn)(int, int, int, I, I, I, float, const float *, I, const float *, I,     \
                                        float, float *, I);                                                   \
    typedef void (*PRE##dgemm##SUF##fn)(int, int, int, I, I, I, double, const double *, I, const double *, I,  \
                                        double, double *, I);                                                 \
    typedef void (*PRE##ssyrk##SUF##fn)(int, int, int, I, I, float, const float *, I, float, float *, I);      \
    typedef void (*PRE##dsyrk##SUF##fn)(int, int, int, I, I, double, const double *, I, double, double *, I);  \
    typedef void (*PRE##sgemv##SUF##fn)(int, int, I, I, float, const float *, I, const float *, I, float,      \
                                        float *, I);                                                          \
    typedef void (*PRE##dgemv##SUF##fn)(int, int, I, I, double, const double *, I, const double *, I, double,  \
                                        double *, I);                                                         \
    void PRE##cblas_sgemm##SUF(int order, int transa, int transb, I m, I n, I k, float alpha, const float *a,  \
                               I lda, const float *b, I ldb, float beta, float *c, I ldc)                     \
    {                                                                                                          \
        GEMM_BODY(PRE##sgemm##SUF##fn, TFT_STR(PRE##cblas_sgemm##SUF), site_sgemm, TFT_F32, float)             \
    }                                                                                                          \
    void PRE##cblas_dgemm##SUF(int order, int transa, int transb, I m, I n, I k, double alpha,                 \
                               const double *a, I lda, const double *b, I ldb, double beta, double *c, I ldc) \
    {                                                                                                          \
        GEMM_BODY(PRE##dgemm##SUF##fn, TFT_STR(PRE##cblas_dgemm##SUF), site_dgemm, TFT_F64, double)            \
    }                                                                                                          \
    void PRE##cblas_ssyrk##SUF(int order, int uplo, int trans, I n, I k, float alpha, const float *a, I lda,   \
                               float beta, float *c, I ldc)                                                   \
    {                                                                                                          \
        SYRK_BODY(PRE##ssyrk##SUF##fn, TFT_STR(PRE##cblas_ssyrk##SUF), site_ssyrk, TFT_F32, float)             \
    }                                                                                                          \
    void PRE##cblas_dsyrk##SUF(int order, int uplo, int trans, I n, I k, double alpha, const double *a, I lda, \
                               double beta, double *c, I ldc)                                                 \
    {                                                                                                          \
        SYRK_BODY(PRE##dsyrk##SUF##fn, TFT_STR(PRE##cblas_dsyrk##SUF), site_dsyrk, TFT_F64, double)            \
    }                                                                                                          \
    void PRE##cblas_sgemv##SUF(int order, int trans, I m, I n, float alpha, const float *a, I lda,             \
                               const float *x, I incx, float beta, float *y, I incy)                          \
    {                                                                                                          \
        GEMV_BODY(PRE##sgemv##SUF##fn, TFT_STR(PRE##cblas_sgemv##SUF), site_sgemv, TFT_F32, float)             \
    }                                                                                                          \
    void PRE##cblas_dgemv##SUF(int order, int trans, I m, I n, double alpha, const double *a, I lda,           \
                               const double *x, I incx, double beta, double *y, I incy)                       \
    {                                                                                                          \
        GEMV_BODY(PRE##dgemv##SUF##fn, TFT_STR(PRE##cblas_dgemv##SUF), site_dgemv, TFT_F64, double)            \
    }

CBLAS_FLAVOUR(scipy_, 64_, int64_t)
CBLAS_FLAVOUR(, 64_, int64_t)
CBLAS_FLAVOUR(scipy_, , int)
