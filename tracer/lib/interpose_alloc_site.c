/*
 * interpose_alloc_site.c — the site of a recorded allocation: the name of
 * the calling function, from the .symtab of the object it lives in (read
 * from its file once; dladdr sees exported symbols only), cached per
 * return address in a lock-free table. Called on the allocation
 * interposers' recording path only (interpose_alloc.c,
 * interpose_alloc_mmap.c).
 */
#include "interpose_alloc_internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- sites: the calling function's name ------------------------------------ */

/* The .symtab of a loaded object, read from its file once (dladdr only
 * sees exported symbols; an executable built without -rdynamic exports
 * none of its functions). The file stays mapped; sym is NULL when the
 * object has no .symtab (stripped) or its file cannot be read. */
typedef struct sym_obj {
    const void *lm;          /* struct link_map *, the key */
    uintptr_t bias;          /* l_addr */
    const ElfW(Sym) *sym;
    size_t nsym;
    const char *str;
    size_t strsz;
    char base[64];           /* file name without directories */
} sym_obj;

#define MAX_SYM_OBJS 256
static struct {
    pthread_mutex_t lock;    /* held while a file is read; no loader lock inside */
    int n;
    sym_obj o[MAX_SYM_OBJS];
} syms = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void base_name(char *out, size_t n, const char *path)
{
    const char *s = strrchr(path, '/');
    s = s ? s + 1 : path;
    size_t len = strnlen(s, n - 1);
    memcpy(out, s, len);
    out[len] = '\0';
}

/* Finds .symtab and its string table in the mapped file [m, m + size);
 * every offset is checked against the file's size. */
static void parse_symtab(sym_obj *o, const unsigned char *m, size_t size)
{
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)m;
    if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
        eh->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
        eh->e_shentsize != sizeof(ElfW(Shdr)) || eh->e_shoff > size ||
        (size - eh->e_shoff) / sizeof(ElfW(Shdr)) < eh->e_shnum)
        return;
    const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(m + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_entsize != sizeof(ElfW(Sym)) || sh[i].sh_link >= eh->e_shnum)
            continue;
        const ElfW(Shdr) *st = &sh[sh[i].sh_link];
        if (sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset || st->sh_offset > size ||
            st->sh_size > size - st->sh_offset || (sh[i].sh_offset & (sizeof(void *) - 1)))
            return;
        o->sym = (const ElfW(Sym) *)(m + sh[i].sh_offset);
        o->nsym = sh[i].sh_size / sizeof(ElfW(Sym));
        o->str = (const char *)(m + st->sh_offset);
        o->strsz = st->sh_size;
        return;
    }
}

static void load_symtab(sym_obj *o, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat sb;
    long m = -1;
    if (fstat(fd, &sb) == 0 && sb.st_size > 0)
        m = syscall(SYS_mmap, NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0L);
    close(fd);
    if (m == -1)
        return;
    parse_symtab(o, (const unsigned char *)m, (size_t)sb.st_size);
    if (!o->sym)
        syscall(SYS_munmap, (void *)m, (size_t)sb.st_size);
}

/* The symbol table of the object lm, loaded on first use; NULL when the
 * cache is full. */
static const sym_obj *sym_obj_get(const struct link_map *lm)
{
    pthread_mutex_lock(&syms.lock);
    sym_obj *o = NULL;
    for (int i = 0; i < syms.n && !o; i++)
        if (syms.o[i].lm == lm && syms.o[i].bias == lm->l_addr)
            o = &syms.o[i];
    if (!o && syms.n < MAX_SYM_OBJS) {
        o = &syms.o[syms.n++];
        memset(o, 0, sizeof(*o));
        o->lm = lm;
        o->bias = lm->l_addr;
        const char *path = lm->l_name;
        if (!path || !path[0]) { /* the main program: its file, even if renamed since */
            char exe[4096];
            ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
            exe[n > 0 ? n : 0] = '\0';
            base_name(o->base, sizeof(o->base), exe);
            path = "/proc/self/exe";
        } else {
            base_name(o->base, sizeof(o->base), path);
        }
        load_symtab(o, path);
    }
    pthread_mutex_unlock(&syms.lock);
    return o;
}

