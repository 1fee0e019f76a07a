/*
 * attach_nccl.c — a program linked to libnccl for `tftrace attach`'s NCCL
 * probes, started without tftrace. Writes its pid to DIR/pid, then loops
 * until killed, every 20 ms, on a NULL communicator, which NCCL refuses
 * (ncclInvalidArgument, 4) without touching a GPU: ncclAllReduce(1000
 * float32, sum), ncclBroadcast(24 int64, root 1), ncclReduce(7 float64,
 * max, root 3), ncclAllGather(5 uint8), ncclReduceScatter(9 bfloat16, avg),
 * ncclSend(11 int32, peer 2), ncclRecv(13 float16, peer 0); prints the
 * first results. NCCL's prototypes are declared here (its enums are ints:
 * nccl.h's values) so no header is needed.
 *   attach_nccl DIR
 */
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

#include "attach_pidfile.h"

int ncclAllReduce(const void *s, void *r, size_t count, int dtype, int op, void *comm, void *stream);
int ncclBroadcast(const void *s, void *r, size_t count, int dtype, int root, void *comm, void *stream);
int ncclReduce(const void *s, void *r, size_t count, int dtype, int op, int root, void *comm, void *stream);
int ncclAllGather(const void *s, void *r, size_t count, int dtype, void *comm, void *stream);
int ncclReduceScatter(const void *s, void *r, size_t count, int dtype, int op, void *comm, void *stream);
int ncclSend(const void *s, size_t count, int dtype, int peer, void *comm, void *stream);
int ncclRecv(void *r, size_t count, int dtype, int peer, void *comm, void *stream);

int main(int argc, char **argv)
{
    if (argc < 2)
        return fprintf(stderr, "usage: attach_nccl DIR\n"), 2;
    static float buf[1000];
    char path[4096], tmp[4200];
    if (attach_pid_write(argv[1], path, tmp))
        return 1;
    for (long i = 0;; i++) {
        int e = ncclAllReduce(buf, buf, 1000, 7, 0, NULL, NULL);
        int e2 = ncclBroadcast(buf, buf, 24, 4, 1, NULL, NULL);
        int e3 = ncclReduce(buf, buf, 7, 8, 2, 3, NULL, NULL) | ncclAllGather(buf, buf, 5, 1, NULL, NULL) |
                 ncclReduceScatter(buf, buf, 9, 9, 4, NULL, NULL) | ncclSend(buf, 11, 2, 2, NULL, NULL) |
                 ncclRecv(buf, 13, 6, 0, NULL, NULL);
        if (i == 0) {
            printf("ncclAllReduce %d ncclBroadcast %d others %d\n", e, e2, e3);
            fflush(stdout);
            rename(tmp, path);
        }
        usleep(20000);
    }
}
