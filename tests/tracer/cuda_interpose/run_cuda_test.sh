#!/bin/bash
# CUDA-side interposer tests on a machine without a GPU (see CMakeLists.txt).
# Usage: run_cuda_test.sh CASE TFTRACE TFDUMP TFDIFF LIBTFTRACE PLUGIN PROG [PROG...]
# The environment a traced program needs for NVTX and CUDA
# (NVTX_INJECTION64_PATH, CUDA_INJECTION64_PATH; docs/INTERPOSE.md) comes
# from the launcher: these tests check that it sets it.
set -euo pipefail
case_name=$1 tftrace=$2 tfdump=$3 tfdiff=$4 lib=$5 plugin=$6
shift 6
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-cuda.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
unset NVTX_INJECTION64_PATH CUDA_INJECTION64_PATH
[ -n "$lib" ] && [ -n "$plugin" ] || fail "usage: LIBTFTRACE and PLUGIN paths"

# traced NAME ARGS...: runs ARGS under tftrace into $tmp/NAME.trace
traced() {
    local name=$1
    shift
    "$tftrace" -q --timeout 60 -o "$tmp/$name.trace" -- "$@"
}

# same_run NAME PROG ARGS...: stdout and exit status equal untraced and
# traced (no GPU here: the program reports its CUDA error and exits).
# Untraced means without the injection variables too (FAKE_PLUGIN stands
# for CUDA_INJECTION64_PATH): tftrace sets them only with its LD_PRELOAD.
same_run() {
    local name=$1 st0=0 st1=0
    shift
    timeout 60 env -u NVTX_INJECTION64_PATH -u CUDA_INJECTION64_PATH -u FAKE_PLUGIN "$@" >"$tmp/$name.out0" \
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
    ! json_events -k step "$tmp/off.trace" | grep . >/dev/null || fail "TFT_INTERPOSE=0 still records steps" ;;
  nodevice)
    for prog in "$@"; do
        name=$(basename "$prog")
        same_run "$name" "$prog"
        n=$(grep -c '^tftrace:' "$tmp/$name.err1" || true)
        [ "$n" -le 1 ] || fail "$name: $n tftrace lines on stderr: $(cat "$tmp/$name.err1")"
    done ;;
  fake)
    prog=$1 fake=$2
    export FAKE_PLUGIN=$fake
    same_run g "$prog"
    ! grep -q 'plugin not loaded' "$tmp/g.err1" || fail "plugin message with a plugin: $(cat "$tmp/g.err1")"
    json_events --order time "$tmp/g.trace" >"$tmp/g.json"
    python3 - "$tmp/g.json" <<'PY'
import json, struct, sys
recs = list(map(json.loads, open(sys.argv[1])))
def bits(x): return struct.unpack("<q", struct.pack("<d", x))[0]
steps = [(r["step"], r["phase"]) for r in recs if r["kind"] == "step"]
assert steps == [(s, p) for s in range(4) for p in ("begin", "end")], steps
# file (time) order: every op/tensor/collective lies inside the step it names
cur = None
for r in recs:
    if r["kind"] == "step":
        cur = r["step"] if r["phase"] == "begin" else None
    elif r["kind"] in ("op", "tensor", "collective"):
        assert r["step"] == cur, ("record outside its step", r, cur)
ops = {}
for r in recs:
    if r["kind"] == "op":
        ops.setdefault(r["name"], []).append(r)
ts = {r["id"]: r for r in recs if r["kind"] == "tensor"}
byname = {}
for r in ts.values():
    byname.setdefault(r["name"], []).append(r)
def out_of(op):
    o = [t for t in ts.values() if t["seq"] == op["seq"] and t["name"] == op["name"]]
    assert len(o) == 1, (op, o)
    return o[0]
# cublasSgemm: C 5 x 4 (ldc 7) recorded [4, 5]; A 5 x 3 -> [3, 5]; B 3 x 4 -> [4, 3]
sg = ops["cublasSgemm"]
assert len(sg) == 4 and all(o["op_kind"] == "gemm" for o in sg), sg
for o in sg:
    assert o["attrs"] == [5, 4, 3, 0, 0, 0, 1, 5, 3, 7, bits(1.0), bits(0.0)], o["attrs"]
    a, b = ts[o["inputs"][0]], ts[o["inputs"][1]]
    assert a["name"] == "cublasSgemm.A" and a["shape"] == [3, 5] and b["shape"] == [4, 3], (a, b)
    c = out_of(o)
    assert c["shape"] == [4, 5] and c["mode"] == "full" and c["device"] == "cuda:0", c
    assert c["stats"]["numel"] == 20 and c["stats"]["min"] > -99, c["stats"]  # padding rows left out
gx = ops["cublasGemmEx"]
assert len(gx) == 4 and gx[0]["attrs"][:6] == [5, 4, 3, 1, 0, 0], gx[0]
assert ts[gx[0]["inputs"][0]]["shape"] == [5, 3], ts[gx[0]["inputs"][0]]  # A stored 3 x 5
sb = ops["cublasSgemmStridedBatched"]
assert out_of(sb[0])["shape"] == [2, 4, 5] and ts[sb[0]["inputs"][0]]["shape"] == [2, 3, 5], out_of(sb[0])
lt = ops["cublasLtMatmul"]
assert len(lt) == 4 and lt[0]["attrs"][:7] == [5, 4, 3, 0, 0, 0, 1], lt[0]
for o_s, o_l in zip(sg, lt):  # the same product, one through a padded C
    assert out_of(o_s)["stats"]["fingerprint"] == out_of(o_l)["stats"]["fingerprint"], (o_s, o_l)
