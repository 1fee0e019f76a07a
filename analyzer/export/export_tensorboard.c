/*
 * export_tensorboard.c — a trace's per-step statistics as TensorBoard event
 * files (export_tensorboard.h; docs/REPORTS.md "TensorBoard").
 *
 * An event file is a sequence of TFRecords: a little-endian uint64 length,
 * the masked CRC-32C of those 8 bytes, the serialised Event (protobuf,
 * proto/tensorboard_event_subset.proto, encoded by protobuf-c), the masked
 * CRC-32C of the Event. The first Event names the file version; then one
 * Event per step holds that step's scalars, and text summaries come as
 * Events of their own.
 *
 * Per rank one pass over its records: the first record of each tensor name
 * in a step gives that step's value ("loss", "lr", "grad_norm": the value;
 * others: std and abs-max as std/NAME and absmax/NAME). Memory: one map of
 * the names followed (at most TB_NAMES) and one step's values.
 */
#include "export_tensorboard.h"

#include "core_out.h"
#include "export_walk_internal.h"
#include "tensorboard_event_subset.pb-c.h"
#include "tft_u64map.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TB_NAMES 512 /* tensor names followed per rank, beyond loss/lr/grad_norm */

/* ---- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), masked ------- */

static uint32_t crc_table[256];

static void crc_init(void)
{
    if (crc_table[1])
        return;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
}

static uint32_t crc32c(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++)
        c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* TFRecord's masking: rotate right by 15, add a constant. */
