/*
 * leak_describe.c — one line of text per leak for the reports
 * (leak_describe): what the site holds or how fast it grew, with GOLDEN's
 * figures when tfdiff found it and when the oldest block still live was
 * allocated.
 */
#include "leak.h"

#include <inttypes.h>
#include <stdio.h>

/* ", the oldest allocated T s into the run (step S)" for what is live. */
static void describe_first(const leak_finding *l, char *buf, size_t n)
{
    char sb[48];
    if (!l->first_known) {
        snprintf(buf, n, "%s", "");
        return;
    }
    snprintf(buf, n, ", the oldest allocated %.3f s into the run (%s)", (double)l->first_alloc_ns * 1e-9,
             core_step_text(l->first_alloc_step, sb, sizeof(sb)));
}

void leak_describe(const leak_finding *l, char *buf, size_t n)
{
    char first[96], golden[160] = "", sb[48];
    describe_first(l, first, sizeof(first));
    if (l->how == LEAK_PEAK) {
        snprintf(buf, n, "%s: held up to %" PRIu64 " bytes in %" PRIu64 " blocks at once, %.3f s into the run (%s; "
                 "GOLDEN: at most %" PRIu64 " bytes in %" PRIu64 " blocks), %" PRIu64 " bytes live at the end",
                 l->site, l->peak_live_bytes, l->peak_live_allocs, (double)l->peak_ns * 1e-9,
                 core_step_text(l->peak_step, sb, sizeof(sb)), l->golden_peak_live_bytes, l->golden_peak_live_allocs,
                 l->live_bytes_at_end);
        return;
    }
    if (l->how == LEAK_AT_EXIT) {
        if (l->golden_known && l->vs_golden_peak)
            snprintf(golden, sizeof(golden), " (GOLDEN held at most %" PRIu64 " bytes there at once; BAD did not "
                     "run to a normal end)", l->golden_peak_live_bytes);
        else if (l->golden_known)
            snprintf(golden, sizeof(golden), " (GOLDEN: %" PRIu64 " bytes in %" PRIu64 " blocks)",
                     l->golden_live_bytes_at_end, l->golden_live_allocs_at_end);
        else if (l->min_bytes)
            snprintf(golden, sizeof(golden), " (at least %" PRIu64 " bytes: --leak-min-bytes)", l->min_bytes);
        snprintf(buf, n, "%s: %" PRIu64 " bytes in %" PRIu64 " blocks live at the end%s%s", l->site,
                 l->live_bytes_at_end, l->live_allocs_at_end, golden, first);
        return;
    }
    if (l->golden_known)
        snprintf(golden, sizeof(golden), "; GOLDEN: %" PRIu64 " bytes live at the end", l->golden_live_bytes_at_end);
    if (l->per_alloc)
        snprintf(buf, n, "%s: +%.0f bytes per allocation over %" PRIu64 " allocations of the site (no steps), %" PRIu64
                 " bytes live at the end%s%s", l->site, l->bytes_per_step, l->iterations, l->live_bytes_at_end,
                 first, golden);
    else
        snprintf(buf, n, "%s: +%.0f bytes/step from step %lld, %" PRIu64 " bytes live at the end%s%s", l->site,
                 l->bytes_per_step, (long long)l->from_step, l->live_bytes_at_end, first, golden);
}
