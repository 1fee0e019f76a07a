/*
 * core_out.c — the analyzers' output files (core_out.h): a temporary file
 * beside the target renamed over it when complete; a device, a FIFO or a
 * link of the user's own written directly; another user's link refused.
 */
#include "core_out.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes directly to what path names (a device, a FIFO, a link's target). */
static int open_direct(core_out *o, int flags)
{
    int fd = open(o->path, O_WRONLY | O_CLOEXEC | O_NOCTTY | flags, 0600);
    if (fd < 0)
        return -1;
    if (!(o->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return 0;
}

int core_out_open(core_out *o, const char *path, unsigned mode)
{
    *o = (core_out){.path = path};
    struct stat sb;
    if (lstat(path, &sb) == 0) {
        if (S_ISLNK(sb.st_mode)) {
            if (sb.st_uid != geteuid() && sb.st_uid != 0) {
                snprintf(o->why, sizeof(o->why), "a symbolic link of another user (uid %u): not written through; "
                         "remove it or give another path", (unsigned)sb.st_uid);
                errno = ELOOP;
                return -1;
            }
            return open_direct(o, O_CREAT | O_TRUNC);
        }
        if (S_ISCHR(sb.st_mode) || S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode))
            return open_direct(o, O_NOFOLLOW);
        if (S_ISDIR(sb.st_mode)) {
            errno = EISDIR;
            return -1;
        }
    }
    if ((size_t)snprintf(o->tmp, sizeof(o->tmp), "%s.tmp-XXXXXX", path) >= sizeof(o->tmp)) {
        o->tmp[0] = 0;
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        o->tmp[0] = 0;
        return -1;
    }
    if (!mode) {
        mode_t um = umask(0);
        umask(um);
        mode = 0666 & ~(unsigned)um;
    }
    if (fchmod(fd, (mode_t)mode) < 0 || !(o->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlink(o->tmp);
        o->tmp[0] = 0;
        errno = e;
        return -1;
    }
    return 0;
}

const char *core_out_strerror(const core_out *o)
{
    return o->why[0] ? o->why : strerror(errno);
}

int core_out_commit(core_out *o)
{
    int bad = ferror(o->f);
    int e = fclose(o->f);
    o->f = NULL;
    if (bad || e != 0 || (o->tmp[0] && rename(o->tmp, o->path) != 0)) {
        int err = bad && !e ? EIO : errno;
        if (o->tmp[0])
            unlink(o->tmp);
        errno = err;
        return -1;
    }
    return 0;
}

void core_out_abort(core_out *o)
{
    if (o->f)
        fclose(o->f);
    o->f = NULL;
    if (o->tmp[0])
        unlink(o->tmp);
}

int core_out_parse_mode(const char *s, unsigned *mode)
{
    size_t n = s ? strlen(s) : 0;
    if (!n || n > 4 || strspn(s, "01234567") != n)
        return -1;
    unsigned long m = strtoul(s, NULL, 8);
    if (m > 0777 || (m & 0600) != 0600)
        return -1;
    *mode = (unsigned)m;
    return 0;
}

unsigned core_out_dir_mode(unsigned mode)
{
    return mode | ((mode & 0444) >> 2);
}