# collectives
ex = [r for r in recs if r["kind"] == "collective" and r["phase"] == "exit"]
ar = [r for r in ex if r["name"] == "ncclAllReduce"]
assert len(ar) == 12, len(ar)
c0, c1, c2 = ar[0], ar[1], ar[2]
assert c0["comm"] == c1["comm"] != c2["comm"], (c0, c1, c2)
assert (c0["comm_rank"], c0["nranks"], c1["comm_rank"], c1["nranks"]) == (0, 2, 1, 2), (c0, c1)
assert (c0["count"], c0["dtype"], c0["op"], c2["op"], c2["nranks"]) == (8, "f32", "sum", "max", 1), (c0, c2)
# c2's send before each of its all-reduces takes a sequence of its own
assert [r["coll_seq"] for r in ar if r["comm"] == c2["comm"]] == [0, 1, 2, 3]
kinds = {r["name"]: r for r in ex}
assert kinds["ncclBroadcast"]["root"] == 0 and kinds["ncclReduceScatter"]["count"] == 8
assert kinds["ncclSend"]["type"] == "send" and kinds["ncclRecv"]["root"] == 1, kinds["ncclSend"]
p2p = [r for r in ex if r["type"] in ("send", "recv")]
assert len(p2p) == 12 and not {r["comm"] for r in p2p} & {c0["comm"], c2["comm"]}, p2p[:3]
assert [r["coll_seq"] for r in p2p if r["nranks"] == 1] == [0, 1, 2, 3], p2p
# result statistics (device tensors) as outputs of the collective's op,
# the ones of the group included (launched after ncclGroupEnd)
coll_ops = {o["seq"]: o["name"] for n in ("ncclAllReduce", "ncclBroadcast", "ncclReduceScatter", "ncclRecv")
            for o in ops[n]}
res = [t for t in ts.values() if t["name"].startswith("nccl")]
assert sorted({t["name"] for t in res}) == ["ncclAllReduce", "ncclBroadcast", "ncclRecv", "ncclReduceScatter"], res
assert len([t for t in res if t["name"] == "ncclAllReduce"]) == 12
for t in res:
    assert coll_ops.get(t["seq"]) == t["name"] and t["shape"] == [8] and t["mode"] == "full", t
m = [t for t in res if t["name"] == "ncclAllReduce" and t["step"] == 0]
assert m[0]["stats"]["max"] == 2 * 4 and m[2]["stats"]["max"] == 4, m  # sum of 2 ranks, max of 1
print("fake: %d gemm ops, %d collectives, %d device tensors" %
      (sum(len(v) for k, v in ops.items() if k.startswith("cublas") and "." not in k), len(ex), len(ts)))
PY
    traced b "$prog" --plant 2 >/dev/null
    st=0; "$tfdiff" --json "$tmp/g.trace" "$tmp/b.trace" >"$tmp/d.json" || st=$?
    [ "$st" = 1 ] || fail "tfdiff exit $st, want 1"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['first_divergence']; assert d['step']==2 and d['tensor'].startswith('cublasSgemm'), d; print('tfdiff:', d['tensor'], 'step', d['step'])" \
        "$tmp/d.json" || fail "tfdiff did not name the planted gemm: $(head -c 400 "$tmp/d.json")" ;;
  fake-noplugin)
    prog=$1
    unset FAKE_PLUGIN
    same_run g "$prog"
    [ "$(grep -c 'CUDA plugin not loaded' "$tmp/g.err1")" = 1 ] ||
        fail "want one 'plugin not loaded' line: $(cat "$tmp/g.err1")"
    ! grep -q 'plugin not loaded' "$tmp/g.err0" || fail "untraced run printed the plugin message"
    json_events -k tensor,op "$tmp/g.trace" >"$tmp/g.json"
    python3 - "$tmp/g.json" <<'PY'
import json, sys
recs = list(map(json.loads, open(sys.argv[1])))
ts = [r for r in recs if r["kind"] == "tensor"]
assert len(ts) == 4 * 12 and all(t["mode"] == "shape" for t in ts), ts[:3]
assert not [t for t in ts if t["name"].startswith("nccl")], "result tensors without a plugin"
assert len([r for r in recs if r["kind"] == "op" and r["name"] == "cublasSgemm"]) == 4
print("no plugin: shapes only,", len(ts), "tensors")
PY
    ;;
  fake-realplugin)
    prog=$1
    export FAKE_PLUGIN=$plugin
    same_run g "$prog"
    n=$(grep -c '^tftrace:' "$tmp/g.err1" || true)
    [ "$n" -le 1 ] || fail "$n tftrace lines on stderr: $(cat "$tmp/g.err1")"
    cat "$tmp/g.err1"
    json_events -k tensor "$tmp/g.trace" >"$tmp/g.json"
    python3 -c "
import json, sys
ts = list(map(json.loads, open(sys.argv[1])))
g = [t for t in ts if t['name'].startswith('cublas')]
assert len(g) == 4 * 12 and all(t['mode'] == 'shape' for t in ts), ts[:3]
print('real plugin without a device: shapes only')" "$tmp/g.json" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo "PASS $case_name"
