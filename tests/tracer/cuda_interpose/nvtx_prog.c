/*
 * nvtx_prog.c — an unmodified program for the NVTX injection test: NVTX v3
 * (header-only) ranges around STEPS iterations of a small CBLAS workload.
 * Each iteration: a "step" range (or, with --numbered, a start/end range
 * named "step N" with N from 10), inside it a pushed "fwd" range holding an
 * Ex range "layer0" (ASCII message) and a domain range with a registered
 * string "attn", then a "bwd" range (wide string). --plant S adds 1 to A[0]
 * in step S. --range NAME names the step ranges NAME instead of "step".
 * Prints a checksum of the results, so a change under tracing would show.
 */
#include <cblas.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 5
enum { M = 4, N = 3, K = 2 };

static void gemm(float *c, int step, int plant)
{
    float a[M * K], b[K * N];
    for (int i = 0; i < M * K; i++)
        a[i] = (float)((i * 3 + step) % 7) * 0.5f;
    for (int i = 0; i < K * N; i++)
        b[i] = (float)((i * 5 + step) % 11) * 0.25f - 1.0f;
    if (step == plant)
        a[0] += 1.0f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
}

int main(int argc, char **argv)
{
    int plant = -1, numbered = 0;
    const char *range = "step";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--plant") && i + 1 < argc)
            plant = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--numbered"))
            numbered = 1;
        else if (!strcmp(argv[i], "--range") && i + 1 < argc)
            range = argv[++i];
    }
    nvtxDomainHandle_t dom = nvtxDomainCreateA("nvtx_prog");
    nvtxStringHandle_t attn = nvtxDomainRegisterStringA(dom, "attn");
    double sum = 0;
    float c[M * N];
    for (int s = 0; s < STEPS; s++) {
        char name[32];
        nvtxRangeId_t id = 0;
        if (numbered) {
            snprintf(name, sizeof(name), "%s %d", range, 10 + s);
            id = nvtxRangeStartA(name);
        } else {
            nvtxRangePushA(range);
        }
        nvtxRangePushA("fwd");
        nvtxEventAttributes_t ev = {0};
        ev.version = NVTX_VERSION;
        ev.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        ev.messageType = NVTX_MESSAGE_TYPE_ASCII;
        ev.message.ascii = "layer0";
        nvtxRangePushEx(&ev);
        gemm(c, s, plant);
        for (int i = 0; i < M * N; i++)
            sum += c[i];
        nvtxEventAttributes_t ev2 = {0};
        ev2.version = NVTX_VERSION;
        ev2.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        ev2.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        ev2.message.registered = attn;
        nvtxDomainRangePushEx(dom, &ev2);
        gemm(c, s + 100, -1);
        nvtxDomainRangePop(dom);
        nvtxRangePop(); /* layer0 */
        nvtxRangePop(); /* fwd */
        nvtxRangePushW(L"bwd");
        gemm(c, s + 200, -1);
        for (int i = 0; i < M * N; i++)
            sum += c[i];
        nvtxRangePop();
        if (numbered)
            nvtxRangeEnd(id);
        else
            nvtxRangePop();
    }
    gemm(c, 999, -1); /* after the last step: no step */
    printf("checksum %.4f\n", sum);
    return 0;
}
