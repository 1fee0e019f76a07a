/*
 * interpose_mpi_comm.c — what the MPI interposers' calls are on: MPI's
 * predefined handles (looked up at run time for Open MPI, constants for
 * MPICH), their datatypes and reduction ops as the format's, and the
 * communicators — their identity from the members' world ranks and the
 * creation order, the table that finds them by handle, their COMM
 * records — which mpi_call_fill puts together for one recorded call.
 * The calls themselves: interpose_mpi.c.
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

/* ---- predefined handles --------------------------------------------------- */

struct mpi_handles mpi_mh;
pthread_once_t mpi_mh_once = PTHREAD_ONCE_INIT;

#define DT_TFT(a, b, c, d) c,
#define DT_SMAX(a, b, c, d) TFT_STATS_##d,
static const int dt_tft[N_DTYPES] = {MPI_DTYPES(DT_TFT)};
static const int dt_smax[N_DTYPES] = {MPI_DTYPES(DT_SMAX)};

#ifdef OPEN_MPI
/* RTLD_DEFAULT first: a program's copy relocation of a handle object (as
 * non-PIC code referencing MPI_INT makes) is the address everyone uses, and
 * RTLD_NEXT would find libmpi's original instead. */
static void *handle_sym(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    return p ? p : ip_real(name);
}

void mpi_handles_load(void)
{
    static const char *const dt_names[N_DTYPES] = {
#define DT_NAME(a, b, c, d) "ompi_mpi_" #a,
        MPI_DTYPES(DT_NAME)};
    static const char *const op_names[N_OPS] = {
#define OP_NAME(a, b, c, d) "ompi_mpi_op_" #a,
        MPI_OPS(OP_NAME)};
    mpi_mh.world = handle_sym("ompi_mpi_comm_world");
    mpi_mh.self = handle_sym("ompi_mpi_comm_self");
    mpi_mh.comm_null = handle_sym("ompi_mpi_comm_null");
    mpi_mh.req_null = handle_sym("ompi_request_null");
    for (int i = 0; i < N_DTYPES; i++)
        mpi_mh.dt[i] = handle_sym(dt_names[i]);
    for (int i = 0; i < N_OPS; i++)
        mpi_mh.op[i] = handle_sym(op_names[i]);
}
#else
void mpi_handles_load(void)
{
#define DT_VAL(a, b, c, d) H(b),
#define OP_VAL(a, b, c, d) H(b),
    void *dts[N_DTYPES] = {MPI_DTYPES(DT_VAL)};
    void *ops[N_OPS] = {MPI_OPS(OP_VAL)};
    memcpy(mpi_mh.dt, dts, sizeof(dts));
    memcpy(mpi_mh.op, ops, sizeof(ops));
    mpi_mh.world = H(MPI_COMM_WORLD);
    mpi_mh.self = H(MPI_COMM_SELF);
    mpi_mh.comm_null = H(MPI_COMM_NULL);
    mpi_mh.req_null = H(MPI_REQUEST_NULL);
}
#endif

uintptr_t mpi_req_null(void) { return RKEY(mpi_mh.req_null); }

/* The tft_dtype of a predefined dt, *smax the most statistics its buffers
 * get; -1 for any other type (derived, complex, long double, ...). */
static int map_dtype(MPI_Datatype dt, int *smax)
{
    for (int i = 0; i < N_DTYPES; i++)
        if (H(dt) == mpi_mh.dt[i] && mpi_mh.dt[i]) {
            *smax = dt_smax[i];
            return dt_tft[i];
        }
    return -1;
}

/* ---- communicators -------------------------------------------------------- */

typedef int (*type_size_fn)(MPI_Datatype, int *);
typedef int (*get_count_fn)(const MPI_Status *, MPI_Datatype, int *);
typedef int (*comm_group_fn)(MPI_Comm, MPI_Group *);
typedef int (*translate_fn)(MPI_Group, int, const int[], MPI_Group, int[]);
typedef int (*group_free_fn)(MPI_Group *);
typedef int (*get_attr_fn)(MPI_Comm, int, void *, int *);
typedef int (*set_attr_fn)(MPI_Comm, int, void *);
typedef int (*create_keyval_fn)(MPI_Comm_copy_attr_function *, MPI_Comm_delete_attr_function *, int *, void *);

void *_Atomic mpi_comm_rank_fn, *_Atomic mpi_comm_size_fn;

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
    if (!creg.have_wgroup && wgroup(COMM_OF(mpi_mh.world), &creg.wgroup) == MPI_SUCCESS)
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
    m->rank = mpi_comm_rank(comm);
    m->size = mpi_comm_size(comm);
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
        MPI_Comm comm = COMM_OF(mpi_mh.world);
        w->rank = mpi_comm_rank(comm);
        w->size = mpi_comm_size(comm);
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

static int is_world(MPI_Comm comm) { return H(comm) == mpi_mh.world; }

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
    return mcomm_register(comm, H(comm) == mpi_mh.self ? "MPI_COMM_SELF" : NULL, 0);
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
    int size = m ? m->size : mpi_comm_size(comm);
    int rank = m ? m->rank : mpi_comm_rank(comm);
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
    if (fn && fn(st, mc->derived ? COMM_DT(mpi_mh.dt[DTI_byte]) : dt, &n) == MPI_SUCCESS && n != MPI_UNDEFINED && n >= 0 && (uint64_t)n <= mc->ci.count)
        mc->ci.count = (uint64_t)n;
    errno = saved;
}

/* After a creator made *out from parent (interpose_mpi.c, created()):
 * numbers the new communicator now and remembers what made it. */
void mpi_comm_made(MPI_Comm out, const char *made_by, MPI_Comm parent)
{
    mcomm *p = mcomm_of(parent);
    mcomm_register(out, made_by, p ? p->id : 0);
}

#endif /* TFT_HAVE_MPI */
