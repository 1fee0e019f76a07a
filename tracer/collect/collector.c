/*
 * collector.c — ring drain loop: one rank file per traced process, created
 * when its first record arrives; strings registered with the writer; process
 * death detected (the launcher's waitpid, or the pid vanishing), after which
 * everything the process committed is drained, its exit recorded and its
 * file closed with an index. This file: the collector's creation and
 * release, the rank files, the record path, the drops' attribution, the
 * drain pass and the periodic records; the processes' ends, the
 * collection's end and records from outside the rings: collector_end.c.
 */
#include "collector_internal.h"
#include "tft_procstat.h"
#include "tft_writer_internal.h" /* tft_writer_abandon */

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <time.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The backlog's limit: TFT_BACKLOG_MB MiB (64 when unset or malformed: the
 * traced job never fails for it), at least one ring's bytes; 0 turns the
 * backlog off (rings drained in place, the producer waits for the writer). */
static size_t backlog_max_bytes(uint64_t ring_bytes)
{
    const char *s = getenv("TFT_BACKLOG_MB");
    char *end = NULL;
    long long mb = s && *s ? strtoll(s, &end, 10) : 64;
    if (s && *s && (*end || mb < 0 || mb > (1ll << 20)))
        mb = 64;
    if (mb == 0)
        return 0;
    size_t max = (size_t)mb << 20;
    return max < ring_bytes ? (size_t)ring_bytes : max;
}

collector *collector_new(shm_hdr *h, const char *dir, int dir_fd, const uint8_t run_id[16],
                         const collector_opts *o)
{
    collector *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->h = h;
    c->dir = strdup(dir);
    c->dir_fd = dir_fd;
    c->claimed_fd = -1;
    c->ring_dropped = calloc(h->n_rings ? h->n_rings : 1, sizeof(uint64_t));
    c->ring_stalled = calloc(h->n_rings ? h->n_rings : 1, sizeof(uint64_t));
    c->ring_kinds = calloc((h->n_rings ? h->n_rings : 1) * (size_t)SHM_DROP_KINDS, sizeof(uint64_t));
    c->backlog = calloc(h->n_rings ? h->n_rings : 1, sizeof(cbacklog));
    c->backlog_max = backlog_max_bytes(h->ring_bytes);
    if (!c->dir || !c->ring_dropped || !c->ring_stalled || !c->ring_kinds || !c->backlog) {
        collector_free(c);
        return NULL;
    }
    memcpy(c->run_id, run_id, 16);
    if (o)
        memcpy(&c->o, o, o->sz < sizeof(c->o) ? o->sz : sizeof(c->o));
    if (!c->o.file_mode)
        c->o.file_mode = 0600;
    for (uint32_t i = 0; i < SHM_MAX_PROCS; i++) {
        cproc *p = &c->procs[i];
        p->first_step = p->last_step = p->last_step_end = TFT_STEP_NONE;
        p->step_begun = p->pass_step = p->synced = TFT_STEP_NONE;
        p->drop_first_step = p->drop_last_step = TFT_STEP_NONE;
    }
    return c;
}

void collector_free(collector *c)
{
    if (!c)
        return;
    for (uint32_t i = 0; i < SHM_MAX_PROCS; i++)
        tft_writer_abandon(c->procs[i].w);
    if (c->claimed_fd >= 0)
        close(c->claimed_fd);
    free(c->ranks);
    free(c->ring_dropped);
    free(c->ring_stalled);
    free(c->ring_kinds);
    for (uint32_t i = 0; c->backlog && i < c->h->n_rings; i++)
        free(c->backlog[i].buf);
    free(c->backlog);
    free(c->dir);
    free(c);
}

void cproc_record(cproc *p, const tft_rec *rec)
{
    p->records++;
    if (rec->step != TFT_STEP_NONE) {
        if (p->first_step == TFT_STEP_NONE || rec->step < p->first_step)
            p->first_step = rec->step;
        if (p->last_step == TFT_STEP_NONE || rec->step > p->last_step)
            p->last_step = rec->step;
    }
    if (rec->kind == TFT_REC_STEP && rec->len >= sizeof(tft_rec_step)) {
        uint32_t phase = ((const tft_rec_step *)rec)->phase;
        if (phase == TFT_STEP_END && (p->last_step_end == TFT_STEP_NONE || rec->step > p->last_step_end))
            p->last_step_end = rec->step;
        if (phase == TFT_STEP_BEGIN)
            p->step_begun = rec->step; /* a program that goes back (a second loop) moves it back */
    }
}

