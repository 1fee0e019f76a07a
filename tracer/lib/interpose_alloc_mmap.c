/*
 * interpose_alloc_mmap.c — mappings of at least alloc_min bytes: mmap,
 * mmap64, munmap and mremap, defined in the preloaded libtftrace. The
 * regions are kept exactly (start, length, site) under a mutex: a munmap
 * or MAP_FIXED mapping over part of a recorded region records the
 * region's FREE and an ALLOC of each piece that remains; mremap moves it.
 * A small mapping costs a comparison and the next definition's call; a
 * munmap while no region is recorded, one load more.
 */
#include "interpose_alloc_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- mmap regions ---------------------------------------------------------------- */

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
typedef int (*munmap_fn)(void *, size_t);
typedef void *(*mremap_fn)(void *, size_t, size_t, int, ...);

static void *_Atomic real_mmap, *_Atomic real_mmap64, *_Atomic real_munmap, *_Atomic real_mremap;

/* Recorded mappings, exact, under the lock (munmap is a system call: a
 * scan costs little next to it). n is read without the lock to skip
 * munmaps when nothing is recorded. */
typedef struct region {
    uintptr_t start;
    size_t len;              /* bytes as recorded (pieces: page multiples) */
    const char *site;
} region;

#define MAX_REGIONS 4096
static struct {
    pthread_mutex_t lock;
    _Atomic size_t n;
    region r[MAX_REGIONS];
} regions = {.lock = PTHREAD_MUTEX_INITIALIZER};

static size_t page_size(void)
{
    static _Atomic size_t ps;
    size_t p = atomic_load_explicit(&ps, memory_order_relaxed);
    if (!p) {
        long v = sysconf(_SC_PAGESIZE);
        p = v > 0 ? (size_t)v : 4096;
        atomic_store_explicit(&ps, p, memory_order_relaxed);
    }
    return p;
}

static size_t page_up(size_t n) { return (n + page_size() - 1) & ~(page_size() - 1); }

/* Adds a region and records it (when record); lock held. */
static void region_add_locked(uintptr_t start, size_t len, const char *site, int record)
{
    size_t n = atomic_load_explicit(&regions.n, memory_order_relaxed);
    if (n == MAX_REGIONS)
        return; /* untracked: not recorded either (its FREE would be missed) */
    regions.r[n] = (region){start, len, site};
    atomic_store_explicit(&regions.n, n + 1, memory_order_relaxed);
    if (record)
        tft_alloc((void *)start, len, site);
}

/* [a, a + len) is no longer mapped as recorded: every overlapping region
 * gets a FREE, and the pieces of it outside the range are recorded again
 * with its site. Returns the site of the region that started at a, or
 * NULL. Lock held. */
static const char *regions_cut_locked(uintptr_t a, size_t len, int record)
{
    const char *site_at_a = NULL;
    uintptr_t end = a + page_up(len);
    size_t i = 0;
    while (i < atomic_load_explicit(&regions.n, memory_order_relaxed)) {
        region r = regions.r[i];
        uintptr_t rend = r.start + page_up(r.len);
        if (r.start >= end || rend <= a) {
            i++;
            continue;
        }
        if (r.start == a)
            site_at_a = r.site;
        size_t n = atomic_load_explicit(&regions.n, memory_order_relaxed) - 1;
        regions.r[i] = regions.r[n];
        atomic_store_explicit(&regions.n, n, memory_order_relaxed);
        if (record)
            tft_free((void *)r.start);
        if (r.start < a)
            region_add_locked(r.start, a - r.start, r.site, record);
        if (rend > end)
            region_add_locked(end, rend - end, r.site, record);
    }
    return site_at_a;
}

/* Forgets [a, a + len) (munmap, MAP_FIXED over it, mremap away). */
static const char *regions_forget(void *a, size_t len)
{
    int record = !ip_depth, saved = errno;
    ip_depth++;
    pthread_mutex_lock(&regions.lock);
    const char *site = regions_cut_locked((uintptr_t)a, len, record);
    pthread_mutex_unlock(&regions.lock);
    ip_depth--;
    errno = saved;
    return site;
}

