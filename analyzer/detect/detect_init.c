/*
 * detect_init.c — initialisation (docs/CHECK.md), judged once the rank is
 * read from each parameter matrix's initial record (`P` before the first
 * step, tftrain): all zeros or one value (init-zero, init-constant), or a
 * std far from the other matrices' median (init-scale).
 */
#include "detect_rules_internal.h"

#include <stdlib.h>
#include <string.h>

static const char CAUSE_ZERO[] =
    "the parameter was initialised to zeros or a constant (a missing init call, e.g. position embeddings): its "
    "units stay symmetric";
static const char CAUSE_SCALE[] =
    "a wrong init scale for this parameter (a missing 1/sqrt(fan_in), a std meant for another layer)";

/* The initial value of parameter P (detect_initial): the record named P
 * (tftrain records every parameter before the first forward), or param.P's
 * own first forward record (tftrace --torch); NULL when the trace has none. */
static const detect_series *initial_of(detect_rank *c, const detect_series *p)
{
    return detect_initial(c, p);
}


static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void detect_init_finish(detect_rank *c)
{
    double *stds = malloc((size_t)(c->ns + 1) * sizeof(double));
    int n = 0;
    for (int i = 0; i < c->ns; i++) {
        const detect_series *p = &c->s[i], *x;
        if (!(p->cls & DETECT_C_PARAM) || !(x = initial_of(c, p)) || x->first_ndim < 2 ||
            x->first.numel < 2 || x->mode < TFT_STATS_HEALTH)
            continue;
        const tft_stats *st = &x->first;
        if (st->zero == st->numel) {
            detect_add(c, "init-zero", detect_zero_is_choice(x->name) ? DETECT_INFO : DETECT_ERROR, x->first_step, x, NULL, 0, 0, CAUSE_ZERO,
                       "%s is all zeros at step %lld (%llu elements)", x->name, (long long)x->first_step,
                       (unsigned long long)st->numel);
        } else if (st->min == st->max && !st->nan && !st->pinf && !st->ninf) {
            detect_add(c, "init-constant", DETECT_ERROR, x->first_step, x, NULL, st->min, 0, CAUSE_ZERO,
                       "every element of %s is %.6g at step %lld", x->name, st->min, (long long)x->first_step);
        } else if (x->mode >= TFT_STATS_FULL && st->std > 0 && stds) {
            stds[n++] = st->std;
        }
    }
    if (n >= 3) {
        qsort(stds, (size_t)n, sizeof(double), cmp_double);
        double med = stds[n / 2], k = c->o.init_std;
        for (int i = 0; k > 0 && i < c->ns; i++) {
            const detect_series *p = &c->s[i], *x;
            if (!(p->cls & DETECT_C_PARAM) || !(x = initial_of(c, p)) || x->first_ndim < 2 ||
                x->mode < TFT_STATS_FULL || !(x->first.std > 0))
                continue;
            double r = x->first.std / med;
            if (r > k || r < 1 / k)
                detect_add(c, "init-scale", DETECT_WARNING, x->first_step, x, NULL, r, k, CAUSE_SCALE,
                           "%s starts with std %.4g, %.3g times the median %.4g of the %d other matrices' stds",
                           x->name, x->first.std, r, med, n);
        }
    }
    free(stds);
}
