/*
 * collector_end.c — what ends in a collection, and what enters it from
 * outside the rings: a process's exit (the launcher's wait status, written
 * as its PROCESS record) and its file's close; the collection's flush and
 * finish (every file closed, the summary of what reached the disk and what
 * was lost); the job's run id set late; records for a live process from
 * the launcher itself (tftrace --timeout's stacks). Its creation and
 * release: collector.c.
 */
#include "collector_internal.h"
#include "tft_writer_internal.h" /* tft_writer_set_run_id */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static void append_exit(collector *c, cproc *p)
{
    if (!p->w || p->closed || p->failed)
        return;
    tft_rec_process pr = {.h = {.kind = TFT_REC_PROCESS, .len = sizeof(pr), .ts = tft_clock_mono_ns(),
                                .step = TFT_STEP_NONE, .seq = TFT_SEQ_NONE},
                          .event = TFT_PROC_EXIT, .pid = p->pid, .exit_code = p->exit_code,
                          .signal = p->signal};
    if (cproc_append(c, p, &pr.h) == 0)
        cproc_record(p, &pr.h);
}

void collector_set_child(collector *c, pid_t pid) { c->child = pid; }

void collector_set_claimed(collector *c, int fd, const char *name)
{
    c->claimed_fd = fd;
    snprintf(c->claimed_name, sizeof(c->claimed_name), "%s", name);
}

void collector_child_exit(collector *c, pid_t pid, int status)
{
    for (uint32_t i = 0; i < SHM_MAX_PROCS; i++) {
        shm_proc *sp = &c->h->procs[i];
        if (atomic_load(&sp->state) == PROC_FREE || sp->pid != pid)
            continue;
        cproc *p = &c->procs[i];
        collector_drain(c, (int)i);
        if (!p->opened && p->records == 0) { /* recorded nothing: no rank file */
            atomic_store(&sp->state, PROC_DONE);
            continue;
        }
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
        int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        if (!p->exit_known || p->signal != sig || (!sig && p->exit_code != code)) {
            p->exit_known = 1; /* the manifest gets it even if the file is closed */
            p->exit_code = code;
            p->signal = sig;
            append_exit(c, p);
        }
        cproc_finish(c, i);
    }
}

int collector_steps_done(collector *c, int64_t step)
{
    int seen = 0;
    for (uint32_t i = 0; i < SHM_MAX_PROCS; i++) {
        const cproc *p = &c->procs[i];
        if (!p->opened || p->first_step == TFT_STEP_NONE)
            continue; /* no records, or none inside steps (a launcher, a helper process) */
        if (!p->closed && (p->last_step_end == TFT_STEP_NONE || p->last_step_end < step))
            return 0;
        seen |= p->last_step_end != TFT_STEP_NONE && p->last_step_end >= step;
    }
    return seen;
}

int collector_live_procs(collector *c)
{
    int n = 0;
    for (uint32_t i = 0; i < SHM_MAX_PROCS; i++)
        n += atomic_load(&c->h->procs[i].state) == PROC_ACTIVE;
    return n;
}

void collector_flush(collector *c)
{
    collector_backlog_write(c); /* what was pulled is what a flush seals */
    for (uint32_t i = 0; i < SHM_MAX_PROCS; i++) {
        cproc *p = &c->procs[i];
        if (!p->w || p->closed || p->failed)
            continue;
        int e = tft_writer_flush(p->w);
        tft_writer_stats st = TFT_WRITER_STATS();
        tft_writer_get_stats(p->w, &st);
        if (e)
            cproc_fail(c, p, e, "write");
        else
            p->sealed = st.records;
        p->st_records = st.records;
        p->st_chunks = st.chunks;
    }
}

