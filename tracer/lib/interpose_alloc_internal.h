/*
 * interpose_alloc_internal.h — what the allocation interposers share: the
 * settings and the next allocator (interpose_alloc_next.c, the lowest),
 * the callers' names (interpose_alloc_site.c), the mmap family's regions
 * (interpose_alloc_mmap.c), the malloc family (interpose_alloc.c). The fast paths read alloc_min and the next
 * allocator's table inline, as they did in one file.
 */
#ifndef TFT_INTERPOSE_ALLOC_INTERNAL_H
#define TFT_INTERPOSE_ALLOC_INTERNAL_H

#include "interpose_internal.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define RET_ADDR __builtin_return_address(0)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define NOINLINE __attribute__((noinline))

/* Requests of at least this many bytes are recorded; SIZE_MAX: none. */
extern _Atomic size_t alloc_min __attribute__((visibility("hidden")));

static inline size_t min_bytes(void) { return atomic_load_explicit(&alloc_min, memory_order_relaxed); }

/* Turns the interposers off for the rest of the process (recording off,
 * or a program that records its own allocations). */
static inline void alloc_off(void) { atomic_store_explicit(&alloc_min, SIZE_MAX, memory_order_relaxed); }

/* The address range of libtftrace's own loaded segments: its calls are
 * the recorder's, not the program's. Set by the constructor. */
extern uintptr_t self_lo __attribute__((visibility("hidden")));
extern uintptr_t self_hi __attribute__((visibility("hidden")));

static inline int in_self(const void *ret) { return (uintptr_t)ret - self_lo < self_hi - self_lo; }

typedef void *(*malloc_fn)(size_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void (*free_fn)(void *);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*memalign_fn)(size_t, size_t); /* memalign and aligned_alloc */

/* The next allocator's functions (interpose_alloc_next.c): until resolved,
 * each points to a boot_* function that resolves them all. */
struct alloc_next {
    _Atomic(malloc_fn) malloc;
    _Atomic(calloc_fn) calloc;
    _Atomic(realloc_fn) realloc;
    _Atomic(free_fn) free;
    _Atomic(posix_memalign_fn) posix_memalign;
    _Atomic(memalign_fn) aligned_alloc, memalign;
};
extern struct alloc_next alloc_next __attribute__((visibility("hidden")));

#define NEXT(fn) atomic_load_explicit(&alloc_next.fn, memory_order_relaxed)

/* Blocks handed out while dlsym runs (it may allocate); never reused. The
 * size of a block sits in the 8 bytes before it. */
#define ALLOC_ARENA_BYTES (256u * 1024u)
extern char alloc_arena[ALLOC_ARENA_BYTES] __attribute__((visibility("hidden")));

static inline int in_arena(const void *p) { return (uintptr_t)p - (uintptr_t)alloc_arena < ALLOC_ARENA_BYTES; }

static inline size_t arena_size(const void *p) { return ((const size_t *)p)[-1]; }

static inline size_t ptr_hash(uintptr_t p)
{
    uint64_t x = (uint64_t)p >> 4;
    x *= 0x9e3779b97f4a7c15ull;
    return (size_t)(x ^ (x >> 29));
}

/* ---- interpose_alloc_site.c ---- */

/* The name of the function that ret returns into ("func+0x10 (module)"
 * style, "?" when unknown), symbolised once per return address; the name
 * lives as long as the process. */
const char *alloc_site_of(const void *ret);
/* The symbol tables' lock, taken around fork. */
void alloc_sites_lock(void);
void alloc_sites_unlock(void);

/* ---- interpose_alloc_mmap.c ---- */

/* The recorded regions' lock, taken around fork. */
void alloc_regions_lock(void);
void alloc_regions_unlock(void);

#endif
