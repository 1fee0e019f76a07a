/*
 * dump_verify.c — `tfdump --verify` (decompress every chunk of every rank
 * file and check every checksum and record structure, plus the manifest
 * cross-checks) and `tfdump --chunks` (the chunk list of every rank file).
 *
 * --verify prints the library's problem messages (each names the file, the
 * chunk or frame, the byte offset and what is still readable), one status
 * line per file that is not intact, then "OK: ..." or "FAILED: ...".
 */
#include "dump_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void verify_file_line(const dump_trace *d, int i, const tft_reader_status *st)
{
    uint64_t good = st->chunks >= st->chunks_bad ? st->chunks - st->chunks_bad : 0;
    printf("%s: %s: %" PRIu64 " of %" PRIu64 " chunks readable", d->names[i],
           dump_integrity_name(st->integrity), good, st->chunks);
    if (st->integrity == TFT_TORN && st->torn_offset < st->file_bytes)
        printf("; %" PRIu64 " bytes from byte %" PRIu64 " on are lost", st->file_bytes - st->torn_offset,
               st->torn_offset);
    else if (st->integrity == TFT_TORN)
        printf("; the file was not closed (no index)");
    printf("\n");
}

static cJSON *verify_file_json(const dump_trace *d, int i, const tft_reader_status *st)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", d->names[i]);
    cJSON_AddNumberToObject(o, "rank", tft_trace_rank_id(d->t, i));
    cJSON_AddStringToObject(o, "integrity", dump_integrity_name(st->integrity));
    cJSON_AddBoolToObject(o, "closed", st->closed);
    cJSON_AddBoolToObject(o, "index_rebuilt", st->index_rebuilt);
    core_json_u64(o, "chunks", st->chunks);
    core_json_u64(o, "chunks_bad", st->chunks_bad);
    core_json_u64(o, "bytes", st->file_bytes);
    if (st->integrity == TFT_TORN)
        core_json_u64(o, "torn_offset", st->torn_offset);
    if (st->integrity == TFT_DAMAGED)
        core_json_u64(o, "bad_offset", st->bad_offset);
    return o;
}

static void verify_report_json(const dump_trace *d, const tft_reader_status *st, int worst)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddBoolToObject(j, "ok", worst == TFT_INTACT);
    cJSON_AddStringToObject(j, "integrity", dump_integrity_name(worst));
    cJSON *files = cJSON_AddArrayToObject(j, "files");
    for (int i = 0; files && i < d->n; i++)
        cJSON_AddItemToArray(files, verify_file_json(d, i, &st[i]));
    cJSON *pr = cJSON_AddArrayToObject(j, "problems");
    for (size_t i = 0; pr && i < d->log.n; i++)
        cJSON_AddItemToArray(pr, cJSON_CreateString(d->log.msgs[i]));
    core_json_u64(j, "problems_not_shown", d->log.more);
    char *text = cJSON_Print(j);
    if (text)
        puts(text);
    cJSON_free(text);
    cJSON_Delete(j);
}

static void verify_report_text(const dump_trace *d, const dump_opts *o, const tft_reader_status *st,
                               int worst)
{
    uint64_t chunks = 0, torn = 0, damaged = 0;
    size_t problems = d->log.n + d->log.more;
    for (size_t i = 0; i < d->log.n; i++)
        printf("%s\n", d->log.msgs[i]);
    if (d->log.more)
        printf("... and %zu more problems\n", d->log.more);
    for (int i = 0; i < d->n; i++) {
        chunks += st[i].chunks;
        torn += st[i].integrity == TFT_TORN;
        damaged += st[i].integrity == TFT_DAMAGED;
        if (st[i].integrity != TFT_INTACT)
            verify_file_line(d, i, &st[i]);
    }
    if (worst == TFT_INTACT)
        printf("OK: %s: %d rank file%s, %" PRIu64 " chunks, every checksum verified\n", o->path, d->n,
               d->n == 1 ? "" : "s", chunks);
    else
        printf("FAILED: %s: %d rank file%s: %" PRIu64 " torn, %" PRIu64 " damaged; %zu problem%s\n",
               o->path, d->n, d->n == 1 ? "" : "s", torn, damaged, problems, problems == 1 ? "" : "s");
}

