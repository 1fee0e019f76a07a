/*
 * capture.c — captured tensors out of a trace (capture.h): assembling the
 * CAPTURE parts of every rank file into tensors, and the .npy writer.
 *
 * The trace is untrusted: a part's offset, size and total are checked
 * against each other and against the first part of the same capture, and a
 * tensor's buffer grows with the bytes that actually arrived (never to a
 * size a damaged header claims), so memory stays bounded by the captured
 * bytes present in the file — of the captures the caller asked for
 * (core_capture_list_want): tfdump --tensor keeps one tensor's bytes, --replay-op
 * one op's. One rank file is open at a time.
 */
#include "core_capture.h"
#include "core_out.h"
#include "tft_msg.h"
#include "tft_stats.h" /* tft_bf16_to_f32, tft_f8e4m3_to_f32, tft_f8e5m2_to_f32 */

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECENT_OPS 1024      /* ops remembered for the names of their captures */
#define RECENT_TENSORS 8192  /* TENSOR records remembered for their statistics */
#define OPEN_SEARCH 256      /* captures of a rank searched for the next part */

const char *core_capture_role_name(int role)
{
    static const char *const n[] = {"output", "input", "prior"};
    return role >= 0 && role <= TFT_CAPTURE_PRIOR ? n[role] : "?";
}

void core_capture_free(core_capture_tensor *t, size_t n)
{
    if (!t)
        return;
    for (size_t i = 0; i < n; i++)
        free(t[i].data);
    free(t);
}

/* ---- reading ------------------------------------------------------------- */

typedef struct recent_op {
    int64_t seq;
    uint64_t name;
    int kind;
} recent_op;

typedef struct recent_tensor {
    uint64_t id;
    tft_stats stats;
    int mode;
} recent_tensor;

/* Per-capture assembly state, parallel to the result array. */
typedef struct cap_build {
    uint64_t next;           /* offset the next part must start at */
    uint64_t cap;            /* bytes allocated in data */
    bool gap;                /* a part was missing or out of order */
    bool load;               /* its bytes are kept (with_data, and the caller wants them) */
} cap_build;

typedef struct lister {
    core_capture_tensor *t;
    cap_build *b;
    size_t n, cap;
    int with_data;
    core_capture_want_fn want;        /* which captures' bytes to load (NULL: all, when with_data) */
    void *want_ctx;
    recent_op ops[RECENT_OPS];
    recent_tensor *tensors;  /* RECENT_TENSORS entries, direct-mapped by id */
    tft_log_fn log;          /* the caller's, or NULL */
    void *log_ctx;
    char first_log[512];
    char lost[400];          /* the first rank file torn or with damaged chunks, "" none */
    int nlost;               /* how many */
} lister;

static void log_keep(void *ctx, int level, const char *msg)
{
    lister *l = ctx;
    if (level <= TFT_LOG_ERROR && !l->first_log[0])
        snprintf(l->first_log, sizeof(l->first_log), "%s", msg);
    if (l->log)
        l->log(l->log_ctx, level, msg);
}

static uint64_t numel_of(int ndim, const int64_t *shape, bool *ok)
{
    uint64_t n = 1;
    *ok = true;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && n > UINT64_MAX / (uint64_t)shape[i])) {
            *ok = false;
            return 0;
        }
        n *= (uint64_t)shape[i];
    }
    return n;
}

static int grow(lister *l)
{
    if (l->n < l->cap)
        return 0;
    size_t ncap = l->cap ? l->cap * 2 : 16;
    core_capture_tensor *nt = realloc(l->t, ncap * sizeof(*nt));
    if (!nt)
        return -ENOMEM;
    l->t = nt;
    cap_build *nb = realloc(l->b, ncap * sizeof(*nb));
    if (!nb)
        return -ENOMEM;
    l->b = nb;
    l->cap = ncap;
    return 0;
}

static void copy_name(char *dst, size_t n, const tft_reader *r, uint64_t id)
{
    const char *s = id ? tft_reader_string(r, id) : NULL;
    if (s)
        snprintf(dst, n, "%s", s);
    else if (id)
        snprintf(dst, n, "#%016" PRIx64, id);
    else
        dst[0] = '\0';
}

