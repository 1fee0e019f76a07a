/*
 * dump_export.c — tfdump --export FORMAT OUT TRACE: the export room's
 * export_run (export.h) with tfdump's options, its messages on stderr as
 * "tfdump: MESSAGE", and its exit statuses.
 */
#include "dump_internal.h"
#include "export.h"

#include <errno.h>

static void say(void *ctx, int level, const char *msg)
{
    (void)ctx, (void)level;
    dump_err("%s", msg);
}

int dump_export(dump_trace *d, const dump_opts *o)
{
    export_opts eo = {.format = o->export_format, .out = o->export_out, .mode = o->file_mode, .path = o->path, .rank = o->rank,
                      .nranges = o->nranges, .ranges = o->ranges, .have_steps = o->have_steps != 0,
                      .step_lo = o->step_lo, .step_hi = o->step_hi, .log = say};
    int e = export_run(d->t, &eo);
    if (e == -ENOMEM)
        dump_nomem(o->path, "the export");
    return e ? DUMP_USAGE : DUMP_OK;
}
