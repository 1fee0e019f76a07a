/*
 * leak_prog.c — an unmodified program for the host-allocation interposer
 * test (tracer/lib/interpose_alloc.c): built normally (no -rdynamic), not
 * linked with libtftrace. Every named function below allocates directly,
 * so it is the site the trace must show.
 *
 *   load_weights     3 x 2 MiB at start, kept until exit: not a leak
 *   per iteration (--iters N, default 12):
 *     grow_kv_cache  mallocs 4 MiB and keeps it: the leak (--no-leak frees
 *                    the previous iteration's block: one alive at a time)
 *     scratch_pass   calloc 3 MiB, realloc 256 KiB -> 6 MiB (crosses the
 *                    default 1 MiB threshold), posix_memalign 1 MiB,
 *                    aligned_alloc 1 MiB; all freed
 *     map_buffer     mmap 2 MiB, mremap to 3 MiB, mmap 4 MiB and munmap
 *                    it in two parts; all unmapped
 *     small_churn    1,000 malloc/free of 16 B .. 4 KiB (never recorded)
 *   worker_churn     4 threads x 50 malloc(1.5 MiB)/free, concurrently
 *   fork_child       a child process allocates and frees 2 MiB, exits 0
 *   odd_calls        errno across a large malloc, failing requests
 *                    (malloc, calloc overflow, realloc of a recorded
 *                    block), reallocarray, memalign; all freed
 *
 * Prints a checksum of what it wrote and read, so a change of results
 * under tracing shows.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define NOINLINE __attribute__((noinline))

static uint64_t checksum;
/* Every block is stored here once: it escapes, so the compiler cannot drop
 * a malloc/free pair. */
static void *volatile sink;

/* Writes one byte per 4 KiB page of p (so the pages exist) and adds them up. */
static NOINLINE void touch(void *p, size_t n, unsigned seed)
{
    unsigned char *c = p;
    sink = p;
    for (size_t i = 0; i < n; i += 4096) {
        c[i] = (unsigned char)(seed + i / 4096);
        checksum += c[i];
    }
}

static void die(const char *what)
{
    perror(what);
    exit(2);
}

static void *weights[3];

static NOINLINE void load_weights(void)
{
    for (int i = 0; i < 3; i++) {
        weights[i] = malloc(2 * MIB);
        if (!weights[i])
            die("malloc");
        touch(weights[i], 2 * MIB, (unsigned)i);
    }
}

static void *kv_prev;

/* The leak: a 4 MiB block per call that nobody frees. */
static NOINLINE void *grow_kv_cache(int iter, int leak)
{
    void *p = malloc(4 * MIB);
    if (!p)
        die("malloc");
    touch(p, 4 * MIB, (unsigned)iter);
    if (!leak) {
        free(kv_prev);
        kv_prev = p;
    }
    return p;
}

static NOINLINE void scratch_pass(int iter)
{
    char *a = calloc(3, MIB);
    char *b = malloc(256 * 1024);
    if (!a || !b)
        die("calloc");
    touch(a, 3 * MIB, (unsigned)iter);
    touch(b, 256 * 1024, (unsigned)iter);
    char *c = realloc(b, 6 * MIB);
    if (!c)
        die("realloc");
    touch(c, 6 * MIB, (unsigned)iter + 1);
    void *d = NULL;
    if (posix_memalign(&d, 4096, MIB) != 0)
        die("posix_memalign");
    void *e = aligned_alloc(64, MIB);
    if (!e)
        die("aligned_alloc");
    touch(d, MIB, 3);
    touch(e, MIB, 4);
    free(a);
    free(c);
    free(d);
    free(e);
}

