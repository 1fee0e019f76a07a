/*
 * dump_internal.h — the parts of tfdump (analyzer/tfdump/tfdump.c wires them):
 * options, diagnostics collection, stdout handling, rank-file names, record
 * rendering (text and JSON) and the four modes (summary, events, verify,
 * chunks). Not installed; nothing here is a library API.
 *
 * Exit statuses shared by every mode: DUMP_OK (0), DUMP_FINDINGS (1, only
 * --verify and --check), DUMP_USAGE (2, usage errors and unreadable input).
 */
#ifndef TFT_DUMP_INTERNAL_H
#define TFT_DUMP_INTERNAL_H

#include "detect.h"
#include "core.h"
#include "core_drops.h"
#include "core_json.h"
#include "desync.h"
#include "leak.h"
#include "desync_stacks.h"
#include "report_check.h"
#include "tft_format.h"
#include "tft_u64map.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum { DUMP_OK = 0, DUMP_FINDINGS = 1, DUMP_USAGE = 2 };

enum dump_mode { MODE_SUMMARY = 0, MODE_EVENTS, MODE_VERIFY, MODE_CHUNKS, MODE_CHECK, MODE_TENSOR,
                 MODE_CAPTURES, MODE_REPLAY, MODE_EXTRACT, MODE_EXPORT, MODE_HTML, MODE_COMPACT };

/* Bit 0 of dump_opts.kinds selects every kind this build does not know. */
#define KIND_BIT_UNKNOWN 1ull

typedef struct dump_opts {
    const char *path;    /* TRACE: a trace directory or one rank file */
    int mode;            /* enum dump_mode */
    int json;            /* JSON output (one object, or one per line) */
    int order;           /* TFT_ORDER_STEP_SEQ (default) or TFT_ORDER_TIME */
    int rank;            /* --rank: rank id to keep, -1 = every rank */
    int have_steps;      /* --steps given: keep records with lo <= step <= hi */
    int64_t step_lo, step_hi;
    const char *name_glob; /* --name: fnmatch pattern on the record's name */
    uint64_t kinds;      /* --kind: bit k keeps kind k (< 64); 0 = every kind */
    const char *tensor;  /* --tensor NAME|ID[@STEP] */
    const char *out;     /* --out FILE.npy */
    int raw;             /* --raw: bf16 as its '<u2' bits in .npy (default: exact '<f4') */
    int64_t replay_seq;  /* --replay-op SEQ */
    double rtol, atol;   /* --rtol, --atol for --replay-op */
    uint64_t leak_min_bytes; /* --check: a site holding this much at the end in several blocks
                          * is a leak without growth (--leak-min-bytes); 0 = off */
    detect_opts chk;        /* --check: the detectors' thresholds (--threshold NAME=VALUE) */
    const char *extract_out; /* --extract IN OUT: OUT (path = IN) */
    const char *ranks_list;  /* --ranks LIST (--extract; --export parses it into ranges) */
    int stats_to;        /* --stats (--extract): TFT_STATS_* to reduce to, -1 as recorded */
    int export_format;   /* --export FORMAT OUT: enum export_format (export.h) */
    const char *export_out; /* ... OUT, "-" = stdout */
    const char *html_out;   /* --html FILE */
    unsigned file_mode;  /* --mode / TFT_MODE: permission bits of what --extract, --export and --tensor --out
                          * write (directories: x added where r); 0: 0600 (0700) */
    int nranges;         /* --ranks LIST (--export; and --rank R): inclusive ranges */
    int32_t ranges[32][2];
} dump_opts;

/* ---- the command line (dump_args.c, dump_usage.c) ------------------------ */

/* Fills *o from argv. Returns DUMP_OK, DUMP_USAGE (after a message), or -1
 * (--help or --version shown: exit 0). */
int dump_parse_args(int argc, char **argv, dump_opts *o);
/* tfdump --help on f. */
void dump_usage(FILE *f);

/* ---- diagnostics (dump_util.c) ------------------------------------------ */

/* Collects the format library's ERROR/WARN messages. While `hold` is set the
 * messages are only kept (they are printed once the caller knows whether the
 * trace opened); otherwise each is also echoed to stderr as "tfdump: MSG".
 * Messages repeated verbatim are kept once; past DUMP_LOG_KEEP messages the
 * rest are only counted, so a badly damaged trace cannot flood the output. */
#define DUMP_LOG_KEEP 100
typedef struct dump_log {
    char **msgs;         /* owned copies, in arrival order */
    size_t n, cap;
    size_t more;         /* messages past DUMP_LOG_KEEP, counted only */
    int hold;
} dump_log;

void dump_log_fn(void *ctx, int level, const char *msg);
void dump_log_echo(const dump_log *l, size_t from); /* to stderr, prefixed */
void dump_log_free(dump_log *l);

/* Prints "tfdump: MESSAGE" on stderr. */
void dump_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "tfdump: PATH: WHAT needs more memory than allowed (the address space is
 * limited to N MiB (ulimit -v)); ..." for an allocation that failed. */
void dump_nomem(const char *path, const char *what);
/* The message for a failed read of a rank file: dump_nomem for -ENOMEM,
 * "NAME: read error: ..." otherwise. Returns DUMP_USAGE. */
