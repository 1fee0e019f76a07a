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
 * The non-blocking calls and their completion are in interpose_mpi_nb.c;
 * what the two files share is interpose_mpi_internal.h.
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

/* ---- predefined handles --------------------------------------------------- */

/* MPI datatypes with a tft_dtype (C name suffix, MPI name, ours, the most
 * statistics their buffers get); LP64. Numbers get the recording mode's
 * statistics; bytes (MPI_BYTE, MPI_CHAR: text, MPI_UNSIGNED_CHAR,
 * MPI_PACKED) are u8 with at most HEALTH ones: the count, zero bytes,
 * the smallest and largest byte and the fingerprint, no moments (a mean
 * of packed bytes means nothing, and they cost most). The most used come
 * first: map_dtype scans in this order. */
#define MPI_DTYPES(X)                                                                                   \
    X(float, MPI_FLOAT, TFT_F32, FULL) X(double, MPI_DOUBLE, TFT_F64, FULL)                            \
    X(byte, MPI_BYTE, TFT_U8, HEALTH) X(int, MPI_INT, TFT_I32, FULL)                                   \
    X(char, MPI_CHAR, TFT_U8, HEALTH) X(unsigned_char, MPI_UNSIGNED_CHAR, TFT_U8, HEALTH)              \
    X(packed, MPI_PACKED, TFT_U8, HEALTH) X(long, MPI_LONG, TFT_I64, FULL)                             \
    X(int32_t, MPI_INT32_T, TFT_I32, FULL) X(long_long_int, MPI_LONG_LONG_INT, TFT_I64, FULL)          \
    X(int64_t, MPI_INT64_T, TFT_I64, FULL) X(unsigned, MPI_UNSIGNED, TFT_U32, FULL)                    \
    X(uint32_t, MPI_UINT32_T, TFT_U32, FULL) X(unsigned_long, MPI_UNSIGNED_LONG, TFT_U64, FULL)        \
    X(unsigned_long_long, MPI_UNSIGNED_LONG_LONG, TFT_U64, FULL) X(uint64_t, MPI_UINT64_T, TFT_U64, FULL)\
    X(short, MPI_SHORT, TFT_I16, FULL) X(int16_t, MPI_INT16_T, TFT_I16, FULL)                          \
    X(unsigned_short, MPI_UNSIGNED_SHORT, TFT_U16, FULL) X(uint16_t, MPI_UINT16_T, TFT_U16, FULL)      \
    X(uint8_t, MPI_UINT8_T, TFT_U8, FULL) X(signed_char, MPI_SIGNED_CHAR, TFT_I8, FULL)                \
    X(int8_t, MPI_INT8_T, TFT_I8, FULL) X(c_bool, MPI_C_BOOL, TFT_BOOL, FULL)
#define MPI_OPS(X) X(sum, MPI_SUM, TFT_REDOP_SUM, 0) X(prod, MPI_PROD, TFT_REDOP_PROD, 0) \
    X(min, MPI_MIN, TFT_REDOP_MIN, 0) X(max, MPI_MAX, TFT_REDOP_MAX, 0)

#define COUNT_ONE(a, b, c, d) +1
#define DT_INDEX(a, b, c, d) DTI_##a,
enum { MPI_DTYPES(DT_INDEX) N_DTYPES };
enum { N_OPS = 0 MPI_OPS(COUNT_ONE) };

/* Handles as void * so one comparison serves both ABIs: Open MPI's are
 * addresses of objects in libmpi, looked up at run time so that libtftrace
 * has no undefined data symbols; MPICH's are integer constants. */
static struct {
    void *world, *self, *comm_null, *req_null;
    void *dt[N_DTYPES];
    void *op[N_OPS];
} mh;
static pthread_once_t mh_once = PTHREAD_ONCE_INIT;

