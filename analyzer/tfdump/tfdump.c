/*
 * tfdump — inspect a tftrace trace: summary, events, verification, chunks,
 * captured tensors (to .npy) and the replay of a captured op.
 *
 * main parses the command line (dump_args.c) and wires the parts
 * (dump_*.c, dump_internal.h); see dump_usage.c for the interface and its
 * exit statuses. The trace is untrusted input: every problem with it is a
 * message and an exit status, never a crash, and memory stays bounded by a
 * few chunks per rank file.
 */
#include "core_escape.h"
#include "dump_internal.h"

#include <unistd.h>

static int run(const dump_opts *o)
{
    dump_trace d;
    int status = dump_trace_open(&d, o);
    if (status)
        return status;
    if (o->mode != MODE_VERIFY) {
        dump_log_echo(&d.log, 0); /* warnings about a torn or damaged trace */
        d.log.hold = 0;
    }
    if (d.unrecorded && o->mode == MODE_EXTRACT) {
        dump_err("%s: the trace recorded nothing (a manifest and no rank file): nothing to extract", o->path);
        dump_trace_close(&d);
        return DUMP_USAGE;
    }
    if (d.unrecorded) {
        status = dump_unrecorded(&d, o);
        dump_trace_close(&d);
        return status;
    }
    switch (o->mode) {
    case MODE_EVENTS: status = dump_events(&d, o); break;
    case MODE_VERIFY: status = dump_verify(&d, o); break;
    case MODE_COMPACT: status = dump_compact(&d, o); break;
    case MODE_CHUNKS: status = dump_chunks(&d, o); break;
    case MODE_CHECK: status = dump_check(&d, o); break;
    case MODE_HTML: status = dump_html(&d, o); break;
    case MODE_TENSOR: status = dump_tensor(&d, o); break;
    case MODE_CAPTURES: status = dump_captures(&d, o); break;
    case MODE_REPLAY: status = dump_replay(&d, o); break;
    case MODE_EXTRACT: status = dump_extract(&d, o); break;
    case MODE_EXPORT: status = dump_export(&d, o); break;
    default: status = dump_summary(&d, o); break;
    }
    dump_trace_close(&d);
    return status;
}

int main(int argc, char **argv)
{
    dump_opts o;
    dump_out_init();
    int status = dump_parse_args(argc, argv, &o);
    if (status < 0)
        return dump_out_finish(DUMP_OK);
    if (status)
        return status;
    /* strings from the trace never reach the output raw (an export escapes
     * its own JSON, and may be binary) */
    if (o.mode != MODE_EXPORT)
        core_escape_stdout(o.json);
    return dump_out_finish(run(&o));
}
