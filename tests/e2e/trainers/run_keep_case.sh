#!/bin/bash
# tftrace --keep-steps (keep.cmake; FORMAT.md §3.6): tftrain for 40 steps
# with full records for the last 5 only. The trace verifies and checks
# clean, the last 5 steps are there in full, every step keeps its loss,
# the file takes far fewer disk blocks than a full trace, two such traces
# of one run match, a bug planted in step 37 is found, and a recorder
# killed with SIGKILL mid-run leaves a readable trace.
# Usage: run_keep_case.sh TFTRACE TFDUMP TFDIFF TFTRAIN
set -euo pipefail
tftrace=$1 tfdump=$2 tfdiff=$3 tftrain=$4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-keep.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
train=("$tftrain" --steps 40 -q --backend cpu)

"$tftrace" -q -o "$tmp/full.trace" -- "${train[@]}" || fail "full run"
"$tftrace" -q --keep-steps 5 -o "$tmp/k1.trace" -- "${train[@]}" || fail "--keep-steps run"
TFT_KEEP_STEPS=5 "$tftrace" -q -o "$tmp/k2.trace" -- "${train[@]}" || fail "TFT_KEEP_STEPS run"

for t in k1 k2; do
    "$tfdump" --verify "$tmp/$t.trace" >/dev/null || fail "$t: --verify"
    "$tfdump" --check "$tmp/$t.trace" >/dev/null || fail "$t: --check"
done

# the summary says which steps are full; the last 5 are, the first 15 not
line=$("$tfdump" "$tmp/k1.trace" | grep '^kept ') || fail "no 'kept' line in the summary"
[[ $line =~ full\ records:\ steps\ ([0-9]+)\.\.39\;\ scalars\ and\ collectives:\ steps\ 0\.\.39 ]] ||
    fail "summary: $line"
first=${BASH_REMATCH[1]}
[ "$first" -le 35 ] && [ "$first" -ge 15 ] || fail "full records from step $first, want 15..35"
! "$tfdump" "$tmp/full.trace" | grep -q '^kept ' || fail "a full trace says 'kept'"

# in-process mode (no launcher: tftrain links libtftrace, TFT_OUTPUT names
# the trace) honours TFT_KEEP_STEPS too
TFT_OUTPUT=$tmp/ip.trace TFT_KEEP_STEPS=5 "$tftrain" --steps 20 -q --backend cpu >/dev/null ||
    fail "in-process TFT_KEEP_STEPS run"
"$tfdump" "$tmp/ip.trace" | grep -q '^kept  *full records: steps [0-9]*\.\.19; scalars and collectives: steps 0\.\.19' ||
    fail "in-process: no kept line: $("$tfdump" "$tmp/ip.trace" 2>&1 | grep -E '^kept|integrity')"

# every step has its loss; steps 35..39 have every op of the full trace
n=$("$tfdump" -e -k tensor "$tmp/k1.trace" | grep -c ' tensor loss f32\[1\]') || true
[ "$n" = 40 ] || fail "$n steps with a loss, want 40"
ops_full=$("$tfdump" -e -k op -s 35:39 "$tmp/full.trace" | wc -l)
ops_keep=$("$tfdump" -e -k op -s 35:39 "$tmp/k1.trace" | wc -l)
[ "$ops_full" -gt 0 ] && [ "$ops_keep" = "$ops_full" ] || fail "steps 35..39: $ops_keep ops, full trace $ops_full"
ops_old=$("$tfdump" -e -k op -s 0:9 "$tmp/k1.trace" | wc -l)
[ "$ops_old" = 0 ] || fail "steps 0..9 still have $ops_old ops"

# disk blocks: retired chunks' blocks went back (a file system without
# hole punching keeps them: then the check is skipped, said so)
bf=$(stat -c %b "$tmp/full.trace/rank-00000.tft")
bk=$(stat -c %b "$tmp/k1.trace/rank-00000.tft")
if [ $((bk * 2)) -ge "$bf" ]; then
    if fallocate -p -o 0 -l 4096 "$tmp/full.trace/manifest.json" 2>/dev/null; then
        fail "keep-steps file takes $bk blocks, the full one $bf: want under half"
    fi
    echo "note: no hole punching on $tmp: blocks not checked"
fi

# two keep-steps traces of one run match; so does one against the full trace
"$tfdiff" "$tmp/k1.trace" "$tmp/k2.trace" >"$tmp/d.out" 2>"$tmp/d.err" || { cat "$tmp/d.out"; fail "k1 vs k2"; }
grep -q 'compared from step' "$tmp/d.err" || fail "tfdiff did not note the steps compared"
"$tfdiff" "$tmp/full.trace" "$tmp/k1.trace" >"$tmp/d.out" 2>&1 || { cat "$tmp/d.out"; fail "full vs k1"; }

# a bug in step 37 is found in the full records
st=0
"$tftrace" -q --keep-steps 5 -o "$tmp/bad.trace" -- "${train[@]}" --bug short-batch@37 2>/dev/null || st=$?
[ "$st" != 0 ] || fail "short-batch@37 did not fail the run"
st=0
"$tfdiff" "$tmp/k1.trace" "$tmp/bad.trace" >"$tmp/d.out" 2>&1 || st=$?
[ "$st" = 1 ] || { cat "$tmp/d.out"; fail "tfdiff of the planted bug: exit $st, want 1"; }
grep -q 'first divergence: rank 0, step 37' "$tmp/d.out" || { cat "$tmp/d.out"; fail "divergence not at step 37"; }

# SIGKILL of the recorder mid-run: what reached the disk reads, every
# step in it keeps its loss
"$tftrace" -q --keep-steps 3 -o "$tmp/kill.trace" -- "$tftrain" --steps 100000 -q --backend cpu &
pid=$!
for _ in $(seq 100); do
    sz=$(stat -c %s "$tmp/kill.trace/rank-00000.tft" 2>/dev/null || echo 0)
    [ "$sz" -gt 200000 ] && break
    sleep 0.1
done
child=$(pgrep -P "$pid" || true)
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
[ -z "$child" ] || kill -KILL $child 2>/dev/null || true
"$tfdump" "$tmp/kill.trace" >"$tmp/s.out" 2>&1 || { cat "$tmp/s.out"; fail "killed trace unreadable"; }
grep -q '^kept .*full records: steps' "$tmp/s.out" || { cat "$tmp/s.out"; fail "killed trace: no 'kept' line"; }
"$tfdump" --verify "$tmp/kill.trace" >"$tmp/v.out" 2>&1 || true
grep -q " [1-9][0-9]* damaged" "$tmp/v.out" && { cat "$tmp/v.out"; fail "killed trace damaged"; }
ends=$("$tfdump" -e -k step "$tmp/kill.trace" | grep -c ' step end') || true
losses=$("$tfdump" -e -k tensor "$tmp/kill.trace" | grep -c ' tensor loss f32\[1\]') || true
[ "$ends" -gt 5 ] && [ "$losses" -ge "$ends" ] || fail "killed trace: $ends steps ended, $losses losses"
echo "OK: keep-steps (full from step $first; $bk blocks vs $bf)"
