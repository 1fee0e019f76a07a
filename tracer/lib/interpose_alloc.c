/*
 * interpose_alloc.c — large host allocations of unmodified programs, for
 * leak reports: malloc, calloc, realloc, reallocarray, free,
 * posix_memalign, aligned_alloc, memalign, mmap, mmap64, mremap, munmap,
 * defined in the preloaded libtftrace.
 *
 * A request of at least alloc_min bytes (TFT_ALLOC_MIN, default 1 MiB) is
 * recorded as an ALLOC record whose site is the calling function (the
 * direct caller, symbolised once per return address), and its release as
 * a FREE record. Everything else costs a comparison, no lock and no
 * thread-local access:
 *  - malloc, calloc, the aligned forms: `bytes < alloc_min`, then a call of
 *    the next allocator;
 *  - free, and realloc of a block to a small size: one load of the count
 *    of recorded blocks alive; only when it is non-zero, a probe of a
 *    lock-free set of their addresses (a seqlock tells a probe that raced
 *    with a removal to look again; a hit is confirmed under the lock).
 * alloc_min is SIZE_MAX (nothing is ever recorded) until the library's
 * constructor read the configuration, in processes that do not record
 * (no TFT_SHM / TFT_OUTPUT, TFT_INTERPOSE=0), and, from the first large
 * allocation on, when ip_active() says no: recording off, or a program
 * linked with libtftrace (it records what it allocates itself;
 * TFT_INTERPOSE=1 turns the interposers on there too).
 *
 * The next allocator: calls go to the next definition after libtftrace
 * (dlsym(RTLD_NEXT)) — glibc's, or an allocator the user preloaded or
 * linked (jemalloc, tcmalloc), so a block is never handed from one
 * allocator to another (valloc, pvalloc and malloc_usable_size are not
 * defined here and reach that same allocator directly). dlsym may itself
 * allocate: calls made while it runs on this thread are served from a
 * static arena whose blocks are never reused.
 *
 * Not recorded: calls made inside another interposer or the recorder
 * (ip_depth > 0, which includes the in-process writer thread), calls from
 * libtftrace itself, mappings with PROT_NONE (address-space reservations,
 * not memory), MPI launchers and daemons (by program name: mpi_helper) and
 * what glibc does internally (its own mmap of large malloc chunks is the
 * malloc we already saw).
 * Under a sanitizer (ASan, TSan) the sanitizer's allocator precedes ours
 * in symbol resolution and none of this is reached.
 *
 * mmap regions are kept exactly (start, length, site) under a mutex:
 * a munmap or MAP_FIXED mapping over part of a recorded region records the
 * region's FREE and an ALLOC of each piece that remains; mremap moves it.
 *
 * Fork: the locks are taken around fork (pthread_atfork) so the child
 * inherits consistent tables; the recorder re-registers the child.
 *
 * This file: the set of recorded blocks, the malloc family and the set-up.
 * The next allocator and the settings every part reads:
 * interpose_alloc_next.c; the callers' names: interpose_alloc_site.c; the
 * mmap family: interpose_alloc_mmap.c.
 */
#include "interpose_alloc_internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* ---- anonymous memory for our own tables ------------------------------------ */

/* Zeroed pages straight from the kernel: no allocator, no interposer. */
static void *raw_map(size_t bytes)
{
    long r = syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0L);
    return r == -1 ? NULL : (void *)r;
}

/* ---- the set of recorded blocks -------------------------------------------- */

/* Open addressing, linear probing, at most half full (not tft_u64map.h:
 * lock-free readers, atomics, and memory from mmap inside malloc's
 * interposer). Writers hold set.lock; readers probe without it. A removal shifts later entries back
 * (no tombstones), so it bumps seq to odd before and to even after: a probe
 * that missed while seq changed looks again. Growing publishes a new table
 * and keeps the old one mapped (readers may still be in it; old tables
 * only ever hold stale hits, which the locked path rejects). */
typedef struct set_slot {
    _Atomic uintptr_t key;   /* block address, 0 = empty */
    _Atomic size_t bytes;    /* requested size */
} set_slot;

typedef struct set_table {
    size_t mask;             /* capacity - 1 */
    set_slot slot[];
} set_table;

static struct {
    _Atomic unsigned seq;
    _Atomic size_t live;     /* entries; 0 lets free skip the probe */
    _Atomic(set_table *) table;
    pthread_mutex_t lock;
} set = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* 1 when key is (or was just) in t; bounded by the capacity. */
static int set_probe(const set_table *t, uintptr_t key)
{
    size_t m = t->mask, i = ptr_hash(key) & m;
    for (size_t n = 0; n <= m; n++, i = (i + 1) & m) {
        uintptr_t k = atomic_load_explicit(&t->slot[i].key, memory_order_relaxed);
        if (k == key)
            return 1;
        if (!k)
            return 0;
    }
    return 0;
}

