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
for 16x16 and 512x512 matrices, f32 and f64, and 16x16 f32 with a[0, 0]
changed before every call (no statistics to reuse). OPENBLAS_NUM_THREADS=1
in every configuration (the collector gets the other core); tftrace's
defaults (4 MiB rings); a traced run whose trace shows dropped records is
left out (it would flatter the tracer). Figures in the thread's CPU time
(the table adds the wall clock); see child(). Never a timed assertion:
prints a table and BENCH-RESULT lines. --scale X multiplies the calls per
pass (1000 for 16x16, 2 for 512x512).

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


PASSES, WARM_PASSES, PAUSE_S = 20, 10, 0.01


def child(size, dtype, n, fresh):
    """(wall, cpu) us per `a @ b`: the best of PASSES passes of n calls,
    each followed by a 10 ms pause in which the collector drains what the
    pass wrote (a pass writes about 1.2 MB at most, under the default 4 MiB
    ring): the cost of a call with room in the ring, not the collector's
    throughput. The warm-up passes lap the ring (its pages are mapped).
    cpu: the thread's CPU time, which other processes disturb far less.
    fresh: a[0, 0] changes before every call (the operand's statistics
    cannot be reused); the untraced loop does the same."""
    import numpy as np
    rng = np.random.default_rng(1)
    t = np.float32 if dtype == "f32" else np.float64
    a = rng.standard_normal((size, size)).astype(t)
    b = rng.standard_normal((size, size)).astype(t)
    best, best_cpu = float("inf"), float("inf")
    for p in range(WARM_PASSES + PASSES):
        t0, c0 = time.perf_counter(), time.thread_time()
        if fresh:
            for i in range(n):
                a[0, 0] = i
                c = a @ b
        else:
            for _ in range(n):
                c = a @ b
        t1, c1 = time.perf_counter(), time.thread_time()
        if p >= WARM_PASSES:
            best, best_cpu = min(best, (t1 - t0) / n), min(best_cpu, (c1 - c0) / n)
        time.sleep(PAUSE_S)
    assert c.shape == (size, size)
    return best * 1e6, best_cpu * 1e6


def dropped(tfdump, trace):
    """Records the trace says were dropped (0 when none), None if unreadable."""
    r = subprocess.run([tfdump, "--json", trace], capture_output=True, text=True)
    try:
        j = json.loads(r.stdout)
    except ValueError:
        return None
    return int(j.get("dropped", 0) or 0)


def run(cfg, case, opts, tmp, k):
    size, dtype, fresh = case
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    for v in ("TFT_SHM", "TFT_OUTPUT", "LD_PRELOAD"):
        env.pop(v, None)
    n = max(int((1000 if size <= 64 else 2) * float(opts["scale"])), 1)
    cmd = [opts["python"], os.path.abspath(__file__), "--child", str(size), dtype, str(n), str(int(fresh))]
    trace = None
    if cfg != "untraced":
        trace = os.path.join(tmp, "%s-%d-%s-%d.trace" % (cfg, size, dtype, k))
        pre = [opts["tftrace"], "-q", "-o", trace]
        if cfg == "shape":
            pre += ["--stats", "shape"]
        cmd = pre + ["--"] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.stderr.write("bench_numpy: %s failed (%d): %s\n" % (" ".join(cmd), r.returncode, r.stderr[-400:]))
        return None, None
    d = dropped(opts["tfdump"], trace) if trace else 0
    wall, cpu = map(float, r.stdout.split()[-2:])
    return (wall, cpu), d


def result(id_, what, unit, fig, base, base_what, metric, goal_op, goal):
    value = fig - base if metric == "delta" else fig / base
    print("BENCH-RESULT " + json.dumps({
        "id": id_, "what": what, "unit": unit, "figure": round(fig, 4), "baseline": round(base, 4),
        "baseline_what": base_what, "metric": metric, "value": round(value, 4), "goal_op": goal_op,
        "goal": goal}, separators=(",", ":")))


