#!/usr/bin/env bash
# bench_export.sh — tfdump --export chrome|perfetto against tfdump --events
# --json on the same trace (the baseline: reading every record and printing
# it as JSON), and the peak memory of an export at 10x the trace length.
#
#   bench/analyzer/bench_export.sh BUILD [REPS] [quick]
#
# A 2-rank tft_sample trace of 2,000 steps (200 with quick; ~340k records);
# each command runs REPS times (default 3), alternated, best time kept.
# BENCH-RESULT lines (bench/README.md):
#   export.chrome.time, export.perfetto.time  ratio of the export's time to
#       the baseline's, goal <= 1 (an export costs no more than --events --json)
#   export.chrome.rss10x, export.perfetto.rss10x  peak RSS exporting 10x
#       the steps over the peak at 1x, goal <= 1.1 (memory flat in trace length)
set -euo pipefail
B=$1 REPS=${2:-3} QUICK=${3:-}
tfdump=$B/analyzer/tfdump sample=$B/examples/sample/tft_sample
steps=2000
[ -n "$QUICK" ] && steps=200
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-bench-export.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$sample" "$tmp/t.trace" --ranks 2 --steps "$steps" >/dev/null
"$sample" "$tmp/s.trace" --ranks 2 --steps $((steps / 10)) >/dev/null

python3 - "$tfdump" "$tmp" "$REPS" "$steps" <<'PYEOF'
import json, os, subprocess, sys, time
tfdump, tmp, reps, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
t, s = tmp + "/t.trace", tmp + "/s.trace"
cmds = {
    "events": [tfdump, "--events", "--json", t],
    "chrome": [tfdump, "--export", "chrome", tmp + "/o.json", t],
    "perfetto": [tfdump, "--export", "perfetto", tmp + "/o.pftrace", t],
}
def run(cmd):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, st, ru = os.wait4(p.pid, 0)
    assert st == 0, (cmd, st)
    return time.perf_counter() - t0, ru.ru_maxrss * 1024
best = {k: float("inf") for k in cmds}
for _ in range(reps):
    for k, c in cmds.items():
        best[k] = min(best[k], run(c)[0])
def line(**kw):
    print("BENCH-RESULT " + json.dumps(kw))
print("load average %.2f; %d steps, 2 ranks" % (os.getloadavg()[0], steps))
for k in ("chrome", "perfetto"):
    print("%-9s %.3f s vs --events --json %.3f s" % (k, best[k], best["events"]))
    line(id="export.%s.time" % k, what="tfdump --export %s, %d steps x 2 ranks" % (k, steps), unit="s",
         figure=round(best[k], 4), baseline=round(best["events"], 4), baseline_what="tfdump --events --json",
         metric="ratio", value=round(best[k] / best["events"], 3), goal_op="<=", goal=1.0)
    out = tmp + "/m." + k
    small = min(run([tfdump, "--export", k, out, s])[1] for _ in range(max(1, reps)))
    large = min(run([tfdump, "--export", k, out, t])[1] for _ in range(max(1, reps)))
    print("%-9s peak RSS %d KiB at %d steps, %d KiB at %d" % (k, large >> 10, steps, small >> 10, steps // 10))
    line(id="export.%s.rss10x" % k, what="peak RSS of --export %s, %d vs %d steps" % (k, steps, steps // 10),
         unit="KiB", figure=large >> 10, baseline=small >> 10, baseline_what="the same export at 1/10 the steps",
         metric="ratio", value=round(large / small, 3), goal_op="<=", goal=1.1)
PYEOF