int dump_verify(dump_trace *d, const dump_opts *o)
{
    tft_reader_status *st = calloc((size_t)d->n + 1, sizeof(*st));
    if (!st) {
        dump_nomem(o->path, "--verify");
        return DUMP_USAGE;
    }
    int worst = TFT_INTACT;
    for (int i = 0; i < d->n; i++) { /* one rank file open at a time */
        tft_reader *r = tft_trace_reader(d->t, i);
        int e = r ? tft_reader_verify(r, &st[i]) : errno ? -errno : -EIO;
        tft_trace_release(d->t, i);
        if (e < 0) {
            free(st);
            return dump_read_error(o->path, d->names[i], e);
        }
        if (st[i].integrity > worst)
            worst = st[i].integrity;
    }
    if (dump_trace_check(d, o->path) > 0)
        worst = TFT_DAMAGED;
    if (o->json)
        verify_report_json(d, st, worst);
    else
        verify_report_text(d, o, st, worst);
    free(st);
    return worst == TFT_INTACT ? DUMP_OK : DUMP_FINDINGS;
}

/* ---- --chunks ------------------------------------------------------------------ */

static bool chunk_json(const dump_trace *d, int i, const tft_chunk_info *c)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return false;
    cJSON_AddStringToObject(o, "file", d->names[i]);
    cJSON_AddNumberToObject(o, "rank", tft_trace_rank_id(d->t, i));
    core_json_u64(o, "chunk", c->chunk_no);
    core_json_u64(o, "offset", c->offset);
    core_json_u64(o, "comp_size", c->comp_size);
    core_json_u64(o, "raw_size", c->raw_size);
    core_json_u64(o, "records", c->records);
    cJSON_AddItemToObject(o, "steps", dump_json_range(c->first_step, c->last_step, TFT_STEP_NONE));
    cJSON_AddItemToObject(o, "seqs", dump_json_range(c->first_seq, c->last_seq, TFT_SEQ_NONE));
    core_json_u64(o, "first_ts", c->first_ts);
    core_json_u64(o, "last_ts", c->last_ts);
    core_json_u64(o, "dropped", c->dropped);
    bool ok = dump_out_json_line(o);
    cJSON_Delete(o);
    return ok;
}

static bool chunk_text(const dump_trace *d, int i, const tft_chunk_info *c)
{
    printf("%s chunk %u offset=%" PRIu64 " comp=%u raw=%u records=%u", d->names[i], c->chunk_no,
           c->offset, c->comp_size, c->raw_size, c->records);
    if (c->first_step != TFT_STEP_NONE)
        printf(" steps=%" PRId64 "..%" PRId64, c->first_step, c->last_step);
    if (c->first_seq != TFT_SEQ_NONE)
        printf(" seq=%" PRId64 "..%" PRId64, c->first_seq, c->last_seq);
    printf(" dropped=%" PRIu64 "\n", c->dropped);
    return dump_out_ok();
}

int dump_chunks(dump_trace *d, const dump_opts *o)
{
    for (int i = 0; i < d->n; i++) {
        if (o->rank >= 0 && tft_trace_rank_id(d->t, i) != o->rank)
            continue;
        tft_reader *r = tft_trace_reader(d->t, i);
        if (!r)
            return dump_read_error(o->path, d->names[i], errno ? -errno : -EIO);
        bool ok = true;
        for (size_t k = 0; ok && k < tft_reader_chunk_count(r); k++) {
            const tft_chunk_info *c = tft_reader_chunk(r, k);
            ok = o->json ? chunk_json(d, i, c) : chunk_text(d, i, c);
        }
        tft_trace_release(d->t, i);
        if (!ok)
            return DUMP_OK;
    }
    return DUMP_OK;
}
