/*
 * replay_internal.h — the parts of `tftrace replay` (replay.c: options,
 * the point, the report; replay_side.c: each side from its recording;
 * replay_run.c: the child processes it runs).
 */
#ifndef TFT_REPLAY_INTERNAL_H
#define TFT_REPLAY_INTERNAL_H

#include "cli_internal.h"
#include "tft_format.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#define RP_MAX_ARGS 512

typedef struct rp_opts {
    const char *golden, *bad, *out, *at;
    double timeout;
    int from_start, quiet;
    int yes;               /* --yes: run the recorded commands without asking */
    int force;             /* --force: replace an earlier replay's traces in the output directory */
} rp_opts;

/* The point to replay to. */
typedef struct rp_point {
    int64_t step;  /* TFT_STEP_NONE: a step-less trace */
    int64_t seq;   /* -1 unknown */
    int rank;
    char tensor[256], origin[256], kind[32];
} rp_point;

/* One side (golden or bad) of the replay. */
typedef struct rp_side {
    const char *label;     /* "golden" / "bad" */
    const char *trace;     /* recorded trace */
    char cwd[1024];
    char *argv[RP_MAX_ARGS];
    int argc;
    char stats[16];
    long every;
    char alloc_min[64], step_range[256]; /* recorded options, "" = default */
    /* the checkpoint used, if any */
    int have_ckpt;
    int64_t ckpt_step;
    char ckpt_path[4096], recipe[4096];
    int64_t rec_first, rec_last; /* steps of the recording (rank 0) */
    /* results */
    char out_trace[4200];
    int run_status;
    int64_t rep_first, rep_last;
    int reproduced;        /* 1 yes, 0 no, -1 unknown */
    char repro_detail[512];
} rp_side;

/* ---- replay_side.c ---- */
int64_t json_step(const cJSON *o);
void json_str(const cJSON *o, const char *key, char *out, size_t n);
void side_free(rp_side *s);
int side_manifest(rp_side *s);
int side_checkpoints(rp_side *s, int rank, int64_t step);
int side_prepare(const rp_opts *o, rp_side *s);
int64_t steps_run(const rp_side *s);
cJSON *side_json(const rp_side *s);

/* ---- replay_run.c ---- */
extern char tool_dir[PATH_MAX];
int run_cmd(char *const argv[], const char *cwd, char **out, const char *errfile);
void tool_path(char *buf, size_t n, const char *tool);
int out_dir(const char *dir);
FILE *fopen_out(const char *path, const char *how);
int confirm(const rp_opts *o, const rp_side side[2]);
int run_side(const rp_opts *o, rp_side *s, const rp_point *p, const char *spec);
void check_reproduced(const rp_opts *o, rp_side *s, const rp_point *p);

#endif
