"""The numpy program of bench/peers/bench_peers.sh: a loop of `a @ b` on
16 x 16 float32 arrays (numpy calls cblas_sgemm of the BLAS it was built
against: Debian's OpenBLAS here). Prints the loop's ns per matmul, measured
inside the program after a warm-up, so a tracer's start-up and end-of-run
work are not counted.
  np_loop.py [N]   N matmuls (default 100000)"""
import sys
import time

import numpy as np

n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
rng = np.random.default_rng(0)
a = rng.standard_normal((16, 16), dtype=np.float32)
b = rng.standard_normal((16, 16), dtype=np.float32)
for _ in range(1000):
    c = a @ b
t0 = time.perf_counter_ns()
for _ in range(n):
    c = a @ b
t1 = time.perf_counter_ns()
print(f"np_loop ns_per_call {(t1 - t0) / n:.1f} calls {n + 1000} check {float(c.sum()):.6g}")
