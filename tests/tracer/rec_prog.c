/*
 * rec_prog.c — a traced test program. Data is a pure function of
 * (thread, index) so rec_check can recompute every tensor's statistics.
 *   rec_prog threads N        N threads x 100 tensors of 1..4096 floats
 *   rec_prog crash KIND STEP  steps 0..9, one tensor "x" per step; at STEP:
 *                             segv | abort | kill (SIGKILL itself) | exit3
 *   rec_prog sleep            one step, then sleeps forever
 *   rec_prog flood N          N tensors as fast as possible (ring overflow)
 */
#include "tft.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rec_data.h"

static void *thread_main(void *arg)
{
    int t = (int)(intptr_t)arg;
    float *buf = malloc(4096 * sizeof(float));
    for (int i = 0; i < 100; i++) {
        char name[32];
        snprintf(name, sizeof(name), "t%d.%d", t, i);
        int64_t n = rec_fill(buf, t, i);
        if (tft_tensor(name, TFT_F32, buf, 1, &n) != 0)
            fprintf(stderr, "tft_tensor failed\n");
    }
    free(buf);
    return NULL;
}

static int run_threads(int n)
{
    pthread_t th[64];
    n = n > 64 ? 64 : n;
    tft_step_begin(0);
    for (int t = 0; t < n; t++)
        pthread_create(&th[t], NULL, thread_main, (void *)(intptr_t)t);
    for (int t = 0; t < n; t++)
        pthread_join(th[t], NULL);
    tft_step_end(0);
    return 0;
}

static int run_crash(const char *kind, int at)
{
    float x[16];
    for (int step = 0; step < 10; step++) {
        tft_step_begin(step);
        for (int i = 0; i < 16; i++)
            x[i] = (float)step;
        int64_t n = 16;
        tft_tensor("x", TFT_F32, x, 1, &n);
        tft_step_end(step);
        if (step == at) {
            if (!strcmp(kind, "segv")) { /* a real fault, on a page we may not touch */
                volatile int *bad = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                *bad = 1;
            }
            if (!strcmp(kind, "abort"))
                abort();
            if (!strcmp(kind, "kill"))
                kill(getpid(), SIGKILL);
            if (!strcmp(kind, "exit3"))
                exit(3);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "threads"))
        return run_threads(atoi(argv[2]));
    if (argc >= 4 && !strcmp(argv[1], "crash"))
        return run_crash(argv[2], atoi(argv[3]));
    if (argc >= 2 && !strcmp(argv[1], "sleep")) {
        tft_step_begin(0);
        float v = 1;
        int64_t n = 1;
        tft_tensor("before_sleep", TFT_F32, &v, 1, &n);
        for (;;)
            pause();
    }
    if (argc >= 3 && !strcmp(argv[1], "flood")) {
        static float buf[64];
        int64_t n = 64;
        long count = atol(argv[2]), failed = 0;
        tft_step_begin(0);
        for (long i = 0; i < count; i++)
            failed += tft_tensor("flood", TFT_F32, buf, 1, &n) != 0;
        printf("flood: %ld of %ld dropped by the recorder\n", failed, count);
        return 0;
    }
    fprintf(stderr, "usage: rec_prog threads N | crash KIND STEP | sleep | flood N\n");
    return 2;
}
