#!/usr/bin/env bash
# tfdiff's round-off model on tftrain (docs/TFDIFF.md, "Round-off"): a
# golden run against a run apart only by round-off (tftrace --perturb), 200
# steps, is a match; the same perturbed run with a bug planted late
# (no-scale@150: attention scores unscaled) is found at step 150 in the
# attention, where the fixed tolerance alone (--rtol 1e-4 --atol 1e-6, the
# comparison before the model) stops on round-off first. --noise with a
# second perturbed run finds it too; JSON says what the model saw.
set -euo pipefail
tftrain=$1 tftrace=$2 tfdiff=$3
tmp=$(mktemp -d /tmp/tft-roundoff-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
st() { local s=0; "$@" >"$tmp/out" 2>"$tmp/err" || s=$?; echo "$s"; }
args=(--steps 200 -q --eval-every 0 --backend cpu)

"$tftrace" -q -o "$tmp/g.trace" -- "$tftrain" "${args[@]}" 2>/dev/null
"$tftrace" -q --perturb -o "$tmp/p.trace" -- "$tftrain" "${args[@]}" 2>/dev/null
"$tftrace" -q --perturb -o "$tmp/b.trace" -- "$tftrain" "${args[@]}" --bug no-scale@150 2>/dev/null

# the healthy pair: a match, said with the growth of the differences
s=$(st "$tfdiff" -q --json "$tmp/g.trace" "$tmp/p.trace")
[ "$s" = 0 ] || { head -c 3000 "$tmp/out"; fail "golden vs perturbed: exit $s, want 0"; }
python3 - "$tmp/out" <<'PY' || fail "JSON roundoff"
import json, sys
j = json.load(open(sys.argv[1]))
ro = j["roundoff"]
assert j["verdict"] == "match" and j["tolerance"]["roundoff"] is True, j["verdict"]
assert ro["summary"].startswith("match within round-off"), ro["summary"]
assert ro["explained"] > 0 and ro["max_diff"] > 1e-4 and ro["windows"], ro
assert ro["thresholds"] == {"own_growth": 16, "run_growth": 8}, ro["thresholds"]
print("golden vs perturbed:", ro["summary"][:160])
PY
# the fixed tolerance alone calls the healthy pair diverged (what the model fixes)
s=$(st "$tfdiff" -q --rtol 1e-4 --atol 1e-6 "$tmp/g.trace" "$tmp/p.trace")
[ "$s" = 1 ] || fail "--rtol 1e-4 alone: exit $s on the perturbed pair (want 1: round-off beyond it), the test shows nothing"

# the late bug: found at its step, in the attention
check_bug() {
    python3 - "$tmp/out" "$1" <<'PY' || fail "$1: the bug is not found at step 150 in the attention: $(head -c 2000 "$tmp/out")"
import json, sys
j = json.load(open(sys.argv[1]))
fd = j.get("first_divergence") or {}
print(sys.argv[2], "first divergence:", fd.get("step"), fd.get("tensor"))
sys.exit(0 if fd.get("step") == 150 and "attn" in (fd.get("tensor") or "") else 1)
PY
}
s=$(st "$tfdiff" -q --json "$tmp/g.trace" "$tmp/b.trace")
[ "$s" = 1 ] || fail "golden vs perturbed+no-scale@150: exit $s, want 1"
check_bug default
s=$(st "$tfdiff" -q --json --noise "$tmp/p.trace" "$tmp/g.trace" "$tmp/b.trace")
[ "$s" = 1 ] || fail "--noise: exit $s, want 1"
check_bug --noise
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["roundoff"]["noise"] is True' "$tmp/out" \
  || fail "--noise: roundoff.noise is not true"
s=$(st "$tfdiff" -q --json --rtol 1e-4 --atol 1e-6 "$tmp/g.trace" "$tmp/b.trace")
python3 - "$tmp/out" <<'PY' || fail "--rtol 1e-4 alone reaches the bug: the test shows nothing"
import json, sys
fd = json.load(open(sys.argv[1]))["first_divergence"]
print("fixed tolerance alone: first divergence at step", fd["step"], fd["tensor"])
sys.exit(0 if fd["step"] < 150 else 1)
PY
# usage errors
s=$(st "$tfdiff" --noise "$tmp/p.trace" --rtol 1e-3 "$tmp/g.trace" "$tmp/b.trace")
[ "$s" = 2 ] && grep -q "noise" "$tmp/err" || fail "--noise with --rtol: exit $s, want 2 and a message"
s=$(st "$tfdiff" --noise "$tmp/missing.trace" "$tmp/g.trace" "$tmp/b.trace")
[ "$s" = 2 ] || fail "--noise with a missing trace: exit $s, want 2"
echo "PASS"
