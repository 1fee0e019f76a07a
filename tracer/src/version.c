/* libtftrace: library identity. The recorder API lands in tracer/src. */
#include "tft_format.h"