/* Name of the function of o that contains the file address a, or NULL. */
static const char *symtab_find(const sym_obj *o, uintptr_t a)
{
    for (size_t i = 0; i < o->nsym; i++) {
        const ElfW(Sym) *s = &o->sym[i];
        int type = (int)(s->st_info & 0xf); /* ST_TYPE, the same in both ELF classes */
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s->st_shndx == SHN_UNDEF || a < s->st_value ||
            a - s->st_value >= s->st_size)
            continue;
        if (s->st_name < o->strsz && memchr(o->str + s->st_name, '\0', o->strsz - s->st_name))
            return o->str + s->st_name;
    }
    return NULL;
}

/* A function name without the compiler's clone suffixes
 * (grow.constprop.0, grow.isra.0, grow.part.1, grow.cold). */
static void fn_name(char *out, size_t n, const char *name)
{
    size_t len = strlen(name);
    const char *dot = strchr(name + 1, '.');
    if (dot && name[0])
        len = (size_t)(dot - name);
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), name);
}

/* The function containing return address a: its exported name (dladdr),
 * else its name in the object's .symtab, else "object+0xoffset". */
static void symbolize(uintptr_t a, char *buf, size_t n)
{
    Dl_info info;
    struct link_map *lm = NULL;
    uintptr_t pc = a - 1; /* inside the call instruction, in the caller */
    if (!dladdr1((void *)pc, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm) {
        snprintf(buf, n, "0x%" PRIxPTR, a);
        return;
    }
    if (info.dli_sname && info.dli_sname[0]) {
        fn_name(buf, n, info.dli_sname);
        return;
    }
    const sym_obj *o = sym_obj_get(lm);
    const char *name = o && o->sym ? symtab_find(o, pc - o->bias) : NULL;
    if (name)
        fn_name(buf, n, name);
    else
        snprintf(buf, n, "%s+0x%" PRIxPTR, o && o->base[0] ? o->base : "?", a - (uintptr_t)info.dli_fbase);
}

/* Return address -> site name, insert-only and lock-free; names live as
 * long as the process. A full neighbourhood leaves the site unnamed ("?")
 * rather than allocate a name per call. */
#define SITE_SLOTS 8192u
#define SITE_PROBES 64u
static struct site_slot {
    _Atomic uintptr_t ret;
    _Atomic(const char *) name;
} sites[SITE_SLOTS];

const char *alloc_site_of(const void *ret)
{
    uintptr_t a = (uintptr_t)ret;
    size_t h = ptr_hash(a);
    for (unsigned k = 0; k < SITE_PROBES; k++) {
        struct site_slot *s = &sites[(h + k) & (SITE_SLOTS - 1)];
        uintptr_t key = atomic_load_explicit(&s->ret, memory_order_acquire);
        if (key == a) {
            const char *name = atomic_load_explicit(&s->name, memory_order_acquire);
            if (name)
                return name;
            break; /* another thread is naming it: name it here too */
        }
        if (!key)
            break;
    }
    char buf[256];
    symbolize(a, buf, sizeof(buf));
    size_t len = strlen(buf) + 1;
    for (unsigned k = 0; k < SITE_PROBES; k++) {
        struct site_slot *s = &sites[(h + k) & (SITE_SLOTS - 1)];
        uintptr_t key = 0;
        if (atomic_compare_exchange_strong(&s->ret, &key, a) || key == a) {
            const char *name = atomic_load_explicit(&s->name, memory_order_acquire);
            if (name)
                return name;
            char *copy = NEXT(malloc)(len);
            if (!copy)
                return "?";
            memcpy(copy, buf, len);
            const char *none = NULL;
            if (!atomic_compare_exchange_strong(&s->name, &none, copy)) {
                NEXT(free)(copy);
                return none;
            }
            return copy;
        }
    }
    return "?";
}

void alloc_sites_lock(void) { pthread_mutex_lock(&syms.lock); }

void alloc_sites_unlock(void) { pthread_mutex_unlock(&syms.lock); }
