/*
 * core_spill.c — per-rank extracts for the cross-rank analyses (see
 * core_spill.h) and their merge.
 *
 * Why the merge order is the old one. tft_merge (TFT_ORDER_STEP_SEQ) pops,
 * among the head records of all rank files, the least (step, seq, rank
 * index), step and seq carried over from the rank's last record that had
 * one. A rank file's keys need not grow (several recording threads), so
 * consider P, the running maximum of a rank's keys. A record whose key is
 * below the P of the records before it is popped right after its
 * predecessor: when the record that set P was popped every other head was
 * at least P, and nothing moved since. So at a choice, only the rank just
 * popped can hold such a record, every other head's key equals its P, and
 * popping the least key is popping the least P: the merge of the rank files
 * is the merge of their P sequences, which never decrease — a plain sorted
 * merge by (P, index), in which any subset of the records keeps its order.
 * The extract keeps the subset the analyses read, each with its P.
 *
 * Cost: one pass per rank file; an extract holds the rank's collectives,
 * COMM records and "param.*" tensors (about 50 bytes each plus the
 * record), a few strings; the merge reads SPILL_READ bytes per rank at a
 * time.
 */
#include "core_spill.h"
#include "core_common.h"
#include "core_clock.h"
#include "tft_u64map.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    SPILL_BLOCK = 64 << 10, /* bytes a rank buffers before writing them */
    SPILL_READ = 1 << 10,   /* merge: a rank's first read buffer (grows for a larger entry) */
    SPILL_RECENT = 16,      /* tensors kept to resolve a collective's result (desync_collectives.c's rule) */
};

typedef struct spill_block {
    uint64_t off;
    uint32_t len;
} spill_block;

typedef struct spill_rank {
    spill_block *blocks;
    size_t nblocks, cap;
    core_spill_nonfinite nf;
} spill_rank;

struct diff_spill {
    int fd;
    int nranks;
    _Atomic uint64_t end;      /* bytes of the file handed out */
    spill_rank *ranks;
};

diff_spill *core_spill_new(int nranks)
{
    diff_spill *sp = calloc(1, sizeof(*sp));
    if (!sp || nranks < 0)
        goto nomem;
    sp->nranks = nranks;
    sp->ranks = calloc((size_t)nranks + 1, sizeof(*sp->ranks));
    if (!sp->ranks)
        goto nomem;
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/tfdiff-spill.XXXXXX", dir && *dir ? dir : "/tmp");
    sp->fd = mkstemp(path);
    if (sp->fd < 0) {
        int e = errno;
        free(sp->ranks);
        free(sp);
        errno = e;
        return NULL;
    }
    unlink(path);
    return sp;
nomem:
    if (sp)
        free(sp->ranks);
    free(sp);
    errno = ENOMEM;
    return NULL;
}

void core_spill_free(diff_spill *sp)
{
    if (!sp)
        return;
    for (int i = 0; i < sp->nranks; i++)
        free(sp->ranks[i].blocks);
    free(sp->ranks);
    if (sp->fd >= 0)
        close(sp->fd);
    free(sp);
}

const core_spill_nonfinite *core_spill_nonfinite_of(const diff_spill *sp, int ri)
{
    static const core_spill_nonfinite none;
    return sp && ri >= 0 && ri < sp->nranks ? &sp->ranks[ri].nf : &none;
}

