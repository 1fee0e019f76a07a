/*
 * attach_nccl.c — a program linked to libnccl for `tftrace attach`'s NCCL
 * probes, started without tftrace. Writes its pid to DIR/pid, then loops
 * until killed, every 20 ms: ncclAllReduce(1000 floats, sum) and
 * ncclBroadcast(24 int64, root 1) on a NULL communicator, which NCCL
 * refuses (ncclInvalidArgument, 4) without touching a GPU; prints the first
 * results. NCCL's prototypes are declared here (its enums are ints: float32
 * = 7, int64 = 4, sum = 0) so no header is needed.
 *   attach_nccl DIR
 */
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

int ncclAllReduce(const void *s, void *r, size_t count, int dtype, int op, void *comm, void *stream);
int ncclBroadcast(const void *s, void *r, size_t count, int dtype, int root, void *comm, void *stream);

int main(int argc, char **argv)
{
    if (argc < 2)
        return fprintf(stderr, "usage: attach_nccl DIR\n"), 2;
    static float buf[1000];
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/pid", argv[1]);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return perror(tmp), 1;
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    for (long i = 0;; i++) {
        int e = ncclAllReduce(buf, buf, 1000, 7, 0, NULL, NULL);
        int e2 = ncclBroadcast(buf, buf, 24, 4, 1, NULL, NULL);
        if (i == 0) {
            printf("ncclAllReduce %d ncclBroadcast %d\n", e, e2);
            fflush(stdout);
            rename(tmp, path);
        }
        usleep(20000);
    }
}
