#!/usr/bin/env python3
"""tftrace --torch next to what a PyTorch user has without it -- a benchmark, not a test.

One model, one invocation (examples/pytorch/gpt_train.py --size bench), six
ways, in one run:

  untraced               python gpt_train.py ...
  tftrace --torch        tftrace --torch -- python gpt_train.py ...     (modules mode)
  tftrace --torch ops    tftrace --torch ops -- python gpt_train.py ... (every ATen op)
  hand hooks             ... --hand-hooks   (forward hooks on every module: min/max/mean/std/NaN)
  DebugMode              ... --debug-mode   (torch.utils._debug_mode, every op's outputs hashed)
  detect_anomaly         ... --detect-anomaly

1. Overhead. The script times each step itself (--time-out); the first 2
   steps of every run are dropped (warm-up). Repetitions are interleaved:
   each of --rounds rounds runs every variant once, so drift in the machine's
   speed hits all alike. Reported: each variant's best run (the lowest of its
   runs' median step times; other work on the machine only adds time), its
   ratio to untraced's best, and each round's ratio to show the noise (the
   JSON also has the median over all kept steps, "pooled"). The script runs
   with --threads 1 by default: on a small shared machine two intra-op
   threads next to any other process make some steps tens of times slower.

2. What it localized. For each bug of --bugs (default causal-off-by-one@2
   and no-attn-scale@2) a golden and a bad run under each tool, and what a
   user learns from comparing them:
     tftrace     tfdiff --json GOLDEN BAD: the first divergence (step, tensor,
                 the op that produced it) and its origin
     hand hooks  the first (step, module) whose recorded statistics differ
     DebugMode   the first op whose output hash differs (step, module, op)
     detect_anomaly  whether it said anything (it only reports NaN/Inf
                 produced in backward)

A variant that fails (tftrace without --torch, a torch without DebugMode)
is reported as "failed: <end of its stderr>"; the rest still runs.

    bench/torch/bench_torch.py [--tftrace build/tracer/tftrace] [--python PY]
        [--steps 8] [--rounds 3] [--json OUT] [--threads N]
        [--no-timing] [--no-localize] [--bugs B@S,...] [--keep]
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "examples", "pytorch", "gpt_train.py")
WARMUP_STEPS = 2  # dropped from every run's step times

# name, how it is run: (tftrace --torch mode or None, extra script flags)
# "{out}" in the flags is replaced by the run's output file.
VARIANTS = [
    ("untraced", None, []),
    ("tftrace --torch", "modules", []),
    ("tftrace --torch ops", "ops", []),
    ("hand hooks", None, ["--hand-hooks", "--hand-hooks-out", "{out}"]),
    ("DebugMode", None, ["--debug-mode", "--debug-mode-out", "{out}"]),
    ("detect_anomaly", None, ["--detect-anomaly"]),
]


def tail(text, n=240):
    """The end of a process's stderr, on one line."""
    text = " ".join(text.split())
    return text if len(text) <= n else "..." + text[-n:]


class Runner:
    def __init__(self, args, workdir):
        self.args = args
        self.workdir = workdir
        self.count = 0

    def run(self, variant, train_args):
        """Run one variant; returns a dict with ok, step_s, out, trace, error."""
        name, torch_mode, extra = variant
        self.count += 1
        tag = f"{self.count:03d}"
        time_file = os.path.join(self.workdir, f"{tag}.time.json")
        out_file = os.path.join(self.workdir, f"{tag}.out")
        trace = os.path.join(self.workdir, f"{tag}.trace") if torch_mode else None
        cmd = [self.args.python, SCRIPT] + train_args + ["--time-out", time_file]
        cmd += [a.replace("{out}", out_file) for a in extra]
        if self.args.threads:
            cmd += ["--threads", str(self.args.threads)]
        if torch_mode:
            launcher = [self.args.tftrace, "-q", "-o", trace, "--torch"]
            if torch_mode != "modules":
                launcher.append(torch_mode)
            cmd = launcher + ["--"] + cmd
        result = {"variant": name, "cmd": cmd, "ok": False, "out": out_file,
                  "trace": trace, "error": None, "step_s": [], "stderr": ""}
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True,
                                  timeout=self.args.run_timeout)
        except FileNotFoundError as e:
            result["error"] = f"failed: {e}"
            return result
        except subprocess.TimeoutExpired:
            result["error"] = f"failed: timed out after {self.args.run_timeout} s"
            return result
        result["wall_s"] = time.perf_counter() - t0
        result["stdout"], result["stderr"] = proc.stdout, proc.stderr
        if proc.returncode != 0:
            result["error"] = f"failed (exit {proc.returncode}): {tail(proc.stderr)}"
            return result
        try:
            with open(time_file) as f:
                result["step_s"] = json.load(f)["step_s"]
        except (OSError, ValueError, KeyError) as e:
            result["error"] = f"failed: no step times ({e}): {tail(proc.stderr)}"
            return result
        if trace:
            result["trace_bytes"] = sum(os.path.getsize(os.path.join(trace, f))
                                        for f in os.listdir(trace))
        result["ok"] = True
        return result

    def discard(self, result):
        """Delete a run's outputs (traces of ops mode are large)."""
        for path in (result.get("trace"), result.get("out")):
            if path and os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            elif path and os.path.exists(path):
                os.remove(path)


