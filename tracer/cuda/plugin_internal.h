/*
 * plugin_internal.h — shared by the parts of libtftrace-cuda.so: the CUPTI
 * subscriber (plugin.c) and the device-statistics service (devstats.c).
 */
#ifndef TFT_CUDA_PLUGIN_INTERNAL_H
#define TFT_CUDA_PLUGIN_INTERNAL_H

#include "tft_cuda_plugin.h"

#include <stdint.h>

/* > 0 while this thread runs our own CUDA calls: the CUPTI callbacks then
 * record nothing (our scratch allocations are not the program's) and note
 * the correlation ids of our copies so that their activity is dropped.
 * Defined in devstats.c, whose calls are most of them: plugin.c calls
 * devstats.c, never the other way. */
extern __thread int cp_self;

/* Notes a runtime correlation id of one of our own calls (plugin.c). */
void cp_ignore_corr(uint32_t corr);

/* The statistics entry points of the plugin table (devstats.c). */
int64_t ds_launch(const tft_cuda_tensor *t, int mode, void *stream, int *device);
int ds_poll(int64_t handle, tft_stats *out);

#endif