/* Appends n bytes to rank ri's blocks (one write, at an offset reserved for it). */
static int rank_write(diff_spill *sp, int ri, const void *p, size_t n)
{
    spill_rank *rk = &sp->ranks[ri];
    if (!n)
        return 0;
    if (rk->nblocks == rk->cap) {
        size_t nc = rk->cap ? rk->cap * 2 : 8;
        spill_block *b = realloc(rk->blocks, nc * sizeof(*b));
        if (!b)
            return -ENOMEM;
        rk->blocks = b;
        rk->cap = nc;
    }
    uint64_t off = atomic_fetch_add(&sp->end, (uint64_t)n);
    for (size_t done = 0; done < n;) {
        ssize_t w = pwrite(sp->fd, (const char *)p + done, n - done, (off_t)(off + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        done += (size_t)w;
    }
    rk->blocks[rk->nblocks++] = (spill_block){off, (uint32_t)n};
    return 0;
}

int core_spill_import(diff_spill *sp, int ri, const void *p, size_t n)
{
    if (!sp || ri < 0 || ri >= sp->nranks)
        return -EINVAL;
    for (size_t k = 0; k < n; k += SPILL_BLOCK) {
        int e = rank_write(sp, ri, (const char *)p + k, n - k < SPILL_BLOCK ? n - k : SPILL_BLOCK);
        if (e)
            return e;
    }
    return 0;
}

uint64_t core_spill_bytes(const diff_spill *sp, int ri)
{
    uint64_t n = 0;
    for (size_t b = 0; sp && ri >= 0 && ri < sp->nranks && b < sp->ranks[ri].nblocks; b++)
        n += sp->ranks[ri].blocks[b].len;
    return n;
}

int core_spill_export(const diff_spill *sp, int ri, int (*emit)(void *ctx, const void *p, size_t n), void *ctx)
{
    if (!sp || ri < 0 || ri >= sp->nranks)
        return -EINVAL;
    char *buf = malloc(SPILL_BLOCK);
    if (!buf)
        return -ENOMEM;
    const spill_rank *rk = &sp->ranks[ri];
    int e = 0;
    for (size_t b = 0; !e && b < rk->nblocks; b++) {
        size_t n = rk->blocks[b].len;
        ssize_t r = pread(sp->fd, buf, n, (off_t)rk->blocks[b].off);
        e = r == (ssize_t)n ? emit(ctx, buf, n) : r < 0 ? -errno : -EIO;
    }
    free(buf);
    return e;
}

/* ---- extraction ---------------------------------------------------------- */

struct core_spill_extractor {
    diff_spill *sp;
    int ri;
    tft_reader *r;
    unsigned char *buf;        /* SPILL_BLOCK bytes being filled */
    size_t len;
    int64_t last_step, last_seq; /* tft_merge's carried step and seq */
    int64_t pstep, pseq;       /* their running maximum: the key */
    struct { uint64_t id, fp; bool valid; } recent[SPILL_RECENT];
    unsigned recent_pos;
    tft_u64map strs;           /* string ids already in this rank's extract */
    core_clock_pair clk;       /* the clock pair in force (SPILL_CLOCK entries when it changes) */
};
typedef struct core_spill_extractor extractor;

static int ex_flush(extractor *x)
{
    int e = rank_write(x->sp, x->ri, x->buf, x->len);
    x->len = 0;
    return e;
}

/* Appends an entry of header h and payload p[0, n) padded to `pad` bytes. */
static int ex_put(extractor *x, spill_ent h, const void *p, size_t n, size_t pad)
{
    size_t body = ((pad > n ? pad : n) + 7) & ~(size_t)7;
    h.len = (uint32_t)(sizeof(h) + body);
    h.kstep = x->pstep;
    h.kseq = x->pseq;
    if (x->len + h.len > SPILL_BLOCK) {
        int e = ex_flush(x);
        if (e)
            return e;
    }
    if (h.len > SPILL_BLOCK) /* records are at most TFT_REC_MAX_BYTES, the block as large */
        return -EINVAL;
    memcpy(x->buf + x->len, &h, sizeof(h));
    if (n)
        memcpy(x->buf + x->len + sizeof(h), p, n);
    memset(x->buf + x->len + sizeof(h) + n, 0, body - n);
    x->len += h.len;
    return 0;
}

/* The text of string id, once per rank, before the entry that names it. */
static int ex_string(extractor *x, uint64_t id)
{
    if (!id || tft_u64map_find(&x->strs, id, NULL, NULL))
        return 0;
    const char *txt = tft_reader_string(x->r, id);
    if (!txt)
        return 0; /* not known yet: tried again at its next use */
    void *v;
    int e = tft_u64map_insert(&x->strs, id, NULL, NULL, &v);
    if (e < 0)
        return e == -ENOSPC ? 0 : e;
    size_t n = strlen(txt);
    if (n > SPILL_BLOCK - sizeof(spill_ent) - 8)
        n = SPILL_BLOCK - sizeof(spill_ent) - 8;
    return ex_put(x, (spill_ent){.kind = SPILL_STR, .fp = n, .name = id}, txt, n, n + 1);
}

static void ex_nonfinite(extractor *x, const tft_rec_tensor *t)
{
    core_spill_nonfinite *nf = &x->sp->ranks[x->ri].nf;
    if (nf->found || t->mode < TFT_STATS_HEALTH || t->stats.nan + t->stats.pinf + t->stats.ninf == 0)
        return;
    const char *name = tft_reader_string(x->r, t->name);
    if (core_mask_inf(name, &t->stats))
        return; /* a causal mask's -inf (masked_fill) */
    *nf = (core_spill_nonfinite){true, x->pstep, x->pseq, t->h.step, t->h.seq, t->stats.nan,
                                 t->stats.pinf + t->stats.ninf, ""};
    if (name)
        snprintf(nf->name, sizeof(nf->name), "%s", name);
    else
        snprintf(nf->name, sizeof(nf->name), "%016llx", (unsigned long long)t->name);
}

/* desync_params.c's desync_on_param and desync_on_grad filter, within the rank. */
static int ex_tensor(extractor *x, const tft_rec_tensor *t)
{
    ex_nonfinite(x, t);
    x->recent[x->recent_pos++ % SPILL_RECENT].id = t->id;
    x->recent[(x->recent_pos - 1) % SPILL_RECENT].fp = t->stats.fingerprint;
    x->recent[(x->recent_pos - 1) % SPILL_RECENT].valid = t->mode >= TFT_STATS_HEALTH;
    if (t->h.step == TFT_STEP_NONE || t->mode < TFT_STATS_HEALTH)
        return 0;
    const char *text = tft_reader_string(x->r, t->name);
    if (text && !strncmp(text, "grad.", 5) && text[5]) {   /* keyed by its parameter's name */
        char pname[512];
        int n = snprintf(pname, sizeof(pname), "param.%s", text + 5);
        if (n <= 0 || (size_t)n >= sizeof(pname))
            return 0;
        return ex_put(x, (spill_ent){.kind = SPILL_GRAD, .step = t->h.step, .fp = t->stats.fingerprint,
                                     .name = tft_string_id(pname, (size_t)n)},
                      NULL, 0, 0);
    }
    if (!text || strncmp(text, "param.", 6) != 0)
        return 0;
    int e = ex_string(x, t->name);
    return e ? e
             : ex_put(x, (spill_ent){.kind = SPILL_PARAM, .step = t->h.step, .fp = t->stats.fingerprint,
                                     .name = t->name, .has_fp = t->stats.zero == t->stats.numel},
                      NULL, 0, 0);
}

static int ex_collective(extractor *x, const tft_rec *rec)
{
    const tft_rec_collective *cr = (const tft_rec_collective *)rec;
    spill_ent h = {.kind = SPILL_COLL, .step = rec->step != TFT_STEP_NONE ? rec->step : x->last_step};
    if ((cr->h.flags & TFT_COLL_FLAG_EXIT) && cr->result)
        for (int k = 0; k < SPILL_RECENT && !h.has_fp; k++)
            if (x->recent[k].valid && x->recent[k].id == cr->result) {
                h.fp = x->recent[k].fp;
                h.has_fp = 1;
            }
    int e = ex_string(x, cr->name);
    return e ? e : ex_put(x, h, rec, rec->len, sizeof(tft_rec_collective));
}

static int ex_record(extractor *x, const tft_rec *rec)
{
    if (rec->step != TFT_STEP_NONE)
        x->last_step = rec->step;
    if (rec->seq != TFT_SEQ_NONE)
        x->last_seq = rec->seq;
    if (x->last_step > x->pstep || (x->last_step == x->pstep && x->last_seq > x->pseq)) {
        x->pstep = x->last_step;
        x->pseq = x->last_seq;
    }
    if (rec->kind == TFT_REC_TENSOR && rec->len >= sizeof(tft_rec_tensor))
        return ex_tensor(x, (const tft_rec_tensor *)rec);
    if (rec->kind == TFT_REC_COMM && rec->len >= sizeof(tft_rec_comm))
        return ex_put(x, (spill_ent){.kind = SPILL_COMM, .step = x->last_step}, rec, rec->len, 0);
    if (rec->kind == TFT_REC_COLLECTIVE && rec->len >= TFT_REC_COLLECTIVE_MIN_BYTES)
        return ex_collective(x, rec);
    if (core_clock_pair_update(&x->clk, rec))
        return ex_put(x, (spill_ent){.kind = SPILL_CLOCK, .step = x->last_step}, &x->clk, sizeof(x->clk), 0);
    return 0;
}

core_spill_extractor *core_spill_extract_begin(diff_spill *sp, tft_reader *r, int ri)
{
    if (!sp || !r || ri < 0 || ri >= sp->nranks) {
        errno = EINVAL;
        return NULL;
    }
    extractor *x = calloc(1, sizeof(*x));
    if (x)
        x->buf = malloc(SPILL_BLOCK);
    if (!x || !x->buf) {
        free(x);
        errno = ENOMEM;
        return NULL;
    }
    x->sp = sp;
    x->ri = ri;
    x->r = r;
    x->last_step = x->last_seq = x->pstep = x->pseq = INT64_MIN;
    const tft_file_info *fi = tft_reader_info(r);
    if (fi)
        core_clock_pair_start(&x->clk, fi);
    tft_u64map_init(&x->strs, &(tft_u64map_opts){.vsize = 1, .max_n = 1 << 16});
    return x;
}

int core_spill_extract_record(core_spill_extractor *x, const tft_rec *rec)
{
    return ex_record(x, rec);
}

int core_spill_extract_end(core_spill_extractor *x, bool keep)
{
    if (!x)
        return 0;
    int e = keep ? ex_flush(x) : 0;
    free(x->buf);
    tft_u64map_free(&x->strs);
    free(x);
    return e;
}

int core_spill_extract(diff_spill *sp, tft_reader *r, int ri)
{
    core_spill_extractor *x = core_spill_extract_begin(sp, r, ri);
    if (!x)
        return -errno;
    int e = tft_reader_rewind(r);
    const tft_rec *rec;
    while (e == 0 && (e = tft_reader_next(r, &rec)) == 1)
        e = ex_record(x, rec);
    int f = core_spill_extract_end(x, e == 0);
    return e < 0 ? e : f;
}

/* ---- merge --------------------------------------------------------------- */

typedef struct merge_src {
    unsigned char *buf;        /* entries read ahead */
    size_t cap, pos, len;
    size_t block;              /* next block to read ... */
    uint32_t block_off;        /* ... from this byte of it */
    const spill_ent *head;     /* current entry (in buf), NULL when done */
} merge_src;

struct core_spill_merge {
    diff_spill *sp;
    merge_src *src;            /* nranks */
    int *heap, n;              /* rank indices with a head, least key first */
    int pending;               /* rank whose head was handed out, -1 none */
};

/* Whether rank a's head comes before rank b's. */
static bool src_less(const core_spill_merge *m, int a, int b)
{
    const spill_ent *x = m->src[a].head, *y = m->src[b].head;
    if (x->kstep != y->kstep)
        return x->kstep < y->kstep;
    if (x->kseq != y->kseq)
        return x->kseq < y->kseq;
    return a < b;
}

static void heap_down(core_spill_merge *m, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, s = i;
        if (l < m->n && src_less(m, m->heap[l], m->heap[s]))
            s = l;
        if (r < m->n && src_less(m, m->heap[r], m->heap[s]))
            s = r;
        if (s == i)
            return;
        int t = m->heap[i];
        m->heap[i] = m->heap[s];
        m->heap[s] = t;
        i = s;
    }
}

static void heap_up(core_spill_merge *m, int i)
{
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!src_less(m, m->heap[i], m->heap[p]))
            return;
        int t = m->heap[i];
        m->heap[i] = m->heap[p];
        m->heap[p] = t;
        i = p;
    }
}

