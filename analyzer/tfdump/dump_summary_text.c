/*
 * dump_summary_text.c — `tfdump TRACE`: the summary as lines on stdout,
 * "name         value" (dump_summary_internal.h): the trace, run and
 * manifest, ranks, steps, records by kind, collective calls (and those
 * never finished), drops, bytes, integrity, exits, memory, clocks, the
 * process table, and the problems the reader met.
 */
#include "dump_summary_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void text_kinds(const trace_sum *s)
{
    printf("records      %" PRIu64, s->records);
    const char *sep = " (";
    for (int k = 0; k < s->kind_hi; k++) {
        if (!s->by_kind[k])
            continue;
        char kb[24];
        printf("%s%s %" PRIu64, sep, dump_rec_kind_label((uint16_t)k, kb), s->by_kind[k]);
        sep = ", ";
    }
    printf("%s\n", s->records ? ")" : "");
}

static void exit_text(const rank_sum *rs, char *buf, size_t n)
{
    if (!rs->exit_known)
        snprintf(buf, n, "unknown (no exit recorded)");
    else if (rs->exit_signal)
        snprintf(buf, n, "killed by signal %d", rs->exit_signal);
    else
        snprintf(buf, n, "code %d", rs->exit_code);
}

static void text_exits(const trace_sum *s, int n)
{
    char first[64], cur[64];
    bool same = true;
    if (n <= 0)
        return;
    exit_text(&s->ranks[0], first, sizeof(first));
    for (int i = 1; i < n && same; i++) {
        exit_text(&s->ranks[i], cur, sizeof(cur));
        same = strcmp(first, cur) == 0;
    }
    if (same) {
        printf("exit         %s%s\n", n > 1 ? "every rank: " : "", first);
        return;
    }
    for (int i = 0; i < n; i++) {
        exit_text(&s->ranks[i], cur, sizeof(cur));
        printf("%s rank %d: %s\n", i ? "            " : "exit        ", s->ranks[i].rank, cur);
    }
}

/* Each rank's uncaught exception (EXCEPTION records): "raised       rank
 * 0: RuntimeError at step 37 in model.tok_emb: ..." */
static void text_raised(const trace_sum *s, int n)
{
    const char *label = "raised      ";
    for (int i = 0; i < n; i++) {
        if (!s->ranks[i].raised.known)
            continue;
        char what[700];
        printf("%s rank %d: %s\n", label, s->ranks[i].rank, core_exception_text(&s->ranks[i].raised, what, sizeof(what)));
        label = "            ";
    }
}

/* The resident set the collector sampled (PROCESS RSS records): the rank
 * with the highest peak, and each rank's peak when there are a few. */
static void text_memory(const trace_sum *s, int n)
{
    int top = -1;
    uint64_t samples = 0;
    for (int i = 0; i < n; i++) {
        samples += s->ranks[i].rss_samples;
        if (s->ranks[i].rss_samples && (top < 0 || s->ranks[i].rss_peak > s->ranks[top].rss_peak))
            top = i;
    }
    if (top < 0)
        return;
    const rank_sum *t = &s->ranks[top];
    printf("memory       peak RSS %.1f MiB (rank %d), last %.1f MiB; %" PRIu64 " samples\n",
           (double)t->rss_peak / 1048576.0, t->rank, (double)t->rss_last / 1048576.0, samples);
    for (int i = 0; n > 1 && n <= 8 && i < n; i++)
        if (s->ranks[i].rss_samples)
            printf("             rank %d: peak %.1f MiB, last %.1f MiB\n", s->ranks[i].rank,
                   (double)s->ranks[i].rss_peak / 1048576.0, (double)s->ranks[i].rss_last / 1048576.0);
}

void dump_text_manifest(const tft_manifest *m)
{
    if (!m) {
        printf("manifest     none\n");
        return;
    }
    const char *cs = dump_collector_state(m);
    const char *state = m->complete           ? "(run finished)"
                        : m->incomplete       ? "(run finished; the trace is INCOMPLETE)"
                        : cs && !strcmp(cs, "died") ? "(run did not finish: its collector died)"
                        : cs && !strcmp(cs, "running") ? "(still recording)"
                                                       : "(run did not finish: manifest not final)";
    printf("run          %s  host %s  world size %d  %s\n", m->run_id[0] ? m->run_id : "?",
           m->host[0] ? m->host : "?", m->world_size, state);
    printf("command     ");
    for (int i = 0; i < m->argc; i++)
        printf(" %s", m->argv[i]);
    printf("\n");
    if (m->incomplete)
        printf("incomplete   %s\n", m->incomplete);
    const tft_manifest_collector *c = dump_collector_unfinished(m);
    if (c && !m->incomplete && cs) {
        if (!strcmp(cs, "died"))
            printf("collector    died: tftrace (pid %d on %s) is gone without finishing the trace (killed? "
                   "out of memory?); what it had not written is lost, the rank files end where it stopped\n",
                   (int)c->pid, c->host);
        else if (!strcmp(cs, "running"))
            printf("collector    running: tftrace (pid %d) is still recording; read the trace again when it "
                   "ends\n", (int)c->pid);
        else
            printf("collector    tftrace (pid %d on %s) has not finished the trace: still running there, or it "
                   "died\n", (int)c->pid, c->host);
    }
}

