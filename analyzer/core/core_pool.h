/*
 * core_pool.h — a fixed number of threads running jobs 0..n-1 (the rank
 * work of tfdiff, tfdump --check, the desync extraction, the detectors),
 * each thread taking the next job when done. Nothing here prints.
 */
#ifndef TFT_CORE_POOL_H
#define TFT_CORE_POOL_H

/* Runs fn(ctx, i, worker) for i in [0, n) on `width` threads (worker in
 * [0, width): per-thread scratch), each taking the next i when done; width
 * <= 1 or a failed thread start runs them inline. Returns the first
 * non-zero result of fn in i order (all of them run regardless). */
int core_pool_run(int n, int width, int (*fn)(void *ctx, int i, int worker), void *ctx);

/* Threads for rank work: the online CPUs (at least 1). */
int core_pool_width(void);

#endif