/* Lock-free: 0 = p was not recorded (exact for a block this thread may
 * free); 1 = it may be (confirm with set_remove under the lock). */
static NOINLINE int set_maybe_has(uintptr_t p)
{
    for (int tries = 0; tries < 64; tries++) {
        unsigned s = atomic_load_explicit(&set.seq, memory_order_acquire);
        if (!(s & 1)) {
            set_table *t = atomic_load_explicit(&set.table, memory_order_acquire);
            if (t && set_probe(t, p))
                return 1;
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&set.seq, memory_order_relaxed) == s)
                return 0;
        }
        cpu_relax();
    }
    return 1; /* a writer is slow (preempted): let the locked path decide */
}

static inline int maybe_recorded(const void *p)
{
    return UNLIKELY(atomic_load_explicit(&set.live, memory_order_relaxed) != 0) && p &&
           set_maybe_has((uintptr_t)p);
}

static set_table *set_grow(set_table *old)
{
    size_t cap = old ? (old->mask + 1) * 2 : 4096;
    set_table *t = raw_map(sizeof(*t) + cap * sizeof(set_slot));
    if (!t)
        return NULL;
    t->mask = cap - 1;
    for (size_t i = 0; old && i <= old->mask; i++) {
        uintptr_t k = atomic_load_explicit(&old->slot[i].key, memory_order_relaxed);
        if (!k)
            continue;
        size_t j = ptr_hash(k) & t->mask;
        while (atomic_load_explicit(&t->slot[j].key, memory_order_relaxed))
            j = (j + 1) & t->mask;
        atomic_store_explicit(&t->slot[j].bytes, atomic_load_explicit(&old->slot[i].bytes, memory_order_relaxed),
                              memory_order_relaxed);
        atomic_store_explicit(&t->slot[j].key, k, memory_order_relaxed);
    }
    atomic_store_explicit(&set.table, t, memory_order_release);
    return t;
}

/* Adds p, or updates its size when it is there already (its block was
 * released by a path we do not see); -ENOMEM when the table cannot grow.
 * Lock held. */
static int set_insert_locked(uintptr_t p, size_t bytes)
{
    set_table *t = atomic_load_explicit(&set.table, memory_order_relaxed);
    size_t live = atomic_load_explicit(&set.live, memory_order_relaxed);
    if ((!t || (live + 1) * 2 > t->mask + 1) && !(t = set_grow(t)))
        return -ENOMEM;
    size_t i = ptr_hash(p) & t->mask;
    uintptr_t k;
    while ((k = atomic_load_explicit(&t->slot[i].key, memory_order_relaxed)) != 0) {
        if (k == p) {
            atomic_store_explicit(&t->slot[i].bytes, bytes, memory_order_relaxed);
            return 0;
        }
        i = (i + 1) & t->mask;
    }
    atomic_store_explicit(&t->slot[i].bytes, bytes, memory_order_relaxed);
    atomic_store_explicit(&t->slot[i].key, p, memory_order_release);
    atomic_store_explicit(&set.live, live + 1, memory_order_release);
    return 0;
}

