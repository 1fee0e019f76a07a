#!/bin/bash
# attach_cost.sh BUILD [N] — the cost per MPI call of `tftrace attach`'s
# uprobes against the LD_PRELOAD interposers, on the same program:
# tests/tracer/bpf/mpi_hang's loop of N MPI_Allreduce calls (1024 ints, one
# rank, so the call itself is short and the recording's cost shows), timed
# inside the program. Needs root (the uprobes). Prints one line per mode and
# the cost per call against the untraced loop (docs/BENCHMARKS.md).
set -euo pipefail
build=$1 n=${2:-200000}
prog=$build/tests/tracer/bpf/mpi_hang tftrace=$build/tracer/tftrace
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-attach-cost.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mpi=(mpirun --allow-run-as-root -np 1)
export MPI_HANG_GO=1
run() {   # run DIR CMD...: the loop's elapsed seconds
    local d=$1; shift
    mkdir -p "$d"; touch "$d/go"
    "$@" loop "$n" "$d" | sed -n 's/^elapsed //p'
}
best() { sort -g | head -1; }
plain=$(for i in 1 2 3; do run "$tmp/p$i" "${mpi[@]}" "$prog"; done | best)
pre=$(for i in 1 2 3; do run "$tmp/l$i" "${mpi[@]}" "$tftrace" -q -o "$tmp/l$i.trace" -- "$prog"; done | best)
att=$(for i in 1 2 3; do
    d=$tmp/a$i; mkdir -p "$d"
    "${mpi[@]}" "$prog" loop "$n" "$d" >"$d.out" &
    job=$!
    while [ ! -e "$d/pid.0" ]; do sleep 0.05; done
    "$tftrace" attach -o "$d.trace" "$(cat "$d/pid.0")" 2>"$d.err" &
    att=$!
    sleep 1; touch "$d/go"
    wait $job; wait $att || true
    sed -n 's/^elapsed //p' "$d.out"
done | best)
awk -v n="$n" -v p="$plain" -v l="$pre" -v a="$att" 'BEGIN {
    printf "untraced            %.3f s for %d MPI_Allreduce calls (%.2f us/call)\n", p, n, p / n * 1e6
    printf "LD_PRELOAD (tftrace) %.3f s: +%.2f us/call\n", l, (l - p) / n * 1e6
    printf "uprobes (attach)     %.3f s: +%.2f us/call\n", a, (a - p) / n * 1e6 }'