int dump_read_error(const char *path, const char *name, int e);

/* ---- stdout (dump_util.c) -------------------------------------------------- */

/* Output to stdout goes through stdio; SIGPIPE is ignored at start. dump_out_ok()
 * returns false once a write failed (the reader went away: stop producing).
 * dump_out_finish() flushes and turns the mode's status into the exit status: a
 * closed pipe is a quiet success, any other write error is reported. */
void dump_out_init(void);
bool dump_out_ok(void);
int dump_out_finish(int status);
/* Prints a cJSON value as one line; returns false when stdout failed. */
bool dump_out_json_line(const cJSON *j);

/* ---- the opened trace (dump_trace.c) -------------------------------------- */

typedef struct dump_trace {
    tft_trace *t;        /* NULL when unrecorded */
    int n;               /* rank files */
    char **names;        /* display name of each rank file (owned) */
    dump_log log;
    bool unrecorded;     /* a trace directory with a manifest and no rank file: the
                          * command recorded nothing (killed before its first record) */
    tft_manifest manifest; /* when unrecorded: what the manifest knows (owned) */
} dump_trace;

/* Opens o->path with the log collecting messages. On failure prints what the
 * library said (or a generic message) and returns DUMP_USAGE. A directory
 * whose manifest.json reads and that holds no rank file opens as an
 * unrecorded trace (d->t NULL, d->unrecorded set): see dump_unrecorded. */
int dump_trace_open(dump_trace *d, const dump_opts *o);
void dump_trace_close(dump_trace *d);
/* Checks the rank files against manifest.json (every listed rank present,
 * same run id); each problem goes to d->log. Returns the number found. */
int dump_trace_check(dump_trace *d, const char *path);
const char *dump_integrity_name(int integrity); /* complete / torn / damaged */
/* A rank file header's run id as the manifest writes it: 32 hex digits. */
void dump_run_id_hex(const uint8_t id[16], char out[33]);
/* The first collector of the manifest that did not finish, NULL when every
 * one did (or the manifest lists none: an in-process trace, an old one). */
const tft_manifest_collector *dump_collector_unfinished(const tft_manifest *m);
/* "finished", "running", "died", "unknown", or NULL without collectors. */
const char *dump_collector_state(const tft_manifest *m);

/* ---- record rendering (dump_text.c, dump_json.c) -------------------------- */

/* The record's name (op, tensor, collective, kernel name; alloc site;
 * checkpoint path) or NULL for kinds without one. */
const char *dump_rec_name(const tft_rec *rec, const tft_reader *r, char buf[18]);
/* "tensor", "op", ... or "unknown(N)"; buf must hold 24 bytes. */
const char *dump_rec_kind_label(uint16_t kind, char buf[24]);
const char *dump_proc_event_name(uint32_t event);   /* start / exit / rss / ? */

void dump_rec_text(FILE *f, const tft_rec *rec, int rank, const tft_reader *r);
cJSON *dump_rec_json(const tft_rec *rec, int rank, const tft_reader *r);

/* A string, or null for NULL (dump_util.c; the integers: core_json.h). */
void dump_json_str_or_null(cJSON *o, const char *key, const char *s);
/* [a, b] as exact integers, or null when a is `none` (TFT_STEP_NONE, TFT_SEQ_NONE). */
cJSON *dump_json_range(int64_t a, int64_t b, int64_t none);

/* ---- collective calls (dump_coll.c) ---------------------------------------- */

/* Counts collective calls across the ranks of a summary pass and keeps the
 * ones that were entered and never returned (an ENTER record without its
 * EXIT: the rank hung in the call, or died in it). A call is one EXIT record,
 * one record without ENTER/EXIT flags (written after the call), or one
 * unmatched ENTER. Ranks are fed one after the other: dump_coll_rank_begin, the
 * rank's records (dump_coll_note), dump_coll_rank_end while its reader is still open
 * (it names the calls left open).
 *
 * Bounds (a trace is untrusted): at most COLL_INFLIGHT_MAX calls in flight
 * per rank are tracked (a hash on communicator and sequence number, O(1)
 * per record); ENTERs beyond are counted, not kept. At most COLL_KEEP
 * unfinished calls are kept for the report over the whole trace; the rest
 * are counted (coll_track.unshown). */
#define COLL_INFLIGHT_MAX 65536
#define COLL_KEEP 4096

typedef struct coll_open {
    uint64_t comm, coll_seq, name;
    int64_t step;
    int idx;             /* rank file index */
    uint32_t count;      /* ENTERs of this (comm, coll_seq) in flight (1 but for repeats) */
    uint64_t serial;     /* order of its first ENTER in the rank */
    bool named;          /* name_text holds the API name (false: the record names none) */
    char name_text[72];  /* the API name as the rank file defines it, resolved at dump_coll_rank_end */
} coll_open;