/* The first write error of p's file: counted once, logged once; the
 * collector stops writing the file (what it sealed stays readable). */
void cproc_fail(collector *c, cproc *p, int e, const char *what)
{
    if (p->err)
        return;
    p->err = e ? e : -EIO;
    p->err_what = what;
    p->failed = 1;
    c->write_errors++;
    CLOG(c, TFT_LOG_ERROR, "%s/%s: %s failed: %s; recording of this rank stopped (the records before are on disk)",
         c->dir, p->file, what, strerror(-p->err));
}

/* Appends rec to p's file. A chunk the writer sealed during the call holds
 * every record appended before it: that is what is known to be on disk. */
int cproc_append(collector *c, cproc *p, const tft_rec *rec)
{
    /* the counts before are those after the previous append (every append
     * and seal of p->w goes through here, cproc_close or collector_flush):
     * one stats call per record, not two */
    tft_writer_stats after = TFT_WRITER_STATS();
    int e = tft_writer_append(p->w, rec);
    tft_writer_get_stats(p->w, &after);
    if (after.chunks != p->st_chunks)
        p->sealed = p->st_records;
    p->st_records = after.records;
    p->st_chunks = after.chunks;
    if (e && e != -EINVAL) {
        p->lost++;
        cproc_fail(c, p, e, "write");
    }
    return e;
}

/* Seals what is buffered, notes it as on disk, and closes p's file (index,
 * fsync). */
void cproc_close(collector *c, cproc *p)
{
    if (!p->w)
        return;
    tft_writer_stats st = TFT_WRITER_STATS();
    int e = p->failed ? 0 : tft_writer_flush(p->w);
    tft_writer_get_stats(p->w, &st);
    if (e)
        cproc_fail(c, p, e, "write");
    else if (!p->failed)
        p->sealed = st.records;
    p->appended = st.records;
    e = tft_writer_close(p->w);
    p->w = NULL;
    p->closed = 1;
    if (e && !p->failed)
        cproc_fail(c, p, e, "close");
}

/* Creates p's rank file in the trace directory: O_EXCL|O_NOFOLLOW, so an
 * existing file or a planted link is never written through; a taken name
 * (another instance of the run, a leftover) gets the pid appended. */
static int create_rank_file(collector *c, cproc *p)
{
    if (c->claimed_fd >= 0 && !strcmp(p->file, c->claimed_name)) {
        int fd = c->claimed_fd;
        c->claimed_fd = -1;
        return fd;
    }
    for (int k = 0; k < 2; k++) {
        int fd = openat(c->dir_fd, p->file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        (mode_t)c->o.file_mode);
        if (fd >= 0) {
            if (fchmod(fd, (mode_t)c->o.file_mode) < 0) { /* exact, whatever the umask */
                int e = errno;
                close(fd);
                unlinkat(c->dir_fd, p->file, 0);
                errno = e;
                return -1;
            }
            return fd;
        }
        if (errno != EEXIST || k)
            return -1;
        snprintf(p->file, sizeof(p->file), "rank-%05d-p%d.tft", p->rank, (int)p->pid);
    }
    return -1;
}

