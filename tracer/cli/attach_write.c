/*
 * attach_write.c — `tftrace attach`: the calls the probes saw, as the
 * records the in-process recorder writes for the same calls (FORMAT.md §5),
 * so the analyses (desync, leaks) read them alike:
 *  - MPI and NCCL collectives: a COLLECTIVE ENTER and EXIT record each.
 *    MPI_COMM_WORLD is recognised by the symbol its handle points at
 *    (ompi_mpi_comm_world) and gets the interposers' id; any other MPI
 *    communicator, and every NCCL communicator (an ncclComm_t says nothing
 *    of its members from outside), is its raw handle, per process, rank -1.
 *    MPI datatypes and ops are named from the symbols their handles point
 *    at (unknown: dtype 255, op other); NCCL's are the enum values of
 *    nccl.h, stable across versions (ncclInt8 = 0 ... ncclFloat8e5m2 = 11;
 *    ncclSum = 0, ncclProd, ncclMax, ncclMin, ncclAvg = 4). An NCCL call
 *    that returned an error also gets an OP record (kind runtime, named as
 *    the call, attribute: the ncclResult_t).
 *  - malloc/calloc of at least the threshold: an ALLOC record (site: the
 *    calling function, as the interposer's), its free a FREE record;
 *  - cudaMalloc/cudaFree: an OP record per call (kind runtime; attributes
 *    cudaMalloc: bytes, cudaError_t, pointer; cudaFree: pointer,
 *    cudaError_t), and for a call that succeeded the ALLOC/FREE record the
 *    CUPTI plugin writes (device kind CUDA, device -1: not known here).
 */
#ifdef TFT_HAVE_BPF   /* the whole file: BPF builds only */
#include "attach_cmd_internal.h"
#include "tft_clock.h"

#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    uint16_t type;
} fns[TFT_AFN_COUNT] = {
    [TFT_AFN_ALLREDUCE] = {"MPI_Allreduce", TFT_COLL_ALLREDUCE},
    [TFT_AFN_REDUCE] = {"MPI_Reduce", TFT_COLL_REDUCE},
    [TFT_AFN_BCAST] = {"MPI_Bcast", TFT_COLL_BCAST},
    [TFT_AFN_ALLGATHER] = {"MPI_Allgather", TFT_COLL_ALLGATHER},
    [TFT_AFN_BARRIER] = {"MPI_Barrier", TFT_COLL_BARRIER},
    [TFT_AFN_MALLOC] = {"malloc", 0},
    [TFT_AFN_CALLOC] = {"calloc", 0},
    [TFT_AFN_FREE] = {"free", 0},
    [TFT_AFN_CUDA_MALLOC] = {"cudaMalloc", 0},
    [TFT_AFN_CUDA_FREE] = {"cudaFree", 0},
    [TFT_AFN_NCCL_ALLREDUCE] = {"ncclAllReduce", TFT_COLL_ALLREDUCE},
    [TFT_AFN_NCCL_BROADCAST] = {"ncclBroadcast", TFT_COLL_BCAST},
    [TFT_AFN_NCCL_REDUCE] = {"ncclReduce", TFT_COLL_REDUCE},
    [TFT_AFN_NCCL_ALLGATHER] = {"ncclAllGather", TFT_COLL_ALLGATHER},
    [TFT_AFN_NCCL_REDUCESCATTER] = {"ncclReduceScatter", TFT_COLL_REDUCE_SCATTER},
    [TFT_AFN_NCCL_SEND] = {"ncclSend", TFT_COLL_SEND},
    [TFT_AFN_NCCL_RECV] = {"ncclRecv", TFT_COLL_RECV},
};

static int is_nccl(unsigned fn) { return fn >= TFT_AFN_NCCL_ALLREDUCE && fn <= TFT_AFN_NCCL_RECV; }

static Dwfl *target_dwfl(att_target *t)
{
    if (!t->dwfl) {
        static const Dwfl_Callbacks cbs = {.find_elf = dwfl_linux_proc_find_elf,
                                           .find_debuginfo = dwfl_standard_find_debuginfo};
        t->dwfl = dwfl_begin(&cbs);
        if (!t->dwfl)
            return NULL;
        dwfl_report_begin(t->dwfl);
        dwfl_linux_proc_report(t->dwfl, t->pid);
        dwfl_report_end(t->dwfl, NULL, NULL);
    }
    return t->dwfl;
}