# ------------------------------------------------------------------ timing


def bench_timing(runner, args):
    train_args = ["--size", "bench", "--steps", str(args.steps)]
    per_variant = {v[0]: {"kept": [], "rounds": [], "errors": [], "trace_bytes": []}
                   for v in VARIANTS}
    for r in range(args.rounds):
        for variant in VARIANTS:
            res = runner.run(variant, train_args)
            slot = per_variant[variant[0]]
            if res["ok"]:
                kept = res["step_s"][WARMUP_STEPS:]
                slot["kept"] += kept
                slot["rounds"].append(statistics.median(kept) if kept else None)
                if "trace_bytes" in res:
                    slot["trace_bytes"].append(res["trace_bytes"])
            else:
                slot["errors"].append(res["error"])
                slot["rounds"].append(None)
            state = "ok" if res["ok"] else res["error"][:60]
            print(f"  round {r + 1}/{args.rounds}  {variant[0]:22} {state}", file=sys.stderr)
            runner.discard(res)

    # Other work on the machine only ever adds time, so each variant's figure
    # is its best run: the lowest of its runs' median step times. The median
    # over all kept steps of all runs ("pooled") and each round's ratio are
    # kept too, to show how noisy the rounds were.
    base = per_variant["untraced"]
    base_runs = [v for v in base["rounds"] if v is not None]
    base_best = min(base_runs) if base_runs else None
    base_pooled = statistics.median(base["kept"]) if base["kept"] else None
    rows = []
    for name, _, _ in VARIANTS:
        slot = per_variant[name]
        row = {"variant": name, "median_step_ms": None, "ratio": None,
               "pooled_median_ms": None, "pooled_ratio": None,
               "round_ratios": [], "steps_timed": len(slot["kept"]), "error": None}
        runs = [v for v in slot["rounds"] if v is not None]
        if runs:
            row["median_step_ms"] = min(runs) * 1e3
            row["pooled_median_ms"] = statistics.median(slot["kept"]) * 1e3
            if base_best:
                row["ratio"] = min(runs) / base_best
                row["pooled_ratio"] = statistics.median(slot["kept"]) / base_pooled
            row["round_ratios"] = [v / b for v, b in zip(slot["rounds"], base["rounds"])
                                   if v is not None and b]
        if slot["errors"]:
            row["error"] = slot["errors"][0]
        row["round_median_ms"] = [v * 1e3 if v is not None else None for v in slot["rounds"]]
        if slot["trace_bytes"]:
            row["trace_mb"] = statistics.median(slot["trace_bytes"]) / 1e6
        rows.append(row)
    return rows


# ------------------------------------------------------------ localization


