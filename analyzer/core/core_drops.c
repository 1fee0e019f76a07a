/*
 * core_drops.c — the steps in which a side of a rank lost records, read
 * from its DROPPED records.
 */
#include "core_drops.h"
#include "tft_drops.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int core_drops_scan(tft_reader *r, int64_t steps[2], bool *known)
{
    tft_drop_sum s;
    tft_drop_sum_init(&s);
    const tft_rec *rec;
    int e;
    while ((e = tft_reader_next(r, &rec)) > 0)
        if (rec->kind == TFT_REC_DROPPED)
            tft_drop_sum_add(&s, (const tft_rec_dropped *)rec, rec->len);
    steps[0] = s.first_step;
    steps[1] = s.last_step;
    *known = !s.steps_unknown || s.first_step != TFT_STEP_NONE;
    int re = tft_reader_rewind(r);
    return e < 0 ? e : re < 0 ? re : 0;
}

const char *core_drop_reason_name(uint32_t reason)
{
    static const char *const n[] = {"ring_full", "too_big", "other"};
    return reason < 3 ? n[reason] : "?";
}