/* The module mapped at the highest address at or below want->addr. */
struct below {
    uint64_t addr;
    Dwfl_Module *m;
    Dwarf_Addr start;
};

static int below_cb(Dwfl_Module *m, void **ud, const char *name, Dwarf_Addr start, void *arg)
{
    (void)ud, (void)name;
    struct below *b = arg;
    if (start <= b->addr && (!b->m || start > b->start))
        b->m = m, b->start = start;
    return DWARF_CB_OK;
}

/*
 * A data object that starts at addr, searched by value in the symbols of
 * the module below it. The handles MPI passes (&ompi_mpi_comm_world, ...)
 * live in a .bss: the executable's, when it copy-relocates them, or the
 * library's. A .bss longer than the file's last page continues in an
 * anonymous mapping that /proc/PID/maps does not tie to the file, so
 * dwfl_addrmodule finds no module for the part of it past that page (an
 * ASan-built executable, or any program with large static arrays).
 */
static const char *object_at(Dwfl *dwfl, uint64_t addr)
{
    struct below b = {.addr = addr};
    if (dwfl_getmodules(dwfl, below_cb, &b, 0) < 0 || !b.m)
        return NULL;
    int n = dwfl_module_getsymtab(b.m);
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr value;
        const char *name = dwfl_module_getsym_info(b.m, i, &sym, &value, NULL, NULL, NULL);
        if (name && value == addr && GELF_ST_TYPE(sym.st_info) == STT_OBJECT && sym.st_shndx != SHN_UNDEF)
            return name;
    }
    return NULL;
}

/* The symbol covering addr; *off its offset in it. NULL none. */
static const char *symbol_at(att_target *t, uint64_t addr, GElf_Off *off)
{
    Dwfl *d = target_dwfl(t);
    Dwfl_Module *m = d ? dwfl_addrmodule(d, addr) : NULL;
    GElf_Sym sym;
    return m ? dwfl_module_addrinfo(m, addr, off, &sym, NULL, NULL, NULL) : NULL;
}

/* The symbol a handle points at (its start), NULL none; the last 16 cached. */
static const char *handle_symbol(att_target *t, uint64_t addr)
{
    static struct { pid_t pid; uint64_t addr; const char *name; } cache[16];
    static unsigned next;
    for (int i = 0; i < 16; i++)
        if (cache[i].pid == t->pid && cache[i].addr == addr)
            return cache[i].name;
    GElf_Off off = 1;
    const char *n = symbol_at(t, addr, &off);
    if (!n || off != 0)
        n = t->dwfl ? object_at(t->dwfl, addr) : NULL;
    cache[next % 16].pid = t->pid, cache[next % 16].addr = addr, cache[next % 16].name = n;
    next++;
    return n;
}

/* The function a call returns into (the interposer's "site"): its symbol,
 * else MODULE+0xOFFSET (a static function of a stripped library), "?"
 * unknown; the last 64 cached. */
static const char *site_name(att_target *t, uint64_t ret)
{
    static struct { pid_t pid; uint64_t ret; char name[128]; } cache[64];
    static unsigned next;
    for (int i = 0; i < 64; i++)
        if (cache[i].pid == t->pid && cache[i].ret == ret && cache[i].name[0])
            return cache[i].name;
    char *out = cache[next % 64].name;
    cache[next % 64].pid = t->pid, cache[next % 64].ret = ret;
    next++;
    GElf_Off off;
    const char *n = ret ? symbol_at(t, ret - 1, &off) : NULL;
    Dwfl_Module *m = n || !ret || !t->dwfl ? NULL : dwfl_addrmodule(t->dwfl, ret - 1);
    Dwarf_Addr start = 0;
    const char *mod = m ? dwfl_module_info(m, NULL, &start, NULL, NULL, NULL, NULL, NULL) : NULL;
    if (n)
        snprintf(out, 128, "%s", n);
    else if (mod)
        snprintf(out, 128, "%s+0x%llx", strrchr(mod, '/') ? strrchr(mod, '/') + 1 : mod,
                 (unsigned long long)(ret - start));
    else
        snprintf(out, 128, "?");
    return out;
}

