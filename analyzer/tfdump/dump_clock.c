/*
 * dump_clock.c — the summary's clocks per rank (dump_internal.h): how each
 * rank's times compare with the others' when the trace spans several hosts
 * (docs/MULTINODE.md "Clocks across hosts"): the MPI estimate of the
 * manifest when there is one, else each host's realtime with its kernel's
 * NTP state from the rank's CLOCK records (FORMAT.md §5.17), and the
 * realtime steps those records show.
 */
#include "dump_internal.h"

#include <inttypes.h>
#include <string.h>

#define STEP_MIN_NS 1000000 /* smaller changes of realtime - monotonic are reading noise */

void dump_clock_begin(dump_clock_sum *c, const tft_file_info *fi)
{
    *c = (dump_clock_sum){.ntp = TFT_NTP_UNKNOWN};
    if (fi)
        c->real_minus_mono = (int64_t)(fi->start_realtime_ns - fi->start_monotonic_ns);
}

void dump_clock_note(dump_clock_sum *c, const tft_rec *rec)
{
    if (rec->kind != TFT_REC_CLOCK || rec->len < sizeof(tft_rec_clock))
        return;
    const tft_rec_clock *k = (const tft_rec_clock *)rec;
    int64_t rm = (int64_t)(k->realtime_ns - k->h.ts), d = rm - c->real_minus_mono;
    if (d > STEP_MIN_NS || d < -STEP_MIN_NS) {
        c->steps++;
        if ((d < 0 ? -d : d) > (c->step_max < 0 ? -c->step_max : c->step_max))
            c->step_max = d;
    }
    c->real_minus_mono = rm;
    c->seen = true;
    c->ntp = k->ntp <= TFT_NTP_UNSYNCED ? k->ntp : TFT_NTP_UNKNOWN;
    c->maxerror_ns = c->ntp == TFT_NTP_SYNCED ? k->maxerror_ns : 0;
}

/* The manifest entry of rank file i with an MPI estimate, NULL none. */
static const tft_manifest_rank *estimate_of(dump_trace *d, int i)
{
    const tft_manifest *m = tft_trace_manifest(d->t);
    const tft_file_info *fi = tft_trace_file_info(d->t, i);
    for (int k = 0; m && fi && k < m->nranks; k++)
        if (m->ranks[k].rank == fi->rank && m->ranks[k].pid == fi->pid && m->ranks[k].clock_known)
            return &m->ranks[k];
    return NULL;
}

static bool several_hosts(dump_trace *d)
{
    const tft_file_info *f0 = d->n ? tft_trace_file_info(d->t, 0) : NULL;
    for (int i = 1; f0 && i < d->n; i++) {
        const tft_file_info *fi = tft_trace_file_info(d->t, i);
        if (fi && strncmp(fi->host, f0->host, sizeof(fi->host)) != 0)
            return true;
    }
    return false;
}

static const char *ntp_text(const dump_clock_sum *c, bool mpi, char *buf, size_t n)
{
    if (mpi) /* the estimate is what compares it; the NTP state only for information */
        snprintf(buf, n, "host NTP %s", c->ntp == TFT_NTP_SYNCED     ? "synchronised"
                                        : c->ntp == TFT_NTP_UNSYNCED ? "not synchronised"
                                                                     : "state unknown");
    else if (!c->seen)
        snprintf(buf, n, "no clock records (recorded before 1.6)");
    else if (c->ntp == TFT_NTP_SYNCED)
        snprintf(buf, n, "NTP-synchronised, error within %.3f ms", c->maxerror_ns / 1e6);
    else if (c->ntp == TFT_NTP_UNSYNCED)
        snprintf(buf, n, "not NTP-synchronised: its realtime compares with no other host's");
    else
        snprintf(buf, n, "NTP state unknown");
    return buf;
}

bool dump_clock_shown(dump_trace *d, bool any_step) { return any_step || several_hosts(d); }

void dump_clock_line(dump_trace *d, int i, const dump_clock_sum *c, bool first)
{
    const tft_file_info *fi = tft_trace_file_info(d->t, i);
    const tft_manifest_rank *e = estimate_of(d, i);
    char ntp[96], mpi[128] = "", st[96] = "";
    if (e && e->clock_error_ns == 0 && e->clock_offset_ns == 0)
        snprintf(mpi, sizeof(mpi), "the reference clock of the MPI estimate; ");
    else if (e)
        snprintf(mpi, sizeof(mpi), "on rank %d's clock through MPI (offset %+.1f us, error within %.1f us); ",
                 (int)e->clock_ref, e->clock_offset_ns / 1e3, e->clock_error_ns / 1e3);
    if (c->steps)
        snprintf(st, sizeof(st), "; realtime stepped %u time%s (largest %+.3f ms)", c->steps,
                 c->steps == 1 ? "" : "s", c->step_max / 1e6);
    printf("%s rank %d on %.64s: %s%s%s\n", first ? "clocks      " : "            ", tft_trace_rank_id(d->t, i),
           fi ? fi->host : "?", mpi, ntp_text(c, e != NULL, ntp, sizeof(ntp)), st);
}

cJSON *dump_clock_json(dump_trace *d, int i, const dump_clock_sum *c)
{
    cJSON *o = cJSON_CreateObject();
    const tft_manifest_rank *e = estimate_of(d, i);
    if (e) {
        core_json_i64(o, "mpi_offset_ns", e->clock_offset_ns);
        core_json_u64(o, "mpi_error_ns", e->clock_error_ns);
    }
    cJSON_AddStringToObject(o, "ntp", !c->seen                        ? "no records"
                                      : c->ntp == TFT_NTP_SYNCED   ? "synced"
                                      : c->ntp == TFT_NTP_UNSYNCED ? "unsynced"
                                                                   : "unknown");
    if (c->ntp == TFT_NTP_SYNCED)
        core_json_u64(o, "ntp_maxerror_ns", c->maxerror_ns);
    cJSON_AddNumberToObject(o, "realtime_steps", c->steps);
    if (c->steps)
        core_json_i64(o, "largest_step_ns", c->step_max);
    return o;
}