/* The capture this part continues (same rank, op, tensor, role), or -1. */
static long find_open(const lister *l, size_t rank_start, int64_t seq, uint64_t id, int role)
{
    size_t lo = l->n > OPEN_SEARCH ? l->n - OPEN_SEARCH : 0;
    if (lo < rank_start)
        lo = rank_start;
    for (size_t i = l->n; i-- > lo;) {
        const core_capture_tensor *t = &l->t[i];
        if (t->seq == seq && t->id == id && t->role == role)
            return (long)i;
    }
    return -1;
}

static int start_capture(lister *l, const tft_rec_capture *c, int rank, const tft_reader *r)
{
    int e = grow(l);
    if (e)
        return e;
    core_capture_tensor *t = &l->t[l->n];
    memset(t, 0, sizeof(*t));
    t->rank = rank;
    t->step = c->h.step;
    t->seq = c->h.seq;
    t->role = (int)c->role;
    t->id = c->tensor;
    copy_name(t->name, sizeof(t->name), r, c->name);
    t->dtype = c->dtype;
    t->ndim = c->ndim;
    memcpy(t->shape, c->shape, sizeof(t->shape));
    t->bytes = c->total;
    t->stats_mode = -1;
    t->op_kind = -1;
    bool ok;
    uint64_t numel = numel_of(t->ndim, t->shape, &ok);
    size_t esz = tft_dtype_size(t->dtype);
    t->consistent = ok && esz && numel <= UINT64_MAX / esz && numel * esz == c->total;
    const recent_op *o = &l->ops[(uint64_t)c->h.seq % RECENT_OPS];
    if (o->seq == c->h.seq) {
        copy_name(t->op_name, sizeof(t->op_name), r, o->name);
        t->op_kind = o->kind;
    }
    const recent_tensor *rt = &l->tensors[c->tensor % RECENT_TENSORS];
    if (rt->id == c->tensor && c->tensor) {
        t->stats = rt->stats;
        t->stats_mode = rt->mode;
    }
    l->b[l->n] = (cap_build){.load = l->with_data && (!l->want || l->want(l->want_ctx, t))};
    l->n++;
    return 0;
}

/* Appends a part's bytes (unshuffled) at its offset. */
static int take_bytes(core_capture_tensor *t, cap_build *b, const tft_rec_capture *c)
{
    uint64_t end = c->offset + c->n; /* <= total: tft_rec_check */
    if (end > b->cap) {
        uint64_t ncap = b->cap ? b->cap * 2 : 65536;
        if (ncap < end)
            ncap = end;
        if (ncap > t->bytes)
            ncap = t->bytes;
        if (ncap != (size_t)ncap)
            return -ENOMEM;
        void *nd = realloc(t->data, (size_t)ncap);
        if (!nd)
            return -ENOMEM;
        t->data = nd;
        b->cap = ncap;
    }
    char *dst = (char *)t->data + c->offset;
    if (c->h.flags & TFT_CAPTURE_SHUFFLED)
        tft_capture_shuffle(dst, c->data, c->n, tft_dtype_size(c->dtype), 1);
    else
        memcpy(dst, c->data, c->n);
    return 0;
}

static int add_part(lister *l, const tft_rec_capture *c, int rank, size_t rank_start, const tft_reader *r)
{
    long i = find_open(l, rank_start, c->h.seq, c->tensor, (int)c->role);
    int e;
    if (i < 0 || (l->b[i].next == l->t[i].bytes && c->offset == 0 && l->t[i].bytes)) {
        /* a new capture (or the same key again after a complete one: kept apart) */
        if ((e = start_capture(l, c, rank, r)))
            return e;
        i = (long)l->n - 1;
    }
    core_capture_tensor *t = &l->t[i];
    cap_build *b = &l->b[i];
    t->parts++;
    if (c->total != t->bytes || c->dtype != t->dtype || c->ndim != t->ndim ||
        memcmp(c->shape, t->shape, sizeof(t->shape)) != 0)
        t->consistent = 0;
    if (!t->consistent)
        return 0;
    if (c->offset != b->next) { /* lost (dropped) or repeated parts */
        b->gap = true;
        return 0;
    }
    b->next += c->n;
    t->present += c->n;
    if (b->load && !b->gap && c->n && (e = take_bytes(t, b, c)))
        return e;
    return 0;
}

static void note_record(lister *l, const tft_rec *rec)
{
    if (rec->kind == TFT_REC_OP) {
        const tft_rec_op *o = (const tft_rec_op *)rec;
        recent_op *slot = &l->ops[(uint64_t)o->h.seq % RECENT_OPS];
        *slot = (recent_op){.seq = o->h.seq, .name = o->name, .kind = o->op_kind};
    } else if (rec->kind == TFT_REC_TENSOR) {
        const tft_rec_tensor *t = (const tft_rec_tensor *)rec;
        recent_tensor *slot = &l->tensors[t->id % RECENT_TENSORS];
        *slot = (recent_tensor){.id = t->id, .stats = t->stats, .mode = t->mode};
    }
}

