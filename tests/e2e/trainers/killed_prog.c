/*
 * killed_prog.c — a trainer killed before its first recorded call, the way
 * the OOM killer or a scheduler's preemption ends a job while it starts
 * up. Run unmodified under tftrace (not linked with libtftrace).
 *
 * It parses its arguments and builds a small config (allocations far below
 * the 1 MiB threshold: nothing recorded), then
 *   (default)   sends itself SIGKILL: the trace has a manifest and no rank
 *               file
 *   --train     allocates its 4 MiB parameter block (recorded), runs a few
 *               iterations on it and exits 0: the run that should have been
 *   --train --kill-after  the same, then SIGKILL: a trace that recorded
 *               something before the kill
 *
 * Prints the checksum of its parameters (only when training), so that a
 * change of results under tracing shows.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

typedef struct config {
    int layers, d_model, steps;
    char name[32];
} config;

/* The parameters, one block like a framework's arena (recorded: 4 MiB). */
static NOINLINE float *alloc_params(size_t n)
{
    float *p = malloc(n * sizeof(*p));
    if (!p) {
        perror("malloc");
        exit(2);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(i % 97) * 0.01f;
    return p;
}

int main(int argc, char **argv)
{
    int train = 0, kill_after = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--train"))
            train = 1;
        else if (!strcmp(argv[i], "--kill-after"))
            kill_after = 1;
        else {
            fprintf(stderr, "usage: killed_prog [--train [--kill-after]]\n");
            return 2;
        }
    }
    config *c = calloc(1, sizeof(*c));
    if (!c)
        return 2;
    *c = (config){.layers = 2, .d_model = 64, .steps = 3};
    snprintf(c->name, sizeof(c->name), "tiny-%dx%d", c->layers, c->d_model);
    if (!train)
        raise(SIGKILL); /* before any recorded call */
    size_t n = (size_t)1 << 20; /* 4 MiB of floats */
    float *w = alloc_params(n);
    double sum = 0;
    for (int s = 0; s < c->steps; s++)
        for (size_t i = 0; i < n; i += 4096) {
            w[i] -= 0.001f * w[i];
            sum += w[i];
        }
    if (kill_after)
        raise(SIGKILL);
    printf("%s checksum %.4f\n", c->name, sum);
    free(w);
    free(c);
    return 0;
}
