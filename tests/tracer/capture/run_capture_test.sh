#!/bin/bash
# Capture tests: whole tensors stored by tftrace --capture, read back by
# tfdump --captures / --tensor (.npy, loaded with numpy) / --replay-op.
# Usage: run_capture_test.sh CASE TFTRACE TFDUMP CAP_PROG CAP_MK GEMM|REC_PROG FAULTY TFTRAIN
set -euo pipefail
case_name=$1 tftrace=$2 tfdump=$3 prog=$4 mk=$5 gemm=$6 faulty=$7 tftrain=$8
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-capture.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
py=/usr/bin/python3
have_numpy() { [ -x $py ] && $py -c "import numpy" 2>/dev/null; }
# expect_rc WANT CMD...: runs CMD, output in $tmp/out (stdout) and $tmp/err
expect_rc() {
    local want=$1 st=0
    shift
    "$@" >"$tmp/out" 2>"$tmp/err" || st=$?
    [ "$st" = "$want" ] || fail "exit $st, want $want: $* :: $(head -c 600 "$tmp/err") $(head -c 600 "$tmp/out")"
}
# captures TRACE: the captures as JSON lines in $tmp/caps.json
captures() { "$tfdump" --captures --json "$1" >"$tmp/caps.json"; }

case $case_name in
  npy)
    # every dtype round-trips to .npy exactly: bytes, dtype and shape
    mkdir "$tmp/exp"
    "$tftrace" -q -o "$tmp/t.trace" --capture 'step=1' -- "$prog" "$tmp/exp" >"$tmp/prog.out"
    grep -q "cap_prog done" "$tmp/prog.out" || fail "the program did not finish under capture"
    names=$(python3 -c "import json,sys; print(' '.join(json.load(open(sys.argv[1]))))" "$tmp/exp/expected.json")
    for n in $names; do
        "$tfdump" --tensor "$n@1" --out "$tmp/exp/$n.npy" "$tmp/t.trace" >"$tmp/exp/$n.txt" \
            || fail "tfdump --tensor $n@1 failed"
        grep -q "complete" "$tmp/exp/$n.txt" || fail "$n: $(cat "$tmp/exp/$n.txt")"
    done
    # bf16 as its raw bits too
    "$tfdump" --tensor t_bf16@1 --raw --out "$tmp/exp/t_bf16_raw.npy" "$tmp/t.trace" >/dev/null
    # the recorded fingerprint and the captured bytes agree
    grep -q "= the recorded tensor's" "$tmp/exp/t_f32.txt" || fail "t_f32 fingerprint: $(cat "$tmp/exp/t_f32.txt")"
    have_numpy || { echo "SKIP: numpy missing for $py (the .npy files were written, not loaded)"; exit 0; }
    $py - "$tmp/exp" <<'PY'
import json, sys, numpy as np
d = sys.argv[1]
exp = json.load(open(d + "/expected.json"))
assert len(exp) == 12, sorted(exp)
for name, e in exp.items():
    raw = open(f"{d}/{name}.bin", "rb").read()
    a = np.load(f"{d}/{name}.npy", allow_pickle=False)
    want_descr = "<f4" if name == "t_bf16" else e["descr"]
    assert a.dtype.str == want_descr, (name, a.dtype.str, want_descr)
    assert list(a.shape) == e["shape"], (name, a.shape, e["shape"])
    assert a.flags["C_CONTIGUOUS"], name
    if name == "t_bf16":  # converted exactly: the f32 with the bf16 bits on top
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        assert a.view("<u4").tobytes() == bits.astype("<u4").tobytes(), (a, bits)
        r = np.load(f"{d}/t_bf16_raw.npy")
        assert r.dtype.str == "<u2" and r.tobytes() == raw, r
    else:
        assert a.tobytes() == raw, (name, a.tobytes()[:32], raw[:32])
f32 = np.load(d + "/t_f32.npy")
assert np.isnan(f32[0, 0, 0]) and f32.view("<u4")[0, 0, 0] == 0x7fc01234, hex(f32.view("<u4")[0, 0, 0])
assert np.signbit(f32[0, 0, 1]) and f32[0, 0, 2] == np.inf, f32[0, 0, :4]
assert np.load(d + "/scalar.npy").shape == () and float(np.load(d + "/scalar.npy")) == 3.5
print("round trip ok:", ", ".join(sorted(exp)))
PY
    ;;
  select)
    # exactly the matching ops' outputs and inputs, nothing else
    "$tftrace" -q -o "$tmp/t.trace" --capture 'step=1' -- "$prog" >/dev/null
    captures "$tmp/t.trace"
    python3 - "$tmp/caps.json" <<'PY'
