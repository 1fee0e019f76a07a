/*
 * desync_stacks.c — reading, grouping and printing STACK records
 * (desync_stacks.h). A trace holds a few per process (one per thread), so
 * everything is kept in memory.
 */
#include "desync_stacks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *str_of(const tft_reader *r, uint64_t id)
{
    const char *s = id ? tft_reader_string(r, id) : NULL;
    return s ? s : "";
}

int desync_stacks_add(desync_stacks *s, const tft_reader *r, int rank, const tft_rec *rec)
{
    if (rec->kind != TFT_REC_STACK || rec->len < sizeof(tft_rec_stack))
        return 0;
    const tft_rec_stack *k = (const tft_rec_stack *)rec;
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 16;
        desync_stack *v = realloc(s->v, (size_t)cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    desync_stack *d = &s->v[s->n];
    memset(d, 0, sizeof(*d));
    d->rank = rank;
    d->pid = k->pid;
    d->tid = k->tid;
    d->main = (k->h.flags & TFT_STACK_FLAG_MAIN) != 0;
    snprintf(d->comm, sizeof(d->comm), "%s", str_of(r, k->comm));
    snprintf(d->summary, sizeof(d->summary), "%s", str_of(r, k->summary));
    d->frames = strdup(str_of(r, k->frames));
    if (!d->frames)
        return -ENOMEM;
    s->n++;
    return 0;
}

static int cmp_stack(const void *a, const void *b)
{
    const desync_stack *x = a, *y = b;
    if (x->main != y->main)
        return x->main ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return (x->tid > y->tid) - (x->tid < y->tid);
}

int desync_stacks_merge(desync_stacks *to, desync_stacks *from, int n)
{
    int total = to->n;
    for (int i = 0; i < n; i++)
        total += from[i].n;
    if (total > to->cap) {
        desync_stack *v = realloc(to->v, (size_t)total * sizeof(*v));
        if (!v)
            return -ENOMEM;
        to->v = v;
        to->cap = total;
    }
    for (int i = 0; i < n; i++) {
        if (from[i].n)
            memcpy(to->v + to->n, from[i].v, (size_t)from[i].n * sizeof(*to->v));
        to->n += from[i].n;
        free(from[i].v);   /* the frames moved with the entries */
        from[i] = (desync_stacks){0};
    }
    if (to->n)
        qsort(to->v, (size_t)to->n, sizeof(*to->v), cmp_stack);
    return 0;
}

int desync_stacks_read(tft_trace *t, desync_stacks *s)
{
    int n = tft_trace_nranks(t), e = 0;
    desync_stacks one = {0};
    for (int i = 0; i < n && e == 0; i++) {
        tft_reader *r = tft_trace_reader(t, i);
        if (!r)
            continue;   /* a damaged rank file: said elsewhere */
        const tft_rec *rec;
        e = tft_reader_rewind(r);
        while (e == 0 && (e = tft_reader_next(r, &rec)) == 1)
            e = desync_stacks_add(&one, r, tft_trace_rank_id(t, i), rec);
        if (e > 0 || e == -EBADMSG)
            e = 0;      /* the end, or damage the other analyses report */
        tft_trace_release(t, i);
    }
    if (e == 0)
        e = desync_stacks_merge(s, &one, 1);
    desync_stacks_free(&one);
    return e;
}

void desync_stacks_free(desync_stacks *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->v[i].frames);
    free(s->v);
    *s = (desync_stacks){0};
}

void desync_stacks_print(FILE *f, const desync_stacks *s, const char *prefix)
{
    /* entries are sorted by rank: a group lists its ranks in order */
    for (int i = 0; i < s->n; i++) {
        if (!s->v[i].main)
            continue;
        int first = 1, dup = 0;
        for (int j = 0; j < i && !dup; j++)
            dup = s->v[j].main && !strcmp(s->v[j].summary, s->v[i].summary);
        if (dup)
            continue;
        int count = 0;
        for (int j = i; j < s->n; j++)
            count += s->v[j].main && !strcmp(s->v[j].summary, s->v[i].summary);
        fprintf(f, "%s%s ", prefix, count > 1 ? "ranks" : "rank");
        for (int j = i; j < s->n; j++)
            if (s->v[j].main && !strcmp(s->v[j].summary, s->v[i].summary)) {
                fprintf(f, "%s%d", first ? "" : ",", s->v[j].rank);
                first = 0;
            }
        fprintf(f, ": %s\n", s->v[i].summary[0] ? s->v[i].summary : "(no frames)");
    }
}

cJSON *desync_stacks_json(const desync_stacks *s)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < s->n; i++) {
        const desync_stack *d = &s->v[i];
        cJSON *o = cJSON_CreateObject(), *fa = cJSON_CreateArray();
        cJSON_AddNumberToObject(o, "rank", d->rank);
        cJSON_AddNumberToObject(o, "pid", d->pid);
        cJSON_AddNumberToObject(o, "tid", d->tid);
        cJSON_AddBoolToObject(o, "main", d->main);
        cJSON_AddStringToObject(o, "comm", d->comm);
        cJSON_AddStringToObject(o, "summary", d->summary);
        for (const char *p = d->frames; p && *p;) {
            const char *e = strchr(p, '\n');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            char *line = strndup(p, n);
            if (line)
                cJSON_AddItemToArray(fa, cJSON_CreateString(line));
            free(line);
            p = e ? e + 1 : p + n;
        }
        cJSON_AddItemToObject(o, "frames", fa);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}