#define DT_TFT(a, b, c, d) c,
#define DT_SMAX(a, b, c, d) TFT_STATS_##d,
#define OP_TFT(a, b, c, d) c,
static const int dt_tft[N_DTYPES] = {MPI_DTYPES(DT_TFT)};
static const int dt_smax[N_DTYPES] = {MPI_DTYPES(DT_SMAX)};
static const int op_tft[N_OPS] = {MPI_OPS(OP_TFT)};

#ifdef OPEN_MPI
/* RTLD_DEFAULT first: a program's copy relocation of a handle object (as
 * non-PIC code referencing MPI_INT makes) is the address everyone uses, and
 * RTLD_NEXT would find libmpi's original instead. */
static void *handle_sym(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    return p ? p : ip_real(name);
}

static void handles_load(void)
{
    static const char *const dt_names[N_DTYPES] = {
#define DT_NAME(a, b, c, d) "ompi_mpi_" #a,
        MPI_DTYPES(DT_NAME)};
    static const char *const op_names[N_OPS] = {
#define OP_NAME(a, b, c, d) "ompi_mpi_op_" #a,
        MPI_OPS(OP_NAME)};
    mh.world = handle_sym("ompi_mpi_comm_world");
    mh.self = handle_sym("ompi_mpi_comm_self");
    mh.comm_null = handle_sym("ompi_mpi_comm_null");
    mh.req_null = handle_sym("ompi_request_null");
    for (int i = 0; i < N_DTYPES; i++)
        mh.dt[i] = handle_sym(dt_names[i]);
    for (int i = 0; i < N_OPS; i++)
        mh.op[i] = handle_sym(op_names[i]);
}
#else
static void handles_load(void)
{
#define DT_VAL(a, b, c, d) H(b),
#define OP_VAL(a, b, c, d) H(b),
    void *dts[N_DTYPES] = {MPI_DTYPES(DT_VAL)};
    void *ops[N_OPS] = {MPI_OPS(OP_VAL)};
    memcpy(mh.dt, dts, sizeof(dts));
    memcpy(mh.op, ops, sizeof(ops));
    mh.world = H(MPI_COMM_WORLD);
    mh.self = H(MPI_COMM_SELF);
    mh.comm_null = H(MPI_COMM_NULL);
    mh.req_null = H(MPI_REQUEST_NULL);
}
#endif

static void mpi_handles(void) { pthread_once(&mh_once, handles_load); }

uintptr_t mpi_req_null(void) { return RKEY(mh.req_null); }

/* The tft_dtype of a predefined dt, *smax the most statistics its buffers
 * get; -1 for any other type (derived, complex, long double, ...). */
static int map_dtype(MPI_Datatype dt, int *smax)
{
    for (int i = 0; i < N_DTYPES; i++)
        if (H(dt) == mh.dt[i] && mh.dt[i]) {
            *smax = dt_smax[i];
            return dt_tft[i];
        }
    return -1;
}

int mpi_map_redop(MPI_Op op)
{
    for (int i = 0; i < N_OPS; i++)
        if (mh.op[i] && H(op) == mh.op[i])
            return op_tft[i];
    return TFT_REDOP_OTHER;
}

/* ---- communicators -------------------------------------------------------- */

typedef int (*comm_int_fn)(MPI_Comm, int *);
typedef int (*type_size_fn)(MPI_Datatype, int *);
typedef int (*get_count_fn)(const MPI_Status *, MPI_Datatype, int *);
typedef int (*comm_group_fn)(MPI_Comm, MPI_Group *);
typedef int (*translate_fn)(MPI_Group, int, const int[], MPI_Group, int[]);
typedef int (*group_free_fn)(MPI_Group *);
typedef int (*get_attr_fn)(MPI_Comm, int, void *, int *);
typedef int (*set_attr_fn)(MPI_Comm, int, void *);
typedef int (*create_keyval_fn)(MPI_Comm_copy_attr_function *, MPI_Comm_delete_attr_function *, int *, void *);

/* Our own queries leave errno as they found it, like everything we add. */
static int comm_query(const char *fn_name, void *_Atomic *cache, MPI_Comm comm, int dflt)
{
    int saved = errno;
    comm_int_fn fn = (comm_int_fn)ip_real_cached(cache, fn_name);
    int v;
    if (!fn || fn(comm, &v) != MPI_SUCCESS)
        v = dflt;
    errno = saved;
    return v;
}

