/*
 * devrec.h — the CUDA backend's recording queue: every record tftrain
 * makes while it trains on the device goes through one ordered queue
 * (kernels/stats/tft_stats_cuda_ring.h), device tensors with their statistics
 * computed on the device (or, on request, a copy of their bytes), host
 * records as copies, and the
 * queue emits them in program order as they complete, through rec.c and
 * tft.h. The trace therefore has the same records in the same order as a
 * CPU run, timestamped when emitted (up to the queue's depth later than
 * computed), while the GPU never waits for the recorder.
 */
#ifndef TFT_DEVREC_H
#define TFT_DEVREC_H

#include "train.h"

#include <stddef.h>
#include <stdint.h>

typedef struct devrec devrec;

/* How device tensors are recorded. */
enum devrec_mode {
    DEVREC_STATS,  /* statistics on the device, emitted as device records */
    DEVREC_COPY,   /* bytes copied to pinned memory, statistics by the recorder */
    DEVREC_DRYRUN, /* statistics on the device, emitted nowhere (tracing off;
                    * measures what the device path costs) */
};

typedef struct devrec_opts {
    int mode;              /* enum devrec_mode */
    int stats_mode;        /* tft_stats_mode of device statistics */
    int device;            /* CUDA ordinal, for the records */
    size_t arena_bytes;    /* pinned arena (0: 8 MiB for STATS/DRYRUN, 256 MiB for COPY) */
    size_t max_tensor_bytes; /* sizes the statistics scratch */
    int batch;             /* batched statistics launches (kernels/stats/tft_stats_cuda_ring.h) */
} devrec_opts;

/* Creates the queue and installs it as the runtime's deferral (rec.c).
 * Returns 0 or a negative errno with a message in err. */
int devrec_new(devrec **out, rec_map *map, const devrec_opts *o, char *err, size_t errlen);
/* Emits everything queued, uninstalls, frees; returns how many records
 * could not be produced (CUDA errors), 0 normally. NULL-safe. */
int devrec_free(devrec *d);

/* Queues device tensor dev (numel from shape, dtype) computed on stream.
 * Its statistics may wait in a batch: call devrec_flush before anything on
 * the device can change a tensor queued since the last flush. */
int devrec_dev_tensor(devrec *d, const char *name, int dtype, const void *dev, int ndim, const int64_t *shape,
                      const char *const *inputs, int n_inputs, void *stream);
/* Queues the end of a collective whose result is count elements at dev
 * (its start: rec_deferred()->coll_enter). */
int devrec_dev_coll_exit(devrec *d, const tft_coll_info *ci, const void *dev, void *stream);
/* Launches the waiting statistics batch (the tensors as they are now). */
void devrec_flush(devrec *d);
/* Emits what has completed; never waits. */
void devrec_poll(devrec *d);

#endif