/* Removes p; 1 and its size in *bytes when it was there. Lock held. */
static int set_remove_locked(uintptr_t p, size_t *bytes)
{
    set_table *t = atomic_load_explicit(&set.table, memory_order_relaxed);
    if (!t)
        return 0;
    size_t m = t->mask, i = ptr_hash(p) & m, n = 0;
    uintptr_t k;
    while ((k = atomic_load_explicit(&t->slot[i].key, memory_order_relaxed)) != p) {
        if (!k || ++n > m)
            return 0;
        i = (i + 1) & m;
    }
    *bytes = atomic_load_explicit(&t->slot[i].bytes, memory_order_relaxed);
    unsigned s = atomic_load_explicit(&set.seq, memory_order_relaxed);
    atomic_store_explicit(&set.seq, s + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    /* backward shift: move up every later entry whose home slot is not in (i, j] */
    for (size_t j = (i + 1) & m;; j = (j + 1) & m) {
        k = atomic_load_explicit(&t->slot[j].key, memory_order_relaxed);
        if (!k)
            break;
        size_t home = ptr_hash(k) & m;
        if (((j - home) & m) >= ((j - i) & m)) {
            atomic_store_explicit(&t->slot[i].bytes, atomic_load_explicit(&t->slot[j].bytes, memory_order_relaxed),
                                  memory_order_relaxed);
            atomic_store_explicit(&t->slot[i].key, k, memory_order_relaxed);
            i = j;
        }
    }
    atomic_store_explicit(&t->slot[i].key, 0, memory_order_relaxed);
    atomic_store_explicit(&set.live, atomic_load_explicit(&set.live, memory_order_relaxed) - 1,
                          memory_order_relaxed);
    atomic_store_explicit(&set.seq, s + 2, memory_order_release);
    return 1;
}

static int set_take(const void *p, size_t *bytes)
{
    pthread_mutex_lock(&set.lock);
    int had = set_remove_locked((uintptr_t)p, bytes);
    pthread_mutex_unlock(&set.lock);
    return had;
}

/* ---- recording --------------------------------------------------------------- */

/* After a successful allocation of n bytes at p requested from ret:
 * records it when recording is on. errno is left as the allocator set it. */
static void note_alloc(void *p, size_t n, const void *ret)
{
    if (!p || ip_depth)
        return;
    int saved = errno;
    ip_depth++;
    if (!ip_active()) {
        alloc_off();
    } else if (!in_self(ret)) {
        const char *site = alloc_site_of(ret);
        pthread_mutex_lock(&set.lock);
        int e = set_insert_locked((uintptr_t)p, n);
        pthread_mutex_unlock(&set.lock);
        if (e == 0) /* untracked blocks are not recorded: their FREE would be missed */
            tft_alloc(p, n, site);
    }
    ip_depth--;
    errno = saved;
}

static void record_free(const void *p)
{
    if (ip_depth)
        return;
    int saved = errno;
    ip_depth++;
    tft_free(p);
    ip_depth--;
    errno = saved;
}

/* ---- malloc and friends ------------------------------------------------------- */

static NOINLINE void *malloc_slow(size_t n, const void *ret)
{
    void *p = NEXT(malloc)(n);
    note_alloc(p, n, ret);
    return p;
}

TFT_INTERPOSE void *malloc(size_t n)
{
    if (LIKELY(n < min_bytes()))
        return NEXT(malloc)(n);
    return malloc_slow(n, RET_ADDR);
}

static NOINLINE void *calloc_slow(size_t k, size_t n, const void *ret)
{
    void *p = NEXT(calloc)(k, n);
    if (p)
        note_alloc(p, k * n, ret);
    return p;
}

TFT_INTERPOSE void *calloc(size_t k, size_t n)
{
    size_t b;
    if (LIKELY(!__builtin_mul_overflow(k, n, &b) && b < min_bytes()))
        return NEXT(calloc)(k, n);
    return calloc_slow(k, n, RET_ADDR);
}

static NOINLINE void free_slow(void *p)
{
    size_t bytes;
    if (set_take(p, &bytes))
        record_free(p); /* before the block can be handed out again */
    NEXT(free)(p);
}

/* free while recorded blocks are alive: probe the set first. */
static NOINLINE void free_live(void *p)
{
    if (p && set_maybe_has((uintptr_t)p))
        free_slow(p);
    else if (!in_arena(p))
        NEXT(free)(p);
}

TFT_INTERPOSE void free(void *p)
{
    if (UNLIKELY(atomic_load_explicit(&set.live, memory_order_relaxed) != 0)) {
        free_live(p);
        return;
    }
    if (UNLIKELY(in_arena(p)))
        return;
    NEXT(free)(p);
}

static NOINLINE void *realloc_slow(void *p, size_t n, const void *ret)
{
    if (in_arena(p)) { /* from the bootstrap: move it to the real allocator */
        void *q = n ? (n < min_bytes() ? NEXT(malloc)(n) : malloc_slow(n, ret)) : NULL;
        if (q)
            memcpy(q, p, arena_size(p) < n ? arena_size(p) : n);
        return q;
    }
    size_t old = 0;
    int had = maybe_recorded(p) && set_take(p, &old);
    if (had)
        record_free(p);
    void *q = NEXT(realloc)(p, n);
    if (!q && n) { /* failed: p is still the caller's */
        if (had)
            note_alloc(p, old, ret);
        return NULL;
    }
    if (n >= min_bytes())
        note_alloc(q, n, ret);
    return q;
}

static inline __attribute__((always_inline)) void *realloc_at(void *p, size_t n, const void *ret)
{
    if (LIKELY(n < min_bytes()) && !maybe_recorded(p) && !in_arena(p))
        return NEXT(realloc)(p, n);
    return realloc_slow(p, n, ret);
}

TFT_INTERPOSE void *realloc(void *p, size_t n) { return realloc_at(p, n, RET_ADDR); }

TFT_INTERPOSE void *reallocarray(void *p, size_t k, size_t n)
{
    size_t b;
    if (__builtin_mul_overflow(k, n, &b)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc_at(p, b, RET_ADDR);
}

static NOINLINE int posix_memalign_slow(void **pp, size_t align, size_t n, const void *ret)
{
    int e = NEXT(posix_memalign)(pp, align, n);
    if (e == 0)
        note_alloc(*pp, n, ret);
    return e;
}

TFT_INTERPOSE int posix_memalign(void **pp, size_t align, size_t n)
{
    if (LIKELY(n < min_bytes()))
        return NEXT(posix_memalign)(pp, align, n);
    return posix_memalign_slow(pp, align, n, RET_ADDR);
}

static NOINLINE void *aligned_slow(int c11, size_t align, size_t n, const void *ret)
{
    void *p = c11 ? NEXT(aligned_alloc)(align, n) : NEXT(memalign)(align, n);
    note_alloc(p, n, ret);
    return p;
}

TFT_INTERPOSE void *aligned_alloc(size_t align, size_t n)
{
    if (LIKELY(n < min_bytes()))
        return NEXT(aligned_alloc)(align, n);
    return aligned_slow(1, align, n, RET_ADDR);
}

TFT_INTERPOSE void *memalign(size_t align, size_t n)
{
    if (LIKELY(n < min_bytes()))
        return NEXT(memalign)(align, n);
    return aligned_slow(0, align, n, RET_ADDR);
}

/* ---- set-up ------------------------------------------------------------------------ */

#define DEFAULT_MIN ((size_t)1 << 20)

/* TFT_ALLOC_MIN: bytes, with an optional K, M or G suffix (powers of
 * 1024; "KiB", "MB" and the like are read the same); "0" or "off":
 * nothing is recorded; unset, empty or unreadable: 1 MiB. */
static size_t parse_min(const char *v)
{
    if (!v || !*v)
        return DEFAULT_MIN;
    if (!strcasecmp(v, "off"))
        return SIZE_MAX;
    if (v[0] < '0' || v[0] > '9')
        return DEFAULT_MIN;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno)
        return SIZE_MAX; /* more than any request */
    int shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end && strcasecmp(end, "b") && !(shift && !strcasecmp(end, "ib")))
        return DEFAULT_MIN;
    if (x == 0)
        return SIZE_MAX;
    if (x > (SIZE_MAX >> shift))
        return SIZE_MAX;
    return (size_t)x << shift;
}