static const char *name_or_dash(const char *s) { return s ? s : "-"; }

/* Collective calls, and those a rank entered and never returned from. */
static void text_collectives(dump_trace *d, const trace_sum *s)
{
    const coll_track *t = &s->coll;
    printf("collectives  %" PRIu64 " calls", dump_coll_calls(t));
    if (t->n)
        printf(", %" PRIu64 " entered and never returned (hang or crash):", (uint64_t)t->n + t->unshown);
    printf("\n");
    for (size_t i = 0; i < t->n && i < 16; i++) {
        const coll_open *o = &t->open[i];
        printf("             rank %d: %s comm=%016" PRIx64 " cseq=%" PRIu64,
               tft_trace_rank_id(d->t, o->idx), name_or_dash(o->named ? o->name_text : NULL),
               o->comm, o->coll_seq);
        if (o->step != TFT_STEP_NONE)
            printf(" step %" PRId64, o->step);
        printf("\n");
    }
    if (t->n + t->unshown > 16)
        printf("             ... and %" PRIu64 " more\n", (uint64_t)t->n + t->unshown - 16);
}

void dump_summary_text(dump_trace *d, const dump_opts *o, const trace_sum *s)
{
    printf("trace        %s\n", o->path);
    dump_text_manifest(tft_trace_manifest(d->t));
    dump_extract_describe(o->path, stdout);
    printf("ranks        %d\n", d->n);
    if (s->step_first == TFT_STEP_NONE)
        printf("steps        none\n");
    else
        printf("steps        %" PRId64 "..%" PRId64 "\n", s->step_first, s->step_last);
    if (s->keep_steps && s->step_first != TFT_STEP_NONE) /* --keep-steps (FORMAT.md §3.6) */
        printf("kept         full records: steps %" PRId64 "..%" PRId64 "; scalars and collectives: steps %"
               PRId64 "..%" PRId64 "\n", s->full_first, s->step_last, s->step_first, s->step_last);
    text_kinds(s);
    printf("tensors      %" PRIu64 "\n", s->by_kind[TFT_REC_TENSOR]);
    text_collectives(d, s);
    printf("allocations  %" PRIu64 " (%" PRIu64 " frees)\n", s->by_kind[TFT_REC_ALLOC],
           s->by_kind[TFT_REC_FREE]);
    /* the size and the blocks: a --keep-steps file left sparse (its recorder
     * killed before compacting it) takes fewer blocks than its size */
    printf("bytes        %" PRIu64 " on disk (%" PRIu64 " allocated), %" PRIu64 " uncompressed (ratio %.2fx)\n",
           s->bytes, s->alloc_bytes, s->raw_bytes, s->bytes ? (double)s->raw_bytes / (double)s->bytes : 0.0);
    const tft_manifest *m = tft_trace_manifest(d->t);
    if (m && m->dropped_stalled)
        printf("dropped      %" PRIu64 " (%" PRIu64 " when --no-drop gave up on a stalled collector)\n", s->dropped,
               m->dropped_stalled);
    else
        printf("dropped      %" PRIu64 "\n", s->dropped);
    for (int i = 0; i < d->n; i++) {
        char what[512];
        if (s->ranks[i].drops.count)
            printf("WARNING      rank %d: %s; the trace is incomplete there\n", s->ranks[i].rank,
                   tft_drop_describe(&s->ranks[i].drops, what, sizeof(what)));
    }
    printf("integrity    %s\n", dump_integrity_name(s->integrity));
    text_exits(s, d->n);
    text_raised(s, d->n);
    text_memory(s, d->n);
    bool any_step = false;
    for (int i = 0; i < d->n; i++)
        any_step |= s->ranks[i].clock.steps > 0;
    for (int i = 0; dump_clock_shown(d, any_step) && i < d->n; i++)
        dump_clock_line(d, i, &s->ranks[i].clock, i == 0);
    dump_procs_text(o->path);
    for (size_t i = 0; i < d->log.n; i++)
        printf("%s %s\n", i ? "            " : "problems    ", d->log.msgs[i]);
    if (d->log.more)
        printf("             ... and %zu more\n", d->log.more);
}
