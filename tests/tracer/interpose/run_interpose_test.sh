#!/bin/bash
# Interposer tests: unmodified programs run under tftrace; what the trace
# must show. Usage: run_interpose_test.sh CASE TFTRACE TFDUMP TFDIFF PROG
# These programs have no steps: tfdiff aligns their ops by seq in windows;
# the gemm cases also compare fingerprints through tfdump --events --json.
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

# expect_desync JSON KIND RANK NAME: the first desync of KIND (tfdump
# --check --json) names exactly RANK and the call NAME.
expect_desync() {
    python3 - "$@" <<'PY' || fail "wanted a $2 desync naming rank $3 and $4: $(head -c 600 "$1")"
import json, sys
j = json.load(open(sys.argv[1]))
d = [x for x in j["desync"] if x["kind"] == sys.argv[2]]
assert d and d[0]["ranks"] == [int(sys.argv[3])] and sys.argv[4] + " " in d[0]["detail"] + " ", j
print("desync:", d[0]["detail"])
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
    # its text says "no step (window N)", never the window's internal step number
    "$tfdiff" "$tmp/g.trace" "$tmp/b.trace" >"$tmp/d.txt" || true
    grep -q "^first divergence: rank 0, no step (window 0), seq " "$tmp/d.txt" && ! grep -q -- "-10995116" "$tmp/d.txt" \
      || fail "tfdiff text of a step-less trace: $(cat "$tmp/d.txt")"
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
    # (nothing recorded at all: no rank file; or one without gemm records)
    if ls "$tmp/off.trace"/rank-*.tft >/dev/null 2>&1; then
        "$tfdump" --events "$tmp/off.trace" >"$tmp/off.ev"
        ! grep -q cblas "$tmp/off.ev" || fail "TFT_INTERPOSE=0 still records"
    fi ;;
  gemm-sites)
    # PROG is "gemm_sites LIBRARY": BLAS reached through a dlopen(RTLD_LOCAL)
    # library, from two call sites. The interposers' fast path (string ids
    # cached per site, the statistics memo) must write what the tft.h path
    # writes, record for record but the time stamps: a capture spec that
    # never arms (rank=999999) sends every call down the tft.h path.
    read -r exe lib <<<"$prog"
    want=$("$exe" "$lib")
    for stats in shape full; do
        for path in fast slow; do
            extra=(); [ $path = slow ] && extra=(--capture rank=999999)
            "$tftrace" -q --stats $stats "${extra[@]}" -o "$tmp/$stats-$path.trace" -- "$exe" "$lib" >"$tmp/out"
            [ "$(cat "$tmp/out")" = "$want" ] || fail "results changed under tftrace ($stats, $path): $(cat "$tmp/out") vs $want"
            "$tfdump" --events --json -k op,tensor "$tmp/$stats-$path.trace" >"$tmp/$stats-$path.json"
        done
        python3 - "$tmp/$stats-fast.json" "$tmp/$stats-slow.json" $stats <<'PY' || fail "gemm-sites, --stats $stats"
import json, sys
def recs(p):
    out = []
    for r in map(json.loads, open(p)):
        r.pop("ts")
        out.append(r)
    return out
fast, slow, stats = recs(sys.argv[1]), recs(sys.argv[2]), sys.argv[3]
for i, (f, s) in enumerate(zip(fast, slow)):
    assert f == s, ("record %d differs between the fast path and tft.h's" % i, f, s)
assert len(fast) == len(slow), (len(fast), len(slow))
ops = [r for r in fast if r["kind"] == "op" and r["op_kind"] == "gemm"]
by = {}
for o in ops:
    by.setdefault(o["name"], []).append(o)