def localize_tftrace(args, golden, bad):
    tfdiff = args.tfdiff
    proc = subprocess.run([tfdiff, "--json", golden["trace"], bad["trace"]],
                          capture_output=True, text=True, timeout=args.run_timeout)
    if proc.returncode not in (0, 1, 3):
        return {"said": f"tfdiff failed (exit {proc.returncode}): {tail(proc.stderr)}"}
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        return {"said": f"tfdiff printed no JSON: {tail(proc.stdout + proc.stderr)}"}
    first, origin = report.get("first_divergence"), report.get("origin")
    if not first:
        return {"said": f"verdict {report.get('verdict')}: no divergence", "verdict":
                report.get("verdict")}
    said = f"step {first['step']} {first['tensor']} ({first['kind']}, {first.get('stat')})"
    if origin and (origin.get("seq") != first.get("seq")):
        said += f"; origin: step {origin['step']} op {origin['op']} -> {origin['tensor']}"
    elif origin:
        said += f"; origin: the same op {origin['op']}"
    return {"said": said, "verdict": report.get("verdict"),
            "first_divergence": {k: first.get(k) for k in
                                 ("rank", "step", "seq", "op", "tensor", "kind", "stat")},
            "origin": origin and {k: origin.get(k) for k in
                                  ("rank", "step", "seq", "op", "tensor", "kind", "stat")}}


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def localize_hand_hooks(golden, bad):
    g, b = read_jsonl(golden["out"]), read_jsonl(bad["out"])
    stats = ("shape", "min", "max", "mean", "std", "nan")
    for i, (rg, rb) in enumerate(zip(g, b)):
        if (rg["step"], rg["module"]) != (rb["step"], rb["module"]):
            return {"said": f"records part at #{i}: {rg['module']} vs {rb['module']}"}
        differing = [s for s in stats if rg[s] != rb[s]]
        if differing:
            return {"said": f"step {rb['step']} module {rb['module']} "
                            f"({', '.join(differing)} differ)",
                    "step": rb["step"], "module": rb["module"], "stats": differing}
    if len(g) != len(b):
        return {"said": f"same records, then {len(g)} vs {len(b)} of them"}
    return {"said": "no difference"}


def _debug_value(v):
    """Decode a value of DebugMode.save_logs's JSON (typed values)."""
    if not isinstance(v, dict):
        return v
    kind = v.get("type")
    if kind in ("scalar", "nonfinite_float"):
        return v.get("value")
    if kind in ("tuple", "list"):
        return [_debug_value(x) for x in v.get("items", [])]
    if kind == "dict":
        return {k: _debug_value(x) for k, x in v.get("items", [])}
    return repr(v)


def _debug_ops(path):
    """(step, module, op name, output hashes, output text) per op of a DebugMode log."""
    with open(path) as f:
        logs = json.load(f)["logs"]
    step, modules, ops = None, [], []
    for call in logs:
        depth = call.get("call_depth", 0)
        if call.get("type") == "annotate":
            tag = call.get("tag", "")
            if call.get("header") == "annotate" and tag.startswith("step "):
                step = int(tag.split()[1])
            elif call.get("header") == "nn.Mod":
                while modules and modules[-1][0] >= depth:
                    modules.pop()
                modules.append((depth, tag))
            continue
        if call.get("type") != "op":
            continue
        while modules and modules[-1][0] >= depth:
            modules.pop()
        log = _debug_value(call.get("log")) or {}
        ops.append((step, modules[-1][1] if modules else None, call.get("op_name"),
                    log.get("hash"), call.get("output_str")))
    return ops


def localize_debug_mode(golden, bad):
    g, b = _debug_ops(golden["out"]), _debug_ops(bad["out"])
    hashed = sum(1 for op in b if op[3] is not None)
    if not hashed:
        return {"said": "no hashes in its log"}
    for i, (og, ob) in enumerate(zip(g, b)):
        if og[2] != ob[2]:
            return {"said": f"op sequences part at op #{i} (step {ob[0]}): {og[2]} vs {ob[2]}"}
        if og[3] != ob[3]:
            where = f"in {ob[1]}" if ob[1] else "outside any module (backward/optimizer)"
            return {"said": f"step {ob[0]} op #{i} {ob[2]} {where}",
                    "step": ob[0], "op_index": i, "op": ob[2], "module": ob[1]}
    return {"said": "no hash differs" if len(g) == len(b) else
            f"same hashes, then {len(g)} vs {len(b)} ops"}


def localize_anomaly(golden, bad):
    said = [line for line in bad["stderr"].splitlines()
            if line.strip() and "Anomaly Detection has been enabled" not in line
            and "detect_anomaly()" not in line]
    if not said:
        return {"said": "nothing (only its 'Anomaly Detection has been enabled' warning)"}
    return {"said": f"said: {tail(' '.join(said), 160)}"}


