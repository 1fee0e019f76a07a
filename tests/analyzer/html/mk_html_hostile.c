/*
 * mk_html_hostile — writes one rank file whose names try to inject markup
 * into the HTML reports (tests/analyzer/html/run_html_test.sh): a tensor
 * and an allocation site named with a <script> element, an <img> with an
 * http: source, quotes, an ampersand and a newline.
 *
 *   mk_html_hostile OUT.tft golden|bad
 *
 * Steps 0..5, each a "loss" scalar and the hostile tensor (mean 1; in
 * "bad" from step 2 on mean 2: the first divergence, at step 2), the
 * block outputs transformer.h.0..2 (in "bad" from step 3 on 0.5 higher), and one
 * block of 1 MiB allocated at the hostile site per step in "bad" and never
 * freed (a leak). Exit status 0, or 1 with a message.
 */
#include "tft_format.h"

#include <stdio.h>
#include <string.h>

#define HOSTILE "<script>alert(\"x\")</script><img src=\"http://evil.example/x.png\" onerror=\"y\">&amp;'\nZ"

static void hdr(tft_rec *h, uint16_t kind, uint32_t len, int64_t step, int64_t seq, uint64_t ts)
{
    memset(h, 0, len);
    *h = (tft_rec){.kind = kind, .len = len, .ts = ts, .step = step, .seq = seq};
}

static int tensor(tft_writer *w, uint64_t name, int64_t step, int64_t seq, double mean, uint64_t id)
{
    tft_rec_tensor t;
    hdr(&t.h, TFT_REC_TENSOR, sizeof(t), step, seq, 1000 + (uint64_t)seq);
    t.id = id;
    t.name = name;
    t.dtype = TFT_F32;
    t.device = -1;
    t.mode = TFT_STATS_FULL;
    t.ndim = 1;
    t.shape[0] = 4;
    t.stats = (tft_stats){.numel = 4, .min = mean, .max = mean, .mean = mean, .absmax = mean, .l1 = 4 * mean,
                          .l2 = 2 * mean, .fingerprint = (uint64_t)(mean * 1000)};
    return tft_writer_append(w, &t.h);
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[2], "golden") && strcmp(argv[2], "bad"))) {
        fprintf(stderr, "usage: mk_html_hostile OUT.tft golden|bad\n");
        return 1;
    }
    int bad = !strcmp(argv[2], "bad");
    tft_file_info fi = {.rank = 0, .world_size = 1, .pid = 4242, .start_realtime_ns = 1700000000000000000ull,
                        .start_monotonic_ns = 1000};
    memcpy(fi.run_id, "html-hostile-run", 16);
    snprintf(fi.host, sizeof(fi.host), "hostile");
    tft_writer_opts wo = TFT_WRITER_OPTS(.zstd_level = 1, .sync = 0);
    tft_writer *w = tft_writer_open(argv[1], &fi, &wo);
    if (!w) {
        perror(argv[1]);
        return 1;
    }
    uint64_t hostile = tft_writer_string(w, HOSTILE, strlen(HOSTILE));
    uint64_t loss = tft_writer_string(w, "loss", 4);
    uint64_t op = tft_writer_string(w, "op" HOSTILE, strlen("op" HOSTILE));
    uint64_t blocks[3];
    for (int l = 0; l < 3; l++) {
        char b[32];
        int len = snprintf(b, sizeof(b), "transformer.h.%d", l);
        blocks[l] = tft_writer_string(w, b, (size_t)len);
    }
    int e = 0;
    int64_t seq = 0;
    for (int64_t s = 0; s < 6 && !e; s++) {
        tft_rec_step st;
        hdr(&st.h, TFT_REC_STEP, sizeof(st), s, TFT_SEQ_NONE, 1000 + (uint64_t)seq);
        st.phase = TFT_STEP_BEGIN;
        e = tft_writer_append(w, &st.h);
        uint64_t buf[(sizeof(tft_rec_op) + 8) / 8];
        tft_rec_op *o = (tft_rec_op *)buf;
        hdr(&o->h, TFT_REC_OP, sizeof(buf), s, seq, 1000 + (uint64_t)seq);
        o->name = op;
        o->n_out = 1;
        o->ids[0] = (uint64_t)seq + 1;
        if (!e)
            e = tft_writer_append(w, &o->h);
        if (!e)
            e = tensor(w, hostile, s, seq, bad && s >= 2 ? 2.0 : 1.0, (uint64_t)seq + 1);
        seq++;
        if (!e)
            e = tensor(w, loss, s, seq, 3.0 - 0.1 * (double)s, (uint64_t)seq + 1);
        seq++;
        /* a PyTorch model's block outputs (GPT-2's transformer.h.N): the
         * page draws a curve per layer for them */
        for (int l = 0; l < 3 && !e; l++, seq++)
            e = tensor(w, blocks[l], s, seq, 1.0 + 0.1 * l + (bad && s >= 3 ? 0.5 : 0.0), (uint64_t)seq + 1);
        if (!e && bad) {
            tft_rec_alloc a;
            hdr(&a.h, TFT_REC_ALLOC, sizeof(a), s, TFT_SEQ_NONE, 1000 + (uint64_t)seq);
            a.ptr = 0x100000 * (uint64_t)(s + 1);
            a.bytes = 1u << 20;
            a.site = hostile;
            a.device = -1;
            e = tft_writer_append(w, &a.h);
        }
        hdr(&st.h, TFT_REC_STEP, sizeof(st), s, TFT_SEQ_NONE, 1000 + (uint64_t)seq);
        st.phase = TFT_STEP_END;
        if (!e)
            e = tft_writer_append(w, &st.h);
    }
    if (tft_writer_close(w) || e) {
        fprintf(stderr, "mk_html_hostile: %s: cannot write\n", argv[1]);
        return 1;
    }
    return 0;
}
