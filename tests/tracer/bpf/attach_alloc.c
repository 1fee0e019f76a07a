/*
 * attach_alloc.c — a program for `tftrace attach`'s allocation probes,
 * started without tftrace. Writes its pid to DIR/pid, then loops until
 * killed, every 20 ms: work() mallocs and frees a 2 MiB block, a 3 MiB
 * calloc and a small block (below the threshold: not recorded); every 4th
 * iteration leaky() mallocs 2 MiB and keeps it (a leak growing 25 MiB/s).
 * With "fast": a 2 MiB malloc and its free in a tight loop, nothing else
 * (for a forced loss of events). Built without sanitizers (their allocator
 * would replace libc's malloc, which the probes are on).
 *   attach_alloc DIR [fast]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach_pidfile.h"

static void *kept[100000];
static long nkept;
static void *volatile sink;   /* the blocks escape: the compiler keeps each malloc/free pair */

__attribute__((noinline)) static void leaky(void)
{
    char *p = malloc(2 << 20);
    if (p && nkept < 100000) {
        memset(p, 1, 4096);
        kept[nkept++] = p;
    }
}

__attribute__((noinline)) static void work(void)
{
    char *p = malloc(2 << 20), *c = calloc(1, 3 << 20), *s = malloc(100);
    if (p)
        memset(p, 2, 4096);
    if (c && s)
        c[0] = s[0] = 1;
    sink = p, sink = c, sink = s;
    free(s);
    free(c);
    free(p);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return fprintf(stderr, "usage: attach_alloc DIR [fast]\n"), 2;
    char path[4096], tmp[4200];
    if (attach_pid_write(argv[1], path, tmp))
        return 1;
    rename(tmp, path);
    for (int fast = argc > 2 && !strcmp(argv[2], "fast"); fast;) {
        sink = malloc(2 << 20);
        free(sink);
    }
    for (long i = 0;; i++) {
        work();
        if (i % 4 == 0)
            leaky();
        usleep(20000);
    }
}
