/*
 * leak_keep.c — a training loop that keeps a buffer every iteration, run
 * unmodified under tftrace (not linked with libtftrace, built without
 * -rdynamic: its sites come from its .symtab).
 *
 * A two-layer MLP (plain C loops, no BLAS: nothing but its large
 * allocations is recorded) is trained by SGD on a fixed synthetic
 * regression task for --iters iterations (default 12). Each iteration
 * snapshots its hidden activations into a 4 MiB buffer for "debugging"
 * (save_activations), the shape of a trainer that appends every step's
 * tensors to a history list:
 *
 *   --keep all    every snapshot is kept until exit: the leak
 *   --keep last   only the last one is kept (the previous one is freed)
 *   --keep none   each snapshot is freed at once (default)
 *   --die         after the loop, SIGKILL itself (as the OOM killer would
 *                 end a run that keeps everything): no output
 *
 *   load_params   2 blocks of 2 MiB at start, kept until exit: not a leak
 *
 * Between two snapshots the loop allocates nothing the interposers record
 * (its scratch is far below the 1 MiB threshold), so a trace has the
 * snapshots' ALLOC records back to back: the case the step-less growth
 * heuristic cannot tell from a table filled at start.
 *
 * Prints the final loss and a checksum of the kept snapshots, so that a
 * change of results under tracing shows.
 */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

enum { IN = 64, HID = 256, BATCH = 32 };
#define SNAP_BYTES ((size_t)4 << 20)

/* Stored here once: the blocks escape, so the compiler keeps every call. */
static void *volatile sink;

static void die(const char *what)
{
    perror(what);
    exit(2);
}

/* The parameters: w1 is (HID, IN), w2 is (HID); padded to 2 MiB blocks as
 * a framework's parameter arena would be. */
static float *w1, *w2;

static NOINLINE void load_params(void)
{
    w1 = malloc((size_t)2 << 20);
    w2 = malloc((size_t)2 << 20);
    if (!w1 || !w2)
        die("malloc");
    uint32_t s = 12345;
    for (int i = 0; i < HID * IN; i++) {
        s = s * 1664525u + 1013904223u;
        w1[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.25f;
    }
    for (int i = 0; i < HID; i++)
        w2[i] = 0.01f * (float)(i % 7);
}

/* One SGD step on a batch; h (BATCH, HID) holds the hidden activations
 * afterwards. Returns the batch's mean squared error. */
static float train_step(int iter, float *h)
{
    float x[BATCH][IN], y[BATCH], dy[BATCH];
    float loss = 0;
    for (int b = 0; b < BATCH; b++) {
        float t = 0;
        for (int i = 0; i < IN; i++) {
            x[b][i] = sinf((float)(iter * BATCH + b) * 0.37f + (float)i * 0.11f);
            t += x[b][i] * (float)((i % 5) - 2) * 0.1f;
        }
        y[b] = t;
    }
    for (int b = 0; b < BATCH; b++) {
        float out = 0;
        for (int j = 0; j < HID; j++) {
            float a = 0;
            for (int i = 0; i < IN; i++)
                a += w1[j * IN + i] * x[b][i];
            h[b * HID + j] = a > 0 ? a : 0;
            out += w2[j] * h[b * HID + j];
        }
        dy[b] = out - y[b];
        loss += dy[b] * dy[b];
    }
    const float lr = 1e-3f;
    for (int j = 0; j < HID; j++) {
        float g2 = 0;
        for (int b = 0; b < BATCH; b++) {
            g2 += dy[b] * h[b * HID + j];
            if (h[b * HID + j] > 0)
                for (int i = 0; i < IN; i++)
                    w1[j * IN + i] -= lr * dy[b] * w2[j] * x[b][i] / BATCH;
        }
        w2[j] -= lr * g2 / BATCH;
    }
    return loss / BATCH;
}

/* A 4 MiB snapshot of the activations (the first BATCH*HID floats; the rest
 * of the block is a stand-in for the other layers' tensors, touched page by
 * page so that its pages exist). The caller owns it. */
static NOINLINE float *save_activations(const float *h)
{
    float *snap = malloc(SNAP_BYTES);
    if (!snap)
        die("malloc");
    memcpy(snap, h, sizeof(float) * BATCH * HID);
    for (size_t i = sizeof(float) * BATCH * HID; i < SNAP_BYTES; i += 4096)
        ((unsigned char *)snap)[i] = (unsigned char)(i >> 12);
    sink = snap;
    return snap;
}

int main(int argc, char **argv)
{
    int iters = 12, keep = 0, kill_self = 0; /* keep: 0 none, 1 last, 2 all */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--keep") && i + 1 < argc && !strcmp(argv[i + 1], "all"))
            keep = 2, i++;
        else if (!strcmp(argv[i], "--keep") && i + 1 < argc && !strcmp(argv[i + 1], "last"))
            keep = 1, i++;
        else if (!strcmp(argv[i], "--keep") && i + 1 < argc && !strcmp(argv[i + 1], "none"))
            keep = 0, i++;
        else if (!strcmp(argv[i], "--die"))
            kill_self = 1;
        else {
            fprintf(stderr, "usage: leak_keep [--iters N] [--keep all|last|none] [--die]\n");
            return 2;
        }
    }
    if (iters < 1 || iters > 1000)
        return fprintf(stderr, "leak_keep: --iters must be 1..1000\n"), 2;
    float **history = calloc((size_t)iters, sizeof(*history));
    static float h[BATCH * HID];
    if (!history)
        die("calloc");
    load_params();
    float loss = 0;
    for (int it = 0; it < iters; it++) {
        loss = train_step(it, h);
        history[it] = save_activations(h);
        if (keep == 0) {
            free(history[it]);
            history[it] = NULL;
        } else if (keep == 1 && it > 0) {
            free(history[it - 1]);
            history[it - 1] = NULL;
        }
    }
    if (kill_self)
        raise(SIGKILL);
    double sum = 0;
    int kept = 0;
    for (int it = 0; it < iters; it++)
        if (history[it]) {
            kept++;
            for (int k = 0; k < BATCH * HID; k++)
                sum += history[it][k];
        }
    printf("loss %.6f kept %d checksum %.4f\n", (double)loss, kept, sum);
    return 0; /* the parameters and the kept snapshots are alive at exit */
}