import json, sys
caps = [json.loads(l) for l in open(sys.argv[1])]
outs = sorted(c["name"] for c in caps if c["role"] == "output")
ins = sorted(c["name"] for c in caps if c["role"] == "input")
want = sorted(["t_f32", "t_f64", "t_f16", "t_bf16", "t_i32", "t_i64", "t_u8", "t_bool", "scalar", "empty",
               "big", "sum_out", "other"])
assert outs == want, outs
assert ins == ["big", "t_f32"], ins  # the inputs of op "sum"
assert all(c["step"] == 1 and c["complete"] for c in caps), [c for c in caps if c["step"] != 1 or not c["complete"]]
s = [c for c in caps if c["op"] == "sum"]
assert len({c["seq"] for c in s}) == 1 and len(s) == 3, s
big = [c for c in caps if c["name"] == "big"]
assert all(c["bytes"] == 1200000 and c["parts"] == 19 for c in big), big
print("step=1:", len(caps), "captures")
PY
    # alternatives and name globs: the op "sum" of steps 0 and 2 (with its
    # inputs), t_i32 of every step; no other tensor
    "$tftrace" -q -o "$tmp/u.trace" --capture 'step=0:2,name=su*,step=0:2;name=t_i32;step=0,name=sum' -- "$prog" \
        >/dev/null 2>"$tmp/err" && fail "a repeated step term must be refused" || true
    grep -q "given twice" "$tmp/err" || fail "repeated term: $(cat "$tmp/err")"
    "$tftrace" -q -o "$tmp/u.trace" --capture ' name=su* , step=:0 ; name=t_i32; step=2:,name=sum' -- "$prog" \
        >/dev/null
    captures "$tmp/u.trace"
    python3 - "$tmp/caps.json" <<'PY'
import json, sys
caps = [json.loads(l) for l in open(sys.argv[1])]
got = sorted((c["step"], c["role"], c["name"]) for c in caps)
want = sorted([(s, "output", "t_i32") for s in (0, 1, 2)] +
              [(s, r, n) for s in (0, 2) for r, n in (("output", "sum_out"), ("input", "t_f32"), ("input", "big"))])
assert got == want, got
PY
    # the TENSOR records of captured outputs are flagged, the others not
    "$tfdump" --events --json -k tensor "$tmp/u.trace" >"$tmp/ev.json"
    python3 - "$tmp/ev.json" <<'PY'
import json, sys
ts = [json.loads(l) for l in open(sys.argv[1])]
flag = sorted((t["step"], t["name"]) for t in ts if t["has_data"])
assert flag == sorted([(s, "t_i32") for s in (0, 1, 2)] + [(0, "sum_out"), (2, "sum_out")]), flag
PY
    # seq selects one op: "other" of step 0 is op 12
    "$tftrace" -q -o "$tmp/q.trace" --capture 'seq=12' -- "$prog" >/dev/null
    captures "$tmp/q.trace"
    python3 -c "
import json,sys
c=[json.loads(l) for l in open(sys.argv[1])]
assert [(x['name'],x['seq'],x['step']) for x in c]==[('other',12,0)], c" "$tmp/caps.json" ;;
  nocapture)
    # without --capture: no CAPTURE records, no flags; the trace is small
    "$tftrace" -q -o "$tmp/n.trace" -- "$prog" >/dev/null
    "$tftrace" -q -o "$tmp/c.trace" --capture 'step=0:2' -- "$prog" >/dev/null
    "$tfdump" --json "$tmp/n.trace" >"$tmp/n.json"
    "$tfdump" --json "$tmp/c.trace" >"$tmp/c.json"
    python3 - "$tmp/n.json" "$tmp/c.json" <<'PY'