static int proc_open(collector *c, uint32_t idx)
{
    cproc *p = &c->procs[idx];
    const shm_proc *sp = &c->h->procs[idx];
    p->opened = 1;
    p->pid = sp->pid;
    p->rank = (sp->rank >= 0 && sp->rank < 10000000) ? sp->rank : (int)(sp->index % 10000000);
    snprintf(p->file, sizeof(p->file), "rank-%05d.tft", p->rank);
    for (uint32_t j = 0; j < SHM_MAX_PROCS; j++) /* two processes claiming one rank */
        if (j != idx && c->procs[j].opened && strcmp(c->procs[j].file, p->file) == 0)
            snprintf(p->file, sizeof(p->file), "rank-%05d-p%d.tft", p->rank, (int)p->pid);
    tft_file_info fi = {0};
    memcpy(fi.run_id, c->run_id, 16);
    fi.rank = p->rank;
    fi.world_size = sp->world_size;
    fi.pid = sp->pid;
    if (!(sp->rank >= 0 && sp->rank < 10000000))
        fi.flags |= TFT_FILE_RANK_IS_INDEX;
    fi.start_monotonic_ns = tft_clock_mono_ns();
    fi.start_realtime_ns = clock_realtime_ns();
    gethostname(fi.host, sizeof(fi.host) - 1);
    tft_writer_opts wo = TFT_WRITER_OPTS(.zstd_level = c->o.zstd_level, .chunk_bytes = c->o.chunk_bytes,
                                         .log = c->o.log, .log_ctx = c->o.log_ctx,
                                         .keep_steps = c->o.keep_steps);
    int fd = create_rank_file(c, p);
    p->w = fd >= 0 ? tft_writer_fdopen(fd, &fi, &wo) : NULL;
    if (!p->w) {
        int e = errno;
        if (fd >= 0) /* ours (O_EXCL): no empty or headless file left behind */
            unlinkat(c->dir_fd, p->file, 0);
        cproc_fail(c, p, -e, "create");
        return -1;
    }
    tft_rec_process pr = {.h = {.kind = TFT_REC_PROCESS, .len = sizeof(pr), .ts = fi.start_monotonic_ns,
                                .step = TFT_STEP_NONE, .seq = TFT_SEQ_NONE},
                          .event = TFT_PROC_START, .pid = sp->pid};
    if (cproc_append(c, p, &pr.h) == 0)
        cproc_record(p, &pr.h);
    tft_rec_clock ck;
    clock_pair_read(&ck);
    cproc_append(c, p, &ck.h);
    p->pair_records = p->st_records;
    return 0;
}

/* Raw TSC ticks of a record to CLOCK_MONOTONIC ns. */
static uint64_t to_ns(const collector *c, uint64_t t)
{
    if (!(c->h->flags & SHM_TSC) || !t)
        return t;
    double d = ((double)t - (double)c->h->tsc0) * c->h->ns_per_tick;
    return (uint64_t)((double)c->h->ns0 + d);
}

static void convert_times(const collector *c, tft_rec *rec)
{
    rec->ts = to_ns(c, rec->ts);
    if (rec->kind == TFT_REC_COLLECTIVE && rec->len >= TFT_REC_COLLECTIVE_MIN_BYTES) {
        tft_rec_collective *k = (tft_rec_collective *)rec;
        k->t_enter = to_ns(c, k->t_enter);
        k->t_exit = to_ns(c, k->t_exit);
    }
}

/* Appends a THREAD record of event ev for ring r's thread (the ring's
 * fields are the traced process's memory: the name is copied bounded). */
static void thread_record(collector *c, cproc *p, const shm_ring *r, uint32_t ev)
{
    char name[sizeof(r->thread_name) + 1];
    memcpy(name, r->thread_name, sizeof(r->thread_name));
    name[sizeof(r->thread_name)] = '\0';
    size_t n = strnlen(name, sizeof(r->thread_name));
    tft_rec_thread t = {.h = {.kind = TFT_REC_THREAD, .len = sizeof(t), .ts = tft_clock_mono_ns(),
                              .step = TFT_STEP_NONE, .seq = TFT_SEQ_NONE},
                        .event = ev, .tid = r->tid, .index = r->thread_index,
                        .name = n ? tft_writer_string(p->w, name, n) : 0};
    if (cproc_append(c, p, &t.h) == 0)
        cproc_record(p, &t.h);
}

/* Before a record from ring r: a THREAD switch when the file's previous
 * records came from another thread (FORMAT.md §5.13). */
static void thread_switch(collector *c, cproc *p, const shm_ring *r)
{
    if (p->has_thread && p->cur_tid == r->tid && p->cur_index == r->thread_index)
        return;
    p->has_thread = true;
    p->cur_tid = r->tid;
    p->cur_index = r->thread_index;
    p->switches++;
    thread_record(c, p, r, TFT_THREAD_SWITCH);
}

/* The CLOCK record an idle file skipped, before its next record. */
static void pair_first(cproc *p, collector *c)
{
    tft_rec_clock ck;
    clock_pair_read(&ck);
    p->pair_due = false;
    cproc_append(c, p, &ck.h);
}

