#!/bin/bash
# CUDA-side interposer tests on a machine without a GPU (see CMakeLists.txt).
# Usage: run_cuda_test.sh CASE TFTRACE TFDUMP TFDIFF LIBTFTRACE PLUGIN PROG [PROG...]
# The environment the launcher gives a traced program for NVTX and CUDA
# (docs/INTERPOSE.md) is set here explicitly, so these tests also hold for
# a launcher that does not set it.
set -euo pipefail
case_name=$1 tftrace=$2 tfdump=$3 tfdiff=$4 lib=$5 plugin=$6
shift 6
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-cuda.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export NVTX_INJECTION64_PATH=$lib CUDA_INJECTION64_PATH=$plugin

# traced NAME ARGS...: runs ARGS under tftrace into $tmp/NAME.trace
traced() {
    local name=$1
    shift
    "$tftrace" -q --timeout 60 -o "$tmp/$name.trace" -- "$@"
}

# same_run NAME PROG ARGS...: stdout and exit status equal untraced and
# traced (no GPU here: the program reports its CUDA error and exits).
same_run() {
    local name=$1 st0=0 st1=0
    shift
    timeout 60 env -u NVTX_INJECTION64_PATH -u CUDA_INJECTION64_PATH "$@" >"$tmp/$name.out0" \
        2>"$tmp/$name.err0" || st0=$?
    traced "$name" "$@" >"$tmp/$name.out1" 2>"$tmp/$name.err1" || st1=$?
    [ "$st0" != 124 ] || fail "$name: untraced run timed out"
    [ "$st0" = "$st1" ] || fail "$name: exit status $st1 under tftrace, $st0 without"
    cmp -s "$tmp/$name.out0" "$tmp/$name.out1" ||
        fail "$name: stdout differs under tftrace: $(head -c 300 "$tmp/$name.out1") vs $(head -c 300 "$tmp/$name.out0")"
    [ -d "$tmp/$name.trace" ] || fail "$name: no trace written"
    echo "$name: exit $st0, stdout identical: $(head -c 120 "$tmp/$name.out0")"
}

json_events() { "$tfdump" --events --json "$@"; }

case $case_name in
  nvtx)
    prog=$1
    same_run g "$prog"
    json_events "$tmp/g.trace" >"$tmp/g.json"
    python3 - "$tmp/g.json" <<'PY'
import json, sys
recs = list(map(json.loads, open(sys.argv[1])))
steps = [(r["step"], r["phase"]) for r in recs if r["kind"] == "step"]
assert steps == [(s, p) for s in range(5) for p in ("begin", "end")], steps
ops = [r for r in recs if r["kind"] == "op" and r["name"] == "cblas_sgemm"]
assert len(ops) == 16, len(ops)
want = ["fwd/layer0", "fwd/layer0/attn", "bwd"] * 5 + [None]
assert [o["scope"] for o in ops] == want, [o["scope"] for o in ops]
# the recorder keeps the last step's number after its end
assert [o["step"] for o in ops] == [s for s in range(5) for _ in range(3)] + [4], [o["step"] for o in ops]
print("nvtx: steps 0..4, scopes", sorted(set(str(o["scope"]) for o in ops)))
PY
    # start/end ranges named "step N": the step numbers are N
    traced num "$prog" --numbered >/dev/null
    "$tfdump" --json "$tmp/num.trace" | python3 -c "import json,sys; s=json.load(sys.stdin)['steps']; assert s==[10,14], s" ||
        fail "numbered step ranges"
    # TFT_STEP_RANGE names the step range; other names are scopes
    TFT_STEP_RANGE=iter traced iter "$prog" --range iter >/dev/null
    "$tfdump" --json "$tmp/iter.trace" | python3 -c "import json,sys; s=json.load(sys.stdin)['steps']; assert s==[0,4], s" ||
        fail "TFT_STEP_RANGE=iter"
    traced noiter "$prog" --range iter >/dev/null
    json_events -k step,op -n cblas_sgemm "$tmp/noiter.trace" >"$tmp/noiter.json"
    python3 - "$tmp/noiter.json" <<'PY' || fail "a range not named like the step range must be a scope"
import json, sys
recs = list(map(json.loads, open(sys.argv[1])))
assert not [r for r in recs if r["kind"] == "step"], "steps recorded"
assert recs[0]["scope"] == "iter/fwd/layer0", recs[0]
PY
    # a planted difference in step 2: tfdiff names it
    traced b "$prog" --plant 2 >/dev/null
    st=0; "$tfdiff" --json "$tmp/g.trace" "$tmp/b.trace" >"$tmp/d.json" || st=$?
    [ "$st" = 1 ] || fail "tfdiff exit $st, want 1"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['first_divergence']; assert d['step']==2 and d['tensor'].startswith('cblas_sgemm'), d; print('tfdiff:', d['tensor'], 'step', d['step'])" \
        "$tmp/d.json" || fail "tfdiff did not name step 2: $(head -c 400 "$tmp/d.json")"
    # TFT_INTERPOSE=0: NVTX stays a no-op
    TFT_INTERPOSE=0 traced off "$prog" >"$tmp/off.out"
    cmp -s "$tmp/off.out" "$tmp/g.out0" || fail "results changed with TFT_INTERPOSE=0"
    ! json_events -k step "$tmp/off.trace" | grep -q . || fail "TFT_INTERPOSE=0 still records steps" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo "PASS $case_name"
