#!/bin/bash
# Interposer tests: unmodified programs run under tftrace; what the trace
# must show. Usage: run_interpose_test.sh CASE TFTRACE TFDUMP TFDIFF PROG
# tfdiff aligns tensors by step and skips step-less records, and these
# programs have no steps: the gemm cases compare fingerprints through
# tfdump --events --json instead (tfdiff reports "match", compared 0).
set -euo pipefail
case_name=$1 tftrace=$2 tfdump=$3 tfdiff=$4 prog=$5
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-interpose.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# diverge GOLDEN BAD OUT PLANT: the first output of OUT (op name) whose
# fingerprint differs must be occurrence PLANT; at least MIN outputs.
diverge() {
    "$tfdump" --events --json -k tensor "$1" >"$tmp/g.json"
    "$tfdump" --events --json -k tensor "$2" >"$tmp/b.json"
    python3 - "$tmp/g.json" "$tmp/b.json" "$3" "$4" "$5" <<'PY'
import json, sys
g, b, name, plant, least = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
def outs(p):
    return [r for r in map(json.loads, open(p)) if r["name"] == name]
go, bo = outs(g), outs(b)
assert len(go) >= least and len(go) == len(bo), (len(go), len(bo), least)
diff = [i for i, (x, y) in enumerate(zip(go, bo)) if x["stats"]["fingerprint"] != y["stats"]["fingerprint"]]
assert diff and diff[0] == plant, ("first differing output", diff, "wanted", plant)
assert go[plant]["seq"] == bo[plant]["seq"], (go[plant], bo[plant])
print("first divergence:", name, "call", plant, "seq", bo[plant]["seq"])
PY
}

case $case_name in
  gemm)
    want=$("$prog")
    "$tftrace" -q -o "$tmp/g.trace" -- "$prog" >"$tmp/out"
    [ "$(cat "$tmp/out")" = "$want" ] || fail "results changed under tftrace: $(cat "$tmp/out") vs $want"
    "$tftrace" -q -o "$tmp/b.trace" -- "$prog" --plant 5 >/dev/null
    diverge "$tmp/g.trace" "$tmp/b.trace" cblas_sgemm 5 8
    # tfdiff on step-less traces: ops aligned by seq; the planted call's output
    st=0; "$tfdiff" --json "$tmp/g.trace" "$tmp/b.trace" >"$tmp/d.json" || st=$?
    [ "$st" = 1 ] || fail "tfdiff exit $st on the planted gemm, want 1"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); d=r['first_divergence']; assert d and d['tensor'] in ('cblas_sgemm','cblas_sgemm.A','cblas_sgemm.B') and d['step'] is None and 'window' in d, d" "$tmp/d.json" \
      || fail "tfdiff did not name the planted gemm: $(head -c 400 "$tmp/d.json")"
    st=0; "$tfdiff" "$tmp/g.trace" "$tmp/g.trace" >/dev/null || st=$?
    [ "$st" = 0 ] || fail "tfdiff of a step-less trace with itself: exit $st"
    "$tfdump" --events --json "$tmp/g.trace" >"$tmp/all.json"
    python3 - "$tmp/all.json" <<'PY'
import json, sys
recs = list(map(json.loads, open(sys.argv[1])))
ops = [r for r in recs if r["kind"] == "op" and r["name"] == "cblas_sgemm"]
assert len(ops) == 8 and all(o["op_kind"] == "gemm" and len(o["inputs"]) == 2 for o in ops), ops
ts = {r["id"]: r for r in recs if r["kind"] == "tensor"}
for o in ops:
    a, b = ts[o["inputs"][0]], ts[o["inputs"][1]]
    assert a["name"] == "cblas_sgemm.A" and b["name"] == "cblas_sgemm.B", (a, b)
cs = [r for r in recs if r["kind"] == "tensor" and r["name"] == "cblas_sgemm"]
# C is 5 x 4 in both layouts; ldc = 6 padding (-99) is not in the statistics
assert all(c["shape"] == [5, 4] and c["stats"]["numel"] == 20 and c["stats"]["min"] > -99 for c in cs), cs
d = [r for r in recs if r["kind"] == "tensor" and r["name"] == "cblas_dgemm"]
assert len(d) == 1 and d[0]["dtype"] == "f64" and d[0]["stats"]["min"] == 19, d
PY
    # TFT_INTERPOSE=0: nothing recorded, same results
    TFT_INTERPOSE=0 "$tftrace" -q -o "$tmp/off.trace" -- "$prog" >"$tmp/out"
    [ "$(cat "$tmp/out")" = "$want" ] || fail "results changed with TFT_INTERPOSE=0"
    ! "$tfdump" --events "$tmp/off.trace" | grep -q cblas || fail "TFT_INTERPOSE=0 still records" ;;
  numpy)
    py=/usr/bin/python3
    [ -x $py ] && $py -c "import numpy" 2>/dev/null || { echo "SKIP: numpy missing for $py"; exit 0; }
    want=$($py "$here/np_train.py")
    "$tftrace" -q -o "$tmp/g.trace" -- $py "$here/np_train.py" >"$tmp/out"
    [ "$(cat "$tmp/out")" = "$want" ] || fail "numpy results changed under tftrace"
    "$tftrace" -q -o "$tmp/b.trace" -- $py "$here/np_train.py" --plant 3 >/dev/null
    diverge "$tmp/g.trace" "$tmp/b.trace" cblas_sgemm 3 6 ;;
  mpi-count|mpi-skip)
    command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 0; }
    mode=${case_name#mpi-} kind=count rank=2 extra=(--timeout 10)
    [ "$mode" = skip ] && kind=missing rank=3 extra=(--timeout 10)
    mpirun --allow-run-as-root --oversubscribe -np 4 "$tftrace" -q "${extra[@]}" -o "$tmp/ok.trace" \
        -- "$prog" ok >"$tmp/out"
    grep -qx "result 10 4 28.000" "$tmp/out" || fail "MPI results changed under tftrace: $(cat "$tmp/out")"
    "$tfdump" --check --json "$tmp/ok.trace" >"$tmp/ok.json"
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['desync']==[], j" "$tmp/ok.json"
    "$tfdump" --events -k collective "$tmp/ok.trace" >"$tmp/ev"
    for n in MPI_Reduce MPI_Allgather MPI_Allreduce MPI_Bcast MPI_Barrier; do
        grep -q " collective $n " "$tmp/ev" || fail "no $n record"
    done
    grep -q "MPI_Allreduce allreduce enter .* count=8 f32 sum rank=2/4" "$tmp/ev" || fail "allreduce fields"
    mpirun --allow-run-as-root --oversubscribe -np 4 "$tftrace" -q "${extra[@]}" -o "$tmp/bad.trace" \
        -- "$prog" "$mode" >/dev/null 2>&1 || true
    "$tfdump" --check --json "$tmp/bad.trace" >"$tmp/bad.json" || true
    python3 - "$tmp/bad.json" "$kind" "$rank" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
d = [x for x in j["desync"] if x["kind"] == sys.argv[2]]
assert d and d[0]["ranks"] == [int(sys.argv[3])] and "MPI_Allreduce" in d[0]["detail"], j
print("desync:", d[0]["detail"])
PY
    ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo "PASS $case_name"
