/*
 * recorder_internal.h — state shared by the recorder's API (recorder.c) and
 * its set-up (init.c): the process-wide recording state.
 */
#ifndef TFT_RECORDER_INTERNAL_H
#define TFT_RECORDER_INTERNAL_H

#include "shm_internal.h"

#include <stdatomic.h>

struct rec_global {
    _Atomic int state;            /* ST_UNINIT / ST_OFF / ST_ON */
    shm_hdr *h;                   /* the mapped region */
    size_t bytes;
    uint32_t proc;                /* our slot in h->procs */
    int mode;                     /* enum tft_stats_mode */
    int every;                    /* statistics every N steps (1 = all) */
    _Atomic int64_t step;         /* current step, TFT_STEP_NONE before the first */
    _Atomic int64_t seq;          /* next op sequence number */
    _Atomic uint64_t tensor_id;   /* last tensor id handed out */
    _Atomic uint32_t gen;         /* bumped in a forked child: rings are re-claimed */
    _Atomic int exit_recorded;
};

extern struct rec_global g_rec;

void rec_init(void);                 /* pthread_once target */
void rec_thread_key_init(void);
void rec_record_exit(int code, int sig);
int rec_inproc_flush(int timeout_ms); /* in-process mode: drain and seal now */

#endif
