#!/usr/bin/env python3
"""tftrain throughput and recording overhead -- a benchmark, not a test.

Tokens/s of the default config and of a larger one, untraced and traced
(tftrace, stats full, every op every step), alternated, best of REPS each,
wall time including start-up.

    bench/runtime/bench_train.py [BUILD_DIR] [REPS]
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
tftrain = os.path.join(build, "runtime", "tftrain")
tftrace = os.path.join(build, "tracer", "tftrace")
env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
tmp = tempfile.mkdtemp(prefix="tft-bench-train-")


def wall(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def bench(name, tokens_per_step, steps, args):
    base = [tftrain, "--steps", str(steps), "--eval-every", "0", "-q"] + args
    trace = os.path.join(tmp, "t.trace")
    best_u = best_t = float("inf")
    for _ in range(reps):
        best_u = min(best_u, wall(base))
        best_t = min(best_t, wall([tftrace, "-q", "-o", trace, "--"] + base))
    size = sum(os.path.getsize(os.path.join(trace, f)) for f in os.listdir(trace))
    tok = tokens_per_step * steps
    print(f"{name:30} untraced {tok / best_u:8.0f} tok/s   traced {tok / best_t:8.0f} tok/s   "
          f"ratio {best_t / best_u:.3f}   trace {size / 1e6:.2f} MB for {steps} steps")


print(f"tftrain, best of {reps}, alternated; traced = tftrace with stats full")
bench("default (2L d64 T32 B16)", 16 * 32, 200, [])
bench("larger (4L d256 T128 B8)", 8 * 128, 6,
      ["--layers", "4", "--d-model", "256", "--heads", "8", "--seq", "128", "--batch", "8"])
shutil.rmtree(tmp)
