/*
 * interpose_nvtx.c — NVTX ranges as scopes and steps, through the NVTX
 * injection interface (built with the CUDA side, TFT_HAVE_CUDA; needs no
 * GPU and no CUDA library).
 *
 * NVTX v3 is header-only: a program's nvtxRangePushA is an inline function
 * that calls through a table of function pointers, which the first NVTX
 * call fills by loading the library named by NVTX_INJECTION64_PATH and
 * calling its InitializeInjectionNvtx2. Interposing the nvtxRangePushA
 * symbol would miss every NVTX3 program (PyTorch among them), so libtftrace
 * itself is that library: with NVTX_INJECTION64_PATH=<path of
 * libtftrace.so>, dlopen finds the already preloaded copy and we fill the
 * table. (NVTX v2's libnvToolsExt.so honours the same variable.)
 *
 * What a range does:
 *   - a range named like the step range (TFT_STEP_RANGE, default "step")
 *     marks a step: push / start = tft_step_begin, the matching pop / end =
 *     tft_step_end. Accepted names: exactly NAME (steps are numbered 0, 1,
 *     2, ... in the order they begin), or NAME followed by one of ' ', '_',
 *     ':', '#', '-', '=' (or nothing) and a decimal number, which is then
 *     the step number ("step 12", "step_12", "step12"). At both ends of a
 *     step the device-statistics queue is drained (interpose_cuda_internal.h).
 *   - any other pushed range names a scope (tft_scope_push/pop): op records
 *     carry the '/'-joined path of the open ranges of their thread.
 *     Start/end ranges (not nested, may cross threads) only mark steps.
 * Push/pop forms: nvtxRangePushA/W/Ex, nvtxRangePop, nvtxDomainRangePushEx,
 * nvtxDomainRangePop (every domain counts); start/end: nvtxRangeStartA/W/Ex,
 * nvtxRangeEnd, nvtxDomainRangeStartEx/End. Messages may be ASCII, wide
 * (non-ASCII characters become '?') or registered strings
 * (nvtxDomainRegisterStringA/W, which we therefore implement). Ranges
 * opened inside an interposed call (a library's own NVTX ranges) are
 * ignored. When recording is off or the interposers are off
 * (TFT_INTERPOSE=0), InitializeInjectionNvtx2 declines and NVTX stays the
 * no-op it is without a tool.
 */
#include "interpose_cuda_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <wchar.h>

/* Declarations and the injection interface's types, no implementation. */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

TFT_INTERPOSE int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable);

/* ---- names --------------------------------------------------------------------- */

#define NAME_MAX_BYTES 256

static char step_name[64] = "step";
static size_t step_len = 4;
static _Atomic int64_t next_step; /* number of the next unnumbered step */

/* -1 when name is not a step range, else its step number. */
static int64_t step_of(const char *name)
{
    if (!name || strncmp(name, step_name, step_len) != 0)
        return -1;
    const char *p = name + step_len;
    if (!*p)
        return atomic_fetch_add(&next_step, 1);
    if (strchr(" _:#-=", *p) && p[1])
        p++;
    if (*p < '0' || *p > '9')
        return -1;
    int64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (*p - '0');
    }
    if (*p)
        return -1;
    int64_t want = v + 1, cur = atomic_load(&next_step);
    while (cur < want && !atomic_compare_exchange_weak(&next_step, &cur, want)) {
    }
    return v;
}

/* A wide string as ASCII in buf. */
static const char *from_wide(const wchar_t *w, char *buf, size_t n)
{
    if (!w)
        return NULL;
    size_t i = 0;
    for (; w[i] && i + 1 < n; i++)
        buf[i] = (w[i] > 0 && w[i] < 128) ? (char)w[i] : '?';
    buf[i] = '\0';
    return buf;
}

/* The message of an event's attributes. */
static const char *attr_message(const nvtxEventAttributes_t *a, char *buf, size_t n)
{
    if (!a || a->size < offsetof(nvtxEventAttributes_t, message) + sizeof(a->message))
        return NULL;
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return a->message.ascii;
    case NVTX_MESSAGE_TYPE_UNICODE: return from_wide(a->message.unicode, buf, n);
    case NVTX_MESSAGE_TYPE_REGISTERED: return (const char *)a->message.registered;
    default: return NULL;
    }
}

/* Registered strings and domains: copies that live as long as the process
 * (NVTX hands their handles back in later calls), kept on a list so that
 * they stay reachable. */
typedef struct kept {
    struct kept *next;
    char s[];
} kept;
static kept *_Atomic kept_list;

