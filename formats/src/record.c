/*
 * record.c — record kinds: the table of what each kind is (tft_rec_kind),
 * structural checks, names;
 * plus the small I/O and string-map helpers of the format library.
 */
#include "format_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

/* One row per record kind (tft_format.h, tft_rec_kind_info). A new kind
 * is a struct in tft_format.h and a row here; docs/CONTRIBUTING.md lists
 * the few other places that show it. */
#define STR(type, field) {offsetof(type, field)}, {#field}
#define STR2(type, a, b) {offsetof(type, a), offsetof(type, b)}, {#a, #b}
#define STR4(type, a, b, c, d) \
    {offsetof(type, a), offsetof(type, b), offsetof(type, c), offsetof(type, d)}, {#a, #b, #c, #d}
#define SUB TFT_KIND_SUBSTANCE
static const tft_rec_kind_info kinds[TFT_REC_KIND_MAX] = {
    [TFT_REC_STRING] = {"string", sizeof(tft_rec_string), 0, 0, -1, {0}, {0}},
    [TFT_REC_STEP] = {"step", sizeof(tft_rec_step), SUB, 0, -1, {0}, {0}},
    [TFT_REC_OP] = {"op", sizeof(tft_rec_op), SUB, 2, 0, STR2(tft_rec_op, name, scope)},
    [TFT_REC_TENSOR] = {"tensor", sizeof(tft_rec_tensor), SUB, 1, 0, STR(tft_rec_tensor, name)},
    [TFT_REC_ALLOC] = {"alloc", sizeof(tft_rec_alloc), SUB, 1, 0, STR(tft_rec_alloc, site)},
    [TFT_REC_FREE] = {"free", sizeof(tft_rec_free), SUB, 0, -1, {0}, {0}},
    /* the 1.0/1.1 length; the tag since 1.2 */
    [TFT_REC_COLLECTIVE] = {"collective", TFT_REC_COLLECTIVE_MIN_BYTES, SUB, 1, 0, STR(tft_rec_collective, name)},
    [TFT_REC_KERNEL] = {"kernel", sizeof(tft_rec_kernel), SUB, 1, 0, STR(tft_rec_kernel, name)},
    [TFT_REC_CHECKPOINT] = {"checkpoint", sizeof(tft_rec_checkpoint), SUB, 2, 0,
                            STR2(tft_rec_checkpoint, path, recipe)},
    [TFT_REC_PROCESS] = {"process", sizeof(tft_rec_process), 0, 0, -1, {0}, {0}},
    /* the 1.0-1.3 length; kinds and steps since 1.4 */
    [TFT_REC_DROPPED] = {"dropped", TFT_REC_DROPPED_MIN_BYTES, 0, 0, -1, {0}, {0}},
    [TFT_REC_CAPTURE] = {"capture", sizeof(tft_rec_capture), SUB, 1, 0, STR(tft_rec_capture, name)},
    [TFT_REC_THREAD] = {"thread", sizeof(tft_rec_thread), 0, 1, 0, STR(tft_rec_thread, name)},
    [TFT_REC_SYNC] = {"sync", sizeof(tft_rec_sync), 0, 0, -1, {0}, {0}},
    [TFT_REC_COMM] = {"comm", sizeof(tft_rec_comm), SUB | TFT_KIND_RUN_LONG, 1, 0, STR(tft_rec_comm, name)},
    [TFT_REC_STACK] = {"stack", sizeof(tft_rec_stack), 0, 4, 1, STR4(tft_rec_stack, comm, summary, frames, note)},
    [TFT_REC_CLOCK] = {"clock", sizeof(tft_rec_clock), 0, 0, -1, {0}, {0}},
    [TFT_REC_EXCEPTION] = {"exception", sizeof(tft_rec_exception), SUB, 4, 0,
                           STR4(tft_rec_exception, type, message, where, frames)},
};
#undef STR
#undef STR2
#undef STR4
#undef SUB

const tft_rec_kind_info *tft_rec_kind(uint16_t kind)
{
    return kind < TFT_REC_KIND_MAX && kinds[kind].name ? &kinds[kind] : NULL;
}

int tft_rec_string_ids(const tft_rec *rec, uint64_t ids[TFT_REC_STRINGS])
{
    const tft_rec_kind_info *k = tft_rec_kind(rec->kind);
    int n = k ? k->n_strings : 0;
    for (int i = 0; i < n; i++)
        memcpy(&ids[i], (const char *)rec + k->string_offset[i], sizeof(ids[i]));
    return n;
}

size_t tft_rec_min_size(uint16_t kind)
{
    const tft_rec_kind_info *k = tft_rec_kind(kind);
    return k ? k->min_size : 0;
}

const char *tft_rec_kind_name(uint16_t kind)
{
    const tft_rec_kind_info *k = tft_rec_kind(kind);
    return k ? k->name : "?";
}

/* Checks one record's framing and its kind's counts against its length.
 * avail: bytes from rec to the end of the buffer. Never reads past avail. */
int tft_rec_check(const tft_rec *rec, size_t avail)
{
    if (avail < sizeof(tft_rec))
        return -EBADMSG;
    uint32_t len = rec->len;
    if (len < sizeof(tft_rec) || len % TFT_REC_ALIGN || len > avail || len > TFT_REC_MAX_BYTES)
        return -EBADMSG;
    size_t min = tft_rec_min_size(rec->kind);
    if (min == 0)
        return 0; /* unknown kind: skipped by length */
    if (len < min)
        return -EBADMSG;
    switch (rec->kind) {
    case TFT_REC_STRING: {
        const tft_rec_string *s = (const tft_rec_string *)rec;
        /* id 0 means "no string": never defined */
        return s->id != 0 && (size_t)s->n + sizeof(*s) <= len ? 0 : -EBADMSG;
    }
    case TFT_REC_OP: {
        const tft_rec_op *o = (const tft_rec_op *)rec;
        size_t need = sizeof(*o) + 8u * ((size_t)o->n_in + o->n_out + o->n_attr);
        return need <= len ? 0 : -EBADMSG;
    }
    case TFT_REC_TENSOR: {
        const tft_rec_tensor *t = (const tft_rec_tensor *)rec;
        return t->ndim <= TFT_MAX_NDIM ? 0 : -EBADMSG;
    }
    case TFT_REC_CAPTURE: {
        /* the part lies inside the tensor and inside the record */
        const tft_rec_capture *c = (const tft_rec_capture *)rec;
        bool ok = c->ndim <= TFT_MAX_NDIM && c->role <= TFT_CAPTURE_PRIOR && c->offset <= c->total &&
                  c->n <= c->total - c->offset && sizeof(*c) + (size_t)c->n <= len;
        return ok ? 0 : -EBADMSG;
    }
    case TFT_REC_COMM: {
        const tft_rec_comm *c = (const tft_rec_comm *)rec;
        return sizeof(*c) + 4u * (size_t)c->n_members <= len ? 0 : -EBADMSG;
    }
    default:
        return 0;
    }
}

const char *tft_op_kind_name(int kind)
{
    static const char *const n[] = {"runtime", "gemm", "collective", "kernel", "copy", "other"};
    return (kind >= 0 && kind < (int)(sizeof(n) / sizeof(n[0]))) ? n[kind] : "?";
}

const char *tft_coll_type_name(int type)
{
    static const char *const n[TFT_COLL_TYPE_COUNT] = {
        "allreduce", "reduce", "bcast", "allgather", "reduce_scatter", "alltoall",
        "barrier", "send", "recv", "gather", "scatter",
    };
    return (type >= 0 && type < TFT_COLL_TYPE_COUNT) ? n[type] : "?";
}

const char *tft_redop_name(int op)
{
    static const char *const n[] = {"none", "sum", "prod", "min", "max", "avg", "other"};
    return (op >= 0 && op < (int)(sizeof(n) / sizeof(n[0]))) ? n[op] : "?";
}

void tft_capture_shuffle(void *dst, const void *src, size_t n, size_t esz, int inverse)
{
    if (esz <= 1 || n % esz) {
        memcpy(dst, src, n);
        return;
    }
    size_t count = n / esz;
    const unsigned char *s = src;
    unsigned char *d = dst;
    for (size_t b = 0; b < esz; b++) {
        if (!inverse)
            for (size_t i = 0; i < count; i++)
                d[b * count + i] = s[i * esz + b];
        else
            for (size_t i = 0; i < count; i++)
                d[i * esz + b] = s[b * count + i];
    }
}

uint64_t tft_string_id(const char *s, size_t n)
{
    uint64_t id = XXH3_64bits(s, n);
    return id ? id : 1; /* 0 means "no string" */
}

uint32_t fmt_checksum32(const void *p, size_t n)
{
    return (uint32_t)XXH3_64bits(p, n);
}

int fmt_pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    char *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            return -ENODATA;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

int fmt_write_full(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t r = write(fd, p, n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* ---- string map ---------------------------------------------------------- */

/* Ids come from files, where a crafted one can make them share their low
 * bits: the map mixes them before masking. */
void strmap_init(strmap *m) { tft_u64map_init(&m->ids, &(tft_u64map_opts){.vsize = sizeof(strmap_entry), .min_cap = 256}); }

strmap_entry *strmap_find(const strmap *m, uint64_t id)
{
    return id ? tft_u64map_find(&m->ids, id, NULL, NULL) : NULL;
}

strmap_entry *strmap_put(strmap *m, uint64_t id, const char *text, size_t len)
{
    strmap_entry *e = strmap_find(m, id);
    if (e)
        return e;
    if (!id || tft_u64map_reserve(&m->ids) < 0)
        return NULL;
    char *copy = malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, text, len);
    copy[len] = '\0';
    void *v;
    tft_u64map_insert(&m->ids, id, NULL, NULL, &v); /* room reserved: cannot fail */
    e = v;
    *e = (strmap_entry){.text = copy, .len = (uint32_t)len};
    return e;
}

void strmap_free(strmap *m)
{
    size_t pos = 0;
    for (strmap_entry *e; (e = tft_u64map_next(&m->ids, &pos, NULL));)
        free(e->text);
    tft_u64map_free(&m->ids);
}
_Static_assert(sizeof(tft_rec_capture) == 144, "CAPTURE fixed part is 144 bytes (FORMAT.md 5.12)");
_Static_assert(sizeof(tft_rec_collective) == 112, "COLLECTIVE is 112 bytes since 1.2 (FORMAT.md 5.7)");
_Static_assert(offsetof(tft_rec_collective, tag) == TFT_REC_COLLECTIVE_MIN_BYTES, "1.2 appends the tag");
_Static_assert(sizeof(tft_rec_thread) == 56, "THREAD is 56 bytes (FORMAT.md 5.13)");
_Static_assert(sizeof(tft_rec_sync) == 40, "SYNC is 40 bytes (FORMAT.md 5.14)");
_Static_assert(sizeof(tft_rec_stack) == 80, "STACK is 80 bytes (FORMAT.md 5.16)");
_Static_assert(sizeof(tft_rec_clock) == 64, "CLOCK is 64 bytes (FORMAT.md 5.17)");
_Static_assert(sizeof(tft_rec_comm) == 72, "COMM fixed part is 72 bytes (FORMAT.md 5.15)");
