#!/bin/bash
# attach_malloc_cost.sh BUILD [N] — the cost per malloc+free pair of `tftrace
# attach`'s allocation probes (a uprobe and a uretprobe on malloc, a uprobe
# on free: every call traps, whatever its size) against the LD_PRELOAD
# interposer (a comparison for a small block) and the untraced loop, on
# bench/bpf/malloc_loop.c: N pairs of 64 bytes (below the 1 MiB threshold:
# not recorded, the common case) and N/10 of 2 MiB (recorded). Best of 3,
# timed inside the program. Needs root (the uprobes). docs/BENCHMARKS.md.
set -euo pipefail
build=$1 n=${2:-1000000}
tftrace=$build/tracer/tftrace
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-malloc-cost.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/loop" "$(dirname "$0")/malloc_loop.c"
best() { sort -g | head -1; }
plain() {   # plain N SIZE
    for i in 1 2 3; do d=$tmp/p$i.$2; mkdir -p "$d"; touch "$d/go"; "$tmp/loop" "$1" "$2" "$d" | sed -n 's/^elapsed //p'; done | best
}
pre() {
    for i in 1 2 3; do d=$tmp/l$i.$2; mkdir -p "$d"; touch "$d/go"
        "$tftrace" -q -o "$d.trace" -- "$tmp/loop" "$1" "$2" "$d" | sed -n 's/^elapsed //p'; done | best
}
att() {
    for i in 1 2 3; do d=$tmp/a$i.$2; mkdir -p "$d"
        "$tmp/loop" "$1" "$2" "$d" >"$d.out" & job=$!
        while [ ! -e "$d/pid" ]; do sleep 0.05; done
        "$tftrace" attach --probe malloc -o "$d.trace" "$(cat "$d/pid")" 2>"$d.err" & a=$!
        sleep 1; touch "$d/go"
        wait $job; wait $a || true
        sed -n 's/^elapsed //p' "$d.out"
    done | best
}
big=$((n / 10))
for spec in "$n 64" "$big 2097152"; do
    set -- $spec
    p=$(plain "$1" "$2") l=$(pre "$1" "$2") a=$(att "$1" "$2")
    awk -v n="$1" -v s="$2" -v p="$p" -v l="$l" -v a="$a" 'BEGIN {
        printf "%d pairs of %d bytes: untraced %.3f s (%.3f us/pair); LD_PRELOAD +%.3f us/pair; attach +%.3f us/pair (%.1fx untraced)\n",
               n, s, p, p / n * 1e6, (l - p) / n * 1e6, (a - p) / n * 1e6, a / p }'
done