want = {"cblas_sgemm": 16, "cblas_dgemm": 1, "cblas_ssyrk": 3, "cblas_dsyrk": 3, "cblas_sgemv": 3, "cblas_dgemv": 3}
assert {k: len(v) for k, v in by.items()} == want, {k: len(v) for k, v in by.items()}
# the two call sites of cblas_sgemm: their own arguments (lda 4 row-major; column-major, transposed)
one, two = by["cblas_sgemm"][0::2], by["cblas_sgemm"][1::2]
assert all(o["attrs"][:10] == [5, 4, 3, 0, 0, 0, 0, 4, 4, 6] for o in one), one[0]
assert all(o["attrs"][:10] == [5, 4, 3, 1, 1, 0, 1, 3, 4, 5] for o in two), two[0]
ts = {r["id"]: r for r in fast if r["kind"] == "tensor"}
outs = [r for r in fast if r["kind"] == "tensor" and r["name"] == "cblas_sgemm"]
# C as stored: M x N row-major at site one, [N, M] for site two's column-major
assert [t["shape"] for t in outs] == [[5, 4], [4, 5]] * 8 and all(t["stats"]["numel"] == 20 for t in outs), outs[:2]
assert [t["shape"] for t in fast if t["kind"] == "tensor" and t["name"] == "cblas_dsyrk"] == [[40, 40]] * 3
if stats == "shape":
    assert all(o["inputs"] == [] for o in ops) and len(ts) == 29, (len(ts), ops[0])
    assert all(t["mode"] == "shape" and t["stats"] == {"numel": t["stats"]["numel"]} for t in ts.values())
else:
    assert all(len(o["inputs"]) == (1 if "syrk" in o["name"] else 2) for o in ops), ops[0]
    a1 = [ts[o["inputs"][0]] for o in one]
    assert all(a["name"] == "cblas_sgemm.A" and a["shape"] == [5, 3] for a in a1), a1[0]
    # site one's A changes in place before calls 3 and 5, site two's before calls 0-2
    fp = [a["stats"]["fingerprint"] for a in a1]
    assert fp[0] == fp[1] == fp[2] != fp[3] == fp[4] != fp[5] == fp[6] == fp[7], fp
    fp2 = [ts[o["inputs"][0]]["stats"]["fingerprint"] for o in two]
    assert len(set(fp2[:3])) == 3 and fp2[2] == fp2[3] == fp2[7], fp2
    x = [ts[o["inputs"][1]] for o in by["cblas_sgemv"]]
    assert all(t["name"] == "cblas_sgemv.x" and t["shape"] == [4] for t in x), x[0]
print("gemm-sites, --stats %s: %d records, fast path == tft.h path" % (stats, len(fast)))
PY
    done ;;
  numpy|numpy-pypi)
    # numpy: Debian's (python3-numpy, OpenBLAS's cblas_sgemm); numpy-pypi:
    # PROG is a venv's python whose numpy is PyPI's wheel, with its bundled
    # ILP64 OpenBLAS (scipy_cblas_sgemm64_ or cblas_sgemm64_)
    py=/usr/bin/python3
    [ "$case_name" = numpy-pypi ] && py=$prog
    [ -x $py ] && $py -c "import numpy" 2>/dev/null || { echo "SKIP: numpy missing for $py"; exit 0; }
    if [ "$case_name" = numpy-pypi ]; then
        blas=$($py -c "import numpy, os, glob; print(' '.join(sorted(glob.glob(os.path.join(os.path.dirname(numpy.__file__) + '.libs', '*openblas*')))))")
        case $blas in *openblas64*) ;; *) fail "$py's numpy bundles no ILP64 OpenBLAS (not PyPI's wheel?): '$blas'" ;; esac
    fi
    want=$($py "$here/np_train.py")
    "$tftrace" -q -o "$tmp/g.trace" -- $py "$here/np_train.py" >"$tmp/out"
    [ "$(cat "$tmp/out")" = "$want" ] || fail "numpy results changed under tftrace"
    "$tftrace" -q -o "$tmp/b.trace" -- $py "$here/np_train.py" --plant 3 >/dev/null
    diverge "$tmp/g.trace" "$tmp/b.trace" cblas_sgemm 3 6
    # the symmetric product (syrk: one triangle, the other recorded as
    # zeros) and the matrix-vector product (gemv), against numpy's own sums
    "$tfdump" --events --json -k tensor "$tmp/g.trace" >"$tmp/t.json"
    python3 - "$tmp/t.json" "$tmp/out" <<'PY'