/* Reads more of rank ri's blocks so that at least `need` bytes follow pos
 * (fewer at the end of its extract). */
static int src_fill(core_spill_merge *m, int ri, size_t need)
{
    merge_src *s = &m->src[ri];
    const spill_rank *rk = &m->sp->ranks[ri];
    if (s->pos) {
        memmove(s->buf, s->buf + s->pos, s->len - s->pos);
        s->len -= s->pos;
        s->pos = 0;
    }
    if (need > s->cap) {
        size_t nc = s->cap ? s->cap : SPILL_READ;
        while (nc < need)
            nc *= 2;
        unsigned char *p = realloc(s->buf, nc);
        if (!p)
            return -ENOMEM;
        s->buf = p;
        s->cap = nc;
    }
    while (s->len < need && s->block < rk->nblocks) {
        const spill_block *b = &rk->blocks[s->block];
        size_t want = b->len - s->block_off, room = s->cap - s->len;
        size_t n = want < room ? want : room;
        ssize_t r = pread(m->sp->fd, s->buf + s->len, n, (off_t)(b->off + s->block_off));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : -EIO;
        s->len += (size_t)r;
        s->block_off += (uint32_t)r;
        if (s->block_off == b->len) {
            s->block++;
            s->block_off = 0;
        }
    }
    return 0;
}