static void on_record(void *ctx, uint32_t proc, tft_rec *rec)
{
    collector *c = ctx;
    convert_times(c, rec);
    if (proc >= SHM_MAX_PROCS)
        return;
    cproc *p = &c->procs[proc];
    if (p->closed)
        return;
    if (p->failed || (!p->opened && proc_open(c, proc) < 0)) {
        if (rec->kind != TFT_REC_STRING)
            p->lost++; /* drained all the same: the program must not wait */
        return;
    }
    if (rec->kind == TFT_REC_STRING) {
        const tft_rec_string *s = (const tft_rec_string *)rec;
        if (tft_rec_check(rec, rec->len) == 0)
            tft_writer_string(p->w, s->text, s->n);
        return;
    }
    if (rec->kind == TFT_REC_THREAD || rec->kind == TFT_REC_SYNC)
        return; /* ours to write: a traced program cannot forge them */
    if (c->draining)
        thread_switch(c, p, c->draining);
    if (p->pair_due)
        pair_first(p, c);
    if (rec->kind == TFT_REC_PROCESS && rec->len >= sizeof(tft_rec_process)) {
        const tft_rec_process *pr = (const tft_rec_process *)rec;
        if (pr->event == TFT_PROC_EXIT) {
            p->exit_known = 1;
            p->exit_code = pr->exit_code;
            p->signal = pr->signal;
        }
    }
    if (p->failed)
        return;
    if (cproc_append(c, p, rec) == 0)
        cproc_record(p, rec);
}

/* What one attribution of a ring's drops carries to the DROPPED record. */
typedef struct drop_span {
    int64_t first_step, last_step;
    const uint64_t *by_kind; /* SHM_DROP_KINDS counts, NULL: none known */
} drop_span;

static void append_dropped(collector *c, cproc *p, uint64_t n, uint32_t reason, const drop_span *sp)
{
    if (!n)
        return;
    tft_rec_dropped dr = {.h = {.kind = TFT_REC_DROPPED, .len = sizeof(dr), .ts = tft_clock_mono_ns(),
                                .step = TFT_STEP_NONE, .seq = TFT_SEQ_NONE},
                          .count = n, .reason = reason, .first_step = sp->first_step,
                          .last_step = sp->last_step};
    _Static_assert(TFT_DROP_KINDS == SHM_DROP_KINDS, "the ring counts the record's kinds");
    if (sp->by_kind)
        memcpy(dr.by_kind, sp->by_kind, sizeof(dr.by_kind));
    /* the record first: it may seal the chunk, and the chunk header's count
     * must summarise the DROPPED records of the same chunk */
    if (cproc_append(c, p, &dr.h) == 0)
        cproc_record(p, &dr.h);
    tft_writer_add_dropped(p->w, n);
}

/* Reads ring i's drops since the last attribution (shm_ring: the order the
 * producer writes them in): the total delta, the stalled part, the kinds
 * and the span of steps; acknowledges what it read. Returns the delta. */
static uint64_t read_drops(collector *c, uint32_t i, shm_ring *r, uint64_t *sdelta, uint64_t *kinds,
                           int64_t *first, int64_t *last)
{
    uint64_t d = atomic_load_explicit(&r->dropped, memory_order_acquire);
    uint64_t ds = atomic_load_explicit(&r->dropped_stalled, memory_order_relaxed);
    if (d <= c->ring_dropped[i])
        return 0;
    *first = atomic_load_explicit(&r->drop_first_step, memory_order_relaxed);
    *last = atomic_load_explicit(&r->drop_last_step, memory_order_relaxed);
    uint64_t *seen = &c->ring_kinds[(size_t)i * SHM_DROP_KINDS];
    for (uint32_t k = 0; k < SHM_DROP_KINDS; k++) {
        uint64_t v = atomic_load_explicit(&r->drop_kind[k], memory_order_relaxed);
        kinds[k] = v > seen[k] ? v - seen[k] : 0;
        seen[k] += kinds[k];
    }
    atomic_store_explicit(&r->drop_ack, d, memory_order_release);
    uint64_t delta = d - c->ring_dropped[i];
    *sdelta = ds > c->ring_stalled[i] ? ds - c->ring_stalled[i] : 0;
    if (*sdelta > delta)
        *sdelta = delta; /* the producer counts stalled before total */
    c->ring_dropped[i] = d;
    c->ring_stalled[i] += *sdelta;
    return delta;
}