import json, sys
ts = {r["name"]: r for r in map(json.loads, open(sys.argv[1]))}
want = dict(l.split() for l in open(sys.argv[2]) if l.startswith(("syrk", "gemv", "dgemm", "dsyrk", "dgemv")))
for f in ("sgemm", "ssyrk", "sgemv", "dgemm", "dsyrk", "dgemv"):
    assert "cblas_" + f in ts, ("not recorded", f, sorted(ts))
for f, key, n in (("dgemm", "dgemm_sum", 16 * 32), ("dsyrk", "dsyrk_triangle_sum", 256), ("dgemv", "dgemv_sum", 32)):
    got = ts["cblas_" + f]["stats"]["mean"] * n
    assert ts["cblas_" + f]["dtype"] == "f64", ts["cblas_" + f]
    assert abs(got - float(want[key])) <= 1e-6 * max(1.0, abs(got)), (f, got, want)
s, v = ts["cblas_ssyrk"], ts["cblas_sgemv"]
assert s["shape"] == [16, 16] and s["stats"]["zero"] >= 120, s
assert ts["cblas_ssyrk.A"]["shape"] == [16, 32] and ts["cblas_sgemv.x"]["shape"] == [32], ts.keys()
tri = s["stats"]["mean"] * 256
assert abs(tri - float(want["syrk_triangle_sum"])) <= 1e-3 * abs(tri), (tri, want)
gv = v["stats"]["mean"] * 32
assert v["shape"] == [32] and abs(gv - float(want["gemv_sum"])) <= 1e-3 * abs(gv), (gv, want)
print("syrk and gemv recorded:", round(tri, 3), round(gv, 3))
PY
    ;;
  mpi-*)
    command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 0; }
    mode=${case_name#mpi-}
    # each rank's tftrace ends its own command at --timeout; Open MPI must not
    # kill the other tftrace processes when the first exits non-zero (a
    # collector killed before it closes its rank file can lose its last chunk)
    # (yield_when_idle: ranks blocked in the planted hang give their core
    # away instead of spinning on it while the other tests run beside them)
    mpi4() { OMPI_MCA_orte_abort_on_non_zero_status=0 OMPI_MCA_mpi_yield_when_idle=1 \
             mpirun --allow-run-as-root --oversubscribe -np 4 "$tftrace" -q --timeout 10 -o "$@"; }
    if [ "$mode" = ok ]; then
        mpi4 "$tmp/ok.trace" -- "$prog" ok >"$tmp/out"
        [ "$(cat "$tmp/out")" = "$(printf 'result 10 4 28.000\npart2 12576.000')" ] \
            || fail "MPI results changed under tftrace: $(cat "$tmp/out")"
        st=0; "$tfdump" --check --json "$tmp/ok.trace" >"$tmp/ok.json" || st=$?
        python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['desync']==[], j" "$tmp/ok.json" \
            || fail "false desync on a correct program (exit $st): $(cat "$tmp/ok.json")"
        "$tfdump" --events -k collective "$tmp/ok.trace" >"$tmp/ev"
        grep -q "MPI_Allreduce allreduce enter .* count=8 f32 sum rank=2/4" "$tmp/ev" || fail "allreduce fields"
        "$tfdump" --events --json "$tmp/ok.trace" >"$tmp/all.json"
        python3 "$here/check_mpi_trace.py" c "$tmp/all.json" || fail "MPI records of the ok run"
    else
        kind=count rank=2 name=MPI_Allreduce
        case $mode in
          skip) kind=missing rank=3 ;;
          alltoall) rank=1 name=MPI_Alltoall ;;
          redscat) kind=op rank=0 name=MPI_Reduce_scatter_block ;;
          nbskip) kind=missing rank=3 name=MPI_Iallreduce ;;
          nbmix) kind=type rank=2 ;;
        esac
        mpi4 "$tmp/bad.trace" -- "$prog" "$mode" >/dev/null 2>&1 || true
        "$tfdump" --check --json "$tmp/bad.trace" >"$tmp/bad.json" || true
        expect_desync "$tmp/bad.json" "$kind" "$rank" "$name"
    fi ;;
  mpi4py-*)
    py=/usr/bin/python3
    command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 0; }
    $py -c "import mpi4py, numpy" 2>/dev/null || { echo "SKIP: mpi4py or numpy missing for $py"; exit 0; }
    mode=${case_name#mpi4py-}
    mpi4() { OMPI_MCA_orte_abort_on_non_zero_status=0 OMPI_MCA_mpi_yield_when_idle=1 \
             mpirun --allow-run-as-root --oversubscribe -np 4 "$tftrace" -q --timeout 10 -o "$@"; }
    if [ "$mode" = ok ]; then
        mpi4 "$tmp/ok.trace" -- $py "$here/mpi4py_prog.py" ok >"$tmp/out"
        [ "$(cat "$tmp/out")" = "result 832.000 144.000 10 18" ] \
            || fail "mpi4py results changed under tftrace: $(cat "$tmp/out")"
        st=0; "$tfdump" --check --json "$tmp/ok.trace" >"$tmp/ok.json" || st=$?
        python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['desync']==[], j" "$tmp/ok.json" \
            || fail "false desync on a correct mpi4py program (exit $st): $(cat "$tmp/ok.json")"
        "$tfdump" --events --json "$tmp/ok.trace" >"$tmp/all.json"
        python3 "$here/check_mpi_trace.py" py "$tmp/all.json" || fail "MPI records of the mpi4py ok run"
    else
        kind=count rank=2
        [ "$mode" = skip ] && kind=missing rank=3
        mpi4 "$tmp/bad.trace" -- $py "$here/mpi4py_prog.py" "$mode" >/dev/null 2>&1 || true
        "$tfdump" --check --json "$tmp/bad.trace" >"$tmp/bad.json" || true
        expect_desync "$tmp/bad.json" "$kind" "$rank" MPI_Allreduce
    fi ;;
  alloc)
    # host allocations (interpose_alloc.c): leak_prog leaks 4 MiB per
    # iteration in grow_kv_cache; --no-leak does not
    want=$("$prog"); want_nl=$("$prog" --no-leak)
    case $want in *"errno 33 12 12 12 null 1 1 1") ;; *) fail "leak_prog untraced: $want" ;; esac
    "$tftrace" -q -o "$tmp/bad.trace" -- "$prog" >"$tmp/out"
    [ "$(cat "$tmp/out")" = "$want" ] || fail "results changed under tftrace: $(cat "$tmp/out") vs $want"
    "$tftrace" -q -o "$tmp/good.trace" -- "$prog" --no-leak >"$tmp/out"
    [ "$(cat "$tmp/out")" = "$want_nl" ] || fail "--no-leak results changed: $(cat "$tmp/out") vs $want_nl"
    if ldd "$prog" | grep -E 'lib[at]san' >/dev/null; then
        echo "SKIP: sanitizer build: its malloc precedes the interposers (outputs checked, nothing to record)"
        exit 0
    fi
    # tfdump --check: one leak, grow_kv_cache, 4 MiB per iteration (+-2 %)
    st=0; "$tfdump" --check --json "$tmp/bad.trace" >"$tmp/bad.json" || st=$?
    [ "$st" = 1 ] || fail "tfdump --check exit $st on the leaking run, want 1: $(cat "$tmp/bad.json")"
    st=0; "$tfdump" --check --json "$tmp/good.trace" >"$tmp/good.json" || st=$?
    [ "$st" = 0 ] || fail "tfdump --check exit $st on the run without a leak: $(cat "$tmp/good.json")"
    st=0; "$tfdiff" --json "$tmp/good.trace" "$tmp/bad.trace" >"$tmp/diff.json" || st=$?
    [ "$st" = 1 ] || fail "tfdiff exit $st, want 1 (the leak)"
    st=0; "$tfdiff" --json "$tmp/bad.trace" "$tmp/bad.trace" >"$tmp/same.json" || st=$?
    [ "$st" = 0 ] || fail "tfdiff of the leaking trace with itself: exit $st (GOLDEN has the leak too)"
    "$tfdump" --check "$tmp/bad.trace" >"$tmp/bad.txt" || true
    grep -q "leak: rank 0, grow_kv_cache: +4194304 bytes per allocation over 12 allocations" "$tmp/bad.txt" \
        || fail "text report: $(cat "$tmp/bad.txt")"
    python3 - "$tmp/bad.json" "$tmp/good.json" "$tmp/diff.json" <<'PY' || fail "leak reports"
