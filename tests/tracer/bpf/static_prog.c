/*
 * static_prog.c — linked statically (no dynamic loader, so no recorder can
 * be preloaded into it), for the process-lifecycle tests:
 *   static_prog exit N     exits with N
 *   static_prog sleep S    sleeps S seconds (to be killed)
 *   static_prog hog MB     allocates and touches MB MiB, 1 MiB at a time
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3)
        return fprintf(stderr, "usage: static_prog exit N | sleep S | hog MB\n"), 2;
    long v = atol(argv[2]);
    if (!strcmp(argv[1], "exit"))
        return (int)v;
    if (!strcmp(argv[1], "sleep")) {
        sleep((unsigned)v);
        return 0;
    }
    for (long i = 0; i < v; i++) {
        char *p = malloc(1 << 20);
        if (!p)
            return 1;
        memset(p, (int)i, 1 << 20);
    }
    return 0;
}
