#!/usr/bin/env python3
"""What `tftrace --torch` costs a PyTorch program: a benchmark, not a test.

Figures (each against a baseline measured in the same run, BENCH-RESULT
lines for bench/run.sh, bench/README.md):

  torch.record.dense     ns a dense CPU tensor's record costs from Python
                         (statistics off: --stats shape), through the C
                         extension _tftrace_rec, against the ctypes path
                         (TFT_PYREC=0), in the same traced run
  torch.record.view      the same for a transposed view (the extension
                         reads it in place; the ctypes path copies it)
  torch.gpt.eager        CPU time of examples/pytorch/gpt_train.py (whole
                         process tree: python, tftrace and its collector),
                         traced / untraced, alternated pairs, the median
                         pair ratio; goal <= 1.10
  torch.gpt.compile      the same with --compile (torch.compile), after one
                         untimed 2-step compiled run so that inductor's
                         cache is warm for both sides; goal <= 1.10
  torch.keep_steps.apparent  apparent size (st_size) of a --keep-steps
                         trace of that program against the full trace's;
                         goal <= 0.3

    bench/torch/bench_overhead.py --tftrace build/tracer/tftrace [--python PY]
        [--reps 3] [--steps 300] [--size bench] [--keep 20] [--quick]
        [--only record,eager,compile,keep]

--quick: 1 pair and fewer steps. The program runs with --threads 1 (two
intra-op threads beside any other process make single steps tens of times
slower on a small machine: bench/torch/README.md). Start-up (import torch,
inductor's compile) is in the CPU time of both sides.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GPT = os.path.join(ROOT, "examples", "pytorch", "gpt_train.py")

RECORD_PROG = r'''
import sys, time, torch
from tftrace._torch import tensors
n = int(sys.argv[1])
dense = torch.randn(16, 64)
view = torch.randn(64, 16).t()
out = {}
for label, t in (("dense", dense), ("view", view)):
    best = None
    for _ in range(5):
        t0 = time.thread_time_ns()
        for _ in range(n):
            tensors.record("model.blocks.0.attn", t)
        dt = (time.thread_time_ns() - t0) / n
        best = dt if best is None else min(best, dt)
    out[label] = best
out["extension"] = tensors.fast_module is not None
print("RECORD " + repr(out))
'''


def result(id_, what, unit, fig, base, base_what, metric, goal_op=None, goal=None):
    value = (fig / base if metric == "ratio" else fig - base) if base else None
    print("BENCH-RESULT " + json.dumps({
        "id": id_, "what": what, "unit": unit, "figure": fig, "baseline": base,
        "baseline_what": base_what, "metric": metric, "value": value,
        "goal_op": goal_op, "goal": goal}))


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd, env=None, timeout=3600):
    """Runs cmd; returns the CPU seconds of it and its waited-for descendants."""
    e = dict(os.environ)
    e.update(env or {})
    c0 = child_cpu()
    p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.exit("bench_overhead: %s failed (exit %d):\n%s" % (" ".join(cmd[:6]), p.returncode, p.stderr[-2000:]))
    return child_cpu() - c0, p


def bench_record(a, work):
    prog = os.path.join(work, "record.py")
    with open(prog, "w") as f:
        f.write(RECORD_PROG)
    got = {}
    for label, env in (("extension", {}), ("ctypes", {"TFT_PYREC": "0"})):
        t = os.path.join(work, "record-%s.trace" % label)
        shutil.rmtree(t, ignore_errors=True)
        _, p = run([a.tftrace, "-q", "--stats", "shape", "-o", t, "--torch", "--", a.python, prog,
                    str(2000 if a.quick else 20000)], env=dict(env, PYTHONPATH=os.path.join(ROOT, "python")))
        line = [l for l in p.stdout.splitlines() if l.startswith("RECORD ")]
        if not line:
            sys.exit("bench_overhead: the record program printed nothing:\n" + p.stderr[-2000:])
        got[label] = eval(line[0][7:], {})  # noqa: S307 (our own program's repr of a dict)
        shutil.rmtree(t, ignore_errors=True)
    if not got["extension"]["extension"]:
        print("bench_overhead: the extension _tftrace_rec did not load: both rows measure the ctypes path")
    print("\nper record from Python, --stats shape (best of 5 x N, thread CPU time):")
    for k in ("dense", "view"):
        print("  %-6s extension %7.0f ns   ctypes path %7.0f ns" % (k, got["extension"][k], got["ctypes"][k]))
        result("torch.record.%s" % k, "a %s CPU tensor's record from Python, --stats shape" %
               ("dense" if k == "dense" else "transposed (view)"), "ns",
               round(got["extension"][k]), round(got["ctypes"][k]), "the ctypes path (TFT_PYREC=0)", "ratio")


def gpt_cmd(a, extra):
    return [a.python, GPT, "--size", a.size, "--steps", str(a.steps), "--threads", "1"] + extra


def bench_gpt(a, work, compiled):
    extra = ["--compile"] if compiled else []
    ratios, pairs = [], []
    if compiled:   # inductor's cache warm for both sides alike: the first compile of a run fills it
        run([a.python, GPT, "--size", a.size, "--steps", "2", "--threads", "1", "--compile"])
    for r in range(a.reps):
        un, _ = run(gpt_cmd(a, extra))
        t = os.path.join(work, "gpt.trace")
        shutil.rmtree(t, ignore_errors=True)
        tr, _ = run([a.tftrace, "-q", "-o", t, "--torch", "--"] + gpt_cmd(a, extra))
        shutil.rmtree(t, ignore_errors=True)
        ratios.append(tr / un)
        pairs.append((un, tr))
        print("  %s pair %d: untraced %.2f s, traced %.2f s CPU: %.3fx" %
              ("compile" if compiled else "eager", r + 1, un, tr, tr / un))
    i = sorted(range(len(ratios)), key=lambda k: ratios[k])[len(ratios) // 2]
    un, tr = pairs[i]
    name = "compile" if compiled else "eager"
    result("torch.gpt.%s" % name, "tftrace --torch, GPT --size %s, %d steps%s, CPU time (median pair)" %
           (a.size, a.steps, ", torch.compile" if compiled else ""), "s", round(tr, 2), round(un, 2),
           "untraced", "ratio", "<=", 1.10)


def bench_keep(a, work):
    sizes = {}
    for label, opt in (("full", []), ("keep", ["--keep-steps", str(a.keep)])):
        t = os.path.join(work, "keep-%s.trace" % label)
        shutil.rmtree(t, ignore_errors=True)
        run([a.tftrace, "-q", "-o", t] + opt + ["--torch", "--"] + gpt_cmd(a, []))
        f = os.path.join(t, "rank-00000.tft")
        st = os.stat(f)
        sizes[label] = (st.st_size, st.st_blocks * 512)
        shutil.rmtree(t, ignore_errors=True)
    (fa, fb), (ka, kb) = sizes["full"], sizes["keep"]
    print("\n--keep-steps %d, %d steps: full trace %.2f MB (allocated %.2f MB), keep %.2f MB apparent, %.2f MB allocated" %
          (a.keep, a.steps, fa / 1e6, fb / 1e6, ka / 1e6, kb / 1e6))
    result("torch.keep_steps.apparent", "--torch --keep-steps %d, %d steps: apparent size of the rank file" %
           (a.keep, a.steps), "MB", round(ka / 1e6, 3), round(fa / 1e6, 3), "the full trace", "ratio", "<=", 0.3)
    result("torch.keep_steps.allocated", "--torch --keep-steps %d, %d steps: allocated size of the rank file" %
           (a.keep, a.steps), "MB", round(kb / 1e6, 3), round(fb / 1e6, 3), "the full trace", "ratio", "<=", 0.3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tftrace", default=os.path.join(ROOT, "build", "tracer", "tftrace"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--reps", type=int, default=int(os.environ.get("TFT_BENCH_REPS", "3")))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--size", default="bench", choices=("tiny", "bench"))
    ap.add_argument("--keep", type=int, default=20)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="record,eager,compile,keep")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.steps = 1, min(a.steps, 60)
    if not os.access(a.tftrace, os.X_OK):
        sys.exit("bench_overhead: no tftrace at %s (--tftrace)" % a.tftrace)
    try:
        la = os.getloadavg()
        print("load average %.2f %.2f %.2f, %d CPUs" % (la + (os.cpu_count(),)))
    except OSError:
        pass
    work = tempfile.mkdtemp(prefix="bench-torch-")
    try:
        only = set(a.only.split(","))
        if "record" in only:
            bench_record(a, work)
        if "eager" in only:
            print("\nGPT --size %s, %d steps, eager:" % (a.size, a.steps))
            bench_gpt(a, work, False)
        if "compile" in only:
            print("\nGPT --size %s, %d steps, torch.compile:" % (a.size, a.steps))
            bench_gpt(a, work, True)
        if "keep" in only:
            bench_keep(a, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
