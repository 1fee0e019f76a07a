/*
 * nccl_prog.c — an unmodified one-rank NCCL program for the NCCL
 * interposers: ncclGetUniqueId, ncclCommInitRank (1 rank), then STEPS NVTX
 * "step" ranges each with an ncclAllReduce (sum, 1024 floats) and a group of
 * an ncclBroadcast and an ncclAllReduce (max), then ncclCommDestroy. Prints
 * a checksum; on a CUDA or NCCL error (no device, no driver) prints it and
 * exits with status 3, the same with and without tftrace.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>

#define STEPS 3
#define COUNT 1024

static int cu(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    printf("cuda error in %s: %s\n", what, cudaGetErrorString(e));
    return 1;
}

static int nc(ncclResult_t r, const char *what)
{
    if (r == ncclSuccess)
        return 0;
    printf("nccl error in %s: %s\n", what, ncclGetErrorString(r));
    return 1;
}

int main(void)
{
    int ndev = 0;
    if (cu(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount"))
        return 3;
    ncclUniqueId id;
    ncclComm_t comm;
    float *buf, *out;
    cudaStream_t st;
    if (nc(ncclGetUniqueId(&id), "ncclGetUniqueId") || nc(ncclCommInitRank(&comm, 1, id, 0), "ncclCommInitRank") ||
        cu(cudaMalloc((void **)&buf, COUNT * sizeof(float)), "cudaMalloc") ||
        cu(cudaMalloc((void **)&out, COUNT * sizeof(float)), "cudaMalloc") || cu(cudaStreamCreate(&st), "stream"))
        return 3;
    static float h[COUNT];
    double sum = 0;
    for (int s = 0; s < STEPS; s++) {
        nvtxRangePushA("step");
        for (int i = 0; i < COUNT; i++)
            h[i] = (float)(i % 10) + (float)s;
        if (cu(cudaMemcpy(buf, h, sizeof(h), cudaMemcpyHostToDevice), "cudaMemcpy") ||
            nc(ncclAllReduce(buf, out, COUNT, ncclFloat, ncclSum, comm, st), "ncclAllReduce") ||
            nc(ncclGroupStart(), "ncclGroupStart") ||
            nc(ncclBroadcast(out, buf, COUNT, ncclFloat, 0, comm, st), "ncclBroadcast") ||
            nc(ncclAllReduce(buf, out, COUNT, ncclFloat, ncclMax, comm, st), "ncclAllReduce") ||
            nc(ncclGroupEnd(), "ncclGroupEnd") || cu(cudaStreamSynchronize(st), "sync") ||
            cu(cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost), "cudaMemcpy"))
            return 3;
        for (int i = 0; i < COUNT; i++)
            sum += h[i];
        nvtxRangePop();
    }
    printf("checksum %.1f\n", sum);
    ncclCommDestroy(comm);
    return 0;
}