static int comm_rank(MPI_Comm comm)
{
    static void *_Atomic fn;
    return comm_query("MPI_Comm_rank", &fn, comm, -1);
}

static int comm_size(MPI_Comm comm)
{
    static void *_Atomic fn;
    return comm_query("MPI_Comm_size", &fn, comm, -1);
}

/* What the recorder needs of one communicator, worked out once per
 * communicator (mcomm_make) and kept as an MPI attribute of it: the
 * keyval's delete function frees it when the program frees the
 * communicator (or MPI_Finalize does), so a handle MPI reuses never finds
 * a stale entry (the delete function also takes it out of ctab), and its
 * copy function copies nothing, so a duplicate gets its own.
 * MPI_COMM_WORLD's lives in `world` instead.
 *
 * Identity (equal on all members, different for disjoint groups): the
 * string id of "MPI_Comm{w0,w1,...}#k" — the members' MPI_COMM_WORLD ranks
 * in communicator rank order, and k, the communicator's creation order
 * among this process's communicators with those members (0 first). The
 * creators we interpose (MPI_Comm_split, _split_type, _dup,
 * _dup_with_info, _create, _create_group, MPI_Cart_create, MPI_Cart_sub,
 * MPI_Graph_create, MPI_Dist_graph_create(_adjacent), MPI_Intercomm_create,
 * MPI_Intercomm_merge) number a communicator when it is made — collective
 * calls, made in the same order by all members; one made otherwise
 * (MPI_Comm_idup, MPI_Comm_connect, ...) is numbered at its first recorded
 * use. An intercommunicator: "MPI_Intercomm{A|B}#k" with its two groups
 * in a fixed order (the one whose member list compares lower first), equal
 * on both sides. MPI_COMM_WORLD: "MPI_COMM_WORLD" (the id tftrain uses).
 * Point-to-point calls use the id of "<id as 16 hex digits>:p2p". */
typedef struct mcomm {
    uint64_t id, p2p;     /* collective and point-to-point sequence spaces */
    int rank, size;       /* this process's rank and the size (local group of an intercommunicator) */
    _Atomic int defined;  /* its COMM record was written */
    const char *made_by;  /* static: "MPI_Comm_split", ...; NULL unknown */
    uint64_t parent;      /* id of the communicator it was made from, 0 unknown */
    unsigned order, flags;/* creation order; TFT_COMM_INTER */
    int n_members;        /* entries of members: size (+ remote size), 0 unknown */
    int32_t *members;     /* world ranks in communicator rank order (local group, then remote group) */
} mcomm;

static struct {
    pthread_mutex_t lock;       /* registration: keyval, orders, world */
    int keyval;                 /* MPI_KEYVAL_INVALID until created */
    int have_wgroup;
    MPI_Group wgroup;           /* MPI_COMM_WORLD's group, for translating ranks */
    mcomm world;
    _Atomic int world_ready;
    struct order_ent { uint64_t key; unsigned n; } *orders; /* member set -> communicators made */
    size_t norders, orders_cap;
} creg = {.lock = PTHREAD_MUTEX_INITIALIZER, .keyval = MPI_KEYVAL_INVALID};

/* The entries of registered communicators by handle, in front of their
 * attributes: a recorded call finds its communicator with a few loads
 * instead of an MPI_Comm_get_attr (a lock and a hash table in Open MPI).
 * Open addressing, PROBES slots from a handle's home; lookups and removal
 * take no lock, insertion happens under creg.lock (one writer, so one
 * handle never has two slots). An entry goes when its communicator is
 * freed (mc_delete, before MPI reuses the handle), so a handle MPI hands
 * out again misses and is registered afresh. A communicator that finds no
 * free slot is still served, through its attribute. */
