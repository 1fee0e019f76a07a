#!/usr/bin/env bash
# bench_keep_steps.sh — disk footprint per step of a traced tftrain run
# (default config, full statistics) with and without the flight-recorder
# mode (tftrace --keep-steps N, FORMAT.md §3.6), in two measures:
#
# - allocated: blocks the rank file holds (stat st_blocks x 512), from the
#   slope between a short and a longer run, so the setup and, with the
#   mode, the last N steps' full records (a constant) cancel out;
# - apparent: the file's size (st_size) at the longer run, which is what
#   cp, tar, rsync and a quota without sparse-file support see: a file the
#   writer compacted at close (FORMAT.md §3.6 "Compaction") has no holes,
#   so the two agree.
#
#   bench/format/bench_keep_steps.sh [BUILD_DIR]
#
# BUILD_DIR (default build) holds tracer/tftrace and runtime/tftrain.
# STEPS="A B" (default "500 2000") are the run lengths, KEEP (default 100)
# the N; the two modes run alternated. 100k steps is extrapolated linearly
# (footprint = slope x steps + the last N steps in full). Prints a table and
# two BENCH-RESULT lines (bench/run.sh): format.keep_steps.bytes_per_step,
# the ratio keep/full of the allocated slopes, goal none; and
# format.keep_steps.apparent_bytes, the ratio keep/full of the sizes at B
# steps, goal <= 0.3 (issue 37).
set -euo pipefail
build=${1:-build}
keep=${KEEP:-100}
read -r s1 s2 <<<"${STEPS:-500 2000}"
tmp=$(mktemp -d /tmp/bench_keep_steps.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# "ALLOCATED APPARENT": st_blocks x 512 and st_size of the rank file of a
# run of $2 steps, --keep-steps $1 (0: off)
run_disk() {
    local k=$1 steps=$2 out=$tmp/t.$RANDOM.trace
    "$build/tracer/tftrace" -q --keep-steps "$k" -o "$out" -- "$build/runtime/tftrain" --steps "$steps" -q \
        >"$tmp/log" 2>&1 ||
        { echo "bench_keep_steps: tftrain under tftrace --keep-steps $k failed:" >&2; tail -5 "$tmp/log" >&2; exit 1; }
    echo "$(( $(stat -c %b "$out"/rank-00000.tft) * 512 )) $(stat -c %s "$out"/rank-00000.tft)"
    rm -rf "$out"
}

declare -A disk size
for s in "$s1" "$s2"; do
    read -r disk[full,$s] size[full,$s] <<<"$(run_disk 0 "$s")"
    read -r disk[keep,$s] size[keep,$s] <<<"$(run_disk "$keep" "$s")"
done
slope() { awk -v a="${disk[$1,$s1]}" -v b="${disk[$1,$s2]}" -v s="$s1" -v t="$s2" 'BEGIN { printf "%.1f", (b - a) / (t - s) }'; }
at100k() { awk -v a="${disk[$1,$s2]}" -v m="$2" -v t="$s2" 'BEGIN { printf "%.3f", (a + m * (100000 - t)) / 1e9 }'; }
full=$(slope full)
kept=$(slope keep)
printf 'tftrain default config, full statistics; rank file disk bytes (st_blocks) at %s and %s steps (load %s)\n' \
    "$s1" "$s2" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '  %-22s %12s %12s %14s %22s\n' "" "$s1 steps" "$s2 steps" "B/step (slope)" "100k steps (linear)"
printf '  %-22s %12s %12s %14s %19s GB\n' "full records" "${disk[full,$s1]}" "${disk[full,$s2]}" "$full" "$(at100k full "$full")"
printf '  %-22s %12s %12s %14s %19s GB\n' "--keep-steps $keep" "${disk[keep,$s1]}" "${disk[keep,$s2]}" "$kept" "$(at100k keep "$kept")"
ratio=$(awk -v a="$kept" -v b="$full" 'BEGIN { printf "%.3f", a / b }')
echo "  keep/full per step: $ratio"
printf '  apparent size (st_size) at %s steps: full records %s, --keep-steps %s %s\n' "$s2" "${size[full,$s2]}" \
    "$keep" "${size[keep,$s2]}"
aratio=$(awk -v a="${size[keep,$s2]}" -v b="${size[full,$s2]}" 'BEGIN { printf "%.3f", a / b }')
echo "  keep/full apparent: $aratio"
echo "BENCH-RESULT {\"id\":\"format.keep_steps.bytes_per_step\",\"what\":\"tftrain default config traced with --keep-steps $keep, disk bytes (st_blocks) per step per rank, slope $s1..$s2 steps\",\"unit\":\"B\",\"figure\":$kept,\"baseline\":$full,\"baseline_what\":\"the same runs traced with every record\",\"metric\":\"ratio\",\"value\":$ratio,\"goal_op\":\"<=\",\"goal\":null}"
echo "BENCH-RESULT {\"id\":\"format.keep_steps.apparent_bytes\",\"what\":\"tftrain default config traced with --keep-steps $keep for $s2 steps, rank file size (st_size, holes counted)\",\"unit\":\"B\",\"figure\":${size[keep,$s2]},\"baseline\":${size[full,$s2]},\"baseline_what\":\"the same run traced with every record\",\"metric\":\"ratio\",\"value\":$aratio,\"goal_op\":\"<=\",\"goal\":0.3}"