import json, sys
bad, good, diff = (json.load(open(p)) for p in sys.argv[1:4])
MiB = 1 << 20
for name, j in (("tfdump --check", bad), ("tfdiff", diff)):
    l = j["leaks"]
    assert len(l) == 1, (name, "want exactly the kv leak (not load_weights)", l)
    l = l[0]
    assert l["site"] == "grow_kv_cache" and l["rank"] == 0, (name, l)
    assert abs(l["bytes_per_step"] - 4 * MiB) <= 0.02 * 4 * MiB, (name, "bytes per iteration", l)
    assert l["per"] == "allocation" and l["from_step"] is None and l["iterations"] == 12, (name, l)
    assert l["live_bytes_at_end"] == 48 * MiB, (name, l)
assert good["leaks"] == [], good
print("leak:", bad["leaks"][0])
PY
    # the records: sites by name, every block but the kept ones freed
    "$tfdump" --events --json -k alloc,free "$tmp/bad.trace" >"$tmp/ev.json"
    python3 - "$tmp/ev.json" <<'PY' || fail "alloc/free records"
import json, sys, collections
MiB = 1 << 20
# threads' records interleave in drain order: replay them in time order
recs = sorted(map(json.loads, open(sys.argv[1])), key=lambda r: (r["rank"], r["ts"]))
live, sizes = {}, collections.Counter()
for r in recs:
    key = (r["rank"], r["ptr"])
    if r["kind"] == "alloc":
        assert key not in live, ("allocated twice without a free", r)
        live[key] = r
        sizes[(r["site"], r["bytes"])] += 1
    else:
        assert key in live, ("free of an unrecorded block", r)
        del live[key]
