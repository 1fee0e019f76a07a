/*
 * test_kinds.c — the table of record kinds (tft_rec_kind, formats/src/
 * record.c): every kind of tft_format.h has a row that agrees with the
 * other calls and with the structs (string fields inside the fixed part,
 * 8-byte aligned, the label one of them), tft_rec_string_ids reads the ids
 * a record holds, and the flags say what the tools rely on (a new kind
 * without a row, or with its strings wrong, fails here).
 */
#include "tft_format.h"
#include "tft_test.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static void test_rows(void)
{
    for (uint16_t k = 1; k < TFT_REC_KIND_MAX; k++) {
        const tft_rec_kind_info *x = tft_rec_kind(k);
        CHECKF(x != NULL, "kind %u has no row", k);
        if (!x)
            continue;
        CHECKF(!strcmp(x->name, tft_rec_kind_name(k)), "kind %u: %s vs %s", k, x->name, tft_rec_kind_name(k));
        CHECKF(x->min_size == tft_rec_min_size(k) && x->min_size >= sizeof(tft_rec), "kind %u size", k);
        CHECKF(x->n_strings >= 0 && x->n_strings <= TFT_REC_STRINGS, "kind %u: %d strings", k, x->n_strings);
        CHECKF(x->label >= -1 && x->label < x->n_strings, "kind %u: label %d", k, x->label);
        for (int i = 0; i < x->n_strings; i++) {
            CHECKF(x->string_offset[i] % 8 == 0 && x->string_offset[i] >= sizeof(tft_rec) &&
                       x->string_offset[i] + 8 <= x->min_size,
                   "kind %s: string %d at %u", x->name, i, x->string_offset[i]);
            CHECKF(x->string_field[i] && x->string_field[i][0], "kind %s: string %d unnamed", x->name, i);
        }
        for (uint16_t j = 1; j < k; j++)
            CHECKF(strcmp(tft_rec_kind(j)->name, x->name) != 0, "kinds %u and %u share a name", j, k);
    }
    CHECK(tft_rec_kind(0) == NULL);
    CHECK(tft_rec_kind(TFT_REC_KIND_MAX) == NULL);
    CHECK(tft_rec_kind(0xffff) == NULL);
    CHECK(tft_rec_min_size(TFT_REC_KIND_MAX) == 0);
    CHECK(!strcmp(tft_rec_kind_name(TFT_REC_KIND_MAX), "?"));
}

/* The strings each kind names, by field, as the structs have them. */
static void test_string_fields(void)
{
    const tft_rec_kind_info *op = tft_rec_kind(TFT_REC_OP);
    CHECK(op->n_strings == 2 && op->label == 0);
    CHECK(op->string_offset[0] == offsetof(tft_rec_op, name) && !strcmp(op->string_field[0], "name"));
    CHECK(op->string_offset[1] == offsetof(tft_rec_op, scope) && !strcmp(op->string_field[1], "scope"));
    const tft_rec_kind_info *st = tft_rec_kind(TFT_REC_STACK);
    CHECK(st->n_strings == 4 && !strcmp(st->string_field[st->label], "summary"));
    CHECK(tft_rec_kind(TFT_REC_ALLOC)->string_offset[0] == offsetof(tft_rec_alloc, site));
    CHECK(tft_rec_kind(TFT_REC_CHECKPOINT)->n_strings == 2);
    CHECK(tft_rec_kind(TFT_REC_EXCEPTION)->n_strings == 4 &&
          tft_rec_kind(TFT_REC_EXCEPTION)->string_offset[2] == offsetof(tft_rec_exception, where));
    CHECK(tft_rec_kind(TFT_REC_FREE)->n_strings == 0 && tft_rec_kind(TFT_REC_FREE)->label == -1);

    tft_rec_stack s;
    memset(&s, 0, sizeof(s));
    s.h.kind = TFT_REC_STACK;
    s.h.len = sizeof(s);
    s.comm = 11, s.summary = 22, s.frames = 33, s.note = 44;
    uint64_t ids[TFT_REC_STRINGS] = {0};
    CHECK(tft_rec_string_ids(&s.h, ids) == 4);
    CHECK(ids[0] == 11 && ids[1] == 22 && ids[2] == 33 && ids[3] == 44);
    tft_rec_tensor t;
    memset(&t, 0, sizeof(t));
    t.h.kind = TFT_REC_TENSOR;
    t.h.len = sizeof(t);
    t.name = 0x1234;
    CHECK(tft_rec_string_ids(&t.h, ids) == 1 && ids[0] == 0x1234);
    tft_rec u = {.kind = TFT_REC_KIND_MAX + 3, .len = sizeof(tft_rec)};
    CHECK(tft_rec_string_ids(&u, ids) == 0);
}

/* What the analyzers read off the flags. */
static void test_flags(void)
{
    static const uint16_t substance[] = {TFT_REC_STEP,       TFT_REC_OP,     TFT_REC_TENSOR,     TFT_REC_ALLOC,
                                         TFT_REC_FREE,       TFT_REC_COLLECTIVE, TFT_REC_KERNEL, TFT_REC_CHECKPOINT,
                                         TFT_REC_CAPTURE,    TFT_REC_COMM,   TFT_REC_EXCEPTION};
    static const uint16_t bookkeeping[] = {TFT_REC_STRING, TFT_REC_PROCESS, TFT_REC_DROPPED, TFT_REC_THREAD,
                                           TFT_REC_SYNC,   TFT_REC_STACK,   TFT_REC_CLOCK};
    for (size_t i = 0; i < sizeof(substance) / sizeof(substance[0]); i++)
        CHECKF(tft_rec_kind(substance[i])->flags & TFT_KIND_SUBSTANCE, "%s", tft_rec_kind_name(substance[i]));
    for (size_t i = 0; i < sizeof(bookkeeping) / sizeof(bookkeeping[0]); i++)
        CHECKF(!(tft_rec_kind(bookkeeping[i])->flags & TFT_KIND_SUBSTANCE), "%s",
               tft_rec_kind_name(bookkeeping[i]));
    CHECK(sizeof(substance) / sizeof(substance[0]) + sizeof(bookkeeping) / sizeof(bookkeeping[0]) ==
          TFT_REC_KIND_MAX - 1);
    for (uint16_t k = 1; k < TFT_REC_KIND_MAX; k++)
        CHECKF(!(tft_rec_kind(k)->flags & TFT_KIND_RUN_LONG) == (k != TFT_REC_COMM), "%s run-long",
               tft_rec_kind_name(k));
}

int main(void)
{
    test_rows();
    test_string_fields();
    test_flags();
    return TEST_DONE();
}