def main(argv):
    if len(argv) == 6 and argv[1] == "--child":
        print("%.4f %.4f" % child(int(argv[2]), argv[3], int(argv[4]), argv[5] == "1"))
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
    reps = int(opts["reps"])
    for tool in ("tftrace", "tfdump"):
        if not os.access(opts[tool], os.X_OK):
            sys.stderr.write("bench_numpy: %s not found: build it or pass --%s PATH\n" % (opts[tool], tool))
            return 2
    if subprocess.run([opts["python"], "-c", "import numpy"], capture_output=True).returncode != 0:
        print("SKIP: numpy missing for %s" % opts["python"])
        return 0
    cfgs = ("untraced", "shape", "full")
    sizes = [int(x) for x in opts["sizes"].split(",")]
    dtypes = opts["dtypes"].split(",")
    # (size, dtype, fresh): fresh only for small f32, the case where the
    # operand memo would otherwise hit at every call
    cases = [(z, d, False) for z in sizes for d in dtypes] + [(z, "f32", True) for z in sizes if z <= 64]
    best, drops = {}, {}
    ok = True
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="tft-bench-np-") as tmp:
        k = 0
        for case in cases:
            for _ in range(reps):
                for cfg in cfgs:
                    k += 1
                    v, d = run(cfg, case, opts, tmp, k)
                    if v is None:
                        ok = False
                        continue
                    if d != 0:
                        sys.stderr.write("bench_numpy: %s %s: %s records dropped; run left out\n" % (case, cfg, d))
                        drops[(case, cfg)] = drops.get((case, cfg), 0) + 1
                        continue
                    w, c = best.get((case, cfg), (float("inf"), float("inf")))
                    best[(case, cfg)] = (min(w, v[0]), min(c, v[1]))
    print("us per a @ b, best of %d runs of %d passes, alternated, OPENBLAS_NUM_THREADS=1, default ring;"
          " load average %.1f -> %.1f" % (reps, PASSES, load, os.getloadavg()[0]))
    print("wall clock (CPU time of the thread); delta and ratio from CPU time")
    print("%-22s %17s %17s %17s %11s %11s %9s" % ("", "untraced", "shape", "full", "shape-untr", "full-untr",
                                                  "full/untr"))
    for case in cases:
        if any((case, c) not in best for c in cfgs):
            continue
        u, s_, f = (best[(case, c)] for c in cfgs)
        name = "%dx%d %s%s" % (case[0], case[0], case[1], " fresh A" if case[2] else "")
        print("%-22s %7.3f (%7.3f) %7.3f (%7.3f) %7.3f (%7.3f) %+9.0fns %+9.0fns %9.3f"
              % (name, u[0], u[1], s_[0], s_[1], f[0], f[1], (s_[1] - u[1]) * 1e3, (f[1] - u[1]) * 1e3,
                 f[1] / u[1]))
    for case in cases:
        if any((case, c) not in best for c in cfgs):
            continue
        u, s_, f = (best[(case, c)][1] for c in cfgs)
        size, dtype, fresh = case
        what = "numpy %dx%d %s a @ b%s (CPU time)" % (size, size, dtype, ", a[0,0] changed before each" if fresh else "")
        tag = ("" if dtype == "f32" else "." + dtype) + (".fresh" if fresh else "")
        if size <= 64:
            result("interpose.numpy.matmul%d.shape%s" % (size, tag), what + ", tftrace --stats shape",
                   "ns/call", s_ * 1e3, u * 1e3, "untraced", "delta", "<=", 100)
            result("interpose.numpy.matmul%d.full%s" % (size, tag), what + ", tftrace (full statistics)",
                   "ns/call", f * 1e3, u * 1e3, "untraced", "delta", "<=", None)
        else:
            # the spirit ("cheap enough to leave on", tftrain's 1.02): default settings
            result("interpose.numpy.matmul%d%s" % (size, tag), what + ", tftrace (full statistics)",
                   "us/call", f, u, "untraced", "ratio", "<=", 1.02)
            result("interpose.numpy.matmul%d.shape%s" % (size, tag), what + ", tftrace --stats shape",
                   "us/call", s_, u, "untraced", "ratio", "<=", 1.02)
    if not ok:
        sys.stderr.write("bench_numpy: a measurement failed\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
