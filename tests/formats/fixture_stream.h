/*
 * fixture_stream.h — the record stream of the committed old-format fixture
 * (fixtures/format-1.3.tft), so a test can rebuild the records the old
 * writer was given and compare them with what today's reader returns.
 *
 * 6 steps; per step a STEP begin, 40 OP + TENSOR (FULL statistics) pairs,
 * an ALLOC and a FREE, a COLLECTIVE and a STEP end: 508 records, two chunks
 * of at most 64 KiB. Deterministic (a fixed xorshift). Header-only, static:
 * included by test_format.c and gen_fixture.c.
 */
#ifndef TFT_FIXTURE_STREAM_H
#define TFT_FIXTURE_STREAM_H

#include "tft_format.h"

#include <string.h>

#define FIXTURE_STEPS 6
#define FIXTURE_TENSORS 40
#define FIXTURE_RECORDS (FIXTURE_STEPS * (2 * FIXTURE_TENSORS + 5))

typedef int (*fixture_emit)(void *ctx, const tft_rec *rec);

static uint64_t fixture_rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Calls emit with each record in order; names[i] are the string ids of
 * "w0".."w39" and names[40] of "MPI_Allreduce" (the caller registers them).
 * Returns the first nonzero emit result, or 0. */
static int fixture_stream(const uint64_t names[FIXTURE_TENSORS + 1], fixture_emit emit, void *ctx)
{
    uint64_t rng = 0x9e3779b97f4a7c15ull, ts = 5000;
    _Alignas(8) char buf[512];
    int64_t seq = 0;
    int e = 0;
#define FIX_HDR(T, K, S, SQ) \
    memset(buf, 0, sizeof(buf)); \
    T *r = (T *)buf; \
    r->h.kind = K, r->h.len = sizeof(T), r->h.ts = ts += 100 + fixture_rnd(&rng) % 900, \
    r->h.step = S, r->h.seq = SQ
    for (int64_t step = 0; step < FIXTURE_STEPS && !e; step++) {
        {
            FIX_HDR(tft_rec_step, TFT_REC_STEP, step, TFT_SEQ_NONE);
            r->phase = TFT_STEP_BEGIN;
            e = emit(ctx, &r->h);
        }
        for (int i = 0; i < FIXTURE_TENSORS && !e; i++, seq++) {
            {
                memset(buf, 0, sizeof(buf));
                tft_rec_op *r = (tft_rec_op *)buf;
                r->h.kind = TFT_REC_OP, r->h.len = sizeof(*r) + 16 + 8 * (uint32_t)(i % 3);
                r->h.ts = ts += 100 + fixture_rnd(&rng) % 900, r->h.step = step, r->h.seq = seq;
                r->name = names[i], r->op_kind = TFT_OP_GEMM, r->n_in = 1, r->n_out = 1;
                r->n_attr = (uint8_t)(i % 3);
                r->ids[0] = 2 * (uint64_t)seq + 1, r->ids[1] = 2 * (uint64_t)seq + 2;
                for (int a = 0; a < i % 3; a++)
                    r->ids[2 + a] = 64 << a;
                e = emit(ctx, &r->h);
            }
            if (e)
                break;
            FIX_HDR(tft_rec_tensor, TFT_REC_TENSOR, step, seq);
            r->id = 2 * (uint64_t)seq + 2, r->name = names[i], r->dtype = TFT_F32;
            r->mode = TFT_STATS_FULL, r->ndim = 2, r->shape[0] = 64, r->shape[1] = 16 + i;
            r->stats.numel = 64 * (uint64_t)(16 + i);
            r->stats.zero = fixture_rnd(&rng) % 10;
            r->stats.fingerprint = fixture_rnd(&rng);
            r->stats.mean = (double)(int64_t)(fixture_rnd(&rng) % 2000 - 1000) / 4096.0;
            r->stats.std = 1.0 + (double)(fixture_rnd(&rng) % 1000) / 1e4;
            r->stats.min = r->stats.mean - 4 * r->stats.std, r->stats.max = r->stats.mean + 4 * r->stats.std;
            r->stats.absmax = r->stats.max > -r->stats.min ? r->stats.max : -r->stats.min;
            r->stats.l1 = r->stats.std * 0.8 * (double)r->stats.numel, r->stats.l2 = r->stats.std * 32;
            e = emit(ctx, &r->h);
        }
        if (e)
            break;
        {
            FIX_HDR(tft_rec_alloc, TFT_REC_ALLOC, step, seq);
            r->ptr = 0x7f0000001000ull + (uint64_t)step * 4096, r->bytes = 4096, r->site = names[0];
            if ((e = emit(ctx, &r->h)))
                break;
        }
        {
            FIX_HDR(tft_rec_free, TFT_REC_FREE, step, seq);
            r->ptr = 0x7f0000001000ull + (uint64_t)step * 4096, r->bytes = 4096;
            if ((e = emit(ctx, &r->h)))
                break;
        }
        {
            FIX_HDR(tft_rec_collective, TFT_REC_COLLECTIVE, step, seq++);
            r->h.flags = TFT_COLL_FLAG_EXIT;
            r->comm = 0x1234, r->coll_seq = (uint64_t)step, r->count = 1024, r->t_enter = ts - 50,
            r->t_exit = ts, r->name = names[FIXTURE_TENSORS], r->type = TFT_COLL_ALLREDUCE,
            r->dtype = TFT_F32, r->redop = TFT_REDOP_SUM, r->root = -1, r->rank = 0, r->nranks = 2;
            if ((e = emit(ctx, &r->h)))
                break;
        }
        {
            FIX_HDR(tft_rec_step, TFT_REC_STEP, step, TFT_SEQ_NONE);
            r->phase = TFT_STEP_END;
            e = emit(ctx, &r->h);
        }
    }
#undef FIX_HDR
    return e;
}

#endif