static uint8_t mpi_dtype(att_target *t, uint64_t h)
{
    static const struct { const char *sym; uint8_t d; } map[] = {
        {"ompi_mpi_float", TFT_F32}, {"ompi_mpi_double", TFT_F64}, {"ompi_mpi_int", TFT_I32},
        {"ompi_mpi_int32_t", TFT_I32}, {"ompi_mpi_long", TFT_I64}, {"ompi_mpi_long_long_int", TFT_I64},
        {"ompi_mpi_int64_t", TFT_I64}, {"ompi_mpi_unsigned", TFT_U32}, {"ompi_mpi_uint32_t", TFT_U32},
        {"ompi_mpi_unsigned_long", TFT_U64}, {"ompi_mpi_uint64_t", TFT_U64}, {"ompi_mpi_char", TFT_I8},
        {"ompi_mpi_signed_char", TFT_I8}, {"ompi_mpi_int8_t", TFT_I8}, {"ompi_mpi_byte", TFT_U8},
        {"ompi_mpi_unsigned_char", TFT_U8}, {"ompi_mpi_uint8_t", TFT_U8}, {"ompi_mpi_short", TFT_I16},
        {"ompi_mpi_int16_t", TFT_I16}, {"ompi_mpi_c_bool", TFT_BOOL},
    };
    const char *s = h ? handle_symbol(t, h) : NULL;
    for (size_t i = 0; s && i < sizeof map / sizeof *map; i++)
        if (!strcmp(s, map[i].sym))
            return map[i].d;
    return 255;   /* unknown: the raw handle's meaning could not be read */
}

static uint8_t mpi_redop(att_target *t, uint64_t h)
{
    const char *s = h ? handle_symbol(t, h) : NULL;
    if (!s)
        return TFT_REDOP_OTHER;
    return !strcmp(s, "ompi_mpi_op_sum") ? TFT_REDOP_SUM : !strcmp(s, "ompi_mpi_op_prod") ? TFT_REDOP_PROD
         : !strcmp(s, "ompi_mpi_op_min") ? TFT_REDOP_MIN : !strcmp(s, "ompi_mpi_op_max") ? TFT_REDOP_MAX
                                         : TFT_REDOP_OTHER;
}

/* ncclDataType_t (nccl.h: ncclInt8 = 0, ncclUint8, ncclInt32, ncclUint32,
 * ncclInt64, ncclUint64, ncclFloat16, ncclFloat32, ncclFloat64,
 * ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2 = 11); 255 another value. */
static uint8_t nccl_dtype(uint64_t v)
{
    static const uint8_t map[] = {TFT_I8,  TFT_U8,  TFT_I32, TFT_U32,  TFT_I64,    TFT_U64,
                                  TFT_F16, TFT_F32, TFT_F64, TFT_BF16, TFT_F8E4M3, TFT_F8E5M2};
    return v < sizeof map ? map[v] : 255;
}

/* ncclRedOp_t: ncclSum = 0, ncclProd, ncclMax, ncclMin, ncclAvg = 4; a
 * larger value is a user-made (premultiplied) op. */
static uint8_t nccl_redop(uint64_t v)
{
    static const uint8_t map[] = {TFT_REDOP_SUM, TFT_REDOP_PROD, TFT_REDOP_MAX, TFT_REDOP_MIN, TFT_REDOP_AVG};
    return v < sizeof map ? map[v] : TFT_REDOP_OTHER;
}

int att_is_world(att_target *t, const struct tft_acall *c)
{
    if (c->fn >= TFT_AFN_MPI_END)
        return 0;
    const char *s = handle_symbol(t, c->comm);
    return s && !strcmp(s, "ompi_mpi_comm_world");
}