import json, sys
n, c = (json.load(open(p)) for p in sys.argv[1:3])
assert "capture" not in n["records_by_kind"], n["records_by_kind"]
assert c["records_by_kind"]["capture"] > 3 * 19, c["records_by_kind"]
# the records besides the captures are the same (THREAD records repeat at
# each chunk start and SYNC after collector passes: they follow the chunking
# and the timing, not the program)
skip = {"capture", "thread", "sync"}
rn = {k: v for k, v in n["records_by_kind"].items() if k not in skip}
rc = {k: v for k, v in c["records_by_kind"].items() if k not in skip}
assert rn == rc, (rn, rc)
# 3 x 1.2 MB of tensors recorded: statistics only is a few KB, captures megabytes
assert n["bytes"] < 40000 and c["bytes"] > 1000000, (n["bytes"], c["bytes"])
print("no capture:", n["bytes"], "bytes; capture of every op:", c["bytes"], "bytes")
PY
    captures "$tmp/n.trace"
    [ ! -s "$tmp/caps.json" ] || fail "captures listed in a trace without --capture"
    expect_rc 2 "$tfdump" --tensor big "$tmp/n.trace"
    grep -q "no captured tensors (record with tftrace --capture SPEC)" "$tmp/err" || fail "$(cat "$tmp/err")"
    "$tfdump" --events -k tensor "$tmp/n.trace" | grep captured >/dev/null && fail "tensor flagged without capture" || true ;;
  spec)
    # bad specs are refused before the command runs
    for s in '' 'stp=3' 'step=x' 'step=3:1' 'rank=-1' 'name=' ';name=a' 'step=1;' 'seq' 'step=1,step=2'; do
        expect_rc 2 "$tftrace" -q -o "$tmp/s.trace" --capture "$s" -- "$prog"
        grep -q "tftrace: --capture" "$tmp/err" || fail "spec '$s': $(cat "$tmp/err")"
        [ ! -s "$tmp/out" ] || fail "spec '$s': the command ran"
    done
    # first-divergence-of needs a readable GOLDEN (tests/e2e/replay: the rest)
    expect_rc 2 "$tftrace" -q -o "$tmp/s.trace" --capture 'first-divergence-of=g.trace' -- "$prog"
    grep -q "first-divergence-of: g.trace: cannot open" "$tmp/err" || fail "$(cat "$tmp/err")"
    [ ! -s "$tmp/out" ] || fail "first-divergence-of without GOLDEN: the command ran"
    TFT_CAPTURE='bogus=1' "$tftrace" -q -o "$tmp/s.trace" -- "$prog" >/dev/null 2>"$tmp/err" \
        && fail "a bad TFT_CAPTURE must be refused" || true
    grep -q "unknown key 'bogus'" "$tmp/err" || fail "$(cat "$tmp/err")"
    "$tftrace" --help | grep -- "--capture SPEC" >/dev/null || fail "--capture missing from --help"
    # the spec is kept in the manifest's options
    "$tftrace" -q -o "$tmp/m.trace" --capture 'name="x",step=1' -- "$prog" >/dev/null
    python3 -c "
import json,sys
m=json.load(open(sys.argv[1]+'/manifest.json'))
assert m['options']['capture']=='name=\"x\",step=1', m['options']
assert m['format_version']=='1.4', m['format_version']" "$tmp/m.trace"
    # tfdump usage errors
    expect_rc 2 "$tfdump" --out x.npy "$tmp/m.trace"
    expect_rc 2 "$tfdump" --replay-op -3 "$tmp/m.trace"
    expect_rc 2 "$tfdump" --replay-op 1 --tensor x "$tmp/m.trace"
    expect_rc 2 "$tfdump" --rtol nan --replay-op 1 "$tmp/m.trace" ;;
  damaged)
    "$mk" "$tmp"
    captures "$tmp/x.trace"
    python3 - "$tmp/caps.json" <<'PY'
import json, sys
c = {x["name"]: x for x in map(json.loads, open(sys.argv[1]))}
assert sorted(c) == ["gap", "good", "mixed", "twice"], sorted(c)
assert c["good"]["complete"] and c["good"]["parts"] == 10, c["good"]
assert not c["gap"]["complete"] and c["gap"]["present"] == 65000, c["gap"]
assert not c["mixed"]["complete"] and not c["twice"]["complete"], (c["mixed"], c["twice"])
PY
    "$tfdump" --captures "$tmp/x.trace" | grep "gap f32\[40000\].*INCOMPLETE (65000 of 160000 bytes)" >/dev/null \
        || fail "incomplete capture not shown: $("$tfdump" --captures "$tmp/x.trace")"
    expect_rc 0 "$tfdump" --tensor good --out "$tmp/good.npy" "$tmp/x.trace"
    python3 - "$tmp/good.npy" "$tmp/good.bin" <<'PY'
