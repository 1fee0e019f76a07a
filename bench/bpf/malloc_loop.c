/*
 * malloc_loop.c — for bench/bpf/attach_malloc_cost.sh: writes its pid to
 * DIR/pid, waits for DIR/go, then times N malloc+free pairs of SIZE bytes
 * and prints "elapsed S".   malloc_loop N SIZE DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *volatile sink;

int main(int argc, char **argv)
{
    if (argc < 4)
        return fprintf(stderr, "usage: malloc_loop N SIZE DIR\n"), 2;
    long n = atol(argv[1]);
    size_t size = (size_t)atol(argv[2]);
    char path[4096];
    snprintf(path, sizeof path, "%s/pid", argv[3]);
    FILE *f = fopen(path, "w");
    if (!f)
        return perror(path), 1;
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    snprintf(path, sizeof path, "%s/go", argv[3]);
    while (access(path, F_OK) != 0)
        usleep(10000);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        char *p = malloc(size);
        sink = p;
        free(p);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("elapsed %.6f\n", (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
    return 0;
}
