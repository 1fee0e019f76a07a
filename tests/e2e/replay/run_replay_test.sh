#!/bin/bash
# tftrace replay end to end. Usage:
#   run_replay_test.sh CASE TFTRACE TFDIFF TFDUMP TFTRAIN NONDET_PROG [GEMM_PROG]
# Bug rows: GOLDEN and BAD are recorded with a checkpoint every 4 steps and
# the bug switched on at step 9 (ckpt-optim: as in the bug zoo, BAD resumes
# from GOLDEN's first run), then `tftrace replay GOLDEN BAD` must restart
# both from the checkpoint of step 8 (2 steps re-executed, not 10), reproduce
# both recordings bit for bit, capture the diverging tensor, and
# `tfdiff --tensors` must name the structural pattern of the bug.
set -euo pipefail
case_name=$1 tftrace=$2 tfdiff=$3 tfdump=$4 tftrain=$5 nondet=$6 gemm=${7:-none}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-replay.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail() { echo "FAIL: $*" >&2; [ -f rp/replay.json ] && head -c 3000 rp/replay.json >&2; exit 1; }
SMALL=(--layers 1 --d-model 32 --heads 2 --seq 16 --batch 4 --eval-every 0 -q --warmup 2)

# check G_FROM B_FROM GLOB PATTERN: assertions on rp/replay.json. X_FROM
# is the first step the replay of that side must start at (the checkpoint's
# step, 0 from the start): it must have re-executed exactly X_FROM..S, S the
# point's step (>= 9 for the bug rows), and reproduced its recording; the
# first differing capture matching GLOB must show PATTERN.
check() {
    python3 - rp/replay.json "$@" <<'PY'
import fnmatch, json, sys
r = json.load(open(sys.argv[1]))
g_from, b_from, glob, pattern = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
S = r["point"]["step"]
assert S is not None and S >= max(g_from, b_from), r["point"]
for side, first in (("golden", g_from), ("bad", b_from)):
    s = r[side]
    assert s["reproduced"] is True, (side, s["detail"])
    assert s["steps_replayed"] == [first, S], (side, s["steps_replayed"], "want", [first, S])
    assert s["steps_executed"] == S - first + 1, (side, s["steps_executed"])
    assert (s["checkpoint_step"] if s["checkpoint"] else 0) == first or first == 4 and side == "bad", (side, s)
t = r["tensors"]
assert t and t["different"] >= 1, t
hits = [x for x in t["tensors"] if fnmatch.fnmatch(x["name"], glob) and x["verdict"] == "different"]
assert hits, ("no differing capture of", glob, [(x["name"], x["verdict"]) for x in t["tensors"]])
summ = hits[0]["pattern"]["summary"]
assert pattern in summ, ("pattern", summ, "want", pattern)
assert hits[0]["differing"] > 0 and hits[0]["max_abs_diff"] > 0 and hits[0]["first"], hits[0]
print("replay ok: step", S, "replayed", r["golden"]["steps_replayed"], r["bad"]["steps_replayed"], "-",
      hits[0]["name"], "-", summ)
PY
}

bug_pair() { # BUG: golden and bad with checkpoints every 4 steps, bug from step 9
    "$tftrace" -q -o g.trace -- "$tftrain" "${SMALL[@]}" --steps 12 --ckpt-dir g.ckpt --ckpt-every 4 >/dev/null
    "$tftrace" -q -o b.trace -- "$tftrain" "${SMALL[@]}" --steps 12 --ckpt-dir b.ckpt --ckpt-every 4 \
        --bug "$1@9" >/dev/null
}

