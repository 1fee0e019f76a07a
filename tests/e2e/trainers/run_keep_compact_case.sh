#!/bin/bash
# tftrace --keep-steps stays small and stays right (keep.cmake; FORMAT.md
# §3.6 "Compaction"; issue 37): on the bug zoo's small model,
# - a 300-step run with --keep-steps 20 takes at most 0.3x the full trace's
#   size (apparent, st_size: the compaction at close), reads complete, its
#   last steps equal the full trace's and every step keeps its loss;
# - the same when the traced program is SIGKILLed (the collector closes
#   and compacts);
# - a compaction killed before its rename (TFT_TEST_COMPACT=kill) leaves
#   the trace readable, with the same records; tfdump --compact then
#   compacts it;
# - a bug planted before the full window (no-scale@150) is found by tfdiff
#   at step 150 in the kept loss, saying where the full records start;
#   tfdump --check's loss and grad-norm rules fire at their own steps
#   (before the window) as on the full trace.
# Usage: run_keep_compact_case.sh TFTRACE TFDUMP TFDIFF TFTRAIN
set -euo pipefail
tftrace=$1 tfdump=$2 tfdiff=$3 tftrain=$4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-keepc.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
small=(-q --backend cpu --layers 1 --d-model 32 --heads 2 --seq 16 --batch 4 --eval-every 0)
train=("$tftrain" "${small[@]}" --steps 300)
size() { stat -c %s "$1/rank-00000.tft"; }
# ratio A B: A/B with 3 decimals; within LIMIT: A*1000 <= LIMIT*B
within() { [ $(($1 * 1000)) -le $(($3 * $2)) ]; }

"$tftrace" -q -o "$tmp/full.trace" -- "${train[@]}" || fail "full run"
"$tftrace" -q --keep-steps 20 -o "$tmp/keep.trace" -- "${train[@]}" || fail "--keep-steps run"
full=$(size "$tmp/full.trace") keep=$(size "$tmp/keep.trace")
within "$keep" "$full" 300 || fail "keep-steps trace: $keep bytes, full trace $full: want at most 0.3x"
"$tfdump" --verify "$tmp/keep.trace" >/dev/null || fail "keep-steps trace: --verify"
"$tfdump" "$tmp/keep.trace" | grep -q '^integrity *complete' || fail "keep-steps trace not complete"
"$tfdump" "$tmp/keep.trace" | grep -Eq "^bytes +$keep on disk \\([0-9]+ allocated\\)" ||
    fail "summary: $("$tfdump" "$tmp/keep.trace" | grep '^bytes')"
# the last steps in full, the loss of every step: as in the full trace (ops
# and tensors; the other records carry the run's timings)
"$tfdump" -e -k op,tensor -s 285:299 "$tmp/full.trace" >"$tmp/f.ev"
"$tfdump" -e -k op,tensor -s 285:299 "$tmp/keep.trace" >"$tmp/k.ev"
[ -s "$tmp/f.ev" ] && cmp -s "$tmp/f.ev" "$tmp/k.ev" || fail "steps 285..299 differ from the full trace's"
"$tfdump" -e -k tensor -n loss "$tmp/full.trace" >"$tmp/f.loss"
"$tfdump" -e -k tensor -n loss "$tmp/keep.trace" >"$tmp/k.loss"
[ "$(wc -l <"$tmp/k.loss")" = 300 ] && cmp -s "$tmp/f.loss" "$tmp/k.loss" ||
    fail "losses: $(wc -l <"$tmp/k.loss") of 300, or not the full trace's"

# the traced program SIGKILLed: the collector closes and compacts the file
"$tftrace" -q --keep-steps 20 -o "$tmp/kill.trace" -- "$tftrain" "${small[@]}" --steps 1000000 &
pid=$!
for _ in $(seq 200); do
    sz=$(stat -c %s "$tmp/kill.trace/rank-00000.tft" 2>/dev/null || echo 0)
    [ "$sz" -gt $((full * 3 / 2)) ] && break # about 450 steps
    sleep 0.05
done
child=$(pgrep -P "$pid" || true)
[ -n "$child" ] || fail "no traced program under tftrace"
kill -KILL $child
wait "$pid" 2>/dev/null || true
last=$("$tfdump" -e -k step "$tmp/kill.trace" | grep -c ' step end') || true
[ "$last" -gt 300 ] || fail "killed run: $last steps"
ksz=$(size "$tmp/kill.trace")
within "$ksz" $((full * last / 300)) 300 ||
    fail "killed run: $ksz bytes for $last steps, a full trace of them about $((full * last / 300)): want at most 0.3x"
"$tfdump" "$tmp/kill.trace" | grep -q '^integrity *complete' || fail "killed run's trace not complete"
losses=$("$tfdump" -e -k tensor -n loss "$tmp/kill.trace" | wc -l)
[ "$losses" -ge "$last" ] || fail "killed run: $losses losses for $last steps"

