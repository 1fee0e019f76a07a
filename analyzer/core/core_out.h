/*
 * core_out.h — how the analyzers write an output file (core_out.c). What
 * is at the path decides how:
 *
 *  - nothing, or a regular file: a temporary file is created beside it
 *    (mkstemp: O_CREAT|O_EXCL, never through a link) and renamed over it
 *    once complete — a reader never sees half a file;
 *  - a symbolic link: followed only when it belongs to the user writing or
 *    to root (/dev/stdout), and then written through; a link of another
 *    user's — planted in a shared output directory — is refused, so a root
 *    run cannot be made to overwrite the link's target;
 *  - a device or a FIFO (/dev/null, a pipe): written to directly.
 *
 * Used by every file the analyzers write: HTML pages, JUnit, Markdown,
 * exports, .npy tensors.
 */
#ifndef TFT_CORE_OUT_H
#define TFT_CORE_OUT_H

#include <stdio.h>

typedef struct core_out {
    FILE *f;
    char tmp[4096];   /* the temporary file renamed to path by core_out_commit; "" writing directly */
    const char *path; /* borrowed */
    char why[160];    /* why core_out_open failed, when errno alone would not say */
} core_out;

/* Opens path for writing as above; new files get the permission bits mode
 * exactly (0: 0666 less the umask, as fopen would). 0, or -1 with errno
 * (ELOOP: another user's link; core_out_strerror says why). */
int core_out_open(core_out *o, const char *path, unsigned mode);
/* Closes and renames the temporary file to path. 0, or -1 with errno (the
 * temporary file removed). */
int core_out_commit(core_out *o);
/* Closes and removes the temporary file. */
void core_out_abort(core_out *o);
/* The reason of a failed core_out_open (or strerror(errno)). */
const char *core_out_strerror(const core_out *o);

/* Permission bits from an octal text ("0640"): at most 0777 and with the
 * owner's read and write. 0, or -1 when s is not such a mode. */
int core_out_parse_mode(const char *s, unsigned *mode);
/* A directory's bits for files of mode: x added where r is (0640: 0750). */
unsigned core_out_dir_mode(unsigned mode);

#endif