static uint32_t crc_masked(const uint8_t *p, size_t n)
{
    uint32_t c = crc32c(p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void le64(uint8_t *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static void le32(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

/* ---- the writer --------------------------------------------------------- */

struct export_tb {
    core_out out;
    char path[4096];
    int64_t step;                    /* the step the pending values belong to */
    double wall;                     /* its wall time, seconds */
    Tensorflow__Summary__Value *vals; /* pending scalar values (tags owned) */
    size_t nvals, cap;
    int err;                          /* first write error, a negative errno */
};

static int write_event(export_tb *w, const Tensorflow__Event *ev)
{
    size_t n = tensorflow__event__get_packed_size(ev);
    uint8_t *buf = malloc(n + 16);
    if (!buf)
        return -ENOMEM;
    uint8_t head[12];
    le64(head, n);
    le32(head + 8, crc_masked(head, 8));
    tensorflow__event__pack(ev, buf);
    uint8_t tail[4];
    le32(tail, crc_masked(buf, n));
    int ok = fwrite(head, 1, 12, w->out.f) == 12 && fwrite(buf, 1, n, w->out.f) == n &&
             fwrite(tail, 1, 4, w->out.f) == 4;
    free(buf);
    return ok ? 0 : -EIO;
}

static int flush_values(export_tb *w)
{
    if (!w->nvals)
        return 0;
    Tensorflow__Summary sum = TENSORFLOW__SUMMARY__INIT;
    Tensorflow__Summary__Value **pv = malloc(w->nvals * sizeof(*pv));
    int e = pv ? 0 : -ENOMEM;
    if (!e) {
        for (size_t i = 0; i < w->nvals; i++)
            pv[i] = &w->vals[i];
        sum.n_value = w->nvals;
        sum.value = pv;
        Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
        ev.has_wall_time = 1;
        ev.wall_time = w->wall;
        ev.has_step = 1;
        ev.step = w->step;
        ev.summary = &sum;
        e = write_event(w, &ev);
    }
    free(pv);
    for (size_t i = 0; i < w->nvals; i++)
        free(w->vals[i].tag);
    w->nvals = 0;
    return e;
}

/* Creates dir (mode: the files'; the directory gets x where r is) unless
 * it is a directory already. 0 or -1 with errno. */
static int make_dir(const char *dir, unsigned mode)
{
    struct stat st;
    if (stat(dir, &st) == 0)
        return S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
    if (mkdir(dir, core_out_dir_mode(mode ? mode : 0600)) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

export_tb *export_tb_open(const char *dir, unsigned mode, double wall, char *why, size_t n)
{
    crc_init();
    export_tb *w = calloc(1, sizeof(*w));
    if (!w) {
        snprintf(why, n, "out of memory");
        return NULL;
    }
    if (make_dir(dir, mode) != 0) {
        snprintf(why, n, "%s: cannot make the directory: %s", dir, strerror(errno));
        free(w);
        return NULL;
    }
    char host[64] = "localhost";
    gethostname(host, sizeof(host) - 1);
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    /* TensorBoard reads the files whose names hold "tfevents"; the pid keeps
     * two writers in one directory apart */
    if ((size_t)snprintf(w->path, sizeof(w->path), "%s/events.out.tfevents.%lld.%s.%d.tftrace", dir,
                         (long long)time(NULL), host, (int)getpid()) >= sizeof(w->path)) {
        snprintf(why, n, "%s: path too long", dir);
        free(w);
        return NULL;
    }
    if (core_out_open(&w->out, w->path, mode ? mode : 0600) != 0) {
        snprintf(why, n, "%s: cannot write: %s", w->path, core_out_strerror(&w->out));
        free(w);
        return NULL;
    }
    Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
    ev.has_wall_time = 1;
    ev.wall_time = wall;
    ev.file_version = "brain.Event:2";
    w->err = write_event(w, &ev);
    w->step = INT64_MIN;
    return w;
}

int export_tb_scalar(export_tb *w, int64_t step, double wall, const char *tag, double v)
{
    if (w->err)
        return w->err;
    if (step != w->step) {
        if ((w->err = flush_values(w)) != 0)
            return w->err;
        w->step = step;
        w->wall = wall;
    }
    if (w->nvals == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        Tensorflow__Summary__Value *nv = realloc(w->vals, cap * sizeof(*nv));
        if (!nv)
            return w->err = -ENOMEM;
        w->vals = nv;
        w->cap = cap;
    }
    Tensorflow__Summary__Value *x = &w->vals[w->nvals];
    tensorflow__summary__value__init(x);
    if (!(x->tag = strdup(tag)))
        return w->err = -ENOMEM;
    x->has_simple_value = 1;
    x->simple_value = (float)v;
    w->nvals++;
    return 0;
}

int export_tb_text(export_tb *w, int64_t step, double wall, const char *tag, const char *text)
{
    if (w->err || (w->err = flush_values(w)) != 0)
        return w->err;
    w->step = INT64_MIN; /* the next scalar starts an event of its own */
    Tensorflow__SummaryMetadata__PluginData pd = TENSORFLOW__SUMMARY_METADATA__PLUGIN_DATA__INIT;
    pd.plugin_name = "text";
    Tensorflow__SummaryMetadata md = TENSORFLOW__SUMMARY_METADATA__INIT;
    md.plugin_data = &pd;
    Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT; /* a scalar: no dims */
    ProtobufCBinaryData s = {.len = strlen(text), .data = (uint8_t *)text};
    Tensorflow__TensorProto tp = TENSORFLOW__TENSOR_PROTO__INIT;
    tp.has_dtype = 1;
    tp.dtype = 7; /* DT_STRING */
    tp.tensor_shape = &shape;
    tp.n_string_val = 1;
    tp.string_val = &s;
    Tensorflow__Summary__Value val = TENSORFLOW__SUMMARY__VALUE__INIT;
    val.tag = (char *)tag;
    val.metadata = &md;
    val.tensor = &tp;
    Tensorflow__Summary__Value *pv = &val;
    Tensorflow__Summary sum = TENSORFLOW__SUMMARY__INIT;
    sum.n_value = 1;
    sum.value = &pv;
    Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
    ev.has_wall_time = 1;
    ev.wall_time = wall;
    ev.has_step = 1;
    ev.step = step;
    ev.summary = &sum;
    return w->err = write_event(w, &ev);
}

int export_tb_close(export_tb *w, bool keep)
{
    if (!w)
        return 0;
    int e = w->err;
    if (!e)
        e = flush_values(w);
    for (size_t i = 0; i < w->nvals; i++)
        free(w->vals[i].tag);
    free(w->vals);
    if (keep && !e) {
        if (core_out_commit(&w->out) != 0)
            e = -errno;
    } else {
        core_out_abort(&w->out);
    }
    free(w);
    return e;
}

const char *export_tb_path(const export_tb *w) { return w->path; }

/* ---- a trace's scalars ------------------------------------------------------ */

typedef struct name_slot {
    int64_t last_step; /* the step whose value was written, INT64_MIN none */
    int kind;          /* 0 not followed, 1 a scalar (loss/lr/grad_norm), 2 statistics */
    char tag_std[112], tag_absmax[112];
} name_slot;

/* The tag prefix of a name: optimizer state and parameters after the
 * update are not followed (as many as the parameters; the curves that
 * matter are the outputs and the gradients). */
static int classify(const char *text)
{
    if (!text)
        return 0;
    if (!strcmp(text, "loss") || !strcmp(text, "lr") || !strncmp(text, "lr.group", 8) || !strcmp(text, "grad_norm"))
        return 1;
    if (!strncmp(text, "adam.", 5) || !strncmp(text, "param.", 6) ||
        (!strncmp(text, "opt", 3) && text[3] >= '0' && text[3] <= '9')) /* opt0.group1.2: unnamed parameters */
        return 0;
    return 2;
}

static double scalar_of(const tft_rec_tensor *t)
{
    if (t->stats.numel == 1 && t->mode >= TFT_STATS_HEALTH)
        return t->stats.min;
    return t->mode >= TFT_STATS_FULL ? t->stats.mean : NAN;
}

/* One rank file's scalars into w. Returns 0 or a negative errno. */
static int rank_scalars(tft_reader *r, const export_opts *o, export_tb *w, int *names_over)
{
    const tft_file_info *fi = tft_reader_info(r);
    double wall0 = (double)fi->start_realtime_ns / 1e9, mono0 = (double)fi->start_monotonic_ns / 1e9;
    tft_u64map names;
    tft_u64map_init(&names, &(tft_u64map_opts){.vsize = sizeof(name_slot), .max_n = 1u << 16});
    int followed = 0, e = tft_reader_rewind(r);
    const tft_rec *rec;
    while (e == 0 && (e = tft_reader_next(r, &rec)) == 1) {
        e = 0;
        if (rec->kind != TFT_REC_TENSOR || rec->len < sizeof(tft_rec_tensor) || rec->step == TFT_STEP_NONE)
            continue;
        if (o->have_steps && (rec->step < o->step_lo || rec->step > o->step_hi))
            continue;
        const tft_rec_tensor *t = (const tft_rec_tensor *)rec;
        if (t->mode < TFT_STATS_HEALTH)
            continue;
        void *v;
        int rc = tft_u64map_insert(&names, t->name, NULL, NULL, &v);
        if (rc < 0)
            continue;
        name_slot *s = v;
        const char *text = tft_reader_string(r, t->name);
        if (rc == 1) {
            s->last_step = INT64_MIN;
            s->kind = classify(text);
            if (s->kind == 2 && followed == TB_NAMES) {
                s->kind = 0;
                (*names_over)++;
            } else if (s->kind == 2) {
                followed++;
                snprintf(s->tag_std, sizeof(s->tag_std), "std/%s", text);
                snprintf(s->tag_absmax, sizeof(s->tag_absmax), "absmax/%s", text);
            }
        }
        if (!s->kind || s->last_step == rec->step)
            continue;
        s->last_step = rec->step;
        double wall = wall0 + ((double)rec->ts / 1e9 - mono0);
        if (s->kind == 1) {
            double x = scalar_of(t);
            if (!isnan(x) || t->stats.nan)
                e = export_tb_scalar(w, rec->step, wall, text, x);
        } else {
            double am = t->stats.absmax;
            if (t->mode >= TFT_STATS_FULL)
                e = export_tb_scalar(w, rec->step, wall, s->tag_std, t->stats.std);
            if (!e)
                e = export_tb_scalar(w, rec->step, wall, s->tag_absmax, am);
        }
    }
    tft_u64map_free(&names);
    return e < 0 ? e : 0;
}

int export_tensorboard(tft_trace *t, const export_opts *o, const char *dir, const char *text_tag, const char *text,
                       int64_t text_step)
{
    int n = tft_trace_nranks(t), selected = 0;
    for (int i = 0; i < n; i++)
        selected += export_rank_selected(o, tft_trace_rank_id(t, i));
    if (!selected) {
        export_say(o, TFT_LOG_ERROR, "%s: no rank of this trace (%d rank file%s) matches --rank/--ranks", o->path, n,
            n == 1 ? "" : "s");
        return -EIO;
    }
    if (make_dir(dir, o->mode) != 0) {
        export_say(o, TFT_LOG_ERROR, "%s: cannot make the directory: %s", dir, strerror(errno));
        return -EIO;
    }
    bool text_done = false;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        int rank = tft_trace_rank_id(t, i);
        if (!export_rank_selected(o, rank))
            continue;
        char run[4096];
        /* one run per rank; a single rank is the directory itself */
        if (selected == 1)
            snprintf(run, sizeof(run), "%s", dir);
        else if ((size_t)snprintf(run, sizeof(run), "%s/rank-%05d", dir, rank) >= sizeof(run)) {
            export_say(o, TFT_LOG_ERROR, "%s: path too long", dir);
            return -EIO;
        }
        tft_reader *r = tft_trace_reader(t, i);
        if (!r) {
            export_say(o, TFT_LOG_ERROR, "%s: cannot read %s", o->path, tft_trace_file_name(t, i));
            return -EIO;
        }
        const tft_file_info *fi = tft_reader_info(r);
        char why[4200];
        export_tb *w = export_tb_open(run, o->mode, (double)fi->start_realtime_ns / 1e9, why, sizeof(why));
        if (!w) {
            export_say(o, TFT_LOG_ERROR, "%s", why);
            tft_trace_release(t, i);
            return -EIO;
        }
        int over = 0;
        rc = rank_scalars(r, o, w, &over);
        if (!rc && text && !text_done) {
            rc = export_tb_text(w, text_step == TFT_STEP_NONE ? 0 : text_step, (double)time(NULL), text_tag, text);
            text_done = true;
        }
        if (over)
            export_say(o, TFT_LOG_WARN, "%s: rank %d: %d tensor names past the first %d not exported", o->path, rank, over,
                TB_NAMES);
        int ce = export_tb_close(w, rc == 0);
        if (!rc)
            rc = ce;
        tft_trace_release(t, i);
        if (rc && rc != -ENOMEM)
            export_say(o, TFT_LOG_ERROR, "%s: %s: %s", o->path, run, strerror(-rc));
    }
    return rc == -ENOMEM ? rc : rc ? -EIO : 0;
}

char *export_tb_markdown_block(const char *text)
{
    /* TensorBoard renders text as Markdown: four spaces make a line code */
    size_t lines = 1, n = strlen(text);
    for (size_t i = 0; i < n; i++)
        lines += text[i] == '\n';
    char *out = malloc(n + 4 * lines + 1), *p = out;
    if (!out)
        return NULL;
    bool start = true;
    for (size_t i = 0; i < n; i++) {
        if (start) {
            memcpy(p, "    ", 4);
            p += 4;
        }
        *p++ = text[i];
        start = text[i] == '\n';
    }
    *p = 0;
    return out;
}