static const char *keep_string(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strnlen(s, NAME_MAX_BYTES - 1);
    kept *k = malloc(sizeof(*k) + n + 1);
    if (!k)
        return NULL;
    memcpy(k->s, s, n);
    k->s[n] = '\0';
    k->next = atomic_load(&kept_list);
    while (!atomic_compare_exchange_weak(&kept_list, &k->next, k)) {
    }
    return k->s;
}

/* ---- the ranges of a thread ----------------------------------------------------- */

enum { R_SCOPE = 0, R_STEP = 1, R_IGNORED = 2 };
#define MAX_DEPTH 256

/* A thread's open ranges: the depth is thread-local, what each level is
 * lives in a mapping made at the thread's first range and unmapped when it
 * ends (the library's initial-exec TLS stays small enough for dlopen, see
 * recorder_internal.h's tls_cold). */
typedef struct nv_levels {
    uint8_t what[MAX_DEPTH];
    int64_t step[MAX_DEPTH]; /* R_STEP: its number */
} nv_levels;

static __thread struct {
    int depth;
    nv_levels *lv;           /* NULL until the first range (or when mapping failed: ranges not recorded) */
} nv __attribute__((tls_model("initial-exec")));

static pthread_key_t nv_key;
static pthread_once_t nv_key_once = PTHREAD_ONCE_INIT;

static void nv_levels_free(void *p)
{
    if (p == nv.lv)
        nv.lv = NULL;
    munmap(p, sizeof(nv_levels));
}

static void nv_key_init(void) { pthread_key_create(&nv_key, nv_levels_free); }

static nv_levels *levels(void)
{
    if (__builtin_expect(nv.lv != NULL, 1))
        return nv.lv;
    void *p = mmap(NULL, sizeof(nv_levels), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    pthread_once(&nv_key_once, nv_key_init);
    pthread_setspecific(nv_key, p);
    nv.lv = p;
    return nv.lv;
}

static void step_begin(int64_t s)
{
    cuda_step_boundary(1);
    tft_step_begin(s);
}

static void step_end(int64_t s)
{
    cuda_step_boundary(0);
    tft_step_end(s);
}

static int push(const char *name)
{
    int d = nv.depth++;
    nv_levels *lv;
    if (d >= MAX_DEPTH || !(lv = levels()))
        return d;
    if (ip_depth || !name) {
        lv->what[d] = R_IGNORED;
        return d;
    }
    int saved = errno;
    ip_depth++;
    int64_t s = step_of(name);
    if (s >= 0) {
        lv->what[d] = R_STEP;
        lv->step[d] = s;
        step_begin(s);
    } else {
        lv->what[d] = R_SCOPE;
        tft_scope_push(name);
    }
    ip_depth--;
    errno = saved;
    return d;
}

static int pop(void)
{
    if (nv.depth == 0)
        return -1;
    int d = --nv.depth;
    nv_levels *lv = nv.lv;
    if (d >= MAX_DEPTH || !lv || lv->what[d] == R_IGNORED)
        return d;
    int saved = errno;
    ip_depth++;
    if (lv->what[d] == R_STEP)
        step_end(lv->step[d]);
    else
        tft_scope_pop();
    ip_depth--;
    errno = saved;
    return d;
}

/* Start/end ranges: a step's id has the top bit set and the step number in
 * the low bits; other ranges get plain counters. */
#define STEP_ID_BIT (UINT64_C(1) << 63)
static _Atomic uint64_t next_range_id = 1;

static nvtxRangeId_t start(const char *name)
{
    int64_t s = ip_depth || !name ? -1 : step_of(name);
    if (s < 0)
        return atomic_fetch_add(&next_range_id, 1) & ~STEP_ID_BIT;
    int saved = errno;
    ip_depth++;
    step_begin(s);
    ip_depth--;
    errno = saved;
    return STEP_ID_BIT | (uint64_t)s;
}

static void end(nvtxRangeId_t id)
{
    if (!(id & STEP_ID_BIT) || ip_depth)
        return;
    int saved = errno;
    ip_depth++;
    step_end((int64_t)(id & ~STEP_ID_BIT));
    ip_depth--;
    errno = saved;
}

/* ---- the injected functions ------------------------------------------------------ */

static int push_a(const char *m) { return push(m); }
static int push_w(const wchar_t *m)
{
    char buf[NAME_MAX_BYTES];
    return push(from_wide(m, buf, sizeof(buf)));
}
static int push_ex(const nvtxEventAttributes_t *a)
{
    char buf[NAME_MAX_BYTES];
    return push(attr_message(a, buf, sizeof(buf)));
}
static int dom_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) { return push_ex(a); }
static int pop_0(void) { return pop(); }
static int dom_pop(nvtxDomainHandle_t d) { return pop(); }