case $case_name in
  causal-offbyone)
    bug_pair causal-offbyone
    st=0; "$tftrace" replay --yes -o rp g.trace b.trace >out.txt 2>err.txt || st=$?
    cat out.txt
    [ "$st" = 1 ] || fail "replay exit $st, want 1 (tensors differ): $(cat err.txt)"
    grep -q "from checkpoint" out.txt || fail "no checkpoint used"
    check 8 8 'L0.attn.mask' 'only just above the diagonal' ;;
  pad-mask)
    bug_pair pad-mask
    st=0; "$tftrace" replay --yes -q -o rp g.trace b.trace >out.txt || st=$?
    [ "$st" = 1 ] || fail "replay exit $st"
    check 8 8 'L0.attn.mask' 'only at padded positions' ;;
  no-scale)
    bug_pair no-scale
    st=0; "$tftrace" replay --yes -q -o rp g.trace b.trace >out.txt || st=$?
    [ "$st" = 1 ] || fail "replay exit $st"
    # scores unscaled: BAD = sqrt(head dim 16) = 4 x GOLDEN
    check 8 8 'L0.attn.scores' 'BAD = 4 x GOLDEN'
    # --from-start re-executes everything up to the divergence
    st=0; "$tftrace" replay --yes --force -q --from-start -o rp g.trace b.trace >/dev/null || st=$?
    [ "$st" = 1 ] || fail "replay --from-start exit $st"
    check 0 0 'L0.attn.scores' 'BAD = 4 x GOLDEN' ;;
  ckpt-optim)
    # the bug zoo's recipe: GOLDEN 8 steps straight; BAD resumes at step 4
    # from a first run's checkpoint with the moments lost
    "$tftrace" -q -o g.trace -- "$tftrain" "${SMALL[@]}" --steps 8 >/dev/null
    "$tftrain" "${SMALL[@]}" --steps 8 --ckpt-dir first.ckpt --ckpt-every 4 >/dev/null
    "$tftrace" -q -o b.trace -- "$tftrain" "${SMALL[@]}" --steps 8 \
        --resume first.ckpt/ckpt-step-000004.bin --bug ckpt-optim >/dev/null
    st=0; "$tftrace" replay --yes -q -o rp g.trace b.trace >out.txt || st=$?
    [ "$st" = 1 ] || fail "replay exit $st"
    # GOLDEN has no checkpoint: steps 0..4; BAD resumes by its own command: step 4 only
    check 0 4 'adam.[mv].*' '' ;;
  nondet)
    "$tftrace" -q -o g.trace -- "$nondet" >/dev/null
    "$tftrace" -q -o b.trace -- "$nondet" >/dev/null
    st=0; "$tftrace" replay --yes -q --at step=3,name=w -o rp g.trace b.trace >out.txt || st=$?
    cat out.txt
    [ "$st" = 3 ] || fail "replay of a non-deterministic program: exit $st, want 3"
    grep -q "NOT reproduced.*step 2, tensor noise" out.txt || fail "no non-determinism finding"
    python3 -c "import json,sys; r=json.load(open('rp/replay.json')); assert r['golden']['reproduced'] is False and r['bad']['reproduced'] is False, r" ;;
  firstdiv)
    # --capture first-divergence-of=GOLDEN: one run, the first tensor that
    # differs from GOLDEN is captured as it is computed, with its op's inputs
    "$tftrace" -q -o g.trace -- "$tftrain" "${SMALL[@]}" --steps 6 >/dev/null
    "$tftrace" -q -o b.trace --capture first-divergence-of=g.trace -- "$tftrain" "${SMALL[@]}" --steps 6 \
        --bug no-scale@3 >/dev/null
    "$tfdump" --captures b.trace >caps.txt
    cat caps.txt
    st=0; "$tfdiff" --json g.trace b.trace >d.json || st=$?
    [ "$st" = 1 ] || fail "tfdiff exit $st"
    python3 - caps.txt d.json <<'PY'