static void note_drops(cproc *p, uint64_t delta, const uint64_t *kinds, int64_t first, int64_t last)
{
    p->dropped += delta;
    for (uint32_t k = 0; k < SHM_DROP_KINDS; k++)
        p->drop_kind[k] += kinds[k];
    if (first != TFT_STEP_NONE && (p->drop_first_step == TFT_STEP_NONE || first < p->drop_first_step))
        p->drop_first_step = first;
    if (last != TFT_STEP_NONE && (p->drop_last_step == TFT_STEP_NONE || last > p->drop_last_step))
        p->drop_last_step = last;
}

/* Drops --no-drop gave up on (a stalled or dead collector) are counted
 * apart and written with reason "other": the ring was not simply full.
 * The kinds go with the first record written (FORMAT.md §5.11). */
static void attribute_dropped(collector *c, uint32_t i, shm_ring *r)
{
    uint64_t sdelta = 0, kinds[SHM_DROP_KINDS];
    int64_t first = TFT_STEP_NONE, last = TFT_STEP_NONE;
    /* r->proc only once the ring has drops: the producer's first drop
     * (release) publishes what its claim wrote */
    if (atomic_load_explicit(&r->dropped, memory_order_acquire) <= c->ring_dropped[i] || r->proc >= SHM_MAX_PROCS)
        return;
    uint64_t delta = read_drops(c, i, r, &sdelta, kinds, &first, &last);
    if (!delta)
        return;
    if (first != TFT_STEP_NONE && last != TFT_STEP_NONE && first > last) { /* the program's memory */
        int64_t t = first;
        first = last;
        last = t;
    }
    cproc *p = &c->procs[r->proc];
    if (!p->opened && proc_open(c, r->proc) < 0)
        return;
    if (!p->w || p->closed)
        return;
    c->dropped_total += delta;
    c->stalled_total += sdelta;
    p->dropped_stalled += sdelta;
    note_drops(p, delta, kinds, first, last);
    if (p->failed)
        return; /* counted; the file takes nothing more */
    drop_span sp = {.first_step = first, .last_step = last, .by_kind = kinds};
    drop_span none = {.first_step = first, .last_step = last, .by_kind = NULL};
    append_dropped(c, p, delta - sdelta, TFT_DROP_RING_FULL, &sp);
    append_dropped(c, p, sdelta, TFT_DROP_OTHER, delta > sdelta ? &none : &sp);
}

static void ring_release(collector *c, uint32_t i, shm_ring *r)
{
    atomic_store_explicit(&r->head, 0, memory_order_relaxed);
    atomic_store_explicit(&r->tail, 0, memory_order_relaxed);
    atomic_store_explicit(&r->dropped, 0, memory_order_relaxed);
    atomic_store_explicit(&r->dropped_stalled, 0, memory_order_relaxed);
    for (uint32_t k = 0; k < SHM_DROP_KINDS; k++)
        atomic_store_explicit(&r->drop_kind[k], 0, memory_order_relaxed);
    atomic_store_explicit(&r->drop_ack, 0, memory_order_relaxed);
    c->ring_dropped[i] = 0;
    c->ring_stalled[i] = 0;
    cbacklog *b = &c->backlog[i];
    b->rd = b->wr = 0; /* empty already: a ring is released once its backlog is written */
    if (b->cap > c->h->ring_bytes) { /* a burst's growth goes back */
        c->backlog_cap -= b->cap;
        free(b->buf);
        b->buf = NULL;
        b->cap = 0;
    }
    memset(&c->ring_kinds[(size_t)i * SHM_DROP_KINDS], 0, SHM_DROP_KINDS * sizeof(uint64_t));
    atomic_store_explicit(&r->state, RING_FREE, memory_order_release);
}

/* After a pass over a process's rings: a SYNC with the highest step begun
 * before the pass, when it moved (every record published before the pass
 * began is now written, and records published after it carry that step or
 * a later one; FORMAT.md §5.14). At most one per pass and step. */
static void pass_sync(collector *c, int only_proc, const uint8_t *behind)
{
    for (uint32_t i = 0; i < SHM_MAX_PROCS; i++) {
        cproc *p = &c->procs[i];
        if ((only_proc >= 0 && i != (uint32_t)only_proc) || behind[i])
            continue; /* a pass over p's rings ends when its backlog is written */
        int64_t w = p->pass_step;
        p->pass_step = p->step_begun;
        if (!p->opened || p->closed || !p->w || !p->has_thread || w == TFT_STEP_NONE || w == p->synced)
            continue;
        tft_rec_sync sy = {.h = {.kind = TFT_REC_SYNC, .len = sizeof(sy), .ts = tft_clock_mono_ns(), .step = w,
                                 .seq = TFT_SEQ_NONE}};
        if (cproc_append(c, p, &sy.h) == 0) {
            p->records++;
            p->synced = w;
        }
    }
}

