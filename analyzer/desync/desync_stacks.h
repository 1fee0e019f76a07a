/*
 * desync_stacks.h — the STACK records of a trace (FORMAT.md §5.16): where each
 * thread was when `tftrace --timeout` stopped a hung run, for `tfdump
 * --check` and `tfdiff` (shown with the `missing` desync they explain).
 */
#ifndef TFT_DESYNC_STACKS_H
#define TFT_DESYNC_STACKS_H

#include "tft_format.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>

typedef struct desync_stack {
    int rank;             /* of the rank file */
    int32_t pid, tid;
    bool main;            /* the process's main thread */
    char comm[16];
    char summary[512];    /* "MPI_Allreduce ← step ← main" */
    char *frames;         /* one per line, owned */
} desync_stack;

typedef struct desync_stacks {
    desync_stack *v;
    int n, cap;
} desync_stacks;

/* Adds rec (a STACK record of the rank file read by r, whose rank is rank)
 * to s. Other kinds are ignored. 0 or -ENOMEM. */
int desync_stacks_add(desync_stacks *s, const tft_reader *r, int rank, const tft_rec *rec);
/* Moves every entry of from (n of them) into to, sorted by rank, main
 * threads first. 0 or -ENOMEM (to keeps what it had). */
int desync_stacks_merge(desync_stacks *to, desync_stacks *from, int n);
/* Reads the STACK records of every rank file of t into s (a pass of its
 * own: for tfdiff, which reads them only when it finds a hang). 0 or -errno. */
int desync_stacks_read(tft_trace *t, desync_stacks *s);
void desync_stacks_free(desync_stacks *s);

/* The main threads' stacks grouped by summary, one line per group:
 * "PREFIXranks 0,2,3: MPI_Allreduce ← step ← main". Nothing when s is empty. */
void desync_stacks_print(FILE *f, const desync_stacks *s, const char *prefix);
/* [{"rank","pid","tid","main","comm","summary","frames":[lines]}] */
cJSON *desync_stacks_json(const desync_stacks *s);

#endif