/* Moves rank ri to its next entry (head NULL at the end). */
static int src_next(core_spill_merge *m, int ri)
{
    merge_src *s = &m->src[ri];
    if (s->head)
        s->pos += s->head->len;
    s->head = NULL;
    int e = s->len - s->pos < sizeof(spill_ent) ? src_fill(m, ri, sizeof(spill_ent)) : 0;
    if (e || s->len - s->pos < sizeof(spill_ent))
        return e;
    spill_ent h;
    memcpy(&h, s->buf + s->pos, sizeof(h));
    if (h.len < sizeof(h) || h.len % 8)
        return -EIO; /* our own file: damage means the disk lied */
    if (s->len - s->pos < h.len && (e = src_fill(m, ri, h.len)) != 0)
        return e;
    if (s->len - s->pos < h.len)
        return -EIO;
    s->head = (const spill_ent *)(s->buf + s->pos);
    return 0;
}

void core_spill_merge_close(core_spill_merge *m)
{
    if (!m)
        return;
    for (int i = 0; m->src && i < m->sp->nranks; i++)
        free(m->src[i].buf);
    free(m->src);
    free(m->heap);
    free(m);
}

core_spill_merge *core_spill_merge_open(diff_spill *sp)
{
    core_spill_merge *m = calloc(1, sizeof(*m));
    if (m) {
        m->sp = sp;
        m->pending = -1;
        m->src = calloc((size_t)sp->nranks + 1, sizeof(*m->src));
        m->heap = calloc((size_t)sp->nranks + 1, sizeof(*m->heap));
    }
    if (!m || !m->src || !m->heap) {
        core_spill_merge_close(m);
        errno = ENOMEM;
        return NULL;
    }
    for (int i = 0; i < sp->nranks; i++) {
        int e = src_next(m, i);
        if (e) {
            core_spill_merge_close(m);
            errno = -e;
            return NULL;
        }
        if (m->src[i].head) {
            m->heap[m->n] = i;
            heap_up(m, m->n++);
        }
        if (!m->src[i].head) { /* nothing: give the buffer back */
            free(m->src[i].buf);
            m->src[i] = (merge_src){0};
        }
    }
    return m;
}

int core_spill_merge_next(core_spill_merge *m, const spill_ent **e, int *ri)
{
    if (m->pending >= 0) {
        int p = m->pending, err = src_next(m, p);
        m->pending = -1;
        if (err)
            return err;
        if (m->src[p].head) {
            m->heap[m->n] = p;
            heap_up(m, m->n++);
        } else {
            free(m->src[p].buf);
            m->src[p] = (merge_src){0};
        }
    }
    if (m->n == 0)
        return 0;
    int top = m->heap[0];
    m->heap[0] = m->heap[--m->n];
    heap_down(m, 0);
    m->pending = top;
    *e = m->src[top].head;
    *ri = top;
    return 1;
}