want = {("grow_kv_cache", 4 * MiB): 12, ("load_weights", 2 * MiB): 3, ("scratch_pass", 3 * MiB): 12,
        ("scratch_pass", 6 * MiB): 12, ("scratch_pass", MiB): 24, ("map_buffer", 2 * MiB): 12,
        ("map_buffer", 3 * MiB): 24, ("map_buffer", 4 * MiB): 12, ("worker_churn", 3 * MiB // 2): 200,
        ("fork_child", 2 * MiB): 1, ("odd_calls", 16 * MiB): 1, ("odd_calls", 3 * MiB): 1,
        ("odd_calls", 2 * MiB): 3}
assert dict(sizes) == want, ("recorded (site, bytes)", dict(sizes))
left = collections.Counter(r["site"] for r in live.values())
assert left == {"grow_kv_cache": 12, "load_weights": 3}, ("alive at exit", left)
fk = [r for r in recs if r["kind"] == "alloc" and r["site"] == "fork_child"]
assert len(fk) == 1 and fk[0]["rank"] != 0, ("the forked child is a rank of its own", fk)
print("records ok:", sum(want.values()), "allocations")
PY
    # TFT_ALLOC_MIN: 5M keeps only the 6 MiB realloc and odd_calls' 16 MiB;
    # 200K adds the 256 KiB block; off records nothing
    TFT_ALLOC_MIN=5M "$tftrace" -q -o "$tmp/m5.trace" -- "$prog" >/dev/null
    "$tfdump" --events --json -k alloc "$tmp/m5.trace" >"$tmp/m5.json"
    python3 -c "import json,sys,collections
c = collections.Counter((r['site'], r['bytes']) for r in map(json.loads, open(sys.argv[1])))
assert c == {('scratch_pass', 6 << 20): 12, ('odd_calls', 16 << 20): 1}, dict(c)" "$tmp/m5.json" \
        || fail "TFT_ALLOC_MIN=5M"
    TFT_ALLOC_MIN=200K "$tftrace" -q -o "$tmp/m200.trace" -- "$prog" >/dev/null
    m=$("$tfdump" --events -k alloc "$tmp/m200.trace" | grep -c "bytes=262144 site=scratch_pass" || true)
    [ "$m" = 12 ] || fail "TFT_ALLOC_MIN=200K: $m 256 KiB blocks recorded, want 12"
    TFT_ALLOC_MIN=off "$tftrace" -q -o "$tmp/off.trace" -- "$prog" >"$tmp/out"
    [ "$(cat "$tmp/out")" = "$want" ] || fail "results changed with TFT_ALLOC_MIN=off"
    "$tfdump" --events "$tmp/off.trace" >"$tmp/off.txt" 2>/dev/null || true
    ! grep -q " alloc " "$tmp/off.txt" || fail "TFT_ALLOC_MIN=off still records" ;;
  alloc-python)
    # python3 (threads, its own allocators, mmap'd arenas) under the
    # allocation interposers: same output, its big blocks recorded
    py=/usr/bin/python3
    [ -x $py ] || { echo "SKIP: no $py"; exit 0; }
    cat >"$tmp/big.py" <<'PY'
