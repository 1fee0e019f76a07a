/*
 * nondet_prog.c — a "training" loop that records two tensors per step
 * through tft.h: `w`, deterministic, and `noise`, which from step 2 on
 * depends on the clock, so a replay cannot reproduce it.
 */
#include "tft.h"

#include <stdio.h>
#include <time.h>

int main(void)
{
    float w[64], noise[64];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    for (int step = 0; step < 6; step++) {
        tft_step_begin(step);
        for (int i = 0; i < 64; i++)
            w[i] = (float)(step * 64 + i) * 0.5f;
        int64_t shape[1] = {64};
        tft_tensor("w", TFT_F32, w, 1, shape);
        for (int i = 0; i < 64; i++)
            noise[i] = step >= 2 ? (float)((ts.tv_nsec + i * 7919) % 1000) : (float)i;
        tft_tensor("noise", TFT_F32, noise, 1, shape);
        tft_step_end(step);
    }
    printf("done\n");
    return 0;
}
