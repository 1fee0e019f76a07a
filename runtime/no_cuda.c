/* Builds without the CUDA toolkit: no device, ever. */
#include "tft_stats_cuda.h"
int tft_stats_cuda_available(void) { return 0; }
