/*
 * mk_old_drops.c — a rank file as format 1.3 wrote it for a lossy run:
 * steps 0..9, one tensor each, and in step 5 a DROPPED record of 48 bytes
 * (count 7, neither kinds nor steps: those came with 1.4), the chunk's
 * dropped count 7, the header's version 1.3. Readers of 1.4 must read it
 * and say what they cannot know.
 *   mk_old_drops DIR     writes DIR/rank-00000.tft (DIR must exist)
 */
#include "tft_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static int put(tft_writer *w, tft_rec *h, uint16_t kind, uint32_t len, int64_t step, int64_t seq, uint64_t ts)
{
    h->kind = kind;
    h->len = len;
    h->ts = ts;
    h->step = step;
    h->seq = seq;
    return tft_writer_append(w, h);
}

/* The header frame as a 1.3 writer made it: version 1.3, checksum redone
 * (FORMAT.md §3: u16 major at 16, minor at 18, XXH3 of bytes 8..140 at 140). */
static int patch_minor(const char *path, uint16_t minor)
{
    FILE *f = fopen(path, "r+b");
    unsigned char b[160];
    if (!f || fread(b, 1, sizeof(b), f) != sizeof(b))
        return f ? fclose(f), -1 : -1;
    memcpy(b + 18, &minor, 2);
    uint32_t sum = (uint32_t)XXH3_64bits(b + 8, 132);
    memcpy(b + 140, &sum, 4);
    int e = fseek(f, 0, SEEK_SET) || fwrite(b, 1, sizeof(b), f) != sizeof(b);
    return fclose(f) || e ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mk_old_drops DIR\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/rank-00000.tft", argv[1]);
    tft_file_info info = {.rank = 0, .world_size = 1, .pid = 42};
    tft_writer *w = tft_writer_open(path, &info, NULL);
    if (!w)
        return perror(path), 1;
    int e = 0;
    for (int64_t s = 0; s < 10 && !e; s++) {
        tft_rec_step st = {.phase = TFT_STEP_BEGIN};
        tft_rec_op op = {.name = tft_writer_string(w, "x", 1), .op_kind = TFT_OP_RUNTIME};
        tft_rec_tensor t = {.id = (uint64_t)s + 1, .name = op.name, .dtype = TFT_F32, .ndim = 1, .shape = {4}};
        t.stats.numel = 4;
        e = put(w, &st.h, TFT_REC_STEP, sizeof(st), s, TFT_SEQ_NONE, 100 + (uint64_t)s * 10);
        if (!e)
            e = put(w, &op.h, TFT_REC_OP, sizeof(op), s, s, 101 + (uint64_t)s * 10);
        if (!e)
            e = put(w, &t.h, TFT_REC_TENSOR, sizeof(t), s, s, 102 + (uint64_t)s * 10);
        if (!e && s == 5) {
            tft_rec_dropped d = {.count = 7, .reason = TFT_DROP_RING_FULL};
            e = put(w, &d.h, TFT_REC_DROPPED, TFT_REC_DROPPED_MIN_BYTES, TFT_STEP_NONE, TFT_SEQ_NONE,
                    103 + (uint64_t)s * 10);
            tft_writer_add_dropped(w, 7);
        }
    }
    if (tft_writer_close(w) || e || patch_minor(path, 3))
        return fprintf(stderr, "mk_old_drops: %s: cannot write\n", path), 1;
    return 0;
}