import json, sys
caps = [l.split() for l in open(sys.argv[1]) if l.startswith("r0 ")]
d = json.load(open(sys.argv[2]))["first_divergence"]
outs = [c for c in caps if c[3] == "output"]
ins = [c for c in caps if c[3] == "input"]
assert len(outs) == 1, caps
assert outs[0][4] == d["tensor"] == "L0.attn.scores" and outs[0][1] == "s%d" % d["step"] == "s3", (outs, d)
assert [c[4] for c in ins] == ["L0.qkv"], ins
print("first divergence captured:", outs[0][4], outs[0][1], "with input", ins[0][4])
PY
    "$tfdump" --tensor L0.attn.scores b.trace --out s.npy >/dev/null
    if /usr/bin/python3 -c "import numpy" 2>/dev/null; then # Debian's numpy
        /usr/bin/python3 -c "import numpy as np; a=np.load('s.npy'); assert a.shape==(4,2,16,16) and a.dtype==np.float32, a.shape" \
          || fail "captured scores do not load as [4,2,16,16] f32"
    fi
    # identical run: nothing differs, nothing captured
    "$tftrace" -q -o same.trace --capture first-divergence-of=g.trace -- "$tftrain" "${SMALL[@]}" --steps 6 >/dev/null
    [ "$("$tfdump" --captures same.trace | grep -c '^r0 ')" = 0 ] || fail "a run equal to golden captured something"
    # golden without fingerprints: refused before running
    "$tftrace" -q -o shape.trace --stats shape -- "$tftrain" "${SMALL[@]}" --steps 1 >/dev/null
    st=0; "$tftrace" -q -o x.trace --capture first-divergence-of=shape.trace -- true 2>err.txt || st=$?
    [ "$st" = 2 ] && grep -q "no fingerprinted tensors" err.txt || fail "shape-only golden: exit $st $(cat err.txt)"
    st=0; "$tftrace" -q -o x.trace --capture first-divergence-of=nope.trace -- true 2>err.txt || st=$?
    [ "$st" = 2 ] && grep -q "nope.trace" err.txt || fail "missing golden: exit $st $(cat err.txt)" ;;
  stepless)
    # an unmodified CBLAS program (no steps): replayed whole, the diverging
    # op (B of the 6th gemm, planted) and its consumers captured by seq
    "$tftrace" -q -o g.trace -- "$gemm" >/dev/null
    "$tftrace" -q -o b.trace -- "$gemm" --plant 5 >/dev/null
    st=0; "$tftrace" replay --yes -q -o rp g.trace b.trace >out.txt || st=$?
    cat out.txt
    [ "$st" = 1 ] || fail "replay exit $st"
    python3 - rp/replay.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["point"]["step"] is None and r["point"]["seq"] >= 0, r["point"]
for side in ("golden", "bad"):
    assert r[side]["reproduced"] is True and r[side]["steps_replayed"] is None, r[side]
diff = {t["name"]: t for t in r["tensors"]["tensors"] if t["verdict"] == "different"}
assert set(diff) == {"cblas_sgemm.B", "cblas_sgemm"}, list(diff)
assert diff["cblas_sgemm.B"]["differing"] == 1 and diff["cblas_sgemm.B"]["first"][0]["index"] == [0, 0], diff
assert diff["cblas_sgemm"]["pattern"]["rows"] == [[0, 0]], diff["cblas_sgemm"]
print("step-less replay: the planted B and the gemm it feeds (row 0 only)")
PY
    ;;
  usage)
    st=0; "$tftrace" replay >/dev/null 2>err.txt || st=$?
    [ "$st" = 2 ] && grep -q "needs two traces" err.txt || fail "no traces: exit $st"
    st=0; "$tftrace" replay --at bogus a b >/dev/null 2>err.txt || st=$?
    [ "$st" = 2 ] && grep -q "at needs" err.txt || fail "bad --at: exit $st"
    st=0; "$tftrace" replay nope.trace nope2.trace >/dev/null 2>err.txt || st=$?
    [ "$st" = 2 ] || fail "missing traces: exit $st"
    "$tftrace" replay --help | grep "usage: tftrace replay" >/dev/null || fail "--help"
    # identical runs: nothing to replay
    "$tftrace" -q -o g.trace -- "$tftrain" "${SMALL[@]}" --steps 2 >/dev/null
    st=0; "$tftrace" replay g.trace g.trace >out.txt || st=$?
    [ "$st" = 0 ] && grep -q "do not diverge" out.txt || fail "identical traces: exit $st $(cat out.txt)"
    # tfdiff --tensors on traces without captures: exit 2 with a hint
    st=0; "$tfdiff" --tensors g.trace g.trace >/dev/null 2>err.txt || st=$?
    [ "$st" = 2 ] && grep -q "tftrace --capture" err.txt || fail "tfdiff --tensors without captures: exit $st" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo "PASS $case_name"