static nvtxRangeId_t start_a(const char *m) { return start(m); }
static nvtxRangeId_t start_w(const wchar_t *m)
{
    char buf[NAME_MAX_BYTES];
    return start(from_wide(m, buf, sizeof(buf)));
}
static nvtxRangeId_t start_ex(const nvtxEventAttributes_t *a)
{
    char buf[NAME_MAX_BYTES];
    return start(attr_message(a, buf, sizeof(buf)));
}
static nvtxRangeId_t dom_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) { return start_ex(a); }
static void end_0(nvtxRangeId_t id) { end(id); }
static void dom_end(nvtxDomainHandle_t d, nvtxRangeId_t id) { end(id); }

static nvtxStringHandle_t reg_a(nvtxDomainHandle_t d, const char *s)
{
    return (nvtxStringHandle_t)keep_string(s);
}
static nvtxStringHandle_t reg_w(nvtxDomainHandle_t d, const wchar_t *s)
{
    char buf[NAME_MAX_BYTES];
    return (nvtxStringHandle_t)keep_string(from_wide(s, buf, sizeof(buf)));
}
static nvtxDomainHandle_t dom_create_a(const char *name) { return (nvtxDomainHandle_t)keep_string(name ? name : ""); }
static nvtxDomainHandle_t dom_create_w(const wchar_t *name)
{
    char buf[NAME_MAX_BYTES];
    return (nvtxDomainHandle_t)keep_string(name ? from_wide(name, buf, sizeof(buf)) : "");
}

/* Fills slot id of a module's table (absent slots are skipped). */
static void put(NvtxFunctionTable t, unsigned n, unsigned id, NvtxFunctionPointer fn)
{
    if (id < n && t[id])
        *t[id] = fn;
}

#define FN(f) ((NvtxFunctionPointer)(void (*)(void))(f))

static void read_step_name(void)
{
    const char *v = getenv("TFT_STEP_RANGE");
    if (v && *v && strlen(v) < sizeof(step_name)) {
        strcpy(step_name, v);
        step_len = strlen(v);
    }
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable)
{
    if (!getExportTable || !tft_x_cuda_wanted())
        return 0;
    const NvtxExportTableCallbacks *cb = (const NvtxExportTableCallbacks *)getExportTable(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof(*cb) || !cb->GetModuleFunctionTable)
        return 0;
    read_step_name();
    NvtxFunctionTable core = NULL, core2 = NULL;
    unsigned n_core = 0, n_core2 = 0;
    if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &n_core) || !core)
        return 0;
    put(core, n_core, NVTX_CBID_CORE_RangePushA, FN(push_a));
    put(core, n_core, NVTX_CBID_CORE_RangePushW, FN(push_w));
    put(core, n_core, NVTX_CBID_CORE_RangePushEx, FN(push_ex));
    put(core, n_core, NVTX_CBID_CORE_RangePop, FN(pop_0));
    put(core, n_core, NVTX_CBID_CORE_RangeStartA, FN(start_a));
    put(core, n_core, NVTX_CBID_CORE_RangeStartW, FN(start_w));
    put(core, n_core, NVTX_CBID_CORE_RangeStartEx, FN(start_ex));
    put(core, n_core, NVTX_CBID_CORE_RangeEnd, FN(end_0));
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &n_core2) && core2) {
        put(core2, n_core2, NVTX_CBID_CORE2_DomainRangePushEx, FN(dom_push_ex));
        put(core2, n_core2, NVTX_CBID_CORE2_DomainRangePop, FN(dom_pop));
        put(core2, n_core2, NVTX_CBID_CORE2_DomainRangeStartEx, FN(dom_start_ex));
        put(core2, n_core2, NVTX_CBID_CORE2_DomainRangeEnd, FN(dom_end));
        put(core2, n_core2, NVTX_CBID_CORE2_DomainRegisterStringA, FN(reg_a));
        put(core2, n_core2, NVTX_CBID_CORE2_DomainRegisterStringW, FN(reg_w));
        put(core2, n_core2, NVTX_CBID_CORE2_DomainCreateA, FN(dom_create_a));
        put(core2, n_core2, NVTX_CBID_CORE2_DomainCreateW, FN(dom_create_w));
    }
    const NvtxExportTableVersionInfo *vi =
        (const NvtxExportTableVersionInfo *)getExportTable(NVTX_ETID_VERSIONINFO);
    if (vi && vi->struct_size >= sizeof(*vi) && vi->SetInjectionNvtxVersion)
        vi->SetInjectionNvtxVersion(NVTX_VERSION);
    return 1;
}