typedef struct coll_track {
    coll_open *open;     /* unmatched ENTERs of the ranks read, in order (at most COLL_KEEP) */
    size_t n, cap;
    tft_u64map fly;      /* the rank being read: calls in flight, (comm, coll_seq) -> coll_open */
    uint64_t serial;
    uint64_t calls;      /* completed calls so far */
    uint64_t lost;       /* unmatched ENTERs not kept (beyond COLL_INFLIGHT_MAX, or no memory) */
    uint64_t rank_lost;  /* ... of the rank being read: an EXIT matching none completes one */
    uint64_t unshown;    /* unfinished calls beyond COLL_KEEP, counted only */
} coll_track;

void dump_coll_init(coll_track *t); /* before the first rank */
void dump_coll_rank_begin(coll_track *t);
void dump_coll_note(coll_track *t, const tft_rec_collective *c, int idx);
/* Ends the rank: its calls still in flight become unfinished ones, named
 * through r (the rank's reader, still open). Returns 0 or -ENOMEM. */
int dump_coll_rank_end(coll_track *t, const tft_reader *r);
uint64_t dump_coll_calls(const coll_track *t); /* completed + unfinished */
void dump_coll_free(coll_track *t);

/* ---- modes ----------------------------------------------------------------- */

int dump_summary(dump_trace *d, const dump_opts *o);
int dump_events(dump_trace *d, const dump_opts *o);
int dump_verify(dump_trace *d, const dump_opts *o);
/* --compact (dump_compact.c): each --keep-steps rank file rewritten without
 * its retired chunks' holes and shadowed kept chunks (FORMAT.md §3.6), as
 * the writer does at close; one line per file. Refused while the trace's
 * collector still records. DUMP_OK, or DUMP_FINDINGS when a file could
 * not be compacted (left as it was). */
int dump_compact(dump_trace *d, const dump_opts *o);
int dump_chunks(dump_trace *d, const dump_opts *o);
int dump_check(dump_trace *d, const dump_opts *o); /* dump_check.c */
/* The process table(s) of trace directory dir (processes-PID.json,
 * dump_procs.c): text lines for the summary, or the "processes" key (null
 * when none). Nothing for a rank file or a trace without one. */
void dump_procs_text(const char *dir);
void dump_procs_json(cJSON *j, const char *dir);

/* The summary's clocks per rank (dump_clock.c, docs/MULTINODE.md "Clocks
 * across hosts"): what its CLOCK records said (NTP state and bound, realtime
 * steps) and the manifest's MPI estimate. */
typedef struct dump_clock_sum {
    bool seen;           /* a CLOCK record was read */
    uint32_t ntp;        /* enum tft_clock_ntp of the last one */
    uint64_t maxerror_ns; /* its NTP bound (synchronised) */
    uint32_t steps;      /* realtime steps of more than 1 ms (realtime - monotonic changed) */
    int64_t step_max;    /* the largest in magnitude, ns */
    int64_t real_minus_mono; /* of the last pair (the header's before any) */
} dump_clock_sum;
void dump_clock_begin(dump_clock_sum *c, const tft_file_info *fi);
void dump_clock_note(dump_clock_sum *c, const tft_rec *rec);
/* Whether the summary shows "clocks" lines, one per rank file: when the
 * trace spans several hosts or a rank's realtime was stepped (any_step). */
bool dump_clock_shown(dump_trace *d, bool any_step);
/* Rank file i's "clocks" line (first: the first line, which names it). */
void dump_clock_line(dump_trace *d, int i, const dump_clock_sum *c, bool first);
/* Rank file i's "clock" object for the JSON summary. */
cJSON *dump_clock_json(dump_trace *d, int i, const dump_clock_sum *c);

/* --check's analyses into out (messages on stderr on failure). Returns
 * DUMP_OK or DUMP_USAGE; report_check_result_free frees out either way. */
int dump_check_collect(dump_trace *d, const dump_opts *o, report_check_result *out);
/* tfdump --html FILE TRACE: the single-trace page (dump_html.c). Returns
 * --check's status (0 nothing found, 1 findings), 2 when it cannot be
 * written or the trace read. */
int dump_html(dump_trace *d, const dump_opts *o);
int dump_tensor(dump_trace *d, const dump_opts *o);   /* dump_capture.c: --tensor */
int dump_captures(dump_trace *d, const dump_opts *o); /* dump_capture.c: --captures */
int dump_replay(dump_trace *d, const dump_opts *o);   /* dump_replay.c: --replay-op */
int dump_extract(dump_trace *d, const dump_opts *o);  /* extract.c: --extract IN OUT */
int dump_export(dump_trace *d, const dump_opts *o);   /* dump_export.c: --export FORMAT OUT */
/* The summary's "extract ..." line of a trace written by --extract (its
 * manifest's `extract` object); nothing for other traces. */
void dump_extract_describe(const char *path, FILE *f);
int dump_extract_ranks_kept(const char *path);
/* Every mode on an unrecorded trace (dump_summary.c): the summary shows what
 * the manifest knows and says nothing was recorded (0); --verify checks the
 * manifest lists no rank (0, else 1: the listed files are lost); --check
 * has nothing to check (1); --events, --chunks, --captures print nothing
 * (0); --tensor and --replay-op find nothing (2). */
int dump_unrecorded(dump_trace *d, const dump_opts *o);

#endif