# a compaction killed before its rename: the old file reads, as it was
st=0
TFT_TEST_COMPACT=kill "$tftrace" -q --keep-steps 20 -o "$tmp/ck.trace" -- "${train[@]}" 2>/dev/null || st=$?
[ "$st" = 137 ] || fail "TFT_TEST_COMPACT=kill: tftrace exit $st, want 137 (killed)"
[ -e "$tmp/ck.trace/.rank-00000.tft.compact" ] || fail "no compaction left behind"
sparse=$(size "$tmp/ck.trace")
[ "$sparse" -gt "$keep" ] || fail "the killed compaction's file is compact already ($sparse bytes)"
"$tfdump" "$tmp/ck.trace" | grep -q '^integrity *complete' || fail "killed compaction: the trace is not complete"
"$tfdump" -e "$tmp/ck.trace" >"$tmp/ck.before"
# ... the last steps in full and every loss, as the normal run (which
# steps before them are full depends on when chunks were sealed)
"$tfdump" -e -k op,tensor -s 285:299 "$tmp/ck.trace" | cmp -s - "$tmp/k.ev" ||
    fail "killed compaction: steps 285..299 differ from the normal run's"
"$tfdump" -e -k tensor -n loss "$tmp/ck.trace" | cmp -s - "$tmp/k.loss" ||
    fail "killed compaction: losses differ from the normal run's"
"$tfdump" --compact "$tmp/ck.trace" >"$tmp/c.out" || { cat "$tmp/c.out"; fail "tfdump --compact"; }
grep -q 'compacted' "$tmp/c.out" || fail "tfdump --compact: $(cat "$tmp/c.out")"
[ ! -e "$tmp/ck.trace/.rank-00000.tft.compact" ] || fail "tfdump --compact left the leftover"
within "$(size "$tmp/ck.trace")" "$full" 300 || fail "tfdump --compact: $(size "$tmp/ck.trace") bytes"
"$tfdump" -e "$tmp/ck.trace" | cmp -s - "$tmp/ck.before" || fail "tfdump --compact changed the records"
"$tfdump" --compact "$tmp/ck.trace" | grep -q 'compact already' || fail "second tfdump --compact"

# a bug from step 150, before the window: tfdiff finds it at 150 in the loss
"$tftrace" -q --keep-steps 20 -o "$tmp/bad.trace" -- "${train[@]}" --bug no-scale@150 ||
    fail "no-scale@150 run"
st=0
"$tfdiff" "$tmp/keep.trace" "$tmp/bad.trace" >"$tmp/d.out" 2>&1 || st=$?
[ "$st" = 1 ] || { cat "$tmp/d.out"; fail "tfdiff: exit $st, want 1"; }
grep -Eq '^first divergence: rank 0, step 150, seq [0-9]+: loss \(value, mean; a kept scalar: full records from step 2[0-9]{2} only\)' \
    "$tmp/d.out" || { cat "$tmp/d.out"; fail "tfdiff: not at step 150 in the kept loss"; }
"$tfdiff" --json "$tmp/full.trace" "$tmp/bad.trace" 2>/dev/null >"$tmp/d.json" || true
python3 - "$tmp/d.json" <<'EOF' || fail "tfdiff --json full vs keep"
import json, sys
d = json.load(open(sys.argv[1]))["first_divergence"]
assert d["step"] == 150 and d["tensor"] == "loss" and d["stat"] == "mean", d
assert 200 <= d["full_records_from"] <= 299, d
EOF
"$tfdiff" "$tmp/full.trace" "$tmp/keep.trace" >"$tmp/d.out" 2>&1 || { cat "$tmp/d.out"; fail "tfdiff full vs keep of one run"; }

# tfdump --check: the loss and grad-norm rules judge the steps before the
# window (SGD without clipping, lr 3: bugzoo's no-clip)
sgd=("$tftrain" "${small[@]}" --steps 35 --optim sgd --lr 3 --bug no-clip)
"$tftrace" -q -o "$tmp/sgdf.trace" -- "${sgd[@]}" 2>/dev/null || true
"$tftrace" -q --keep-steps 5 -o "$tmp/sgdk.trace" -- "${sgd[@]}" 2>/dev/null || true
for t in sgdf sgdk; do
    "$tfdump" --check --json "$tmp/$t.trace" 2>"$tmp/$t.err" >"$tmp/$t.json" || true
done
grep -q 'full records from step' "$tmp/sgdk.err" || fail "--check: no note on the keep-steps trace"
python3 - "$tmp/sgdf.json" "$tmp/sgdk.json" <<'EOF' || fail "--check on the keep-steps trace"
import json, sys
def rules(p):
    return {(f["kind"], f["tensor"]): f["step"] for f in json.load(open(p))["findings"]
            if f["tensor"] in ("loss", "grad_norm", "lr")}
full, keep = rules(sys.argv[1]), rules(sys.argv[2])
for k in (("loss-rise", "loss"), ("grad-spike", "grad_norm")):
    assert k in full and keep.get(k) == full[k] and full[k] < 25, (k, full, keep)
EOF
echo "OK: keep-steps compact ($keep bytes vs $full full; killed run $ksz bytes for $last steps)"
