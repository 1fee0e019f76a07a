#!/usr/bin/env bash
# bench_trace_bytes.sh — bytes on disk per step per rank of a traced tftrain
# run (default config, full statistics, every op, every step), from the
# slope between a short and a longer run (the setup's records cancel out):
#
#   bench/format/bench_trace_bytes.sh [BUILD_DIR] [BASELINE_BUILD_DIR]
#
# BUILD_DIR (default build) holds tracer/tftrace and runtime/tftrain. With
# BASELINE_BUILD_DIR (e.g. a build of main, format 1.3: plain chunks) the
# same runs are made with its tftrace, alternated, and the ratio printed.
# STEPS="A B" (default "200 1000") are the two run lengths. Prints a table
# and BENCH-RESULT lines (bench/run.sh): format.trace.bytes_per_step, goal
# none (a footprint; 100k steps = 1e5 x the figure, linear in steps).
set -euo pipefail
build=${1:-build}
base=${2:-}
read -r s1 s2 <<<"${STEPS:-200 1000}"
tmp=$(mktemp -d /tmp/bench_trace_bytes.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# bytes of the rank file of a run of $2 steps traced by build $1
run_bytes() {
    local b=$1 steps=$2 out=$tmp/t.$RANDOM.trace
    "$b/tracer/tftrace" -o "$out" -- "$build/runtime/tftrain" --steps "$steps" >"$tmp/log" 2>&1 ||
        { echo "bench_trace_bytes: tftrain under $b/tracer/tftrace failed:" >&2; tail -5 "$tmp/log" >&2; exit 1; }
    stat -c %s "$out"/rank-00000.tft
    rm -rf "$out"
}

declare -A bytes
for s in "$s1" "$s2"; do
    bytes[new,$s]=$(run_bytes "$build" "$s")
    [ -n "$base" ] && bytes[base,$s]=$(run_bytes "$base" "$s")
done
slope() { awk -v a="${bytes[$1,$s1]}" -v b="${bytes[$1,$s2]}" -v s="$s1" -v t="$s2" 'BEGIN { printf "%.1f", (b - a) / (t - s) }'; }
gb() { awk -v x="$1" 'BEGIN { printf "%.2f", x * 100000 / 1e9 }'; }
new=$(slope new)
printf 'tftrain default config, full statistics; rank file bytes at %s and %s steps (load %s)\n' \
    "$s1" "$s2" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '  %-28s %12s %12s %14s %18s\n' "" "$s1 steps" "$s2 steps" "B/step/rank" "100k steps (lin.)"
printf '  %-28s %12s %12s %14s %15s GB\n' "$build (this tree)" "${bytes[new,$s1]}" "${bytes[new,$s2]}" "$new" "$(gb "$new")"
if [ -n "$base" ]; then
    old=$(slope base)
    printf '  %-28s %12s %12s %14s %15s GB\n' "$base (baseline)" "${bytes[base,$s1]}" "${bytes[base,$s2]}" "$old" "$(gb "$old")"
    ratio=$(awk -v a="$new" -v b="$old" 'BEGIN { printf "%.3f", a / b }')
    echo "BENCH-RESULT {\"id\":\"format.trace.bytes_per_step\",\"what\":\"tftrain default config traced, bytes per step per rank on disk\",\"unit\":\"B\",\"figure\":$new,\"baseline\":$old,\"baseline_what\":\"the same runs traced by $base\",\"metric\":\"ratio\",\"value\":$ratio,\"goal_op\":\"<=\",\"goal\":null}"
else
    echo "BENCH-RESULT {\"id\":\"format.trace.bytes_per_step\",\"what\":\"tftrain default config traced, bytes per step per rank on disk\",\"unit\":\"B\",\"figure\":$new,\"baseline\":null,\"baseline_what\":\"none given\",\"metric\":\"delta\",\"value\":$new,\"goal_op\":\"<=\",\"goal\":null}"
fi
