#!/bin/bash
# Analysis at scale: tfdiff and tfdump --check of two RANKS-rank x STEPS-step
# synthetic traces (tft_sample; BAD with a planted divergence and desync),
# next to `zstd -d` of the same rank files in the same run, and tfdiff
# --mpi under mpirun -np 2 against one process.
#   bench/analyzer/bench_scale.sh [BUILD_DIR] [RANKS] [STEPS]
# Defaults: build, 1024 ranks, 200 steps. Traces go to $TFT_BENCH_DIR (else
# /dev/shm when it has room, else $TMPDIR or /tmp) and are removed after.
# TFT_BENCH_GOLDEN and TFT_BENCH_BAD name traces made before (tft_sample
# of RANKS and STEPS, BAD with --diverge and --desync) to use instead.
# Each command runs REPS times (default 2), alternated with its baseline;
# the best of each is kept. Throughput per core is bytes on disk per CPU
# second (user + system, children included): robust to a loaded machine,
# where wall time is not. Prints a table and BENCH-RESULT lines.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
ranks=${2:-1024}
steps=${3:-200}
reps=${REPS:-2}
tfdiff=$build/analyzer/tfdiff tfdump=$build/analyzer/tfdump sample=$build/examples/sample/tft_sample
for x in "$tfdiff" "$tfdump" "$sample"; do
    [ -x "$x" ] || { echo "bench_scale: $x not built (cmake --build $build --target tfdiff tfdump tft_sample)" >&2; exit 2; }
done
command -v zstd >/dev/null || { echo "bench_scale: zstd (the baseline) not installed" >&2; exit 2; }
need_kb=$((ranks * steps * 9 / 2 + 65536)) # about 2.2 KB per rank and step on disk, two traces
base=${TFT_BENCH_DIR:-}
if [ -z "$base" ]; then
    base=${TMPDIR:-/tmp}
    if [ -d /dev/shm ] && [ "$(df -Pk /dev/shm | awk 'NR==2 {print $4}')" -gt "$need_kb" ]; then base=/dev/shm; fi
