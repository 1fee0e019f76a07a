/*
 * gemm_sites.c — the program of the gemm-sites test: loads
 * gemm_sites_lib.so (argv[1]) with dlopen(RTLD_LOCAL), runs its BLAS
 * calls and prints their checksum, so a change of results would show.
 * Not linked with BLAS or libtftrace.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gemm_sites LIBRARY\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "gemm_sites: %s\n", dlerror());
        return 1;
    }
    double (*run)(void) = (double (*)(void))dlsym(h, "sites_run");
    if (!run) {
        fprintf(stderr, "gemm_sites: %s: no sites_run\n", argv[1]);
        return 1;
    }
    printf("checksum %.6f\n", run());
    return 0;
}
