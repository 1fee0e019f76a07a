"""The MPI program of bench/peers/bench_peers.sh when mpi4py's OSU demo
(demo/osu_bcast.py) is not found: buffer-based comm.Bcast of SIZE bytes
(MPI.BYTE, as the OSU benchmark sends) from rank 0, N times after a
warm-up of N/10, between barriers. Rank 0 prints one line per size:
  bcast SIZE us_per_call US
  bcast_loop.py N_SMALL N_LARGE   (8-byte and 1 MiB broadcasts)"""
import sys

from mpi4py import MPI


def loop(comm, buf, size, n):
    msg = [buf, size, MPI.BYTE]
    skip = max(1, n // 10)
    comm.Barrier()
    for i in range(skip + n):
        if i == skip:
            t0 = MPI.Wtime()
        comm.Bcast(msg, 0)
    t1 = MPI.Wtime()
    comm.Barrier()
    return (t1 - t0) * 1e6 / n


def main():
    n_small = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    n_large = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    comm = MPI.COMM_WORLD
    buf = bytearray(1 << 20)
    for size, n in ((8, n_small), (1 << 20, n_large)):
        us = loop(comm, buf, size, n)
        if comm.Get_rank() == 0:
            print(f"bcast {size} us_per_call {us:.3f}", flush=True)


main()
