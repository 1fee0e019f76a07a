#!/usr/bin/env bash
# tftrace --perturb on tftrain (runtime/README.md): TFTRACE_PERTURB flips
# the last mantissa bit of every parameter after initialisation, so the run
# differs from the unperturbed one in every bit that round-off reaches but
# no more — tfdiff at zero tolerance says DIVERGED, tfdiff's round-off model
# says MATCH ("match within round-off"), and the pair calibrates
# tfdiff --noise. A resumed run is not perturbed.
set -euo pipefail
tftrain=$1 tftrace=$2 tfdiff=$3
tmp=$(mktemp -d /tmp/tft-perturb-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
st() { local s=0; "$@" >"$tmp/out" 2>"$tmp/err" || s=$?; echo "$s"; }
args=(--steps 60 -q --backend cpu)

"$tftrace" -q -o "$tmp/g.trace" -- "$tftrain" "${args[@]}" 2>"$tmp/g.err"
"$tftrace" -q --perturb -o "$tmp/g2.trace" -- "$tftrain" "${args[@]}" 2>"$tmp/g2.err"
grep -q "TFTRACE_PERTURB" "$tmp/g.err" && fail "an unperturbed run says it was perturbed: $(cat "$tmp/g.err")"
[ "$(grep -c "tftrain: TFTRACE_PERTURB: the last mantissa bit of every parameter flipped" "$tmp/g2.err")" = 1 ] \
  || { cat "$tmp/g2.err"; fail "tftrain did not say once that it flipped the parameters"; }
grep -Eq '"perturb":[[:space:]]*true' "$tmp/g2.trace/manifest.json" || fail "manifest options lack perturb"
grep -q '"perturb"' "$tmp/g.trace/manifest.json" && fail "an unperturbed run's manifest says perturb"

# (a) bitwise, the runs differ, from the parameters at initialisation on
s=$(st "$tfdiff" -q --rtol 0 --atol 0 --json "$tmp/g.trace" "$tmp/g2.trace")
[ "$s" = 1 ] || { cat "$tmp/out" "$tmp/err"; fail "tfdiff --rtol 0 --atol 0: exit $s, want 1 (no perturbation?)"; }
python3 - "$tmp/out" <<'PY' || fail "the first bitwise difference is not a parameter at step 0"
import json, sys
j = json.load(open(sys.argv[1]))
fd = j.get("first_divergence") or {}
print("bitwise first difference:", fd.get("step"), fd.get("tensor"))
sys.exit(0 if fd.get("step") == 0 and fd.get("tensor") == "wte" else 1)
PY
# (b) within round-off
s=$(st "$tfdiff" -q "$tmp/g.trace" "$tmp/g2.trace")
[ "$s" = 0 ] || { cat "$tmp/out" "$tmp/err"; fail "tfdiff GOLDEN GOLDEN2: exit $s, want 0"; }
grep -q "match within round-off" "$tmp/out" || { cat "$tmp/out"; fail "no 'match within round-off'"; }
# (c) the pair calibrates --noise
s=$(st "$tfdiff" -q --noise "$tmp/g2.trace" "$tmp/g.trace" "$tmp/g.trace")
[ "$s" = 0 ] || { cat "$tmp/out" "$tmp/err"; fail "tfdiff --noise g2 g g: exit $s, want 0"; }

# a resumed run continues the checkpoint's parameters as saved: the same
# losses, bit for bit, with TFTRACE_PERTURB or without
small=(--layers 1 --d-model 32 --heads 2 --eval-every 0 --backend cpu)
"$tftrain" "${small[@]}" --steps 3 -q --ckpt-dir "$tmp/ck"
"$tftrain" "${small[@]}" --steps 6 --log-every 1 --resume "$tmp/ck" >"$tmp/r.out"
TFTRACE_PERTURB=1 "$tftrain" "${small[@]}" --steps 6 --log-every 1 --resume "$tmp/ck" >"$tmp/r2.out" 2>"$tmp/r2.err"
grep -q "resumed from a checkpoint, nothing flipped" "$tmp/r2.err" || { cat "$tmp/r2.err"; fail "no note on resume"; }
[ "$(awk '/^step/ {print $5}' "$tmp/r.out")" = "$(awk '/^step/ {print $5}' "$tmp/r2.out")" ] \
  || fail "a resumed run was perturbed: $(cat "$tmp/r.out" "$tmp/r2.out")"
# a fresh start is (TFTRACE_PERTURB without tftrace) and 0 is off
"$tftrain" "${small[@]}" --steps 30 --log-every 1 >"$tmp/f.out"
TFTRACE_PERTURB=0 "$tftrain" "${small[@]}" --steps 30 --log-every 1 >"$tmp/f0.out" 2>"$tmp/f0.err"
TFTRACE_PERTURB=1 "$tftrain" "${small[@]}" --steps 30 --log-every 1 >"$tmp/f1.out" 2>/dev/null
[ ! -s "$tmp/f0.err" ] || fail "TFTRACE_PERTURB=0 perturbed: $(cat "$tmp/f0.err")"
cmp -s <(awk '/^step/ {print $5, $8}' "$tmp/f.out") <(awk '/^step/ {print $5, $8}' "$tmp/f0.out") \
  || fail "TFTRACE_PERTURB=0 changed the run"
echo "PASS"