fi
tmp=$(mktemp -d "$base/tft-bench-scale.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

t0=$(date +%s)
if [ -n "${TFT_BENCH_GOLDEN:-}" ] && [ -n "${TFT_BENCH_BAD:-}" ]; then
    ln -s "$TFT_BENCH_GOLDEN" g.trace
    ln -s "$TFT_BENCH_BAD" b.trace
else
    "$sample" g.trace --ranks "$ranks" --steps "$steps"
    "$sample" b.trace --ranks "$ranks" --steps "$steps" --diverge "$((ranks * 2 / 3)):$((steps * 3 / 4))" \
        --desync "$((ranks * 7 / 8)):$((steps * 9 / 10))"
fi
gen_s=$(( $(date +%s) - t0 ))
bytes_g=$(cat g.trace/rank-*.tft | wc -c)
bytes_b=$(cat b.trace/rank-*.tft | wc -c)

# measure NAME CMD...: one run under GNU time; appends "NAME wall cpu rss_kb" to runs.txt
# (exit status 1, differences found, is what tfdiff is expected to say here)
measure() {
    local name=$1
    shift
    local rc=0
    /usr/bin/time -f "%e %U %S %M" -o time.out "$@" >/dev/null 2>err.out || rc=$?
    if [ "$rc" -gt 1 ]; then echo "bench_scale: $name failed ($rc): $(tail -3 err.out)" >&2; exit 1; fi
    tail -1 time.out | awk -v n="$name" '{print n, $1, $2 + $3, $4}' >>runs.txt
}
# per-process peak RSS of an MPI run: each rank under its own GNU time
mpi_rss() {
    rm -f rss.*
    mpirun --allow-run-as-root --oversubscribe -np 2 sh -c \
        '/usr/bin/time -f %M -o "rss.$OMPI_COMM_WORLD_RANK" "$@" >/dev/null 2>&1; r=$?; [ $r -le 1 ]' \
        sh "$tfdiff" --mpi -q g.trace b.trace 2>/dev/null || true
    cat rss.* 2>/dev/null | sort -n | tail -1
}
have_mpi=0
if command -v mpirun >/dev/null && "$tfdiff" --help | grep -q -- --mpi; then have_mpi=1; fi
: >runs.txt
for i in $(seq "$reps"); do
    measure zstd_both sh -c 'zstd -d -c -q g.trace/rank-*.tft b.trace/rank-*.tft'
    measure tfdiff "$tfdiff" -q g.trace b.trace
    measure zstd_bad sh -c 'zstd -d -c -q b.trace/rank-*.tft'
    measure check "$tfdump" --check b.trace
    if [ "$have_mpi" = 1 ]; then
        measure mpi2 mpirun --allow-run-as-root --oversubscribe -np 2 "$tfdiff" --mpi -q g.trace b.trace
    fi
done
mpi_rss_kb=0
[ "$have_mpi" = 1 ] && mpi_rss_kb=$(mpi_rss)
load=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$ranks" "$steps" "$bytes_g" "$bytes_b" "$gen_s" "$load" "$(nproc)" "$have_mpi" "${mpi_rss_kb:-0}" <<'PY'
import json, sys
ranks, steps, bg, bb, gen_s = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
load, ncpu, have_mpi, mpi_rss_kb = sys.argv[6], int(sys.argv[7]), sys.argv[8] == "1", int(sys.argv[9])
runs = {}
for line in open("runs.txt"):
    n, wall, cpu, rss = line.split()
    runs.setdefault(n, []).append((float(wall), float(cpu), int(rss)))
best = {n: (min(r[0] for r in v), min(r[1] for r in v), max(r[2] for r in v)) for n, v in runs.items()}
MB = 1e6
print(f"{ranks} ranks x {steps} steps (tft_sample, {'generated in %d s' % gen_s if gen_s else 'made before'}): GOLDEN {bg / MB:.0f} MB, "
      f"BAD {bb / MB:.0f} MB on disk; {ncpu} CPUs, load average {load}; best of {len(runs['tfdiff'])}")
print(f"{'':34} {'wall s':>8} {'CPU s':>8} {'MB/CPU-s':>9} {'peak RSS MB':>12}")
def row(label, n, nbytes):
    w, c, r = best[n]
    print(f"{label:34} {w:8.2f} {c:8.2f} {nbytes / MB / c:9.1f} {r / 1024:12.1f}")
row("zstd -d, both traces", "zstd_both", bg + bb)
row("tfdiff GOLDEN BAD", "tfdiff", bg + bb)
row("zstd -d, BAD", "zstd_bad", bb)
row("tfdump --check BAD", "check", bb)
if have_mpi: # CPU: only what mpirun accounts for, not shown
    w = best["mpi2"][0]
    print(f"{'mpirun -np 2 tfdiff --mpi':34} {w:8.2f} {'':8} {'':9} {mpi_rss_kb / 1024:12.1f}  (largest process)")
def result(id_, what, unit, fig, base, base_what, metric, goal_op, goal):
    value = fig / base if metric == "ratio" else fig - base
    print("BENCH-RESULT " + json.dumps({"id": id_, "what": what, "unit": unit, "figure": round(fig, 3),
          "baseline": round(base, 3), "baseline_what": base_what, "metric": metric, "value": round(value, 3),
          "goal_op": goal_op, "goal": goal}, separators=(",", ":")))
per_core = lambda n, nbytes: nbytes / MB / best[n][1]
tag = f"{ranks}" if ranks == 1024 else f"{ranks}"
result(f"analyzer.tfdiff.{tag}.rss_mb", f"tfdiff peak RSS, {ranks} ranks x {steps} steps", "MB",
       best["tfdiff"][2] / 1024, 64.0, "the goal's bound, 64 MB", "ratio", "<=", 1.0)
result(f"analyzer.tfdiff.{tag}.vs_zstd", f"tfdiff throughput per core, {ranks} ranks", "MB/CPU-s",
       per_core("tfdiff", bg + bb), per_core("zstd_both", bg + bb), "zstd -d of the same rank files", "ratio", ">=", 0.5)
result(f"analyzer.check.{tag}.rss_mb", f"tfdump --check peak RSS, {ranks} ranks x {steps} steps", "MB",
       best["check"][2] / 1024, 64.0, "the goal's bound, 64 MB", "ratio", "<=", 1.0)
result(f"analyzer.check.{tag}.vs_zstd", f"tfdump --check throughput per core, {ranks} ranks", "MB/CPU-s",
       per_core("check", bb), per_core("zstd_bad", bb), "zstd -d of the same rank files", "ratio", ">=", 0.5)
if have_mpi:
    result("analyzer.tfdiff.mpi2.speedup", f"mpirun -np 2 tfdiff --mpi, {ranks} ranks, {ncpu} CPUs on one host",
           "MB/s", (bg + bb) / MB / best["mpi2"][0], (bg + bb) / MB / best["tfdiff"][0],
           "tfdiff as one process (threads = CPUs)", "ratio", ">=", None)
    result("analyzer.tfdiff.mpi2.rss_mb", f"mpirun -np 2 tfdiff --mpi: largest process peak RSS, {ranks} ranks",
           "MB", mpi_rss_kb / 1024, 64.0, "the goal's bound, 64 MB", "ratio", "<=", 1.0)
PY