static int cmp_cap_id(const void *a, const void *b)
{
    const core_capture_tensor *x = *(core_capture_tensor *const *)a, *y = *(core_capture_tensor *const *)b;
    return (x->id > y->id) - (x->id < y->id);
}

/* Second pass over one rank file for TENSOR records too far back: the
 * captures still without statistics, sorted by id, looked up by binary
 * search per record (O(records log captures), not their product). */
static int fill_missing_stats(lister *l, tft_reader *r, size_t from)
{
    size_t nm = 0;
    for (size_t i = from; i < l->n; i++)
        nm += l->t[i].stats_mode < 0;
    if (!nm)
        return 0;
    core_capture_tensor **v = malloc(nm * sizeof(*v));
    if (!v)
        return -ENOMEM;
    nm = 0;
    for (size_t i = from; i < l->n; i++)
        if (l->t[i].stats_mode < 0)
            v[nm++] = &l->t[i];
    qsort(v, nm, sizeof(*v), cmp_cap_id);
    int e = tft_reader_rewind(r);
    const tft_rec *rec;
    while (!e && (e = tft_reader_next(r, &rec)) > 0) {
        e = 0;
        if (rec->kind != TFT_REC_TENSOR || rec->len < sizeof(tft_rec_tensor))
            continue;
        const tft_rec_tensor *tr = (const tft_rec_tensor *)rec;
        size_t lo = 0, hi = nm;
        while (lo < hi) { /* the first capture of this id */
            size_t mid = lo + (hi - lo) / 2;
            if (v[mid]->id < tr->id)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (size_t k = lo; k < nm && v[k]->id == tr->id; k++) {
            if (v[k]->stats_mode >= 0)
                continue;
            v[k]->stats = tr->stats;
            v[k]->stats_mode = tr->mode;
        }
    }
    free(v);
    return e;
}

static int list_rank(lister *l, tft_reader *r, int rank)
{
    size_t from = l->n;
    memset(l->ops, 0, sizeof(l->ops));
    for (size_t i = 0; i < RECENT_OPS; i++)
        l->ops[i].seq = TFT_SEQ_NONE;
    memset(l->tensors, 0, RECENT_TENSORS * sizeof(*l->tensors));
    const tft_rec *rec;
    int e;
    while ((e = tft_reader_next(r, &rec)) > 0) {
        if (rec->kind == TFT_REC_CAPTURE) {
            if ((e = add_part(l, (const tft_rec_capture *)rec, rank, from, r)))
                return e;
        } else {
            note_record(l, rec);
        }
    }
    if (e < 0)
        return e;
    for (size_t i = from; i < l->n; i++) {
        core_capture_tensor *t = &l->t[i];
        t->complete = t->consistent && !l->b[i].gap && t->present == t->bytes;
        if (!t->complete || !l->b[i].load) {
            free(t->data);
            t->data = NULL;
        } else if (!t->data) { /* an empty tensor: a valid, empty buffer */
            t->data = malloc(1);
            if (!t->data)
                return -ENOMEM;
        }
    }
    return fill_missing_stats(l, r, from);
}

static int list_want(const char *trace_path, core_capture_want_fn want, void *want_ctx, core_capture_tensor **out,
                     size_t *n, tft_log_fn log, void *log_ctx, char *err, size_t errlen, char *lost, size_t lostlen);

int core_capture_list(const char *trace_path, int with_data, core_capture_tensor **out, size_t *n, char *err,
                      size_t errlen, char *lost, size_t lostlen)
{
    return list_want(trace_path, with_data ? NULL : core_capture_want_none, NULL, out, n, NULL, NULL, err, errlen,
                     lost, lostlen);
}

int core_capture_want_none(void *ctx, const core_capture_tensor *t)
{
    (void)ctx, (void)t;
    return 0;
}

int core_capture_list_want(const char *trace_path, core_capture_want_fn want, void *want_ctx, core_capture_tensor **out, size_t *n,
                  tft_log_fn log, void *log_ctx, char *err, size_t errlen)
{
    return list_want(trace_path, want, want_ctx, out, n, log, log_ctx, err, errlen, NULL, 0);
}

static int list_want(const char *trace_path, core_capture_want_fn want, void *want_ctx, core_capture_tensor **out,
                     size_t *n, tft_log_fn log, void *log_ctx, char *err, size_t errlen, char *lost, size_t lostlen)
{
    *out = NULL;
    *n = 0;
    lister *l = calloc(1, sizeof(*l));
    if (!l || !(l->tensors = calloc(RECENT_TENSORS, sizeof(*l->tensors)))) {
        free(l);
        return tft_errf(err, errlen, -ENOMEM, "out of memory");
    }
    l->with_data = want != core_capture_want_none;
    l->want = want == core_capture_want_none ? NULL : want;
    l->want_ctx = want_ctx;
    l->log = log;
    l->log_ctx = log_ctx;
    tft_reader_opts ro = TFT_READER_OPTS(.log = log_keep, .log_ctx = l);
    tft_trace *tr = tft_trace_open_lazy(trace_path, &ro); /* one rank file open at a time */
    int e = 0;
    if (!tr) {
        e = tft_errf(err, errlen, -errno, "%s", l->first_log[0] ? l->first_log : strerror(errno));
        goto out;
    }
    for (int i = 0; i < tft_trace_nranks(tr) && !e; i++) {
        tft_reader *r = tft_trace_reader(tr, i);
        e = r ? list_rank(l, r, tft_trace_rank_id(tr, i)) : errno ? -errno : -EIO;
        if (e)
            tft_errf(err, errlen, e, "%s: %s", tft_trace_file_name(tr, i),
                     e == -ENOMEM ? "needs more memory than allowed for the captured tensors" : strerror(-e));
        tft_reader_status st;
        if (!e && tft_trace_status(tr, i, &st) > 0 && (st.integrity != TFT_INTACT || st.chunks_bad) &&
            !l->nlost++)
            snprintf(l->lost, sizeof(l->lost), "%s is %s", tft_trace_file_name(tr, i),
                     st.integrity == TFT_DAMAGED || st.chunks_bad ? "damaged" : "torn");
        tft_trace_release(tr, i);
    }
out:
    tft_trace_close(tr);
    free(l->tensors);
    free(l->b);
    if (e) {
        core_capture_free(l->t, l->n);
    } else {
        *out = l->t;
        *n = l->n;
        if (lost && lostlen)
            snprintf(lost, lostlen, "%s%s", l->lost,
                     l->nlost > 1 ? " (and other rank files)" : "");
    }
    free(l);
    return e;
}

/* ---- finding ------------------------------------------------------------- */

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

int core_capture_find(const core_capture_tensor *t, size_t n, const char *name_or_id)
{
    if (!name_or_id)
        return -1;
    if (all_digits(name_or_id)) {
        errno = 0;
        unsigned long long id = strtoull(name_or_id, NULL, 10);
        for (size_t i = 0; errno == 0 && i < n; i++)
            if (t[i].id == id)
                return (int)i;
        return -1;
    }
    char name[256];
    snprintf(name, sizeof(name), "%s", name_or_id);
    char *at = strrchr(name, '@');
    bool have_step = false;
    long long step = 0;
    if (at && at[1]) {
        char *end;
        errno = 0;
        step = strtoll(at + 1, &end, 10);
        if (!errno && !*end) {
            *at = '\0';
            have_step = true;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (t[i].role == TFT_CAPTURE_PRIOR || strcmp(t[i].name, name) != 0)
            continue;
        if (have_step && t[i].step != step)
            continue;
        return (int)i;
    }
    return -1;
}

int core_capture_find_op(const core_capture_tensor *t, size_t n, int rank, int64_t seq, uint64_t id, int role)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].rank == rank && t[i].seq == seq && t[i].id == id && t[i].role == role)
            return (int)i;
    return -1;
}

