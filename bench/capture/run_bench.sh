#!/bin/bash
# Capture cost on tftrain: one step's every op captured (inputs and
# outputs), the trace's size with and without capture, shuffled and not,
# and the per-tensor figures of bench_capture. Usage: run_bench.sh BUILD_DIR
# [tftrain args...] (default: the default config, 6 steps, capture step 5).
set -euo pipefail
b=$1
shift
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--steps 6 --eval-every 0 --log-every 6)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-bench-capture.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
run() { # NAME [env...]: records tftrain, prints elapsed seconds
    local name=$1
    shift
    local t0 t1
    t0=$(date +%s.%N)
    env "$@" "$b/tracer/tftrace" -q -o "$tmp/$name.trace" -- "$b/runtime/tftrain" "${args[@]}" >/dev/null
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}
size() { du -sb "$tmp/$1.trace" | cut -f1; }
tn=$(run none)
ts=$(run shuf TFT_CAPTURE='step=5')
tp=$(run plain TFT_CAPTURE='step=5' TFT_CAPTURE_SHUFFLE=0)
raw=$("$b/analyzer/tfdump" --captures "$tmp/shuf.trace" | tail -1)
echo "tftrain ${args[*]}"
echo "captures: $raw"
echo "trace without capture: $(size none) bytes (${tn}s)"
echo "capture, shuffled:     $(size shuf) bytes (${ts}s)"
echo "capture, not shuffled: $(size plain) bytes (${tp}s)"
"$b/bench/capture/bench_capture" "$tmp/shuf.trace"