int collector_finish(collector *c, collector_summary *s)
{
    collector_drain(c, -1);
    atomic_store(&c->h->collector_done, 1);
    memset(s, 0, sizeof(*s));
    s->first_step = s->last_step = TFT_STEP_NONE;
    int n = 0;
    for (uint32_t i = 0; i < SHM_MAX_PROCS; i++)
        n += c->procs[i].opened;
    free(c->ranks);
    c->ranks = calloc((size_t)n + 1, sizeof(*c->ranks));
    for (uint32_t i = 0; i < SHM_MAX_PROCS; i++) {
        cproc *p = &c->procs[i];
        if (!p->opened)
            continue;
        cproc_close(c, p);
        /* lost: taken by the writer but not in a completed chunk, or
         * drained after the file failed */
        uint64_t lost = p->lost + (p->appended > p->sealed ? p->appended - p->sealed : 0);
        if (c->ranks) {
            c->ranks[s->nranks++] = (collector_rank){.rank = p->rank, .pid = p->pid, .exited = p->exit_known,
                                                     .exit_code = p->exit_code, .signal = p->signal,
                                                     .records = p->sealed, .lost = lost, .err = p->err,
                                                     .err_what = p->err_what,
                                                     .dropped_stalled = p->dropped_stalled,
                                                     .dropped = p->dropped,
                                                     .drop_first_step = p->drop_first_step,
                                                     .drop_last_step = p->drop_last_step};
            memcpy(c->ranks[s->nranks - 1].drop_kind, p->drop_kind, sizeof(p->drop_kind));
            snprintf(c->ranks[s->nranks - 1].file, sizeof(c->ranks[0].file), "%s", p->file);
        }
        s->records += p->sealed;
        s->lost += lost;
        if (p->first_step != TFT_STEP_NONE &&
            (s->first_step == TFT_STEP_NONE || p->first_step < s->first_step))
            s->first_step = p->first_step;
        if (p->last_step != TFT_STEP_NONE && (s->last_step == TFT_STEP_NONE || p->last_step > s->last_step))
            s->last_step = p->last_step;
    }
    s->ranks = c->ranks;
    s->dropped = c->dropped_total;
    s->dropped_stalled = c->stalled_total;
    s->errors = c->write_errors;
    return c->write_errors ? -EIO : 0;
}

void collector_incomplete_reason(const collector_summary *s, char *buf, size_t n)
{
    size_t k = 0;
    if (n)
        buf[0] = '\0';
    for (int i = 0; i < s->nranks && k + 1 < n; i++) {
        const collector_rank *r = &s->ranks[i];
        if (!r->err)
            continue;
        int w = snprintf(buf + k, n - k, "%s%s: %s failed (%s): %llu records reached the disk, %llu lost",
                         k ? "; " : "", r->file, r->err_what ? r->err_what : "write", strerror(-r->err),
                         (unsigned long long)r->records, (unsigned long long)r->lost);
        k = w > 0 && (size_t)w < n - k ? k + (size_t)w : n - 1;
    }
}

int collector_set_run_id(collector *c, const uint8_t run_id[16])
{
    memcpy(c->run_id, run_id, 16);
    int first = 0;
    for (uint32_t i = 0; i < SHM_MAX_PROCS; i++) {
        cproc *p = &c->procs[i];
        if (!p->opened || !p->w)
            continue;
        int e = tft_writer_set_run_id(p->w, run_id);
        if (e && !first) {
            first = e;
            CLOG(c, TFT_LOG_ERROR, "%s/%s: cannot write the job's run id into the header: %s", c->dir, p->file,
                 strerror(-e));
        }
    }
    return first;
}

/* ---- records from outside the rings (tftrace --timeout's stacks) ------------ */

static cproc *proc_by_pid(collector *c, pid_t pid)
{
    for (uint32_t i = 0; i < SHM_MAX_PROCS; i++) {
        cproc *p = &c->procs[i];
        if (p->opened && p->w && !p->closed && !p->failed && p->pid == pid)
            return p;
    }
    return NULL;
}

int collector_live_pids(collector *c, pid_t *out, int max)
{
    int k = 0;
    for (uint32_t i = 0; i < SHM_MAX_PROCS && k < max; i++) {
        cproc *p = &c->procs[i];
        if (p->opened && p->w && !p->closed && !p->failed && p->pid > 0 && !p->exit_known && !collector_pid_gone(p->pid))
            out[k++] = p->pid;
    }
    return k;
}

int collector_append_for(collector *c, pid_t pid, tft_rec *rec, const char *const *texts, uint64_t *const *ids,
                         int n)
{
    cproc *p = proc_by_pid(c, pid);
    if (!p)
        return -ESRCH;
    for (int i = 0; i < n; i++)
        *ids[i] = texts[i] && texts[i][0] ? tft_writer_string(p->w, texts[i], strlen(texts[i])) : 0;
    int e = cproc_append(c, p, rec);
    if (e == 0)
        cproc_record(p, rec);
    return e;
}
