/*
 * core_pool.c — the small thread pool the rank work runs on (core_pool.h):
 * `width` threads, the caller's among them, each taking the next job index
 * from one atomic counter until none is left. No queue, no allocation per
 * job; the first failure in job order is kept under a mutex.
 */
#include "core_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct pool {
    int n;
    int (*fn)(void *ctx, int i, int worker);
    void *ctx;
    _Atomic int next;
    pthread_mutex_t lock;
    int err_i, err;            /* first failure in i order */
} pool;

typedef struct pool_arg {
    pool *p;
    int worker;
} pool_arg;

static void *pool_main(void *arg)
{
    pool_arg *a = arg;
    pool *p = a->p;
    for (int i; (i = atomic_fetch_add(&p->next, 1)) < p->n;) {
        int e = p->fn(p->ctx, i, a->worker);
        if (!e)
            continue;
        pthread_mutex_lock(&p->lock);
        if (p->err_i < 0 || i < p->err_i) {
            p->err_i = i;
            p->err = e;
        }
        pthread_mutex_unlock(&p->lock);
    }
    return NULL;
}

int core_pool_run(int n, int width, int (*fn)(void *ctx, int i, int worker), void *ctx)
{
    pool p = {.n = n, .fn = fn, .ctx = ctx, .err_i = -1};
    pthread_mutex_init(&p.lock, NULL);
    atomic_init(&p.next, 0);
    if (width > n)
        width = n;
    if (width < 1)
        width = 1;
    pthread_t *th = calloc((size_t)width, sizeof(*th));
    pool_arg *args = calloc((size_t)width, sizeof(*args));
    int started = 0;
    for (int w = 1; th && args && w < width; w++) {
        args[w] = (pool_arg){&p, w};
        if (pthread_create(&th[w], NULL, pool_main, &args[w]) != 0)
            break;
        started = w;
    }
    pool_arg self = {&p, 0};
    pool_main(&self);
    for (int w = 1; w <= started; w++)
        pthread_join(th[w], NULL);
    free(th);
    free(args);
    pthread_mutex_destroy(&p.lock);
    return p.err;
}

int core_pool_width(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    const char *env = getenv("TFDIFF_THREADS");
    if (env && atoi(env) > 0)
        n = atoi(env);
    return n > 1 ? (int)n : 1;
}