import sys
npy, raw = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
assert npy[:8] == b"\x93NUMPY\x01\x00", npy[:8]
hl = int.from_bytes(npy[8:10], "little")
assert (10 + hl) % 64 == 0 and npy[10 + hl - 1:10 + hl] == b"\n", hl
h = npy[10:10 + hl].decode()
assert "'descr': '<f4'" in h and "'shape': (3, 50000)" in h and "'fortran_order': False" in h, h
assert npy[10 + hl:] == raw, "data differs"
PY
    expect_rc 2 "$tfdump" --tensor gap --out "$tmp/gap.npy" "$tmp/x.trace"
    grep -q "incomplete (65000 of 160000 bytes captured" "$tmp/err" || fail "$(cat "$tmp/err")"
    [ ! -e "$tmp/gap.npy" ] || fail "an incomplete tensor was written"
    expect_rc 2 "$tfdump" --tensor nothere "$tmp/x.trace"
    grep -q "no captured tensor 'nothere'; captured (first 20 of 4)" "$tmp/err" || fail "$(cat "$tmp/err")"
    grep -q "  good@5 (id 11, output of op 1, rank 0)" "$tmp/err" || fail "$(cat "$tmp/err")"
    expect_rc 2 "$tfdump" --tensor good --out /nonexistent/dir/x.npy "$tmp/x.trace"
    grep -q "/nonexistent/dir/x.npy: cannot create" "$tmp/err" || fail "$(cat "$tmp/err")"
    expect_rc 2 "$tfdump" --replay-op 1 "$tmp/x.trace"
    grep -q "cannot be replayed" "$tmp/err" || fail "$(cat "$tmp/err")"
    expect_rc 2 "$tfdump" --replay-op 9 "$tmp/x.trace"
    grep -q "op 9 has no captured tensors" "$tmp/err" || fail "$(cat "$tmp/err")"
    expect_rc 2 "$tfdump" --tensor x "$tmp/none.trace"
    # flipped bytes in the middle of a capture trace: reported, not a crash
    "$tftrace" -q -o "$tmp/t.trace" --capture 'step=1' -- "$prog" >/dev/null
    f="$tmp/t.trace/rank-00000.tft"
    size=$(stat -c %s "$f")
    for off in $((size / 3)) $((size / 2)) $((size * 2 / 3)); do
        printf '\xff\x00\xff\x00' | dd of="$f" bs=1 seek=$off conv=notrunc status=none
    done
    st=0; "$tfdump" --captures "$tmp/t.trace" >"$tmp/out" 2>"$tmp/err" || st=$?
    [ "$st" = 0 ] || fail "--captures on a damaged trace: exit $st"
    grep -q "damaged\|checksum\|lost" "$tmp/err" || fail "damage not reported: $(head -c 400 "$tmp/err")"
    st=0; "$tfdump" --tensor big --out "$tmp/big.npy" "$tmp/t.trace" >/dev/null 2>&1 || st=$?
    [ "$st" = 0 ] || [ "$st" = 2 ] || fail "--tensor on a damaged trace: exit $st"
    # a trace cut short: what its intact chunks hold
    head -c $((size / 2)) "$f" >"$tmp/cut.tft"
    st=0; "$tfdump" --captures "$tmp/cut.tft" >/dev/null 2>&1 || st=$?
    [ "$st" = 0 ] || fail "--captures on a torn file: exit $st" ;;
  ring)
    # a 1.2 MB capture through a 128 KiB ring: the recorder waits for the
    # collector instead of dropping (drop mode, the default)
    "$tftrace" -q --ring-kb 128 -o "$tmp/r.trace" --capture 'step=1,name=big' -- "$prog" >/dev/null
    captures "$tmp/r.trace"
    python3 -c "