enum { CT_SLOTS = 1024, CT_PROBES = 8 };
#define CT_TOMB UINTPTR_MAX /* a removed entry: lookups go on past it */
static struct ct_slot {
    _Atomic uintptr_t key;  /* H(comm) as an integer; 0 free, CT_TOMB removed */
    mcomm *_Atomic m;       /* NULL while being filled or removed: a miss */
} ctab[CT_SLOTS];

static unsigned ct_home(uintptr_t key) { return (unsigned)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 54); }

static mcomm *ct_get(MPI_Comm comm)
{
    uintptr_t key = (uintptr_t)H(comm);
    unsigned i = ct_home(key);
    for (int n = 0; n < CT_PROBES; n++, i = (i + 1) & (CT_SLOTS - 1)) {
        uintptr_t k = atomic_load_explicit(&ctab[i].key, memory_order_acquire);
        if (k == key)
            return atomic_load_explicit(&ctab[i].m, memory_order_acquire);
        if (k == 0)
            return NULL;
    }
    return NULL;
}

/* Adds comm -> m (creg.lock held). */
static void ct_put(MPI_Comm comm, mcomm *m)
{
    uintptr_t key = (uintptr_t)H(comm);
    unsigned i = ct_home(key), free_at = CT_SLOTS;
    for (int n = 0; n < CT_PROBES; n++, i = (i + 1) & (CT_SLOTS - 1)) {
        uintptr_t k = atomic_load_explicit(&ctab[i].key, memory_order_relaxed);
        if (k == key) {
            atomic_store_explicit(&ctab[i].m, m, memory_order_release);
            return;
        }
        if ((k == 0 || k == CT_TOMB) && free_at == CT_SLOTS)
            free_at = i;
        if (k == 0)
            break;
    }
    if (free_at == CT_SLOTS)
        return;
    atomic_store_explicit(&ctab[free_at].m, NULL, memory_order_relaxed);
    atomic_store_explicit(&ctab[free_at].key, key, memory_order_release);
    atomic_store_explicit(&ctab[free_at].m, m, memory_order_release);
}

/* Removes comm's entry (it is being freed). */
static void ct_drop(MPI_Comm comm)
{
    uintptr_t key = (uintptr_t)H(comm);
    unsigned i = ct_home(key);
    for (int n = 0; n < CT_PROBES; n++, i = (i + 1) & (CT_SLOTS - 1)) {
        uintptr_t k = atomic_load_explicit(&ctab[i].key, memory_order_acquire);
        if (k == key) {
            atomic_store_explicit(&ctab[i].m, NULL, memory_order_release);
            atomic_store_explicit(&ctab[i].key, CT_TOMB, memory_order_release);
            return;
        }
        if (k == 0)
            return;
    }
}

#ifdef OPEN_MPI
#define COMM_OF(p) ((MPI_Comm)(p))
#define COMM_DT(p) ((MPI_Datatype)(p))
#else
#define COMM_OF(p) ((MPI_Comm)(intptr_t)(p))
#define COMM_DT(p) ((MPI_Datatype)(intptr_t)(p))
#endif

static int mc_nocopy(MPI_Comm old, int keyval, void *extra, void *in, void *out, int *flag)
{
    (void)old, (void)keyval, (void)extra, (void)in, (void)out;
    *flag = 0;
    return MPI_SUCCESS;
}

static void mcomm_free(mcomm *m)
{
    if (m) {
        free(m->members);
        free(m);
    }
}

static int mc_delete(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void)keyval, (void)extra;
    ct_drop(comm);
    mcomm_free(attr);
    return MPI_SUCCESS;
}

/* The next creation order of the member set key (lock held); 0 first. */
static unsigned order_next(uint64_t key)
{
    for (size_t i = 0; i < creg.norders; i++)
        if (creg.orders[i].key == key)
            return creg.orders[i].n++;
    if (creg.norders == creg.orders_cap) {
        size_t ncap = creg.orders_cap ? creg.orders_cap * 2 : 16;
        struct order_ent *n = realloc(creg.orders, ncap * sizeof(*n));
        if (!n)
            return 0;
        creg.orders = n;
        creg.orders_cap = ncap;
    }
    creg.orders[creg.norders++] = (struct order_ent){key, 1};
    return 0;
}

