/*
 * capture_spec.h — the capture spec of `tftrace --capture SPEC` / TFT_CAPTURE
 * (docs/CAPTURE.md): which ops get their input and output tensors stored
 * whole in the trace. Parsed by the launcher (to reject a bad spec before
 * the command runs) and by the recorder (init.c, once).
 *
 *   SPEC  := ALT { ';' ALT }          an op is captured when any ALT matches
 *   ALT   := TERM { ',' TERM }        ... and an ALT matches when all its TERMs do
 *   TERM  := step=RANGE | seq=RANGE | rank=N | name=GLOB
 *          | first-divergence-of=GOLDEN.trace     (launcher only, see below)
 *   RANGE := N | A:B | A: | :B         inclusive
 *
 * step: the step current when the op begins (an op outside any step never
 * matches a step term). seq: the op's sequence number. rank: the rank of
 * the recording process. name: fnmatch(3) on the op's name or on the name
 * of a tensor the op outputs (an op is selected by what it is or produces,
 * not by its inputs' names). A GLOB cannot contain ',' or ';'.
 * first-divergence-of is parsed (its path kept) but is the launcher's
 * business; the recorder never sees it.
 */
#ifndef TFT_CAPTURE_SPEC_H
#define TFT_CAPTURE_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CAPSPEC_MAX_ALTS 16
#define CAPSPEC_NAME_MAX 256

typedef struct capspec_alt {
    bool has_step, has_seq, has_rank;
    int64_t step_lo, step_hi;     /* inclusive */
    int64_t seq_lo, seq_hi;       /* inclusive */
    int rank;
    char name[CAPSPEC_NAME_MAX];  /* fnmatch pattern, "" = any name */
    bool first_divergence;        /* a first-divergence-of term */
} capspec_alt;

typedef struct capspec {
    int n;                        /* alternatives */
    capspec_alt alt[CAPSPEC_MAX_ALTS];
    char first_divergence_of[4096]; /* GOLDEN path of a first-divergence-of term, "" none */
} capspec;

/* Parses text into *out. Returns 0, or -EINVAL with a one-line reason in err
 * ("term 'stp=3': unknown key 'stp' (step, seq, rank, name, first-divergence-of)"). */
int capspec_parse(const char *text, capspec *out, char *err, size_t errlen);

/* The terms of alternative a other than name, for an op with this step, seq and rank. */
static inline bool capspec_alt_pre(const capspec_alt *a, int64_t step, int64_t seq, int rank)
{
    if (a->has_step && (step == INT64_MIN || step < a->step_lo || step > a->step_hi))
        return false;
    if (a->has_seq && (seq < a->seq_lo || seq > a->seq_hi))
        return false;
    return !a->has_rank || a->rank == rank;
}

#endif
