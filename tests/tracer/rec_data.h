/* rec_data.h — deterministic tensor contents for rec_prog / rec_check. */
#ifndef REC_DATA_H
#define REC_DATA_H
#include <stdint.h>

/* Fills buf with the tensor of (thread t, index i); returns its length. */
static inline int64_t rec_fill(float *buf, int t, int i)
{
    uint32_t s = (uint32_t)(t * 7919 + i * 104729 + 1);
    int64_t n = 1 + (int64_t)((s * 2654435761u) % 4096u);
    for (int64_t k = 0; k < n; k++) {
        s = s * 1664525u + 1013904223u;
        buf[k] = (float)((int32_t)(s >> 8) - (1 << 23)) / (float)(1 << 20);
    }
    if (i % 10 == 3)
        buf[0] = __builtin_nanf("");
    return n;
}
#endif
