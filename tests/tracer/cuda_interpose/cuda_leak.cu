/*
 * cuda_leak.cu — an unmodified CUDA program (nvcc's default: cudart linked
 * statically) for the CUDA plugin: STEPS steps, each an NVTX "step" range in
 * which a 1 MiB buffer is cudaMalloc'ed, filled by a kernel, summed back
 * and freed. --leak S: from step S on the buffers are not freed (the leak
 * tfdump --check and tfdiff must name). --steps N sets the step count.
 * Prints a checksum; on a CUDA error (no device, no driver) prints it and
 * exits with status 3, the same with and without tftrace.
 */
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (1 << 18) /* floats per buffer: 1 MiB */

__global__ void fill(float *p, int n, float v)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = v + (float)(i % 7);
}

static int check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    printf("cuda error in %s: %s\n", what, cudaGetErrorString(e));
    return 1;
}

int main(int argc, char **argv)
{
    int steps = 6, leak_from = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--leak"))
            leak_from = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            steps = atoi(argv[i + 1]);
    }
    int ndev = 0;
    if (check(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount"))
        return 3;
    double sum = 0;
    static float host[16];
    for (int s = 0; s < steps; s++) {
        nvtxRangePushA("step");
        float *d = NULL;
        if (check(cudaMalloc((void **)&d, N * sizeof(float)), "cudaMalloc"))
            return 3;
        fill<<<(N + 255) / 256, 256>>>(d, N, (float)s);
        if (check(cudaGetLastError(), "fill") ||
            check(cudaMemcpy(host, d, sizeof(host), cudaMemcpyDeviceToHost), "cudaMemcpy"))
            return 3;
        for (int i = 0; i < 16; i++)
            sum += host[i];
        if (leak_from < 0 || s < leak_from)
            if (check(cudaFree(d), "cudaFree"))
                return 3;
        nvtxRangePop();
    }
    printf("checksum %.1f over %d steps\n", sum, steps);
    return 0;
}
