#!/usr/bin/python3
"""bench_numpy.py -- cost of the CBLAS interposer on numpy's `a @ b`.

An unmodified numpy loop (Debian's /usr/bin/python3; numpy's matmul calls
cblas_sgemm / cblas_dgemm of Debian's OpenBLAS, which libtftrace.so
interposes when tftrace preloads it) timed per matmul in three
configurations, as child processes, alternated, best of R:
  untraced        /usr/bin/python3 alone
  shape           tftrace --stats shape (an op and C's shape per call)
  full            tftrace with its default statistics (A, B and C: every
                  statistic, so tfdiff's origin analysis can use them)
for 16x16 and 512x512 matrices, f32 and f64. OPENBLAS_NUM_THREADS=1 in
every configuration (the collector gets the other core). The rings are
made large (--ring-kb 65536) and each traced child's trace is checked for
dropped records: a figure with drops would flatter the tracer and is
marked. Never a timed assertion: prints a table and BENCH-RESULT lines.

    bench_numpy.py [--reps R] [--scale X] [--tftrace PATH] [--tfdump PATH]
                   [--python PATH] [--sizes 16,512] [--dtypes f32,f64]
"""
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def child(size, dtype, n):
    """us per `a @ b` over n calls, best of 3 passes after a warm-up."""
    import numpy as np
    rng = np.random.default_rng(1)
    t = np.float32 if dtype == "f32" else np.float64
    a = rng.standard_normal((size, size)).astype(t)
    b = rng.standard_normal((size, size)).astype(t)
    for _ in range(max(n // 10, 2)):
        c = a @ b
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            c = a @ b
        best = min(best, (time.perf_counter() - t0) / n)
    assert c.shape == (size, size)
    return best * 1e6


def dropped(tfdump, trace):
    """Records the trace says were dropped (0 when none), None if unreadable."""
    r = subprocess.run([tfdump, "--json", trace], capture_output=True, text=True)
    try:
        j = json.loads(r.stdout)
    except ValueError:
        return None
    return int(j.get("dropped", 0) or 0)


def run(cfg, size, dtype, n, opts, tmp, k):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    for v in ("TFT_SHM", "TFT_OUTPUT", "LD_PRELOAD"):
        env.pop(v, None)
    cmd = [opts["python"], os.path.abspath(__file__), "--child", str(size), dtype, str(n)]
    trace = None
    if cfg != "untraced":
        trace = os.path.join(tmp, "%s-%d-%s-%d.trace" % (cfg, size, dtype, k))
        pre = [opts["tftrace"], "-q", "--ring-kb", "65536", "-o", trace]
        if cfg == "shape":
            pre += ["--stats", "shape"]
        cmd = pre + ["--"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.stderr.write("bench_numpy: %s failed (%d): %s\n" % (" ".join(cmd), r.returncode, r.stderr[-400:]))
        return None, None
    d = dropped(opts["tfdump"], trace) if trace else 0
    return float(r.stdout.split()[-1]), d


def result(id_, what, unit, fig, base, base_what, metric, goal_op, goal):
    value = fig - base if metric == "delta" else fig / base
    print("BENCH-RESULT " + json.dumps({
        "id": id_, "what": what, "unit": unit, "figure": round(fig, 4), "baseline": round(base, 4),
        "baseline_what": base_what, "metric": metric, "value": round(value, 4), "goal_op": goal_op,
        "goal": goal}, separators=(",", ":")))


def main(argv):
    if len(argv) == 5 and argv[1] == "--child":
        print("%.4f" % child(int(argv[2]), argv[3], int(argv[4])))
        return 0
    opts = {"reps": 5, "scale": 1.0, "python": "/usr/bin/python3",
            "tftrace": os.path.join(ROOT, "build", "tracer", "tftrace"),
            "tfdump": os.path.join(ROOT, "build", "analyzer", "tfdump"),
            "sizes": "16,512", "dtypes": "f32,f64"}
    i = 1
    while i + 1 < len(argv):
        key = argv[i].lstrip("-")
        if key not in opts:
            sys.stderr.write(__doc__)
            return 2
        opts[key] = argv[i + 1]
        i += 2
    reps, scale = int(opts["reps"]), float(opts["scale"])
    for tool in ("tftrace", "tfdump"):
        if not os.access(opts[tool], os.X_OK):
            sys.stderr.write("bench_numpy: %s not found: build it or pass --%s PATH\n" % (opts[tool], tool))
            return 2
    if subprocess.run([opts["python"], "-c", "import numpy"], capture_output=True).returncode != 0:
        print("SKIP: numpy missing for %s" % opts["python"])
        return 0
    cfgs = ("untraced", "shape", "full")
    sizes = [int(s) for s in opts["sizes"].split(",")]
    dtypes = opts["dtypes"].split(",")
    best = {}
    drops = {}
    ok = True
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="tft-bench-np-") as tmp:
        k = 0
        for size in sizes:
            n = max(int((200000 if size <= 64 else 40) * scale), 5)
            for dtype in dtypes:
                for _ in range(reps):
                    for cfg in cfgs:
                        k += 1
                        v, d = run(cfg, size, dtype, n, opts, tmp, k)
                        if v is None:
                            ok = False
                            continue
                        key = (size, dtype, cfg)
                        best[key] = min(best.get(key, float("inf")), v)
                        drops[key] = max(drops.get(key, 0), d if d is not None else -1)
    print("us per a @ b, best of %d, alternated, OPENBLAS_NUM_THREADS=1, load average %.1f -> %.1f"
          % (reps, load, os.getloadavg()[0]))
    print("%-14s %10s %10s %10s %12s %12s" % ("", "untraced", "shape", "full", "shape-untr", "full/untr"))
    for size in sizes:
        for dtype in dtypes:
            row = [best.get((size, dtype, c)) for c in cfgs]
            if None in row:
                continue
            u, s, f = row
            mark = "" if all(drops.get((size, dtype, c), 0) == 0 for c in cfgs[1:]) else "  (DROPPED records)"
            print("%-14s %10.3f %10.3f %10.3f %+10.0fns %12.3f%s"
                  % ("%dx%d %s" % (size, size, dtype), u, s, f, (s - u) * 1e3, f / u, mark))
    for size in sizes:
        for dtype in dtypes:
            if any((size, dtype, c) not in best for c in cfgs):
                continue
            u, s, f = (best[(size, dtype, c)] for c in cfgs)
            what = "numpy %dx%d %s a @ b" % (size, size, dtype)
            tag = "" if dtype == "f32" else "." + dtype
            if size <= 64:
                result("interpose.numpy.matmul%d.shape%s" % (size, tag), what + ", tftrace --stats shape",
                       "ns/call", s * 1e3, u * 1e3, "untraced", "delta", "<=", 100)
                result("interpose.numpy.matmul%d.full%s" % (size, tag), what + ", tftrace (full statistics)",
                       "ns/call", f * 1e3, u * 1e3, "untraced", "delta", "<=", None)
            else:
                # the spirit ("cheap enough to leave on", tftrain's 1.02): default settings
                result("interpose.numpy.matmul%d%s" % (size, tag), what + ", tftrace (full statistics)",
                       "us/call", f, u, "untraced", "ratio", "<=", 1.02)
                result("interpose.numpy.matmul%d.shape%s" % (size, tag), what + ", tftrace --stats shape",
                       "us/call", s, u, "untraced", "ratio", "<=", 1.02)
    if not ok:
        sys.stderr.write("bench_numpy: a measurement failed\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
