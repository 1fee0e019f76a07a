/*
 * attach_cuda.c — a program linked to libcudart for `tftrace attach`'s CUDA
 * probes, started without tftrace. Writes its pid to DIR/pid, then loops
 * until killed, every 20 ms: cudaMalloc of 1 MiB and cudaFree of what it
 * returned; prints the first result ("cudaMalloc N" — without a GPU an
 * error: 35 no driver, 100 no device). The runtime's prototypes are
 * declared here so no CUDA header is needed (cudaError_t is an int enum).
 *   attach_cuda DIR
 */
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

#include "attach_pidfile.h"

int cudaMalloc(void **ptr, size_t size);
int cudaFree(void *ptr);

int main(int argc, char **argv)
{
    if (argc < 2)
        return fprintf(stderr, "usage: attach_cuda DIR\n"), 2;
    char path[4096], tmp[4200];
    if (attach_pid_write(argv[1], path, tmp))
        return 1;
    for (long i = 0;; i++) {
        void *p = NULL;
        int e = cudaMalloc(&p, 1 << 20);
        int e2 = cudaFree(p);
        if (i == 0) {
            printf("cudaMalloc %d cudaFree %d\n", e, e2);
            fflush(stdout);
            rename(tmp, path);   /* after the first call: the runtime is loaded */
        }
        usleep(20000);
    }
}