static NOINLINE void map_buffer(int iter)
{
    void *p = mmap(NULL, 2 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        die("mmap");
    touch(p, 2 * MIB, (unsigned)iter);
    void *q = mremap(p, 2 * MIB, 3 * MIB, MREMAP_MAYMOVE);
    if (q == MAP_FAILED)
        die("mremap");
    touch(q, 3 * MIB, (unsigned)iter + 2);
    if (munmap(q, 3 * MIB) != 0)
        die("munmap");
    char *r = mmap(NULL, 4 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        die("mmap");
    touch(r, 4 * MIB, 7);
    if (munmap(r, MIB) != 0 || munmap(r + MIB, 3 * MIB) != 0)
        die("munmap");
}

static NOINLINE void small_churn(int iter)
{
    void *keep[16] = {0};
    for (int i = 0; i < 1000; i++) {
        size_t n = 16 + (size_t)((i * 37 + iter) % 4080);
        char *p = malloc(n);
        if (!p)
            die("malloc");
        sink = p;
        p[0] = (char)i;
        p[n - 1] = (char)iter;
        checksum += (unsigned char)p[0] + (unsigned char)p[n - 1];
        free(keep[i % 16]);
        keep[i % 16] = p;
    }
    for (int i = 0; i < 16; i++)
        free(keep[i]);
}

static NOINLINE void *worker_churn(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    uint64_t sum = 0;
    for (int i = 0; i < 50; i++) {
        unsigned char *p = malloc(MIB + MIB / 2);
        char *small = malloc(64);
        if (!p || !small)
            die("malloc");
        sink = small;
        sink = p;
        p[0] = (unsigned char)(id + (uintptr_t)i);
        sum += p[0];
        free(small);
        free(p);
    }
    return (void *)(uintptr_t)sum;
}

static NOINLINE int fork_child(void)
{
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        void *p = malloc(2 * MIB);
        if (!p)
            _exit(3);
        touch(p, 2 * MIB, 9);
        free(p);
        _exit(0);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        die("waitpid");
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* What the program sees of errno and results must not change under
 * tracing: returns them as a string for the output line. */
static NOINLINE const char *odd_calls(void)
{
    static char out[128];
    /* through volatile pointers: the compiler sees these requests fail */
    void *(*volatile calloc_v)(size_t, size_t) = calloc;
    void *(*volatile realloc_v)(void *, size_t) = realloc;
    volatile size_t too_big = (size_t)1 << 62;
    errno = EDOM;
    void *p = malloc(16 * MIB);
    int e_ok = errno; /* a successful malloc leaves errno alone */
    errno = 0;
    void *huge = malloc(too_big);
    int e_huge = errno;
    errno = 0;
    void *ovf = calloc_v(SIZE_MAX / 2, 4);
    int e_ovf = errno;
    char *q = malloc(2 * MIB);
    if (!p || !q)
        die("malloc");
    touch(q, 2 * MIB, 5);
    errno = 0;
    void *r = realloc_v(q, too_big); /* fails: q stays valid */
    int e_re = errno;
    q[1] = 1;
    char *ra = reallocarray(NULL, 3, MIB);
    void *ma = memalign(4096, 2 * MIB);
    if (!ra || !ma)
        die("reallocarray");
    touch(ra, 3 * MIB, 6);
    touch(ma, 2 * MIB, 8);
    snprintf(out, sizeof(out), "errno %d %d %d %d null %d %d %d", e_ok, e_huge, e_ovf, e_re, !huge, !ovf, !r);
    free(ma);
    free(ra);
    free(q);
    free(p);
    return out;
}

int main(int argc, char **argv)
{
    int leak = 1, iters = 12;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-leak"))
            leak = 0;
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: leak_prog [--no-leak] [--iters N]\n");
            return 2;
        }
    }
    load_weights();
    for (int it = 0; it < iters; it++) {
        grow_kv_cache(it, leak);
        scratch_pass(it);
        map_buffer(it);
        small_churn(it);
    }
    pthread_t th[4];
    for (uintptr_t t = 0; t < 4; t++)
        if (pthread_create(&th[t], NULL, worker_churn, (void *)t) != 0)
            die("pthread_create");
    for (int t = 0; t < 4; t++) {
        void *r;
        pthread_join(th[t], &r);
        checksum += (uintptr_t)r;
    }
    int child = fork_child();
    const char *odd = odd_calls();
    printf("checksum %llu child %d iters %d %s %s\n", (unsigned long long)checksum, child, iters,
           leak ? "leak" : "no-leak", odd);
    return 0; /* the weights (and, leaking, the kv blocks) are alive at exit */
}
