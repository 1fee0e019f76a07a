"""mpi4py_grid.py — mpi_grid.c's 2 x 2 grid through mpi4py (tests/e2e/trainers,
4 ranks, Debian's python3-mpi4py with numpy): COMM_WORLD.Split into rows
(tensor parallel, rank // 2) and columns (data parallel, rank % 2); each
of ITERS iterations the row Allreduces float32 activations, the column
Allreduces float32 gradients, COMM_WORLD Allgathers the losses. Rank 0
prints a checksum, which tracing must not change.

  mpi4py_grid.py ok     all ranks agree
  mpi4py_grid.py count  at iteration PLANT_ITER rank 3 passes GRAD // 2
                        gradients where its column peer rank 1 passes GRAD
                        (rank 1 then waits for the rest; run it under
                        tftrace --timeout)
"""
import sys

import numpy as np
from mpi4py import MPI

ITERS, PLANT_ITER, ACT, GRAD = 6, 3, 64, 1024
mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
world = MPI.COMM_WORLD
rank = world.Get_rank()
assert world.Get_size() == 4, "mpi4py_grid.py needs 4 ranks"
world.Set_errhandler(MPI.ERRORS_RETURN)
row = world.Split(rank // 2, rank)
col = world.Split(rank % 2, rank)

act_sum = np.zeros(ACT, dtype=np.float32)
grad_sum = np.zeros(GRAD, dtype=np.float32)
losses = np.zeros(4, dtype=np.float32)
check = 0.0
for it in range(ITERS):
    act = np.arange(ACT, dtype=np.float32) + rank + it
    row.Allreduce(act, act_sum, op=MPI.SUM)
    grad = 0.5 * np.resize(act_sum, GRAD).astype(np.float32) + rank
    n = GRAD // 2 if mode == "count" and rank == 3 and it == PLANT_ITER else GRAD
    col.Allreduce(grad[:n], grad_sum[:n], op=MPI.SUM)
    loss = np.array([grad_sum[0] * 0.25 / (it + 1)], dtype=np.float32)
    world.Allgather(loss, losses)
    check += float(losses.sum()) + float(grad_sum[-1])
if rank == 0:
    print("grid %.3f" % check)
col.Free()
row.Free()