/* ---- .npy ------------------------------------------------------------------- */

static const char *npy_descr(int dtype, int as_f32)
{
    switch (dtype) {
    case TFT_F32: return "<f4";
    case TFT_F64: return "<f8";
    case TFT_F16: return "<f2";
    case TFT_BF16: return as_f32 ? "<f4" : "<u2";
    case TFT_F8E4M3: case TFT_F8E5M2: return as_f32 ? "<f4" : "|u1";
    case TFT_I32: return "<i4";
    case TFT_I64: return "<i8";
    case TFT_U8: return "|u1";
    case TFT_I8: return "|i1";
    case TFT_I16: return "<i2";
    case TFT_U16: return "<u2";
    case TFT_U32: return "<u4";
    case TFT_U64: return "<u8";
    case TFT_BOOL: return "|b1";
    default: return NULL;
    }
}

/* The header dict, padded with spaces and a newline so that magic (6) +
 * version (2) + length (2) + header is a multiple of 64. */
static int npy_header(const core_capture_tensor *t, const char *descr, char *buf, size_t cap, size_t *len)
{
    char shape[TFT_MAX_NDIM * 24 + 8];
    size_t k = 0;
    shape[k++] = '(';
    for (int i = 0; i < t->ndim; i++)
        k += (size_t)snprintf(shape + k, sizeof(shape) - k, "%" PRId64 "%s", t->shape[i],
                              t->ndim == 1 ? "," : (i + 1 < t->ndim ? ", " : ""));
    shape[k++] = ')';
    shape[k] = '\0';
    int n = snprintf(buf, cap, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    if (n < 0 || (size_t)n + 64 > cap)
        return -EINVAL;
    size_t total = 10 + (size_t)n + 1;
    size_t padded = (total + 63) / 64 * 64;
    memset(buf + n, ' ', padded - total);
    buf[padded - 10 - 1] = '\n';
    *len = padded - 10;
    return 0;
}

/* Element i of t's bytes (bf16 or fp8) as a float, exactly. */
static float decode_f32(const core_capture_tensor *t, size_t i)
{
    const unsigned char *p = t->data;
    if (t->dtype == TFT_F8E4M3)
        return tft_f8e4m3_to_f32(p[i]);
    if (t->dtype == TFT_F8E5M2)
        return tft_f8e5m2_to_f32(p[i]);
    uint16_t b;
    memcpy(&b, p + 2 * i, sizeof(b));
    return tft_bf16_to_f32(b);
}

static int write_body(FILE *f, const core_capture_tensor *t, int convert)
{
    if (!convert)
        return fwrite(t->data, 1, (size_t)t->bytes, f) == (size_t)t->bytes ? 0 : -EIO;
    size_t count = (size_t)(t->bytes / tft_dtype_size(t->dtype));
    float buf[4096];
    for (size_t i = 0; i < count;) {
        size_t m = count - i < 4096 ? count - i : 4096;
        for (size_t j = 0; j < m; j++)
            buf[j] = decode_f32(t, i + j);
        if (fwrite(buf, sizeof(float), m, f) != m)
            return -EIO;
        i += m;
    }
    return 0;
}

/* Whether dtype has no numpy equivalent and is converted to '<f4' by
 * core_capture_write_npy's as_f32 (bf16, f8e4m3, f8e5m2). */
static bool npy_decodes(int dtype)
{
    return dtype == TFT_BF16 || dtype == TFT_F8E4M3 || dtype == TFT_F8E5M2;
}

int core_capture_write_npy(const core_capture_tensor *t, const char *path, int as_f32, unsigned mode, char *err,
                           size_t errlen)
{
    if (!t->complete || !t->data)
        return tft_errf(err, errlen, -ENODATA, "tensor %s (id %" PRIu64 ") is not completely captured", t->name,
                        t->id);
    const char *descr = npy_descr(t->dtype, as_f32);
    if (!descr || t->ndim < 0 || t->ndim > TFT_MAX_NDIM)
        return tft_errf(err, errlen, -EINVAL, "tensor %s: dtype %d has no .npy equivalent", t->name, t->dtype);
    char hdr[TFT_MAX_NDIM * 24 + 256];
    size_t hlen;
    if (npy_header(t, descr, hdr, sizeof(hdr), &hlen) < 0)
        return tft_errf(err, errlen, -EINVAL, "tensor %s: shape too long for a .npy header", t->name);
    core_out out;
    if (core_out_open(&out, path, mode ? mode : 0600) < 0) {
        int e = errno;
        return tft_errf(err, errlen, -e, "%s: cannot create: %s", path, core_out_strerror(&out));
    }
    FILE *f = out.f;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    int e = fwrite(pre, 1, sizeof(pre), f) == sizeof(pre) && fwrite(hdr, 1, hlen, f) == hlen ? 0 : -EIO;
    if (!e)
        e = write_body(f, t, as_f32 && npy_decodes(t->dtype));
    if (e)
        core_out_abort(&out);
    else if (core_out_commit(&out) != 0)
        e = -EIO;
    if (e)
        tft_errf(err, errlen, e, "%s: write failed", path);
    return e;
}
