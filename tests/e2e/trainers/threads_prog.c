/*
 * threads_prog.c — a trainer with a thread per "device": the main thread
 * marks steps, N worker threads each run a small two-layer forward pass on
 * their shard and record its tensors through tft.h, the main thread
 * combines their outputs into a loss. Written for the tests, shaped like a
 * data-parallel trainer with one thread per device.
 *
 * The data depend only on (worker, step), never on timing; the threads'
 * interleaving does, and varies from run to run (random yields, and with
 * --load busy threads competing for the cores). Two runs must compare as
 * identical; --plant W@S changes one element of worker W's input at step
 * S, which tfdiff must report at that step and tensor.
 *
 *   threads_prog [--steps N] [--workers N] [--same-names] [--load N]
 *                [--plant W@S]
 *
 * --same-names: every worker records the same tensor names ("x", "h",
 * "y"), as identical replicas of one model do; otherwise "w<i>.x", ....
 */
#define _GNU_SOURCE
#include <tft.h>

#include "tft_test_rng.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAXW = 16, DIM = 64, ROWS = 16 };

static int steps = 4, nworkers = 4, same_names, plant_w = -1, plant_s = -1, nload;
static pthread_barrier_t start_bar, done_bar;
static _Atomic int stop_load;
static int64_t cur_step;
static float outputs[MAXW];

/* Deterministic pseudo-random numbers from a seed (xorshift). */
static float rnd(uint64_t *s) { return (float)((tft_test_rng(s) >> 11) % 2000001) / 1000000.0f - 1.0f; }

/* A random yield or two, so that the order in which threads record (and
 * in which the collector finds their records) differs from run to run. */
static void jitter(unsigned *seed)
{
    int k = (int)(rand_r(seed) % 4);
    for (int i = 0; i < k; i++)
        sched_yield();
    if (rand_r(seed) % 8 == 0) {
        struct timespec ts = {0, (long)(rand_r(seed) % 200000)};
        nanosleep(&ts, NULL);
    }
}

static void name_of(char *buf, size_t n, int w, const char *what)
{
    if (same_names)
        snprintf(buf, n, "%s", what);
    else
        snprintf(buf, n, "w%d.%s", w, what);
}

/* One worker's step: x (ROWS x DIM) -> h = tanh(x W1) -> y = h W2 (ROWS). */
static void work(int w, int64_t step, unsigned *jseed)
{
    static _Thread_local float x[ROWS * DIM], wt1[DIM * DIM], h[ROWS * DIM], y[ROWS];
    uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(w + 1) + (uint64_t)step * 1000003u + 1;
    for (int i = 0; i < ROWS * DIM; i++)
        x[i] = rnd(&s);
    if (w == plant_w && step == plant_s)
        x[5] += 0.5f;
    uint64_t ws = 12345u + (uint64_t)w; /* weights: fixed per worker */
    for (int i = 0; i < DIM * DIM; i++)
        wt1[i] = rnd(&ws) * 0.1f;
    char nm[32];
    int64_t shx[2] = {ROWS, DIM}, shy[1] = {ROWS};
    name_of(nm, sizeof nm, w, "x");
    tft_tensor(nm, TFT_F32, x, 2, shx);
    uint64_t in[1] = {tft_last_tensor_id()};
    jitter(jseed);
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < DIM; j++) {
            float acc = 0;
            for (int k = 0; k < DIM; k++)
                acc += x[r * DIM + k] * wt1[k * DIM + j];
            h[r * DIM + j] = tanhf(acc);
        }
    tft_op_begin("layer1", TFT_OP_RUNTIME, 1, in);
    name_of(nm, sizeof nm, w, "h");
    tft_tensor(nm, TFT_F32, h, 2, shx);
    tft_op_end();
    in[0] = tft_last_tensor_id();
    jitter(jseed);
    float sum = 0;
    for (int r = 0; r < ROWS; r++) {
        float acc = 0;
        for (int k = 0; k < DIM; k++)
            acc += h[r * DIM + k] * (float)(k % 7 - 3) * 0.05f;
        y[r] = acc;
        sum += acc * acc;
    }
    tft_op_begin("layer2", TFT_OP_RUNTIME, 1, in);
    name_of(nm, sizeof nm, w, "y");
    tft_tensor(nm, TFT_F32, y, 1, shy);
    tft_op_end();
    outputs[w] = sum / ROWS;
}

static void *worker(void *arg)
{
    int w = (int)(intptr_t)arg;
    unsigned jseed = (unsigned)time(NULL) ^ (unsigned)(w * 7919) ^ (unsigned)clock();
    for (;;) {
        pthread_barrier_wait(&start_bar);
        if (cur_step < 0)
            return NULL;
        jitter(&jseed);
        work(w, cur_step, &jseed);
        pthread_barrier_wait(&done_bar);
    }
}

static void *busy(void *arg)
{
    (void)arg;
    volatile double x = 1;
    while (!atomic_load(&stop_load))
        x = x * 1.0000001 + 1e-9;
    return NULL;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--workers") && i + 1 < argc)
            nworkers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--same-names"))
            same_names = 1;
        else if (!strcmp(argv[i], "--load") && i + 1 < argc)
            nload = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--plant") && i + 1 < argc && sscanf(argv[i + 1], "%d@%d", &plant_w, &plant_s) == 2)
            i++;
        else {
            fprintf(stderr, "usage: threads_prog [--steps N] [--workers N] [--same-names] [--load N] [--plant W@S]\n");
            return 2;
        }
    }
    if (nworkers < 1 || nworkers > MAXW)
        nworkers = 4;
    pthread_t th[MAXW], ld[8];
    if (nload > 8)
        nload = 8;
    for (int i = 0; i < nload; i++)
        pthread_create(&ld[i], NULL, busy, NULL);
    pthread_barrier_init(&start_bar, NULL, (unsigned)nworkers + 1);
    pthread_barrier_init(&done_bar, NULL, (unsigned)nworkers + 1);
    for (int w = 0; w < nworkers; w++)
        pthread_create(&th[w], NULL, worker, (void *)(intptr_t)w);
    for (int64_t step = 0; step < steps; step++) {
        tft_step_begin(step);
        cur_step = step;
        pthread_barrier_wait(&start_bar);
        pthread_barrier_wait(&done_bar);
        float loss = 0;
        for (int w = 0; w < nworkers; w++)
            loss += outputs[w];
        int64_t one[1] = {1};
        tft_tensor("loss", TFT_F32, &loss, 1, one);
        tft_step_end(step);
        printf("step %lld loss %.6f\n", (long long)step, (double)loss);
    }
    cur_step = -1;
    pthread_barrier_wait(&start_bar);
    for (int w = 0; w < nworkers; w++)
        pthread_join(th[w], NULL);
    atomic_store(&stop_load, 1);
    for (int i = 0; i < nload; i++)
        pthread_join(ld[i], NULL);
    return 0;
}