/* The communicator's id and next sequence number (counted from the attach). */
static uint64_t comm_of(att_target *t, const struct tft_acall *c, uint64_t *seq, int *world)
{
    char name[80];
    *world = att_is_world(t, c);
    if (*world)
        snprintf(name, sizeof name, "MPI_COMM_WORLD");
    else
        snprintf(name, sizeof name, "%s@pid%d:0x%llx", is_nccl(c->fn) ? "ncclComm" : "MPI_Comm", (int)t->pid,
                 (unsigned long long)c->comm);
    uint64_t id = tft_string_id(name, strlen(name));
    if (c->fn == TFT_AFN_NCCL_SEND || c->fn == TFT_AFN_NCCL_RECV) { /* FORMAT.md §5.7: a p2p space */
        snprintf(name, sizeof name, "%016llx:p2p", (unsigned long long)id);
        id = tft_string_id(name, strlen(name));
    }
    int i = 0;
    while (i < t->ncomms && t->comm_handle[i] != id)
        i++;
    if (i == t->ncomms && t->ncomms < ATT_MAX_COMMS)
        t->comm_handle[t->ncomms++] = id, t->comm_seq[i] = 0;
    *seq = i < ATT_MAX_COMMS ? t->comm_seq[i]++ : 0;
    return id;
}

static void write_collective(att_target *t, const struct tft_acall *c)
{
    int world, nccl = is_nccl(c->fn);
    tft_rec_collective r = {.h = {.kind = TFT_REC_COLLECTIVE, .len = sizeof(r), .ts = c->t_enter,
                                  .step = TFT_STEP_NONE, .seq = TFT_SEQ_NONE, .flags = TFT_COLL_FLAG_ENTER},
                            .count = c->count, .t_enter = c->t_enter, .type = fns[c->fn].type,
                            .root = c->root, .tag = TFT_TAG_NONE};
    r.comm = comm_of(t, c, &r.coll_seq, &world);
    r.h.seq = (int64_t)t->seq++;   /* the process's calls in order, as the interposers' op seq */
    int reduce = c->fn == TFT_AFN_ALLREDUCE || c->fn == TFT_AFN_REDUCE || c->fn == TFT_AFN_NCCL_ALLREDUCE ||
                 c->fn == TFT_AFN_NCCL_REDUCE || c->fn == TFT_AFN_NCCL_REDUCESCATTER;
    r.dtype = c->fn == TFT_AFN_BARRIER ? TFT_U8 : nccl ? nccl_dtype(c->dtype) : mpi_dtype(t, c->dtype);
    r.redop = !reduce ? TFT_REDOP_NONE : nccl ? nccl_redop(c->op) : mpi_redop(t, c->op);
    r.rank = world ? t->rank : -1;
    r.nranks = world ? t->size : 0;
    r.name = tft_writer_string(t->w, fns[c->fn].name, strlen(fns[c->fn].name));
    tft_writer_append(t->w, &r.h);
    if (!c->t_exit) {
        t->open++;
        return;
    }
    r.h.flags = TFT_COLL_FLAG_EXIT;
    r.h.ts = r.t_exit = c->t_exit;
    tft_writer_append(t->w, &r.h);
    t->calls++;
    t->nccl += nccl;
}

/* An OP record of kind runtime named as the call, with up to 3 attributes. */
static void write_op(att_target *t, const struct tft_acall *c, int n, int64_t a0, int64_t a1, int64_t a2)
{
    uint64_t buf[(sizeof(tft_rec_op) + 3 * sizeof(int64_t)) / sizeof(uint64_t)] = {0};
    tft_rec_op *op = (tft_rec_op *)buf;
    const int64_t attr[3] = {a0, a1, a2};
    op->h = (tft_rec){.kind = TFT_REC_OP, .len = (uint32_t)(sizeof(tft_rec_op) + 8 * (size_t)n), .ts = c->t_enter,
                      .step = TFT_STEP_NONE, .seq = (int64_t)t->seq++};
    op->op_kind = TFT_OP_RUNTIME;
    op->n_attr = (uint8_t)n;
    op->name = tft_writer_string(t->w, fns[c->fn].name, strlen(fns[c->fn].name));
    memcpy(op->ids, attr, 8 * (size_t)n);
    tft_writer_append(t->w, &op->h);
}

