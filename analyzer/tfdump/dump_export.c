/*
 * dump_export.c — tfdump --export FORMAT OUT TRACE: the export room's
 * export_run (export.h) with tfdump's options, its messages on stderr as
 * "tfdump: MESSAGE", and its exit statuses.
 */
#include "dump_internal.h"
#include "export.h"
#include "export_tensorboard.h"
#include "report_check.h"

#include <stdio.h>
#include <stdlib.h>

#include <errno.h>

static void say(void *ctx, int level, const char *msg)
{
    (void)ctx, (void)level;
    dump_err("%s", msg);
}

/* --export tensorboard DIR: the scalars of every selected rank, and
 * --check's report as a text at its first finding's step. */
static int tensorboard(dump_trace *d, const dump_opts *o, const export_opts *eo)
{
    report_check_result res = {0};
    if (dump_check_collect(d, o, &res) != DUMP_OK) {
        report_check_result_free(&res);
        return -EIO;
    }
    char *text = NULL, *md = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        char verdict[1024];
        report_check_verdict(&res, verdict, sizeof(verdict));
        report_check_text(f, &res, d->t);
        fclose(f);
    }
    int rank;
    int64_t step = report_check_first_step(&res, &rank);
    md = text ? export_tb_markdown_block(text) : NULL;
    int e = md ? export_tensorboard(d->t, eo, o->export_out, "tftrace/check", md, step) : -ENOMEM;
    free(md);
    free(text);
    report_check_result_free(&res);
    return e;
}

int dump_export(dump_trace *d, const dump_opts *o)
{
    export_opts eo = {.format = o->export_format, .out = o->export_out, .mode = o->file_mode, .path = o->path, .rank = o->rank,
                      .nranges = o->nranges, .ranges = o->ranges, .have_steps = o->have_steps != 0,
                      .step_lo = o->step_lo, .step_hi = o->step_hi, .log = say};
    int e = o->export_format == EXP_TENSORBOARD ? tensorboard(d, o, &eo) : export_run(d->t, &eo);
    if (e == -ENOMEM)
        dump_nomem(o->path, "the export");
    return e ? DUMP_USAGE : DUMP_OK;
}