/* Room for at least want more bytes in backlog b (compacted, or grown
 * within the limit); returns the room, which may be less. */
static size_t backlog_room(collector *c, cbacklog *b, size_t want)
{
    if (b->rd == b->wr)
        b->rd = b->wr = 0;
    if (b->cap - b->wr >= want)
        return b->cap - b->wr;
    if (b->rd && b->rd >= b->wr - b->rd) { /* moves no more than the writer took */
        memmove(b->buf, b->buf + b->rd, b->wr - b->rd);
        b->wr -= b->rd;
        b->rd = 0;
        if (b->cap - b->wr >= want)
            return b->cap - b->wr;
    }
    size_t ncap = b->cap ? b->cap * 2 : (size_t)c->h->ring_bytes;
    while (ncap - b->wr < want && ncap - b->cap + c->backlog_cap < c->backlog_max)
        ncap *= 2;
    if (ncap - b->cap + c->backlog_cap > c->backlog_max)
        ncap = b->cap + (c->backlog_max - c->backlog_cap) / 4096 * 4096;
    if (ncap > b->cap) {
        char *nb = realloc(b->buf, ncap);
        if (nb) {
            c->backlog_cap += ncap - b->cap;
            b->buf = nb;
            b->cap = ncap;
        }
    }
    return b->cap - b->wr;
}

/* Moves ring i's published records into its backlog; *more: some were left
 * for want of room. Returns the bytes moved. */
static size_t backlog_pull(collector *c, uint32_t i, shm_ring *r, bool *more)
{
    cbacklog *b = &c->backlog[i];
    /* acquire: the first record's head store publishes what ring_claim wrote (r->proc) */
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    *more = b->more = false;
    if (head == tail)
        return 0;
    uint64_t cap = c->h->ring_bytes;
    size_t room = backlog_room(c, b, head > tail && head - tail < cap ? head - tail : cap);
    if (room < TFT_REC_MAX_BYTES && head > tail && room < head - tail) {
        *more = b->more = true; /* the limit: the ring waits for the writer, as without a backlog */
        return 0;
    }
    b->proc = r->proc;
    size_t n = ring_pull(c->h, r, b->buf ? b->buf + b->wr : NULL, room, more);
    b->more = *more;
    b->wr += n;
    return n;
}

/* Hands backlog i's records to the writer, about budget bytes of them
 * (at least one record). Returns the bytes taken. */
static size_t backlog_run(collector *c, uint32_t i, size_t budget)
{
    cbacklog *b = &c->backlog[i];
    size_t start = b->rd;
    c->draining = shm_ring_at(c->h, i);
    while (b->rd < b->wr && b->rd - start < budget) {
        tft_rec *rec = (tft_rec *)(b->buf + b->rd);
        b->rd += rec->len; /* checked by ring_pull; on_record may change the copy */
        on_record(c, b->proc, rec);
    }
    c->draining = NULL;
    return b->rd - start;
}

/* A ring's end of a pass: its drops attributed, and a retired ring (its
 * thread ended, every record taken) handed back. */
static void ring_pass_end(collector *c, uint32_t i, shm_ring *r, uint32_t st)
{
    attribute_dropped(c, i, r);
    if (st != RING_RETIRED)
        return;
    cproc *p = r->proc < SHM_MAX_PROCS ? &c->procs[r->proc] : NULL;
    if (p && p->w && !p->closed && !p->failed && p->has_thread) {
        thread_record(c, p, r, TFT_THREAD_END);
        p->cur_index = UINT32_MAX; /* the next record names its thread again */
    }
    ring_release(c, i, r);
}

static bool ring_skipped(const shm_ring *r, uint32_t st, int only_proc)
{
    return st == RING_FREE || (only_proc >= 0 && r->proc != (uint32_t)only_proc);
}

/* One pass over the rings (only_proc's, or all for -1): every ring's
 * published records pulled into its backlog (the ring's space released at
 * once), then about budget bytes of the backlogs written, round robin
 * (SIZE_MAX: all). A process whose rings or backlog still hold records is
 * behind: its pass is not over (no SYNC, its drops and retired rings wait). */