static void write_alloc(att_target *t, const struct tft_acall *c, int cuda)
{
    const char *site = cuda ? "cudaMalloc" : site_name(t, c->site);
    tft_rec_alloc a = {.h = {.kind = TFT_REC_ALLOC, .len = sizeof(a), .ts = c->t_exit, .step = TFT_STEP_NONE,
                             .seq = TFT_SEQ_NONE},
                       .ptr = c->ptr, .bytes = c->count, .device_kind = cuda ? TFT_DEV_CUDA : TFT_DEV_CPU,
                       .device = -1};
    a.site = tft_writer_string(t->w, site, strlen(site));
    tft_writer_append(t->w, &a.h);
    t->allocs++;
}

static void write_free(att_target *t, const struct tft_acall *c, int cuda)
{
    tft_rec_free f = {.h = {.kind = TFT_REC_FREE, .len = sizeof(f), .ts = c->t_enter, .step = TFT_STEP_NONE,
                            .seq = TFT_SEQ_NONE},
                      .ptr = c->ptr, .bytes = cuda ? 0 : c->count, .device_kind = cuda ? TFT_DEV_CUDA : TFT_DEV_CPU,
                      .device = -1};
    tft_writer_append(t->w, &f.h);
    t->frees++;
}

void att_write_call(att_target *t, const struct tft_acall *c)
{
    if (c->fn >= TFT_AFN_COUNT || !t->w)
        return;
    switch (c->fn) {
    case TFT_AFN_MALLOC:
    case TFT_AFN_CALLOC:
        if (c->ptr)   /* a NULL result is not recorded (nothing to leak) */
            write_alloc(t, c, 0);
        return;
    case TFT_AFN_FREE: write_free(t, c, 0); return;
    case TFT_AFN_CUDA_MALLOC:
        if (!c->t_exit)
            return;
        write_op(t, c, 3, (int64_t)c->count, (int)c->ret, (int64_t)c->ptr);
        t->cuda++;
        if ((int)c->ret == 0 && c->ptr)
            write_alloc(t, c, 1);
        return;
    case TFT_AFN_CUDA_FREE:
        if (!c->t_exit)
            return;
        write_op(t, c, 2, (int64_t)c->ptr, (int)c->ret, 0);
        t->cuda++;
        if ((int)c->ret == 0 && c->ptr)
            write_free(t, c, 1);
        return;
    default: break;
    }
    write_collective(t, c);
    if (is_nccl(c->fn) && c->t_exit && (int)c->ret != 0) {
        write_op(t, c, 1, (int)c->ret, 0, 0);
        t->nccl_errors++;
    }
}

/* The records one lost call would have written, and their kind. */
static int lost_records(unsigned fn, int *kind)
{
    if (fn < TFT_AFN_MPI_END || is_nccl(fn))
        return *kind = TFT_REC_COLLECTIVE, 2;
    if (fn == TFT_AFN_FREE)
        return *kind = TFT_REC_FREE, 1;
    if (fn == TFT_AFN_CUDA_MALLOC || fn == TFT_AFN_CUDA_FREE)
        return *kind = TFT_REC_OP, 1;   /* and an ALLOC/FREE if it succeeded: not known */
    return *kind = TFT_REC_ALLOC, 1;
}

void att_write_losses(att_target *t, const struct tft_alost *now)
{
    tft_rec_dropped d = {.h = {.kind = TFT_REC_DROPPED, .len = sizeof(d), .ts = tft_clock_mono_ns(),
                               .step = TFT_STEP_NONE, .seq = TFT_SEQ_NONE},
                         .reason = 0 /* ring full */, .first_step = TFT_STEP_NONE, .last_step = TFT_STEP_NONE};
    for (unsigned f = 0; f < TFT_AFN_MAX; f++) {
        uint64_t n = now->by_fn[f] - t->lost_seen[f];
        if (now->by_fn[f] <= t->lost_seen[f])
            continue;
        int kind, per = lost_records(f, &kind);
        d.count += n * (uint64_t)per;
        d.by_kind[kind] += n * (uint64_t)per;
        t->lost += n;
        t->lost_seen[f] = now->by_fn[f];
    }
    if (!d.count || !t->w)
        return;
    /* the record first: it may seal the chunk, whose count must include it */
    tft_writer_append(t->w, &d.h);
    tft_writer_add_dropped(t->w, d.count);
}

void att_target_free(att_target *t)
{
    free(t->q);
    t->q = NULL;
    if (t->dwfl)
        dwfl_end(t->dwfl);
    t->dwfl = NULL;
}

#endif
