/*
 * dump_compact.c — tfdump --compact: each rank file of a --keep-steps trace
 * rewritten without the space its retired chunks and shadowed kept chunks
 * take (FORMAT.md §3.6, "Compaction"), through the format library's
 * tft_rank_compact, the code tftrace runs when it closes a file. For the
 * traces whose recorder was killed before it could (SIGKILL, OOM): they
 * read as they are, but their apparent size counts every chunk ever
 * written.
 */
#include "dump_internal.h"
#include "tft_writer_internal.h" /* tft_rank_compact */

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void print_sizes(const char *name, const tft_compact_stats *st)
{
    printf("%s: compacted: %llu -> %llu bytes (allocated %llu -> %llu)", name,
           (unsigned long long)st->before_bytes, (unsigned long long)st->after_bytes,
           (unsigned long long)st->before_blocks, (unsigned long long)st->after_blocks);
    if (st->torn_bytes)
        printf("; its torn tail of %llu bytes (an unfinished chunk) left out", (unsigned long long)st->torn_bytes);
    printf("\n");
}

int dump_compact(dump_trace *d, const dump_opts *o)
{
    const char *cs = dump_collector_state(tft_trace_manifest(d->t));
    if (cs && !strcmp(cs, "running")) {
        dump_err("%s: tftrace is still recording into it: a rank file replaced now would lose what it writes "
                 "next (it compacts its files itself when it closes them)", o->path);
        return DUMP_USAGE;
    }
    int status = DUMP_OK;
    for (int i = 0; i < d->n; i++) {
        const char *path = tft_trace_file_name(d->t, i);
        tft_compact_stats st;
        int e = tft_rank_compact(path, true, &st);
        if (e == -ENOTSUP) {
            printf("%s: not written with --keep-steps: nothing to compact\n", path);
        } else if (e == -EILSEQ) {
            printf("%s: damaged (tfdump --verify says where): not compacted, left as it was\n", path);
            status = DUMP_FINDINGS;
        } else if (e) {
            printf("%s: not compacted (%s), left as it was\n", path, strerror(-e));
            status = DUMP_FINDINGS;
        } else if (!st.compacted) {
            printf("%s: compact already (%llu bytes)\n", path, (unsigned long long)st.before_bytes);
        } else {
            print_sizes(path, &st);
        }
    }
    return status;
}