import json,sys
c=[json.loads(l) for l in open(sys.argv[1])]
assert len(c)==1 and c[0]['complete'] and c[0]['parts']==19, c" "$tmp/caps.json"
    "$tfdump" --json "$tmp/r.trace" | python3 -c "import json,sys; d=json.load(sys.stdin); assert d['dropped']==0, d['dropped']"
    # without the wait, parts are dropped, counted, and the capture is
    # shown incomplete (whether a part found room is up to the timing)
    TFT_CAPTURE_WAIT_MS=0 "$tftrace" -q --ring-kb 128 -o "$tmp/d.trace" --capture 'step=0:2,name=big' -- "$prog" \
        >/dev/null
    captures "$tmp/d.trace"
    "$tfdump" --json "$tmp/d.trace" >"$tmp/d.json"
    python3 - "$tmp/caps.json" "$tmp/d.json" <<'PY'
import json, sys
caps = [json.loads(l) for l in open(sys.argv[1])]
s = json.load(open(sys.argv[2]))
lost = sum(19 - c["parts"] for c in caps) + 19 * (3 - len(caps))
assert all(c["complete"] == (c["parts"] == 19) for c in caps), caps
assert s["dropped"] >= lost, (s["dropped"], lost)
print("without waiting:", lost, "parts lost,", s["dropped"], "records dropped")
PY
    ;;
  gemm)
    want=$("$gemm")
    "$tftrace" -q -o "$tmp/g.trace" --capture 'name=cblas_?gemm' -- "$gemm" >"$tmp/out"
    [ "$(cat "$tmp/out")" = "$want" ] || fail "results changed under capture: $(cat "$tmp/out") vs $want"
    captures "$tmp/g.trace"
    python3 - "$tmp/caps.json" <<'PY'
import json, sys
caps = [json.loads(l) for l in open(sys.argv[1])]
got = sorted((c["seq"], c["role"], c["name"], tuple(c["shape"])) for c in caps)
want = sorted([(2, "input", "cblas_sgemm.A", (7, 6)), (2, "input", "cblas_sgemm.B", (6, 5)),
               (2, "output", "cblas_sgemm", (7, 5)),
               (5, "input", "cblas_sgemm.A", (7, 6)), (5, "input", "cblas_sgemm.B", (5, 6)),
               (5, "output", "cblas_sgemm", (5, 7)), (5, "prior", "cblas_sgemm", (5, 7)),
               (8, "input", "cblas_dgemm.A", (7, 6)), (8, "input", "cblas_dgemm.B", (5, 6)),
               (8, "output", "cblas_dgemm", (7, 5)), (8, "prior", "cblas_dgemm", (7, 5))])
assert got == want, got
assert all(c["complete"] for c in caps), caps
PY
    for q in 2 5 8; do
        expect_rc 0 "$tfdump" --replay-op $q "$tmp/g.trace"
        grep -q "bit-identical" "$tmp/out" || fail "replay of op $q: $(cat "$tmp/out")"
    done
    "$tfdump" --replay-op 5 --json "$tmp/g.trace" | python3 -c "
import json,sys
r=json.load(sys.stdin)
assert r['result']=='bit-identical' and r['op']=='cblas_sgemm' and r['numel']==35 and r['differing']==0, r"
    expect_rc 2 "$tfdump" --replay-op 3 "$tmp/g.trace"  # the A of op 5: no captures of op 3
    # a machine whose gemm is off by one ulp: within tolerance (exit 0);
    # off by 1.0: different (exit 1)
    # a preloaded library comes before the sanitizer runtime here (tftrace puts it first for the child)
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
    LD_PRELOAD="$faulty" FAULTY_BLAS=lsb "$tftrace" -q -o "$tmp/lsb.trace" --capture 'seq=2' -- "$gemm" >/dev/null
    expect_rc 0 "$tfdump" --replay-op 2 "$tmp/lsb.trace"
    grep -q "within tolerance (1 of 35 elements differ" "$tmp/out" || fail "lsb: $(cat "$tmp/out")"
    LD_PRELOAD="$faulty" FAULTY_BLAS=add "$tftrace" -q -o "$tmp/add.trace" --capture 'seq=2' -- "$gemm" >/dev/null
    expect_rc 1 "$tfdump" --replay-op 2 "$tmp/add.trace"
    grep -q "different (1 of 35 elements differ" "$tmp/out" || fail "add: $(cat "$tmp/out")"
    expect_rc 0 "$tfdump" --replay-op 2 --atol 1.5 "$tmp/add.trace"
    grep -q "within tolerance" "$tmp/out" || fail "add with atol 1.5: $(cat "$tmp/out")" ;;
  tftrain)
    args=(--steps 4 --eval-every 0 --log-every 1 --layers 2 --d-model 32 --heads 2 --batch 4 --seq 16)
    "$tftrain" "${args[@]}" >"$tmp/plain.out"
    "$tftrace" -q -o "$tmp/t.trace" --capture 'step=2,name=L0.attn.*' -- "$tftrain" "${args[@]}" >"$tmp/cap.out"
    diff "$tmp/plain.out" "$tmp/cap.out" | grep -v "tok/s" | grep "^[<>]" >/dev/null && fail "training changed under capture" || true
    captures "$tmp/t.trace"
    python3 - "$tmp/caps.json" <<'PY'