import threading
keep = []
def work(k):
    for i in range(20):
        b = bytearray((2 << 20) + k)  # 2 MiB + k, freed at once
        b[-1] = 1
def grow_cache(i):
    keep.append(bytearray(8 << 20))   # kept: 8 MiB per call
ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in ts:
    t.start()
for i in range(10):
    grow_cache(i)
for t in ts:
    t.join()
print(len(keep), sum(len(b) for b in keep), sum(b[0] for b in keep))
PY
    want=$($py "$tmp/big.py")
    "$tftrace" -q -o "$tmp/py.trace" -- $py "$tmp/big.py" >"$tmp/out"
    [ "$(cat "$tmp/out")" = "$want" ] || fail "python results changed under tftrace: $(cat "$tmp/out") vs $want"
    [ "$want" = "10 83886080 0" ] || fail "python output $want"
    if ldd "$tftrace" | grep -E 'lib[at]san' >/dev/null; then
        echo "SKIP: sanitizer build: its malloc precedes the interposers (outputs checked, nothing to record)"
        exit 0
    fi
    "$tfdump" --events --json -k alloc,free "$tmp/py.trace" >"$tmp/ev.json"
    python3 - "$tmp/ev.json" <<'PY' || fail "python alloc/free records"
import json, sys, collections
recs = sorted(map(json.loads, open(sys.argv[1])), key=lambda r: r["ts"])
live, n = {}, collections.Counter()
for r in recs:
    if r["kind"] == "alloc":
        live[r["ptr"]] = r["bytes"]
        n[r["bytes"]] += 1
    else:
        live.pop(r["ptr"], None)
# bytearray(n) asks for n + 1 bytes
assert n[(8 << 20) + 1] == 10, n
for k in range(4):
    assert n[(2 << 20) + k + 1] == 20, (k, n)
assert all(b != (2 << 20) + k + 1 for b in live.values() for k in range(4)), "a freed bytearray is alive"
print("python records ok:", sum(n.values()), "allocations")
PY
    # a short script that keeps nothing: python's start-up arenas (1 MiB
    # mmaps in a burst, alive to the end) are not a leak
    "$tftrace" -q -o "$tmp/short.trace" -- $py -c "x = bytearray(5 << 20); print(len(x))" >"$tmp/out"
    [ "$(cat "$tmp/out")" = 5242880 ] || fail "short python run: $(cat "$tmp/out")"
    "$tfdump" --events -k alloc "$tmp/short.trace" >"$tmp/short.ev"
    grep -q "bytes=5242881 " "$tmp/short.ev" || fail "the 5 MiB bytearray was not recorded: $(cat "$tmp/short.ev")"
    st=0; "$tfdump" --check --json "$tmp/short.trace" >"$tmp/short.json" || st=$?
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['leaks'] == [], j" "$tmp/short.json" \
        || fail "false leak in a short python run (exit $st): $(cat "$tmp/short.json")"
    ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo "PASS $case_name"
