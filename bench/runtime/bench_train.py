#!/usr/bin/env python3
"""tftrain throughput and recording overhead -- a benchmark, not a test.

Tokens/s of the default config and of a larger one, untraced and traced
(tftrace, stats full, every op every step), alternated, best of REPS each,
wall time including start-up. Besides the table, one BENCH-RESULT line per
config (ids runtime.tftrain.default and runtime.tftrain.larger; metric the
ratio traced/untraced of the best wall times, goal <= 1.02) for bench/run.sh.

    bench/runtime/bench_train.py [BUILD_DIR] [REPS]
"""
import json
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


def bench_result(bid, what, traced, untraced):
    """One BENCH-RESULT line: tok/s traced vs untraced, value = time ratio."""
    line = {"id": bid, "what": what, "unit": "tok/s", "figure": round(traced),
            "baseline": round(untraced), "baseline_what": "tftrain untraced",
            "metric": "ratio", "value": round(untraced / traced, 4), "goal_op": "<=",
            "goal": 1.02}
    print("BENCH-RESULT " + json.dumps(line, separators=(",", ":")), flush=True)


def bench(bid, name, tokens_per_step, steps, args):
    base = [tftrain, "--steps", str(steps), "--eval-every", "0", "-q"] + args
    trace = os.path.join(tmp, "t.trace")
    best_u = best_t = float("inf")
    for _ in range(reps):
        best_u = min(best_u, wall(base))
        shutil.rmtree(trace, ignore_errors=True)  # tftrace records only into a new directory
        best_t = min(best_t, wall([tftrace, "-q", "-o", trace, "--"] + base))
    size = sum(os.path.getsize(os.path.join(trace, f)) for f in os.listdir(trace))
    tok = tokens_per_step * steps
    print(f"{name:30} untraced {tok / best_u:8.0f} tok/s   traced {tok / best_t:8.0f} tok/s   "
          f"ratio {best_t / best_u:.3f}   trace {size / 1e6:.2f} MB for {steps} steps", flush=True)
    bench_result(bid, f"tftrain {name}, traced (stats full, every op) / untraced, wall time",
                 tok / best_t, tok / best_u)


print(f"tftrain, best of {reps}, alternated; traced = tftrace with stats full")
bench("runtime.tftrain.default", "default (2L d64 T32 B16)", 16 * 32, 200, [])
bench("runtime.tftrain.larger", "larger (4L d256 T128 B8)", 8 * 128, 6,
      ["--layers", "4", "--d-model", "256", "--heads", "8", "--seq", "128", "--batch", "8"])
shutil.rmtree(tmp)