/* World ranks of the n ranks of comm's group (remote: its remote group)
 * into out (-1 for a process outside MPI_COMM_WORLD); 0 or -1. Lock held. */
static int world_ranks(MPI_Comm comm, int remote, int n, int32_t *out)
{
    static void *_Atomic cg, *_Atomic rg, *_Atomic tr, *_Atomic gf;
    comm_group_fn group = (comm_group_fn)ip_real_cached(remote ? &rg : &cg,
                                                         remote ? "MPI_Comm_remote_group" : "MPI_Comm_group");
    translate_fn translate = (translate_fn)ip_real_cached(&tr, "MPI_Group_translate_ranks");
    group_free_fn gfree = (group_free_fn)ip_real_cached(&gf, "MPI_Group_free");
    comm_group_fn wgroup = (comm_group_fn)ip_real_cached(&cg, "MPI_Comm_group");
    if (!group || !translate || !gfree || !wgroup || n <= 0)
        return -1;
    if (!creg.have_wgroup && wgroup(COMM_OF(mh.world), &creg.wgroup) == MPI_SUCCESS)
        creg.have_wgroup = 1;
    MPI_Group g;
    int *in = malloc((size_t)n * sizeof(int)), *w = malloc((size_t)n * sizeof(int));
    int rc = -1;
    if (creg.have_wgroup && in && w && group(comm, &g) == MPI_SUCCESS) {
        for (int i = 0; i < n; i++)
            in[i] = i;
        if (translate(g, n, in, creg.wgroup, w) == MPI_SUCCESS) {
            for (int i = 0; i < n; i++)
                out[i] = w[i] == MPI_UNDEFINED ? -1 : w[i];
            rc = 0;
        }
        gfree(&g);
    }
    free(in);
    free(w);
    return rc;
}

/* Appends "a,b,..." of n world ranks to buf at *o (room reserved). */
static void members_text(char *buf, size_t *o, const int32_t *m, int n)
{
    for (int i = 0; i < n; i++)
        *o += (size_t)sprintf(buf + *o, "%s%d", i ? "," : "", (int)m[i]);
}

