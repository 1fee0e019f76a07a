/*
 * fake_plugin.c — a stand-in for libtftrace-cuda.so on machines without a
 * GPU (libtft_fake_plugin.so): registers a tft_cuda_plugin table whose
 * "device" tensors are host memory. stats_launch computes the statistics
 * at once (tft_stats_compute over a dense copy) but reports them finished
 * only after FAKE_PLUGIN_DELAY polls (default 3), like a copy-back still in
 * flight, so the interposers' queue really holds items across calls. It
 * checks that handles are released in the order they were given.
 */
#include "tft_cuda_plugin.h"
#include "tft_stats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TFT_PLUGIN_API int InitializeInjection(void);

#define SLOTS 4096

static struct {
    tft_stats stats[SLOTS];
    int polls_left[SLOTS];
    int64_t next, oldest;
    int delay;
} fp;

static int64_t launch(const tft_cuda_tensor *t, int mode, void *stream, int *device)
{
    size_t esz = tft_dtype_size(t->dtype);
    uint64_t numel = t->rows * t->cols * t->batch;
    if (!esz || fp.next - fp.oldest >= SLOTS)
        return -ENOSPC;
    char *dense = malloc(numel * esz + 1);
    if (!dense)
        return -ENOMEM;
    size_t run = (size_t)t->rows * esz;
    for (uint64_t b = 0; b < t->batch; b++)
        for (uint64_t c = 0; c < t->cols; c++)
            memcpy(dense + (b * t->cols + c) * run, (const char *)t->ptr + (b * t->stride + c * t->ld) * esz, run);
    int64_t h = fp.next++;
    tft_stats_compute(t->dtype, dense, (size_t)numel, mode, &fp.stats[h % SLOTS]);
    free(dense);
    fp.polls_left[h % SLOTS] = fp.delay;
    *device = 0;
    return h;
}

static int poll(int64_t h, tft_stats *out)
{
    if (h != fp.oldest) {
        fprintf(stderr, "fake plugin: handle %lld polled before %lld\n", (long long)h, (long long)fp.oldest);
        abort();
    }
    if (fp.polls_left[h % SLOTS]-- > 0)
        return 0;
    *out = fp.stats[h % SLOTS];
    fp.oldest++;
    return 1;
}

static const tft_cuda_plugin table = {
    .sz = sizeof(tft_cuda_plugin), .stats_launch = launch, .stats_poll = poll, .activity_flush = NULL};

int InitializeInjection(void)
{
    const char *d = getenv("FAKE_PLUGIN_DELAY");
    fp.delay = d ? atoi(d) : 3;
    if (tft_x_cuda_wanted())
        tft_x_cuda_register(&table);
    return 1;
}
