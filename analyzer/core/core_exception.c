/*
 * core_exception.c — a rank's uncaught exception, read from its EXCEPTION
 * record and said in one sentence (core_exception.h).
 */
#include "core_exception.h"

#include <stdio.h>
#include <string.h>

static void copy_field(char *dst, size_t n, const tft_reader *r, uint64_t id, bool first_line)
{
    char buf[18];
    const char *s = core_rec_string(r, id, buf);
    snprintf(dst, n, "%s", s ? s : "");
    if (first_line)
        dst[strcspn(dst, "\r\n")] = '\0';
}

void core_exception_take(core_exception *x, const tft_reader *r, const tft_rec *rec)
{
    if (x->known || rec->kind != TFT_REC_EXCEPTION || rec->len < sizeof(tft_rec_exception))
        return;
    const tft_rec_exception *e = (const tft_rec_exception *)rec;
    x->known = true;
    x->step = rec->step;
    copy_field(x->type, sizeof(x->type), r, e->type, true);
    copy_field(x->where, sizeof(x->where), r, e->where, true);
    copy_field(x->message, sizeof(x->message), r, e->message, true);
    if (!x->type[0])
        snprintf(x->type, sizeof(x->type), "an exception");
}

const char *core_exception_text(const core_exception *x, char *buf, size_t n)
{
    char sb[48];
    snprintf(buf, n, "%s at %s%s%s%s%s", x->type, core_step_text(x->step, sb, sizeof(sb)), x->where[0] ? " in " : "",
             x->where, x->message[0] ? ": " : "", x->message);
    return buf;
}