/* Lexicographic order of two member lists (intercommunicator groups). */
static int members_cmp(const int32_t *a, int na, const int32_t *b, int nb)
{
    for (int i = 0; i < na && i < nb; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return na < nb ? -1 : na > nb;
}

/* The identity of m from its members (lock held): m->id, m->p2p, m->order. */
static int mcomm_identity(mcomm *m, int local)
{
    int n = m->n_members, remote = n - local;
    const int32_t *a = m->members, *b = m->members + local;
    int na = local, nb = remote;
    if (m->flags & TFT_COMM_INTER && members_cmp(a, na, b, nb) > 0) {
        a = m->members + local, na = remote;
        b = m->members, nb = local;
    }
    char *buf = malloc(32 + 12 * (size_t)n);
    if (!buf)
        return -1;
    size_t o = (size_t)sprintf(buf, "%s{", m->flags & TFT_COMM_INTER ? "MPI_Intercomm" : "MPI_Comm");
    members_text(buf, &o, a, na);
    if (m->flags & TFT_COMM_INTER) {
        buf[o++] = '|';
        members_text(buf, &o, b, nb);
    }
    buf[o++] = '}';
    m->order = order_next(tft_string_id(buf, o));
    o += (size_t)sprintf(buf + o, "#%u", m->order);
    m->id = tft_string_id(buf, o);
    free(buf);
    char p[32];
    int len = snprintf(p, sizeof(p), "%016" PRIx64 ":p2p", m->id);
    m->p2p = tft_string_id(p, (size_t)len);
    return 0;
}

/* A new entry for comm (lock held), NULL when MPI cannot tell us enough. */
static mcomm *mcomm_make(MPI_Comm comm, const char *made_by, uint64_t parent)
{
    static void *_Atomic ti, *_Atomic rs;
    comm_int_fn test_inter = (comm_int_fn)ip_real_cached(&ti, "MPI_Comm_test_inter");
    comm_int_fn remote_size = (comm_int_fn)ip_real_cached(&rs, "MPI_Comm_remote_size");
    int inter = 0, nremote = 0;
    if (test_inter && test_inter(comm, &inter) != MPI_SUCCESS)
        inter = 0;
    if (inter && (!remote_size || remote_size(comm, &nremote) != MPI_SUCCESS || nremote < 0))
        return NULL;
    mcomm *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->rank = comm_rank(comm);
    m->size = comm_size(comm);
    m->made_by = made_by;
    m->parent = parent;
    m->flags = inter ? TFT_COMM_INTER : 0;
    m->n_members = m->size + nremote;
    m->members = m->size > 0 ? malloc((size_t)m->n_members * sizeof(int32_t)) : NULL;
    if (!m->members || world_ranks(comm, 0, m->size, m->members) ||
        (nremote && world_ranks(comm, 1, nremote, m->members + m->size)) || mcomm_identity(m, m->size)) {
        mcomm_free(m);
        return NULL;
    }
    return m;
}

/* MPI_COMM_WORLD's entry (members 0 .. size-1), made once. */
static mcomm *world_get(void)
{
    if (atomic_load_explicit(&creg.world_ready, memory_order_acquire))
        return &creg.world;
    pthread_mutex_lock(&creg.lock);
    if (!atomic_load(&creg.world_ready)) {
        mcomm *w = &creg.world;
        MPI_Comm comm = COMM_OF(mh.world);
        w->rank = comm_rank(comm);
        w->size = comm_size(comm);
        w->made_by = "MPI_COMM_WORLD";
        w->id = tft_string_id("MPI_COMM_WORLD", 14);
        char p[32];
        int len = snprintf(p, sizeof(p), "%016" PRIx64 ":p2p", w->id);
        w->p2p = tft_string_id(p, (size_t)len);
        w->members = w->size > 0 ? malloc((size_t)w->size * sizeof(int32_t)) : NULL;
        for (int i = 0; w->members && i < w->size; i++)
            w->members[i] = i;
        w->n_members = w->members ? w->size : 0;
        atomic_store_explicit(&creg.world_ready, 1, memory_order_release);
    }
    pthread_mutex_unlock(&creg.lock);
    return &creg.world;
}

/* comm's entry from its attribute, NULL when it has none (yet). */
static mcomm *mcomm_cached(MPI_Comm comm)
{
    static void *_Atomic ga;
    get_attr_fn get = (get_attr_fn)ip_real_cached(&ga, "MPI_Comm_get_attr");
    int kv = __atomic_load_n(&creg.keyval, __ATOMIC_ACQUIRE), flag = 0;
    void *v = NULL;
    if (kv == MPI_KEYVAL_INVALID || !get || get(comm, kv, &v, &flag) != MPI_SUCCESS || !flag)
        return NULL;
    return v;
}

/* Registers comm (guard held): computes its entry and attaches it, unless
 * it has one. made_by: the creator (NULL: first seen in a call). */
static mcomm *mcomm_register(MPI_Comm comm, const char *made_by, uint64_t parent)
{
    static void *_Atomic ck, *_Atomic sa;
    int saved = errno;
    pthread_mutex_lock(&creg.lock);
    mcomm *m = mcomm_cached(comm);
    if (!m && creg.keyval == MPI_KEYVAL_INVALID) {
        create_keyval_fn ckv = (create_keyval_fn)ip_real_cached(&ck, "MPI_Comm_create_keyval");
        int kv = MPI_KEYVAL_INVALID;
        if (ckv && ckv(mc_nocopy, mc_delete, &kv, NULL) == MPI_SUCCESS)
            __atomic_store_n(&creg.keyval, kv, __ATOMIC_RELEASE);
    }
    set_attr_fn set = (set_attr_fn)ip_real_cached(&sa, "MPI_Comm_set_attr");
    if (!m && creg.keyval != MPI_KEYVAL_INVALID && set) {
        m = mcomm_make(comm, made_by, parent);
        if (m && set(comm, creg.keyval, m) != MPI_SUCCESS) {
            mcomm_free(m);
            m = NULL;
        }
    }
    if (m)
        ct_put(comm, m);
    pthread_mutex_unlock(&creg.lock);
    errno = saved;
    return m;
}

static int is_world(MPI_Comm comm) { return H(comm) == mh.world; }

/* comm's entry (guard held), registering it at its first use; NULL when
 * MPI would not let us attach one (then comm_fallback). */
static mcomm *mcomm_of(MPI_Comm comm)
{
    if (is_world(comm))
        return world_get();
    mcomm *m = ct_get(comm);
    if (m)
        return m;
    m = mcomm_cached(comm); /* registered, but no slot was free */
    if (m)
        return m;
    return mcomm_register(comm, H(comm) == mh.self ? "MPI_COMM_SELF" : NULL, 0);
}

/* Writes m's COMM record the first time a recorded call names it. */
static void mcomm_define(mcomm *m)
{
    if (atomic_load_explicit(&m->defined, memory_order_relaxed) || atomic_exchange(&m->defined, 1))
        return;
    int saved = errno;
    tft_comm_define(&TFT_COMM_INFO(.comm = m->id, .name = m->made_by, .parent = m->parent, .rank = m->rank,
                                   .size = m->size, .order = m->order, .n_members = m->n_members,
                                   .members = m->members, .flags = m->flags));
    errno = saved;
}

/* Ids for a communicator we could not register (MPI refused the
 * attribute): "MPI_Comm?<size>", equal on all ranks of equal-sized
 * communicators, without a COMM record. */
static uint64_t comm_fallback(int size, int p2p)
{
    char buf[48];
    int n = snprintf(buf, sizeof(buf), "MPI_Comm?%d%s", size, p2p ? ":p2p" : "");
    return tft_string_id(buf, (size_t)n);
}

/* ---- one recorded call ---------------------------------------------------- */

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

typedef int (*type_extent_fn)(MPI_Datatype, MPI_Aint *, MPI_Aint *);

/* The size in bytes of a type map_dtype does not know (1 when MPI cannot
 * tell); *smax: TFT_STATS_HEALTH when its data are exactly its size in
 * bytes from the buffer's start, lower bound 0 and no holes (a contiguous
 * run of predefined types, a struct without padding), so that the
 * buffer's count * size bytes are the data and can be fingerprinted; -1
 * for any other layout (strides, holes, a negative lower bound), whose
 * bytes we do not read. Derived types are freed and their handles
 * reused: asked every call, never cached. */
static int type_bytes(MPI_Datatype dt, int *smax)
{
    static void *_Atomic ts_fn, *_Atomic ext_fn, *_Atomic true_fn;
    type_size_fn ts = (type_size_fn)ip_real_cached(&ts_fn, "MPI_Type_size");
    type_extent_fn ext = (type_extent_fn)ip_real_cached(&ext_fn, "MPI_Type_get_extent");
    type_extent_fn true_ext = (type_extent_fn)ip_real_cached(&true_fn, "MPI_Type_get_true_extent");
    int bytes = 1;
    MPI_Aint lb = -1, extent = -1, tlb = -1, textent = -1;
    *smax = -1;
    if (!ts || ts(dt, &bytes) != MPI_SUCCESS || bytes <= 0)
        return 1;
    if (ext && true_ext && ext(dt, &lb, &extent) == MPI_SUCCESS && true_ext(dt, &tlb, &textent) == MPI_SUCCESS &&
        lb == 0 && tlb == 0 && extent == bytes && textent == bytes)
        *smax = TFT_STATS_HEALTH;
    return bytes;
}

/* The string id of a call name: every name the MPI interposers record is
 * one of their string literals, so the id is cached per thread by the
 * literal's address (no length, no hash on the call's path). */
static uint64_t call_name_id(const char *name)
{
    enum { SLOTS = 64 };
    static __thread struct {
        const char *name;
        uint64_t id;
    } cache[SLOTS] __attribute__((tls_model("initial-exec")));
    unsigned h = (unsigned)(((uintptr_t)name * 0x9E3779B97F4A7C15ull) >> 58);
    if (__builtin_expect(cache[h].name != name, 0)) {
        cache[h].id = tft_string_id(name, strnlen(name, 1024));
        cache[h].name = name;
    }
    return cache[h].id;
}

void mpi_call_fill(mpi_call *mc, const char *name, int type, MPI_Comm comm, MPI_Datatype dt, uint64_t count,
                   int redop, int root, int p2p, int tag)
{
    int saved = errno;
    mcomm *m = mcomm_of(comm);
    int size = m ? m->size : comm_size(comm);
    int rank = m ? m->rank : comm_rank(comm);
    uint64_t id = m ? (p2p ? m->p2p : m->id) : comm_fallback(size, p2p);
    if (m)
        mcomm_define(m);
    int smax = -1;
    int dtype = type == TFT_COLL_BARRIER ? TFT_U8 : map_dtype(dt, &smax);
    mc->derived = dtype < 0;
    if (dtype < 0) {
        int bytes = type_bytes(dt, &smax);
        dtype = TFT_U8;
        count *= (uint64_t)bytes;
    }
    mc->smax = type == TFT_COLL_BARRIER ? -1 : smax;
    mc->ci = TFT_COLL_INFO(.name = name, .comm = id, .type = type, .dtype = dtype,
                           .count = type == TFT_COLL_BARRIER ? 0 : count, .redop = redop, .root = root,
                           .rank = rank, .nranks = size, .tag = p2p ? tag : TFT_TAG_NONE);
    mc->token = -1;
    mc->name_id = call_name_id(name);
    errno = saved;
}

void mpi_enter(mpi_call *mc)
{
    int saved = errno;
    mc->own_op = rec_current_op() == TFT_SEQ_NONE;
    mc->t_enter = g_rec.h ? shm_stamp(g_rec.h) : 0;
    mc->token = rec_coll_enter(&mc->ci, mc->ci.name, mc->name_id, mc->t_enter);
    errno = saved;
}

/* The TENSOR record of mc's result (its statistics capped at mc->smax);
 * returns its id, 0 when none was made. */
static uint64_t result_tensor(const mpi_call *mc, const void *result, uint64_t ts)
{
    if (!result || mc->smax < 0 || !mc->ci.count)
        return 0;
    int mode = rec_tensor_mode();
    mode = mode < mc->smax ? mode : mc->smax;
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

void mpi_recv_status(mpi_call *mc, const MPI_Status *st, MPI_Datatype dt)
{
    static void *_Atomic gc;
    if (!st)
        return;
    int saved = errno;
    mc->ci.root = st->MPI_SOURCE >= 0 ? st->MPI_SOURCE : mc->ci.root;
    mc->ci.tag = st->MPI_TAG >= 0 ? st->MPI_TAG : mc->ci.tag;
    get_count_fn fn = mc->smax >= 0 ? (get_count_fn)ip_real_cached(&gc, "MPI_Get_count") : NULL;
    int n;
    if (fn && fn(st, mc->derived ? COMM_DT(mh.dt[DTI_byte]) : dt, &n) == MPI_SUCCESS && n != MPI_UNDEFINED && n >= 0 && (uint64_t)n <= mc->ci.count)
        mc->ci.count = (uint64_t)n;
    errno = saved;
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
    int size = comm_size(comm);
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
    int in_place = sendbuf == MPI_IN_PLACE && comm_rank(comm) == root;
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
    int in_place = recvbuf == MPI_IN_PLACE && comm_rank(comm) == root;
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
    if (rc != MPI_SUCCESS || !out || H(*out) == mh.comm_null || !mpi_rec_begin())
        return;
    mcomm *p = mcomm_of(parent);
    mcomm_register(*out, made_by, p ? p->id : 0);
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
