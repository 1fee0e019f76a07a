/*
 * interpose_alloc_next.c — what every allocation interposer reads: the
 * settings (alloc_min, libtftrace's own address range) and the next
 * allocator (the definitions after libtftrace, found with dlsym(RTLD_NEXT)
 * on first use; while dlsym runs on a thread, its allocations are served
 * from a static arena whose blocks are never reused). The lowest file of
 * the allocation interposers: it calls none of the others
 * (interpose_alloc.c, interpose_alloc_site.c, interpose_alloc_mmap.c).
 */
#include "interpose_alloc_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Requests of at least this many bytes are recorded; SIZE_MAX: none. */
_Atomic size_t alloc_min = SIZE_MAX;

/* The address range of libtftrace's own loaded segments: its calls are
 * the recorder's, not the program's. Set by the constructor. */
uintptr_t self_lo, self_hi;


/* ---- the next allocator ---------------------------------------------------- */

static void *boot_malloc(size_t n);
static void *boot_calloc(size_t k, size_t n);
static void *boot_realloc(void *p, size_t n);
static void boot_free(void *p);
static int boot_posix_memalign(void **pp, size_t align, size_t n);
static void *boot_memalign(size_t align, size_t n);

/* Until resolved, each points to a boot_* function that resolves them all. */
struct alloc_next alloc_next = {boot_malloc, boot_calloc, boot_realloc, boot_free, boot_posix_memalign, boot_memalign,
                                boot_memalign};


/* glibc's own entry points: the fallback when dlsym finds nothing. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

/* Blocks handed out while dlsym runs (it may allocate); never reused. */
_Alignas(4096) char alloc_arena[ALLOC_ARENA_BYTES];
static _Atomic size_t arena_used;

/* An arena block of n bytes aligned to align (a power of two); its size
 * sits in the 8 bytes before it. Zeroed (the arena is never reused). */
static void *arena_alloc(size_t n, size_t align)
{
    if (align < 16)
        align = 16;
    if (n > ALLOC_ARENA_BYTES || align > 4096 || (align & (align - 1))) {
        errno = n > ALLOC_ARENA_BYTES ? ENOMEM : EINVAL;
        return NULL;
    }
    size_t need = n + align + 16;
    size_t off = atomic_fetch_add(&arena_used, need);
    if (off + need > ALLOC_ARENA_BYTES) {
        errno = ENOMEM;
        return NULL;
    }
    uintptr_t p = ((uintptr_t)alloc_arena + off + 16 + align - 1) & ~(uintptr_t)(align - 1);
    ((size_t *)p)[-1] = n;
    return (void *)p;
}


/* Set while this thread runs dlsym for the next allocator. volatile: dlsym
 * is declared leaf, and it does re-enter this file through malloc. */
static __thread volatile int resolving __attribute__((tls_model("initial-exec")));

static int posix_memalign_via_memalign(void **pp, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    void *p = NEXT(memalign)(align, n);
    if (!p)
        return ENOMEM;
    *pp = p;
    return 0;
}

static void *lookup_next(const char *name, void *self, void *fallback)
{
    void *p = dlsym(RTLD_NEXT, name);
    return p && p != self ? p : fallback;
}

/* Finds the next allocator's functions; -1 when called from inside that
 * lookup (the caller then uses the arena). Idempotent: threads racing here
 * store the same values. */
static int resolve_next(void)
{
    if (resolving)
        return -1;
    resolving = 1;
    void *m = lookup_next("malloc", (void *)malloc, (void *)__libc_malloc);
    void *c = lookup_next("calloc", (void *)calloc, (void *)__libc_calloc);
    void *r = lookup_next("realloc", (void *)realloc, (void *)__libc_realloc);
    void *f = lookup_next("free", (void *)free, (void *)__libc_free);
    void *ma = lookup_next("memalign", (void *)memalign, (void *)__libc_memalign);
    void *aa = lookup_next("aligned_alloc", (void *)aligned_alloc, ma);
    void *pm = lookup_next("posix_memalign", (void *)posix_memalign, (void *)posix_memalign_via_memalign);
    atomic_store(&alloc_next.memalign, (memalign_fn)ma);
    atomic_store(&alloc_next.aligned_alloc, (memalign_fn)aa);
    atomic_store(&alloc_next.posix_memalign, (posix_memalign_fn)pm);
    atomic_store(&alloc_next.calloc, (calloc_fn)c);
    atomic_store(&alloc_next.realloc, (realloc_fn)r);
    atomic_store(&alloc_next.free, (free_fn)f);
    atomic_store(&alloc_next.malloc, (malloc_fn)m);
    resolving = 0;
    return 0;
}

static void *boot_malloc(size_t n) { return resolve_next() ? arena_alloc(n, 16) : NEXT(malloc)(n); }

static void *boot_calloc(size_t k, size_t n)
{
    size_t b;
    if (resolve_next() == 0)
        return NEXT(calloc)(k, n);
    if (__builtin_mul_overflow(k, n, &b)) {
        errno = ENOMEM;
        return NULL;
    }
    return arena_alloc(b, 16);
}

static void *boot_realloc(void *p, size_t n)
{
    if (resolve_next() == 0 && !in_arena(p))
        return NEXT(realloc)(p, n);
    if (p && !in_arena(p)) { /* not ours to move while dlsym runs */
        errno = ENOMEM;
        return NULL;
    }
    void *q = resolving ? arena_alloc(n, 16) : NEXT(malloc)(n);
    if (q && p)
        memcpy(q, p, arena_size(p) < n ? arena_size(p) : n);
    return q;
}

static void boot_free(void *p)
{
    if (!in_arena(p) && resolve_next() == 0)
        NEXT(free)(p);
}

static int boot_posix_memalign(void **pp, size_t align, size_t n)
{
    if (resolve_next() == 0)
        return NEXT(posix_memalign)(pp, align, n);
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    void *p = arena_alloc(n, align);
    if (!p)
        return ENOMEM;
    *pp = p;
    return 0;
}

static void *boot_memalign(size_t align, size_t n)
{
    return resolve_next() ? arena_alloc(n, align) : NEXT(memalign)(align, n);
}