/* MPI launchers and daemons under tftrace (tftrace -- mpirun ..., or the
 * orted an MPI singleton forks): they allocate large buffers of their own,
 * and recording them would make them ranks of the trace whose numbers
 * collide with the real ranks'. */
static int mpi_helper(void)
{
    static const char *const names[] = {"orted", "orterun", "prted", "prte", "prterun", "mpirun", "mpiexec",
                                        "mpiexec.hydra", "mpiexec.openmpi", "mpirun.openmpi", "mpiexec.mpich",
                                        "mpirun.mpich", "hydra_pmi_proxy", "pmi_proxy", "srun"};
    const char *me = program_invocation_short_name;
    for (size_t i = 0; me && i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(me, names[i]))
            return 1;
    return 0;
}

/* The threshold for this process: SIZE_MAX when nothing will be recorded. */
static size_t config_min(void)
{
    const char *shm = getenv("TFT_SHM"), *out = getenv("TFT_OUTPUT"), *ip = getenv("TFT_INTERPOSE");
    if (!(shm && *shm) && !(out && *out))
        return SIZE_MAX;
    if ((ip && !strcmp(ip, "0")) || mpi_helper())
        return SIZE_MAX;
    return parse_min(getenv("TFT_ALLOC_MIN"));
}

static int find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    uintptr_t me = (uintptr_t)find_self, lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t s = info->dlpi_addr + ph->p_vaddr, e = s + ph->p_memsz;
        lo = s < lo ? s : lo;
        hi = e > hi ? e : hi;
    }
    if (me < lo || me >= hi)
        return 0;
    self_lo = lo;
    self_hi = hi;
    return 1;
}

static void fork_prepare(void)
{
    alloc_sites_lock();
    pthread_mutex_lock(&set.lock);
    alloc_regions_lock();
}

static void fork_release(void)
{
    alloc_regions_unlock();
    pthread_mutex_unlock(&set.lock);
    alloc_sites_unlock();
}

__attribute__((constructor)) static void alloc_init(void)
{
    int saved = errno;
    size_t min = config_min();
    if (min != SIZE_MAX) {
        dl_iterate_phdr(find_self, NULL);
        pthread_atfork(fork_prepare, fork_release, fork_release);
        atomic_store_explicit(&alloc_min, min, memory_order_release);
    }
    errno = saved;
}