/* After a successful mapping of len bytes at p requested from ret (site:
 * the site to keep, NULL = the caller's). */
static void note_region(void *p, size_t len, const void *ret, const char *site)
{
    if (ip_depth)
        return;
    int saved = errno;
    ip_depth++;
    if (!ip_active()) {
        alloc_off();
    } else if (!in_self(ret)) {
        if (!site)
            site = alloc_site_of(ret);
        pthread_mutex_lock(&regions.lock);
        region_add_locked((uintptr_t)p, len, site, 1);
        pthread_mutex_unlock(&regions.lock);
    }
    ip_depth--;
    errno = saved;
}

static NOINLINE void *mmap_slow(int is64, void *a, size_t len, int prot, int flags, int fd, off_t off,
                                const void *ret)
{
    mmap_fn fn = (mmap_fn)ip_real_cached(is64 ? &real_mmap64 : &real_mmap, is64 ? "mmap64" : "mmap");
    if (!ip_depth && (flags & MAP_FIXED) && atomic_load_explicit(&regions.n, memory_order_relaxed))
        regions_forget(a, len);
    void *p = fn ? fn(a, len, prot, flags, fd, off) : (void *)syscall(SYS_mmap, a, len, prot, flags, fd, off);
    if (p != MAP_FAILED && len >= min_bytes() && prot != PROT_NONE)
        note_region(p, len, ret, NULL);
    return p;
}

TFT_INTERPOSE void *mmap(void *a, size_t len, int prot, int flags, int fd, off_t off)
{
    if (LIKELY(len < min_bytes()) && !(flags & MAP_FIXED)) {
        mmap_fn fn = (mmap_fn)ip_real_cached(&real_mmap, "mmap");
        if (LIKELY(fn != NULL))
            return fn(a, len, prot, flags, fd, off);
    }
    return mmap_slow(0, a, len, prot, flags, fd, off, RET_ADDR);
}

TFT_INTERPOSE void *mmap64(void *a, size_t len, int prot, int flags, int fd, off_t off)
{
    if (LIKELY(len < min_bytes()) && !(flags & MAP_FIXED)) {
        mmap_fn fn = (mmap_fn)ip_real_cached(&real_mmap64, "mmap64");
        if (LIKELY(fn != NULL))
            return fn(a, len, prot, flags, fd, off);
    }
    return mmap_slow(1, a, len, prot, flags, fd, off, RET_ADDR);
}

TFT_INTERPOSE int munmap(void *a, size_t len)
{
    munmap_fn fn = (munmap_fn)ip_real_cached(&real_munmap, "munmap");
    /* a range the kernel will refuse unmaps nothing: forget nothing */
    if (UNLIKELY(atomic_load_explicit(&regions.n, memory_order_relaxed) != 0) && len &&
        !((uintptr_t)a & (page_size() - 1)))
        regions_forget(a, len);
    return fn ? fn(a, len) : (int)syscall(SYS_munmap, a, len);
}

TFT_INTERPOSE void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    void *want = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        want = va_arg(ap, void *);
        va_end(ap);
    }
    mremap_fn fn = (mremap_fn)ip_real_cached(&real_mremap, "mremap");
    void *p = fn ? fn(old, old_len, new_len, flags, want)
                 : (void *)syscall(SYS_mremap, old, old_len, new_len, flags, want);
    if (LIKELY(new_len < min_bytes() && atomic_load_explicit(&regions.n, memory_order_relaxed) == 0) ||
        p == MAP_FAILED || ip_depth)
        return p;
    const char *site = atomic_load_explicit(&regions.n, memory_order_relaxed) ? regions_forget(old, old_len) : NULL;
    if (new_len >= min_bytes())
        note_region(p, new_len, RET_ADDR, site);
    return p;
}

void alloc_regions_lock(void) { pthread_mutex_lock(&regions.lock); }

void alloc_regions_unlock(void) { pthread_mutex_unlock(&regions.lock); }
