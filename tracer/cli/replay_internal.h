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

/* ---- replay_side.c: one side from its recording ------------------------- */

/* A number or text of a JSON object (tfdiff's reports): "step" or
 * TFT_STEP_NONE; key's string copied into out (n bytes), left as it is
 * when missing. */
int64_t rp_json_step(const cJSON *o);
void rp_json_str(const cJSON *o, const char *key, char *out, size_t n);
/* Frees the command's words. */
void rp_side_free(rp_side *s);
/* The recorded command (after tftrace's "--"), cwd and options from the
 * trace's manifest; refuses a command whose secrets were redacted. 0, or
 * -1 with a message on stderr. */
int rp_side_manifest(rp_side *s);
/* Rank `rank` of the recording: its step range and the latest usable
 * checkpoint saved at or before `step`. 0, or -1 with a message. */
int rp_side_checkpoints(rp_side *s, int rank, int64_t step);
/* The command the side will run (the recipe's words appended) and its
 * output trace, which must not exist unless --force. 0, or -1 with a
 * message. */
int rp_side_prepare(const rp_opts *o, rp_side *s);
/* Steps the replay ran, 0 when none. */
int64_t rp_steps_run(const rp_side *s);
/* The side's object in replay.json. */
cJSON *rp_side_json(const rp_side *s);

/* ---- replay_run.c: the child processes ------------------------------------- */

/* Runs argv in cwd (NULL = ours); stdout to *out (malloc'd, NUL-terminated)
 * when out != NULL, else inherited; stderr to errfile when given (else
 * inherited). Returns the wait status, or -1 when it could not be started. */
int rp_run_cmd(char *const argv[], const char *cwd, char **out, const char *errfile);
/* The path of a tool (tftrace, tfdiff) next to this program, in
 * ../analyzer (the build tree), or its bare name (the PATH). */
void rp_tool_path(char *buf, size_t n, const char *tool);
/* The output directory: created 0700, or an existing one of ours that is
 * not a symbolic link. 0, or -1 with a message. */
int rp_out_dir(const char *dir);
/* A report file opened for writing ("w" or "a"), never through a link. */
FILE *rp_fopen_out(const char *path, const char *how);
/* Shows the two commands and asks: --yes, or "y" on a terminal. 0 to go
 * on, -1 (message printed) to stop. */
int rp_confirm(const rp_opts *o, const rp_side side[2]);
/* Replays one side under `tftrace --capture spec --until-step`, its output
 * to OUT/LABEL.log. 0, or -1 with a message (it could not run, or wrote no
 * trace). */
int rp_run_side(const rp_opts *o, rp_side *s, const rp_point *p, const char *spec);
/* Recorded vs replayed, bit for bit, over the steps the replay ran:
 * s->reproduced and s->repro_detail. */
void rp_check_reproduced(rp_side *s);

#endif
