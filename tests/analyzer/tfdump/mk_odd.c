/*
 * mk_odd — writes one rank file (OUT.tft) of records that are well formed
 * but odd, for t_odd.sh: a kind this build does not know, string ids without
 * definitions, enumerations out of range, a name with a newline in it, and
 * dropped counts as a record (5) and in the chunk header (its 5 + 3 more).
 *
 *   mk_odd OUT.tft     (exit 0 when written)
 *
 * Expected by the test: 9 records; dropped total 8 (the chunk header's
 * count: the DROPPED record's 5 plus 3 without a record); one record of kind "unknown(200)" with len 48; a
 * tensor named #1234abcd5678ef00 at step 7.
 */
#include "tft_format.h"

#include <stdio.h>
#include <string.h>

static int put(tft_writer *w, tft_rec *h, uint16_t kind, size_t len, int64_t step)
{
    h->kind = kind;
    h->len = (uint32_t)len;
    h->ts = 1000u + (uint64_t)kind;
    h->step = step;
    h->seq = TFT_SEQ_NONE;
    return tft_writer_append(w, h);
}

static int odd_ops(tft_writer *w)
{
    uint64_t buf[(sizeof(tft_rec_op) + 5 * 8) / 8];
    tft_rec_op *o = (tft_rec_op *)buf;
    memset(buf, 0, sizeof(buf));
    o->name = tft_writer_string(w, "weird\nname", 10);
    o->scope = 0x00000000deadbeefull; /* never defined */
    o->op_kind = 999;
    o->n_in = 3;
    o->n_attr = 2;
    o->ids[0] = 1, o->ids[1] = 2, o->ids[2] = UINT64_MAX;
    o->ids[3] = (uint64_t)-5, o->ids[4] = 42;
    int e = put(w, &o->h, TFT_REC_OP, sizeof(buf), 7);

    tft_rec_collective c;
    memset(&c, 0, sizeof(c));
    c.type = 99, c.dtype = 99, c.redop = 99, c.root = -1, c.nranks = 1;
    c.t_enter = 10, c.t_exit = 5; /* exit before enter: clocks disagree */
    return e ? e : put(w, &c.h, TFT_REC_COLLECTIVE, sizeof(c), 7);
}

static int odd_records(tft_writer *w)
{
    tft_rec_process p = {.event = TFT_PROC_START, .pid = 42};
    int e = put(w, &p.h, TFT_REC_PROCESS, sizeof(p), TFT_STEP_NONE);

    uint64_t unk[6] = {0};
    if (!e)
        e = put(w, (tft_rec *)unk, 200, sizeof(unk), TFT_STEP_NONE);

    tft_rec_tensor t;
    memset(&t, 0, sizeof(t));
    t.name = 0x1234abcd5678ef00ull; /* never defined */
    t.dtype = 200, t.mode = 7, t.device_kind = 9, t.ndim = TFT_MAX_NDIM;
    for (int i = 0; i < TFT_MAX_NDIM; i++)
        t.shape[i] = i % 2 ? INT64_MAX : -1;
    if (!e)
        e = put(w, &t.h, TFT_REC_TENSOR, sizeof(t), 7);
    if (!e)
        e = odd_ops(w);

    tft_rec_step s = {.phase = 5};
    tft_rec_dropped d = {.count = 5, .reason = 9};
    tft_rec_process q = {.event = 9, .pid = 42};
    tft_rec_process x = {.event = TFT_PROC_EXIT, .pid = 42, .exit_code = 3};
    if (!e)
        e = put(w, &s.h, TFT_REC_STEP, sizeof(s), 7);
    if (!e)
        e = put(w, &d.h, TFT_REC_DROPPED, sizeof(d), 7);
    if (!e)
        e = put(w, &q.h, TFT_REC_PROCESS, sizeof(q), TFT_STEP_NONE);
    if (!e)
        e = put(w, &x.h, TFT_REC_PROCESS, sizeof(x), TFT_STEP_NONE);
    return e;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mk_odd OUT.tft\n");
        return 2;
    }
    tft_file_info info = {.rank = 0, .world_size = 1, .pid = 42};
    tft_writer *w = tft_writer_open(argv[1], &info, &TFT_WRITER_OPTS(.sync = 0));
    if (!w) {
        perror(argv[1]);
        return 1;
    }
    int e = odd_records(w);
    tft_writer_add_dropped(w, 5 + 3);
    int ce = tft_writer_close(w);
    if (e || ce) {
        fprintf(stderr, "mk_odd: %s: write failed (%d, %d)\n", argv[1], e, ce);
        return 1;
    }
    return 0;
}