static size_t drain_pass(collector *c, int only_proc, size_t budget, bool *left)
{
    size_t total = 0;
    uint8_t behind[SHM_MAX_PROCS] = {0};
    uint32_t n = c->h->n_rings;
    *left = false;
    for (uint32_t i = 0; i < n; i++) {
        shm_ring *r = shm_ring_at(c->h, i);
        uint32_t st = atomic_load_explicit(&r->state, memory_order_acquire);
        c->backlog[i].state = st;
        if (ring_skipped(r, st, only_proc))
            continue;
        bool more = false;
        total += backlog_pull(c, i, r, &more);
        if (more && r->proc < SHM_MAX_PROCS)
            behind[r->proc] = 1;
        *left |= more;
    }
    size_t done = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (c->backlog_next + k) % n;
        cbacklog *b = &c->backlog[i];
        if (b->rd == b->wr || (only_proc >= 0 && b->proc != (uint32_t)only_proc))
            continue;
        if (done < budget)
            done += backlog_run(c, i, budget - done);
        if (b->rd < b->wr && b->proc < SHM_MAX_PROCS)
            behind[b->proc] = 1;
    }
    c->backlog_next = n ? (c->backlog_next + 1) % n : 0;
    for (uint32_t i = 0; i < n; i++) {
        shm_ring *r = shm_ring_at(c->h, i);
        uint32_t st = c->backlog[i].state; /* RETIRED before the pull: the pull took its last record */
        if (ring_skipped(r, st, only_proc) || c->backlog[i].rd < c->backlog[i].wr || c->backlog[i].more)
            continue;
        ring_pass_end(c, i, r, st);
    }
    pass_sync(c, only_proc, behind);
    return total + done;
}

void collector_backlog_write(collector *c)
{
    for (uint32_t i = 0; c->backlog_max && i < c->h->n_rings; i++)
        if (c->backlog[i].rd < c->backlog[i].wr)
            backlog_run(c, i, SIZE_MAX);
}

/* The pass without a backlog: each ring drained in place. */
static size_t drain_in_place(collector *c, int only_proc)
{
    size_t total = 0;
    for (uint32_t i = 0; i < c->h->n_rings; i++) {
        shm_ring *r = shm_ring_at(c->h, i);
        uint32_t st = atomic_load_explicit(&r->state, memory_order_acquire);
        if (ring_skipped(r, st, only_proc))
            continue;
        c->draining = r;
        total += ring_drain(c->h, r, on_record, c);
        c->draining = NULL;
        ring_pass_end(c, i, r, st);
    }
    static const uint8_t none[SHM_MAX_PROCS];
    pass_sync(c, only_proc, none);
    return total;
}

size_t collector_drain(collector *c, int only_proc)
{
    if (!c->backlog_max)
        return drain_in_place(c, only_proc);
    /* everything published before the call: a pass writes all it pulled,
     * so a second one finds room for whatever the first had to leave */
    size_t total = 0;
    bool left = true;
    for (int k = 0; k < 4 && left; k++)
        total += drain_pass(c, only_proc, SIZE_MAX, &left);
    return total;
}

/* What one collector_poll hands the writer from the backlogs: ~2,000
 * records, about a millisecond, so the rings are pulled again long before
 * a producer at full speed (~1.6 GB/s of records) fills one. */
#define POLL_BUDGET (256u << 10)

/* A process is gone when its pid no longer exists or is a zombie. */
int collector_pid_gone(pid_t pid)
{
    return pid <= 0 || tft_procstat_gone(pid);
}

/* Drains a finished process, records its exit and closes its file. */
void cproc_finish(collector *c, uint32_t idx)
{
    cproc *p = &c->procs[idx];
    collector_drain(c, (int)idx);
    for (uint32_t i = 0; i < c->h->n_rings; i++) {
        shm_ring *r = shm_ring_at(c->h, i);
        if (atomic_load(&r->state) != RING_FREE && r->proc == idx)
            ring_release(c, i, r);
    }
    atomic_store(&c->h->procs[idx].state, PROC_DONE);
    if (!p->opened || p->closed || !p->w)
        return;
    if (!p->exit_known) /* SIGKILL of a process that is not our child */
        CLOG(c, TFT_LOG_INFO, "%s/%s: process %d vanished without an exit status", c->dir, p->file,
             (int)p->pid);
    cproc_close(c, p);
}

