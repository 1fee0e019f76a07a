#!/usr/bin/env bash
# bench_roundoff.sh — the cost of tfdiff's round-off model: tfdiff GOLDEN
# GOLDEN2 with the model (the default) against the same binary with the
# fixed tolerance alone (--rtol 1e-4 --atol 1e-6, the baseline: the
# comparison as it was), on two tftrain runs apart only by round-off
# (GOLDEN2 under tftrace --perturb: every pair of a step differs, the
# model's worst case). Optionally a third binary (OLD_TFDIFF, e.g. a build
# from before the model) on the same traces.
#
#   bench/analyzer/bench_roundoff.sh BUILD [STEPS] [REPS] [OLD_TFDIFF]
#
# Each command runs REPS times (default 3), alternated, best kept: CPU
# seconds (user + system) and peak RSS. BENCH-RESULT lines (bench/README.md):
#   tfdiff.roundoff.time  the model's CPU time over the baseline's, goal <= 1.5
#   tfdiff.roundoff.rss   its peak RSS over the baseline's, goal <= 1.5
set -euo pipefail
B=$1 STEPS=${2:-300} REPS=${3:-3} OLD=${4:-}
tftrace=$B/tracer/tftrace tfdiff=$B/analyzer/tfdiff tftrain=$B/runtime/tftrain
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-bench-roundoff.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$tftrace" -q -o "$tmp/g.trace" -- "$tftrain" -q --steps "$STEPS" >/dev/null
"$tftrace" -q --perturb -o "$tmp/g2.trace" -- "$tftrain" -q --steps "$STEPS" >/dev/null 2>&1

python3 - "$tfdiff" "$tmp" "$REPS" "$OLD" <<'PYEOF'
import os, resource, subprocess, sys
tfdiff, tmp, reps, old = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
g, g2 = tmp + "/g.trace", tmp + "/g2.trace"
cmds = {"model": [tfdiff, "-q", g, g2], "fixed": [tfdiff, "-q", "--rtol", "1e-4", "--atol", "1e-6", g, g2]}
if old:
    cmds["old"] = [old, "-q", g, g2]
best = {k: (1e9, 0) for k in cmds}
out = {}
for _ in range(reps):
    for k, c in cmds.items():
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        text, _ = p.communicate()
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        out[k] = (p.returncode, text.splitlines()[0] if text else "")
        best[k] = (min(best[k][0], cpu), max(best[k][1], r1.ru_maxrss))
size = sum(os.path.getsize(os.path.join(d, f)) for d in (g, g2) for f in os.listdir(d))
print("traces: %.1f MB on disk (both)" % (size / 1e6))
for k in cmds:
    print("%-6s exit %d  %-40s  CPU %.3f s" % (k, out[k][0], out[k][1][:40], best[k][0]))
# ru_maxrss of children is the largest child so far: measure each alone
rss = {}
for k, c in cmds.items():
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rss[k] = int(p.stderr.strip().splitlines()[-1])
    print("%-6s peak RSS %.1f MB" % (k, rss[k] / 1024))
t = best["model"][0] / max(best["fixed"][0], 1e-9)
m = rss["model"] / max(rss["fixed"], 1)
print("BENCH-RESULT tfdiff.roundoff.time %.3f goal<=1.5" % t)
print("BENCH-RESULT tfdiff.roundoff.rss %.3f goal<=1.5" % m)
if old:
    print("vs the pre-model binary: time %.3f, rss %.3f" % (best["model"][0] / max(best["old"][0], 1e-9),
                                                            rss["model"] / max(rss["old"], 1)))
PYEOF