import json, sys
caps = [json.loads(l) for l in open(sys.argv[1])]
assert caps and all(c["step"] == 2 and c["complete"] for c in caps), caps
outs = {c["name"]: c["shape"] for c in caps if c["role"] == "output"}
B, T, C, NH = 4, 16, 32, 2
assert outs == {"L0.attn.mask": [B, T, T], "L0.attn.scores": [B, NH, T, T], "L0.attn.probs": [B, NH, T, T],
                "L0.attn.out": [B, T, C], "L0.attn.proj": [B, T, C]}, outs
ops = {c["op"] for c in caps}
assert ops == set(outs), ops  # inputs of these ops only
ins = sorted((c["op"], c["name"]) for c in caps if c["role"] == "input")
assert ("L0.attn.probs", "L0.attn.scores") in ins and ("L0.attn.out", "L0.qkv") in ins, ins
print(len(caps), "captures")
PY
    for op in L0.attn.scores L0.attn.probs L0.attn.out; do
        q=$(python3 -c "
import json,sys
print([c['seq'] for c in map(json.loads, open(sys.argv[1])) if c['op']==sys.argv[2]][0])" "$tmp/caps.json" $op)
        expect_rc 0 "$tfdump" --replay-op "$q" "$tmp/t.trace"
        grep -q "$op (runtime, rank 0): .*bit-identical" "$tmp/out" || fail "replay $op: $(cat "$tmp/out")"
    done
    q=$(python3 -c "
import json,sys
print([c['seq'] for c in map(json.loads, open(sys.argv[1])) if c['op']=='L0.attn.proj'][0])" "$tmp/caps.json")
    expect_rc 2 "$tfdump" --replay-op "$q" "$tmp/t.trace"
    grep -q "cannot be replayed: a matmul whose bias" "$tmp/err" || fail "$(cat "$tmp/err")"
    "$tfdump" --tensor L0.attn.probs --out "$tmp/p.npy" "$tmp/t.trace" >/dev/null
    have_numpy || { echo "SKIP: numpy missing for $py"; exit 0; }
    $py -c "
import numpy as np, sys
p = np.load(sys.argv[1])
assert p.shape == (4, 2, 16, 16) and p.dtype == np.float32, p.shape
assert np.allclose(p.sum(-1), 1, atol=1e-5), p.sum(-1)
assert (np.triu(p[0, 0], 1) == 0).all(), 'causal mask'" "$tmp/p.npy" ;;
  threads)
    # 4 threads recording at once, each captured into its own ring: every
    # tensor complete, bytes as recorded (the thread-exit path frees the
    # threads' capture state: LeakSanitizer, TSan)
    recprog=$6
    "$tftrace" -q -o "$tmp/t.trace" --capture 'step=0' -- "$recprog" threads 4
    captures "$tmp/t.trace"
    python3 -c "
import json,sys
c=[json.loads(l) for l in open(sys.argv[1])]
assert len(c)==400 and all(x['complete'] and x['role']=='output' for x in c), len(c)
assert sorted(x['name'] for x in c)==sorted(f't{t}.{i}' for t in range(4) for i in range(100))" "$tmp/caps.json"
    for n in t0.0 t1.57 t3.99; do
        "$tfdump" --tensor "$n" "$tmp/t.trace" | grep "= the recorded tensor's" >/dev/null || fail "$n: bytes differ"
    done ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: capture.$case_name"