static void check_liveness(collector *c)
{
    uint64_t now = tft_clock_mono_ns();
    if (now - c->last_liveness_ns < 20000000u)
        return;
    c->last_liveness_ns = now;
    for (uint32_t i = 0; i < SHM_MAX_PROCS; i++) {
        shm_proc *sp = &c->h->procs[i];
        /* the launcher's own child is finished by collector_child_exit, with
         * its wait status: a zombie seen here first would lose that */
        if (atomic_load(&sp->state) == PROC_ACTIVE && sp->pid != c->child && collector_pid_gone(sp->pid))
            cproc_finish(c, i);
    }
}

/* Refines the TSC rate against CLOCK_MONOTONIC over the whole run so far
 * (the collector is the only reader of ns_per_tick). */
static void refine_clock(collector *c, uint64_t now_ns)
{
#if defined(__x86_64__)
    if (!(c->h->flags & SHM_TSC) || now_ns - c->last_refine_ns < 1000000000u)
        return;
    c->last_refine_ns = now_ns;
    uint64_t t = __rdtsc();
    uint64_t n = tft_clock_mono_ns();
    if (t > c->h->tsc0 && n > c->h->ns0 + 500000000u)
        c->h->ns_per_tick = (double)(n - c->h->ns0) / (double)(t - c->h->tsc0);
#else
    (void)c;
    (void)now_ns;
#endif
}

/* A CLOCK record into every open rank file each clock_pair_every_ns, so
 * readers follow a realtime step (FORMAT.md §5.17). Written at the end of
 * a drain pass: it may precede records the rings still hold from before
 * it, which readers map with it (a window of one pass, milliseconds). A
 * file that got no record since its last pair gets none (an idle process
 * would otherwise cost a chunk a second) until its next record, which a
 * fresh pair precedes (pair_first). */
static void clock_pairs(collector *c, uint64_t now_ns)
{
    if (now_ns - c->last_pair_ns < clock_pair_every_ns())
        return;
    c->last_pair_ns = now_ns;
    for (uint32_t i = 0; i < SHM_MAX_PROCS; i++) {
        cproc *p = &c->procs[i];
        if (!p->w || p->failed || p->closed)
            continue;
        if (p->st_records == p->pair_records) {
            p->pair_due = true;
            continue;
        }
        tft_rec_clock ck;
        clock_pair_read(&ck);
        cproc_append(c, p, &ck.h);
        p->pair_records = p->st_records;
        p->pair_due = false;
    }
}

/* An RSS sample (a PROCESS record, event TFT_PROC_RSS, FORMAT.md §5.10)
 * into every open rank file each rss_every_ns, read from /proc/PID/statm:
 * the traced program does nothing for it. A file that got no record since
 * its last sample gets none while its resident set is unchanged (an idle
 * or hung process costs nothing; one whose memory grows while it records
 * nothing is still followed). */
static void rss_samples(collector *c, uint64_t now_ns)
{
    uint64_t every = rss_every_ns();
    if (!every || now_ns - c->last_rss_ns < every)
        return;
    c->last_rss_ns = now_ns;
    for (uint32_t i = 0; i < SHM_MAX_PROCS; i++) {
        cproc *p = &c->procs[i];
        uint64_t rss;
        if (!p->w || p->failed || p->closed || p->pid <= 0 || rss_read(p->pid, &rss) != 0)
            continue;
        if (p->st_records == p->rss_records && rss == p->rss_last)
            continue;
        tft_rec_process pr = {.h = {.kind = TFT_REC_PROCESS, .len = sizeof(pr), .ts = tft_clock_mono_ns(),
                                    .step = TFT_STEP_NONE, .seq = TFT_SEQ_NONE},
                              .event = TFT_PROC_RSS, .pid = p->pid, .rss = rss};
        if (cproc_append(c, p, &pr.h) == 0)
            cproc_record(p, &pr.h);
        p->rss_records = p->st_records;
        p->rss_last = rss;
    }
}

size_t collector_poll(collector *c)
{
    uint64_t now = tft_clock_mono_ns();
    atomic_store_explicit(&c->h->heartbeat_ns, now, memory_order_relaxed);
    refine_clock(c, now);
    bool left;
    size_t n = c->backlog_max ? drain_pass(c, -1, POLL_BUDGET, &left) : drain_in_place(c, -1);
    clock_pairs(c, now);
    rss_samples(c, now);
    check_liveness(c);
    return n;
}

