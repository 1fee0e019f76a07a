/*
 * desync_comm_names.c — what COMM records (FORMAT.md 5.15) say of each
 * communicator: its members (listed by one record, or assembled from the
 * records of every rank file that defines one), its point-to-point spaces,
 * and its name in a finding, "{0-3}", "{1,3}", "{0,1|2,3}" (an
 * intercommunicator), or its id in hex when the members are unknown. The
 * definitions live in desync_state.defs, at most DESYNC_MAX_DEFS.
 */
#include "desync_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The definition of communicator id, NULL none. */
comm_def *desync_def_find(const desync_state *s, uint64_t id)
{
    for (int k = 0; k < s->ndefs; k++)
        if (s->defs[k].id == id)
            return &s->defs[k];
    return NULL;
}

/* The definition whose point-to-point space is space, NULL none. */
comm_def *desync_def_of_p2p(const desync_state *s, uint64_t space)
{
    for (int k = 0; k < s->ndefs; k++)
        if (s->defs[k].p2p == space || (s->defs[k].p2p_old && s->defs[k].p2p_old == space))
            return &s->defs[k];
    return NULL;
}

/* The definition of communicator id, added (no members known) when new;
 * NULL past DESYNC_MAX_DEFS or out of memory. */
comm_def *desync_def_get(desync_state *s, uint64_t id)
{
    comm_def *d = desync_def_find(s, id);
    if (d || s->ndefs == DESYNC_MAX_DEFS)
        return d;
    if (s->ndefs == s->defs_cap) {
        int ncap = s->defs_cap ? s->defs_cap * 2 : 16;
        comm_def *n = realloc(s->defs, (size_t)ncap * sizeof(*n));
        if (!n)
            return NULL;
        s->defs = n;
        s->defs_cap = ncap;
    }
    d = &s->defs[s->ndefs++];
    memset(d, 0, sizeof(*d));
    d->id = id;
    char p[32];
    int len = snprintf(p, sizeof(p), "%016" PRIx64 ":p2p", id);
    d->p2p = tft_string_id(p, (size_t)len);
    if (id == s->world)
        d->p2p_old = tft_string_id("MPI_COMM_WORLD:p2p", 18);
    return d;
}

/* Sizes d for n members (all unknown); false when it cannot. Members not
 * listed are assembled from the rank files, one each: a communicator
 * larger than the trace's rank files can never be complete, so its size
 * is not allocated (a COMM record's size is the file's word, not memory
 * the file has paid for). */
static bool def_size(const desync_state *s, comm_def *d, int n)
{
    if (d->mem && d->size == n)
        return true;
    if (n <= 0 || n > DESYNC_MAX_MEMBERS || n > s->nranks || d->mem)
        return false;
    d->mem = malloc((size_t)n * sizeof(*d->mem));
    if (!d->mem)
        return false;
    for (int k = 0; k < n; k++)
        d->mem[k] = -1;
    d->size = n;
    return true;
}

/* Rank file i's member k of d is its own rank (assembling unlisted members). */
void desync_def_assemble(const desync_state *s, comm_def *d, int i, int k, int n)
{
    if (!d->listed && k >= 0 && k < n && def_size(s, d, n))
        d->mem[k] = desync_rank_id(s, i);
}

/* "{0-3}", "{1,3}", "{0,2,4-7}", "{0,1|2,3}" (an intercommunicator) for d
 * into buf (len >= 32); the 16-hex-digit id when the members are unknown.
 * A list that does not fit ends in "...}". */
static void def_name(const comm_def *d, uint64_t id, char *buf, size_t len)
{
    bool known = d && d->mem && d->size > 0;
    for (int k = 0; known && k < d->size; k++)
        known = d->mem[k] >= 0;
    if (!known) {
        snprintf(buf, len, "%016" PRIx64, id);
        return;
    }
    size_t o = 1;
    buf[0] = '{';
    for (int k = 0; k < d->size; k++) {
        if (o + 28 >= len) { /* room for one more item (24) and "...}" */
            o += (size_t)snprintf(buf + o, len - o, "...");
            break;
        }
        const char *sep = k == 0 ? "" : d->inter && k == d->local ? "|" : ",";
        int j = k;
        while (j + 1 < d->size && d->mem[j + 1] == d->mem[j] + 1 && !(d->inter && j + 1 == d->local))
            j++;
        if (j - k >= 2) {
            o += (size_t)snprintf(buf + o, len - o, "%s%d-%d", sep, (int)d->mem[k], (int)d->mem[j]);
            k = j;
        } else {
            o += (size_t)snprintf(buf + o, len - o, "%s%d", sep, (int)d->mem[k]);
        }
    }
    snprintf(buf + o, len - o, "}");
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Replaces every PH<16 hex digits> in d->detail by that communicator's
 * name; fills d->comm_name and d->members. */
void desync_names_fill(const desync_state *s, desync_finding *d)
{
    char out[sizeof(d->detail)];
    size_t o = 0;
    for (const char *p = d->detail; *p && o + 1 < sizeof(out);) {
        uint64_t id = 0;
        int k = 0;
        while (*p == PH[0] && k < 16 && hexval(p[1 + k]) >= 0)
            id = id << 4 | (uint64_t)hexval(p[1 + k++]);
        if (*p != PH[0] || k < 16) {
            out[o++] = *p++;
            continue;
        }
        char nm[64];
        def_name(desync_def_find(s, id), id, nm, sizeof(nm));
        int w = snprintf(out + o, sizeof(out) - o, "%s", nm);
        o = w < 0 ? o : o + (size_t)w < sizeof(out) ? o + (size_t)w : sizeof(out) - 1;
        p += 17;
    }
    out[o] = '\0';
    memcpy(d->detail, out, o + 1);
    const comm_def *def = d->comm ? desync_def_find(s, d->comm) : NULL;
    d->comm_name[0] = '\0';
    if (d->comm)
        def_name(def, d->comm, d->comm_name, sizeof(d->comm_name));
    d->nmembers = 0;
    if (!def || !def->mem || d->comm_name[0] != '{')
        return;
    d->nmembers = def->size;
    for (int k = 0; k < def->size && k < DESYNC_MEMBERS; k++)
        d->members[k] = def->mem[k];
}
