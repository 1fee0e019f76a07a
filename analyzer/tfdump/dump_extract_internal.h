/*
 * dump_extract_internal.h — the parts of tfdump --extract IN OUT
 * (dump_extract.c): what the options select, what happened to each rank
 * file, and the files that copy a rank file (dump_extract_file.c) and
 * write OUT's manifest (dump_extract_manifest.c).
 */
#ifndef TFT_DUMP_EXTRACT_INTERNAL_H
#define TFT_DUMP_EXTRACT_INTERNAL_H

#include "dump_internal.h"

/* What the extract keeps, parsed from the options. */
typedef struct ex_sel {
    int64_t lo, hi;     /* step window, inclusive */
    bool steps_given;
    int *ranks;         /* ranks to keep (read-as ranks), sorted; NULL = all */
    int nranks;
    int stats;          /* TFT_STATS_* to reduce to, -1 as recorded */
    unsigned mode;      /* the files' permission bits (--mode / TFT_MODE, default 0600); OUT: x where r */
} ex_sel;

/* What happened to one rank file. */
typedef struct ex_file {
    int idx;            /* rank file index in the source trace */
    int rank;           /* read-as rank */
    char name[64];      /* file name in OUT: the source's, rank-NNNNN.tft for another name */
    uint64_t read, kept;
    uint64_t refused;   /* records the writer refused as malformed (left out) */
    int64_t lo;         /* window start after narrowing to the full steps */
    int64_t first, last; /* steps kept, TFT_STEP_NONE none */
    int integrity;      /* the source file's, as read (enum tft_integrity) */
} ex_file;

/* Copies what s keeps of rank file f->idx into dirfd/f->name (out: OUT's
 * path, for messages). Returns DUMP_OK or DUMP_USAGE (said why). */
int dump_extract_file(dump_trace *d, int dirfd, const char *out, const ex_sel *s, ex_file *f);
/* Writes OUT's manifest into dirfd (in: IN's path) for the n files fs. 0 or
 * a negative errno. */
int dump_extract_manifest(const dump_trace *d, int dirfd, const char *in, const ex_sel *s, const ex_file *fs,
                          int n);

#endif
