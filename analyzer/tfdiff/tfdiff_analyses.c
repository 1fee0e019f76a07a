/*
 * tfdiff_analyses.c — what tfdiff finds beside the per-rank comparison
 * (tfdiff_internal.h): the leaks of BAD that GOLDEN does not have (per
 * rank, from the scans a job's pass fed), the desyncs of BAD that GOLDEN
 * does not have (across ranks, from the extracts), and tfdump --check's
 * detectors on both traces. Each keeps to BAD's findings of a kind GOLDEN
 * lacks: what the two runs share is not the difference.
 */
#include "core_common.h"
#include "desync.h"
#include "desync_stacks.h"
#include "tfdiff_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The exit of rank `rank` from the manifest, for a rank file that has no
 * PROCESS exit record (a launcher that saw the rank die writes it there). */
static void exit_from_manifest(tft_trace *t, int rank, leak_rank_mem *m)
{
    if (!m->exit_known)
        m->exit_known = core_manifest_rank_exit(tft_trace_manifest(t), rank, &m->exit_code, &m->exit_signal);
}

/* Side's growth leaks and what each site holds, from its finished scan. */
static int finish_leaks(job_tap *t, int side, tft_trace *tr, int i, leak_finding *l, int max, leak_rank_mem *m)
{
    int n = leak_scan_finish(t->leak[side], t->r[side], tft_trace_rank_id(tr, i), 0, l, max, m);
    t->leak[side] = NULL;
    if (n >= 0)
        exit_from_manifest(tr, tft_trace_rank_id(tr, i), m);
    return n;
}

/* Leaks of BAD that GOLDEN does not have at the same rank and site: growth
 * GOLDEN lacks, and sites holding far more at BAD's end than at GOLDEN's
 * (leak_compare); a rank in BAD only: its growth leaks. */
int tfdiff_job_leaks(rank_work *w, rank_job *j, job_tap *t, leak_scratch *sc)
{
    leak_finding gl[LEAKS_MAX], bl[LEAKS_MAX], out[LEAKS_MAX];
    int rank = tft_trace_rank_id(w->b, j->bi);
    int nb = finish_leaks(t, 1, w->b, j->bi, bl, LEAKS_MAX, &sc->bm);
    if (nb < 0)
        return nb;
    const leak_finding *src = bl;
    int n = nb;
    if (j->gi >= 0) {
        int ng = finish_leaks(t, 0, w->g, j->gi, gl, LEAKS_MAX, &sc->gm);
        if (ng < 0)
            return ng;
        n = leak_compare(&sc->gm, gl, ng, &sc->bm, bl, nb, rank, out, LEAKS_MAX);
        src = out;
        j->bad_dropped = n ? sc->bm.dropped : 0;
    }
    if (n > 0 && !(j->found = malloc((size_t)n * sizeof(*j->found))))
        return -ENOMEM;
    if (n > 0)
        memcpy(j->found, src, (size_t)n * sizeof(*j->found));
    j->nfound = n;
    return 0;
}

/* Desyncs of BAD that GOLDEN does not have (same kind, communicator and
 * collective), from the extracts of every rank file of both. */
int tfdiff_desyncs(tft_trace *g, tft_trace *b, diff_spill *gsp, diff_spill *bsp, diff_report *rep)
{
    desync_finding bd[64], gd[64];
    int nb = desync_find_spilled(b, bsp, bd, 64);
    if (nb < 0)
        return nb;
    int ng = desync_find_spilled(g, gsp, gd, 64);
    if (ng == -ENOMEM)
        return ng;
    for (int j = 0; j < nb; j++) {
        bool in_golden = false;
        for (int k = 0; k < ng; k++)
            in_golden |= gd[k].kind == bd[j].kind && gd[k].comm == bd[j].comm && gd[k].coll_seq == bd[j].coll_seq;
        if (!in_golden)
            report_add_desync(rep, &bd[j]);
    }
    int nrep;
    report_desyncs(rep, &nrep);
    if (nrep > 0) {   /* a hang: where each rank was, when --timeout took it (FORMAT.md §5.16) */
        desync_stacks st = {0};
        if (desync_stacks_read(b, &st) == 0)
            report_set_stacks(rep, &st);
        desync_stacks_free(&st);
    }
    return 0;
}

/* The detectors of tfdump --check (docs/CHECK.md) on both traces: BAD's
 * errors and warnings of a kind GOLDEN has none of go to the report. A
 * pass of their own over every rank file of both traces (under --mpi, by
 * process 0 alone, so the report is the same); nothing on no memory. */
void tfdiff_checks(tft_trace *g, tft_trace *b, diff_report *rep)
{
    detect_opts co = DETECT_OPTS_DEFAULT;
    detect_finding *gf = calloc(DETECT_FIND_MAX, sizeof(*gf)), *bf = calloc(DETECT_FIND_MAX, sizeof(*bf));
    int ng = gf && bf ? detect_trace(g, &co, detect_clip_of(tft_trace_manifest(g)), gf, DETECT_FIND_MAX) : -ENOMEM;
    int nb = ng >= 0 ? detect_trace(b, &co, detect_clip_of(tft_trace_manifest(b)), bf, DETECT_FIND_MAX) : ng;
    for (int i = 0; i < nb; i++) {
        bool in_golden = bf[i].severity == DETECT_INFO;
        for (int k = 0; k < ng && !in_golden; k++)
            in_golden = !strcmp(gf[k].kind, bf[i].kind);
        if (!in_golden)
            report_add_check(rep, &bf[i]);
    }
    free(gf);
    free(bf);
}