def bench_localize(runner, args):
    tools = {
        "tftrace --torch": lambda g, b: localize_tftrace(args, g, b),
        "tftrace --torch ops": lambda g, b: localize_tftrace(args, g, b),
        "hand hooks": localize_hand_hooks,
        "DebugMode": localize_debug_mode,
        "detect_anomaly": localize_anomaly,
    }
    base = ["--size", args.localize_size, "--steps", str(args.localize_steps)]
    found = {}
    for variant in VARIANTS:
        name = variant[0]
        if name not in tools:
            continue
        golden = runner.run(variant, base)
        found[name] = {}
        for bug in args.bugs:
            if not golden["ok"]:
                found[name][bug] = {"said": golden["error"]}
                continue
            bad = runner.run(variant, base + ["--bug", bug])
            if not bad["ok"]:
                found[name][bug] = {"said": bad["error"]}
            else:
                try:
                    found[name][bug] = tools[name](golden, bad)
                except Exception as e:  # a tool's output we could not read
                    found[name][bug] = {"said": f"could not compare: {e!r}"}
                runner.discard(bad)
            print(f"  localize {name:22} {bug:24} {found[name][bug]['said'][:70]}",
                  file=sys.stderr)
        runner.discard(golden)
    return found


# -------------------------------------------------------------------- main


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tftrace", default=os.path.join(ROOT, "build", "tracer", "tftrace"))
    p.add_argument("--tfdiff", help="default: analyzer/tfdiff next to --tftrace's tracer/")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--steps", type=int, default=8, help="steps per timed run (default 8)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1,
                   help="--threads for the script (default 1; 0: torch's default)")
    p.add_argument("--json", metavar="OUT")
    p.add_argument("--bugs", default="causal-off-by-one@2,no-attn-scale@2")
    p.add_argument("--localize-size", default="bench")
    p.add_argument("--localize-steps", type=int, default=4)
    p.add_argument("--run-timeout", type=float, default=900)
    p.add_argument("--no-timing", action="store_true")
    p.add_argument("--no-localize", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    args = p.parse_args()
    args.bugs = [b for b in args.bugs.split(",") if b]
    args.tftrace = os.path.abspath(args.tftrace)
    if not args.tfdiff:
        args.tfdiff = os.path.join(os.path.dirname(os.path.dirname(args.tftrace)),
                                   "analyzer", "tfdiff")
    if args.steps <= WARMUP_STEPS:
        p.error(f"--steps must be more than {WARMUP_STEPS} (the warm-up steps dropped)")

    workdir = tempfile.mkdtemp(prefix="tft-bench-torch-")
    runner = Runner(args, workdir)
    report = {"machine": {"cpu": platform.processor() or platform.machine(),
                          "cores": os.cpu_count(), "python": args.python},
              "steps": args.steps, "rounds": args.rounds, "warmup_dropped": WARMUP_STEPS,
              "timing": [], "localized": {}}
    # This measures wall time: other work on the machine shows up as noise.
    report["load_before"] = os.getloadavg()
    if report["load_before"][0] > 0.5 * (os.cpu_count() or 1):
        print(f"warning: load average {report['load_before'][0]:.1f} on "
              f"{os.cpu_count()} cores: expect noisy timings", file=sys.stderr)
    try:
        if not args.no_timing:
            report["timing"] = bench_timing(runner, args)
            report["load_after_timing"] = os.getloadavg()
        if not args.no_localize:
            report["localized"] = bench_localize(runner, args)
    finally:
        if args.keep:
            print(f"work directory kept: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    # The table: one row per variant.
    print(f"gpt_train.py --size bench --threads {args.threads}, {args.steps} steps: median "
          f"step time of steps {WARMUP_STEPS}.., best of {args.rounds} interleaved rounds")
    print()
    print("| variant | median step ms | ratio | per-round ratios | localized |")
    print("| --- | --- | --- | --- | --- |")
    timing = {row["variant"]: row for row in report["timing"]}
    for name, _, _ in VARIANTS:
        row = timing.get(name, {})
        if row.get("median_step_ms") is not None:
            ms, ratio = f"{row['median_step_ms']:.1f}", f"{row['ratio']:.2f}x"
            rr = ", ".join(f"{r:.2f}" for r in row["round_ratios"])
        elif row.get("error"):
            ms, ratio, rr = row["error"], "-", "-"
        else:
            ms, ratio, rr = "-", "-", "-"
        if row.get("trace_mb") is not None:
            rr += f" (trace {row['trace_mb']:.1f} MB)"
        loc = report["localized"].get(name)
        if loc:
            loc = "; ".join(f"**{bug}**: {what['said']}" for bug, what in loc.items())
        else:
            loc = "(baseline)" if name == "untraced" else "-"
        print(f"| {name} | {ms} | {ratio} | {rr} | {loc} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
