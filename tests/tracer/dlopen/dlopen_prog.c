/*
 * dlopen_prog.c LIBTFTRACE — loads libtftrace.so at run time, as a Python
 * package or a plugin would (not preloaded, not linked), and records
 * through it from two threads: a step, a scope, a tensor in each. With
 * TFT_OUTPUT set the in-process collector writes the trace. Exit 0, or 1
 * with a message (dlopen's error among them: "cannot allocate memory in
 * static TLS block" when the library's initial-exec TLS is too large).
 */
#include "tft_types.h" /* TFT_F32 */

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

typedef int (*step_fn)(int64_t);
typedef void (*scope_push_fn)(const char *);
typedef void (*scope_pop_fn)(void);
typedef int (*tensor_fn)(const char *, int, const void *, int, const int64_t *);
typedef int (*flush_fn)(void);

static step_fn step_begin, step_end;
static scope_push_fn scope_push;
static scope_pop_fn scope_pop;
static tensor_fn tensor;

static void record(const char *scope, float base)
{
    float x[4] = {base, base + 1, base + 2, base + 3};
    int64_t shape[1] = {4};
    scope_push(scope);
    tensor("x", TFT_F32, x, 1, shape);
    scope_pop();
}

static void *worker(void *arg)
{
    (void)arg;
    record("worker", 10);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: dlopen_prog LIBTFTRACE\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen_prog: %s\n", dlerror());
        return 1;
    }
    step_begin = (step_fn)dlsym(h, "tft_step_begin");
    step_end = (step_fn)dlsym(h, "tft_step_end");
    scope_push = (scope_push_fn)dlsym(h, "tft_scope_push");
    scope_pop = (scope_pop_fn)dlsym(h, "tft_scope_pop");
    tensor = (tensor_fn)dlsym(h, "tft_tensor");
    flush_fn flush = (flush_fn)dlsym(h, "tft_flush");
    if (!step_begin || !step_end || !scope_push || !scope_pop || !tensor || !flush) {
        fprintf(stderr, "dlopen_prog: a tft_* symbol is missing: %s\n", dlerror());
        return 1;
    }
    step_begin(0);
    record("main", 1);
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0 || pthread_join(t, NULL) != 0) {
        fprintf(stderr, "dlopen_prog: thread\n");
        return 1;
    }
    step_end(0);
    flush();
    puts("recorded");
    return 0;
}
