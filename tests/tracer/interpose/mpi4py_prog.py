"""An unmodified mpi4py program for the MPI interposer tests (4 ranks):
ITERS buffer-based comm.Allreduce calls on float32 numpy arrays, one
comm.Bcast, a ring of comm.Isend/comm.Irecv completed by
MPI.Request.Waitall, then pickle-based comm.reduce and comm.allreduce.
  mpi4py_prog.py ok     all ranks agree
  mpi4py_prog.py count  rank 2 all-reduces 7 floats instead of 8 at iteration 2
  mpi4py_prog.py skip   rank 3 skips the all-reduce of iteration 2 and sleeps:
                        the others hang in it (run under tftrace --timeout)
Rank 0 prints the results, so tracing must not change them."""
import sys
import time

try:
    import numpy as np
    from mpi4py import MPI
except ImportError as e:
    print("SKIP: mpi4py or numpy missing for", sys.executable, e)
    sys.exit(0)

ITERS = 4
mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
comm = MPI.COMM_WORLD
rank = comm.Get_rank()

acc = np.zeros(8, dtype=np.float32)
for it in range(ITERS):
    x = np.arange(8, dtype=np.float32) + rank + it
    out = np.zeros(8, dtype=np.float32)
    n = 8
    if mode == "count" and rank == 2 and it == 2:
        n = 7
    if mode == "skip" and rank == 3 and it == 2:
        time.sleep(120)  # the others wait for us in MPI_Allreduce
        sys.exit(0)
    try:
        comm.Allreduce(x[:n], out[:n], op=MPI.SUM)
    except MPI.Exception as e:  # a count mismatch may be reported, not abort
        print("rank", rank, "MPI error:", e, file=sys.stderr)
    acc += out
y = np.zeros(4, dtype=np.float64)
if rank == 0:
    y[:] = acc[:4] * 0.5
comm.Bcast(y, root=0)
# a ring of non-blocking buffer sends and receives
size = comm.Get_size()
ring_out = np.full(3, rank, dtype=np.int32)
ring_in = np.zeros(3, dtype=np.int32)
reqs = [comm.Irecv(ring_in, source=(rank + size - 1) % size, tag=5),
        comm.Isend(ring_out, dest=(rank + 1) % size, tag=5)]
MPI.Request.Waitall(reqs)
ring = comm.reduce(int(ring_in.sum()), op=MPI.SUM, root=0)
total = comm.allreduce(rank + 1, op=MPI.SUM)
if rank == 0:
    print("result %.3f %.3f %d %d" % (float(acc.sum()), float(y.sum()), total, ring))
