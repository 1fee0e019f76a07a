#!/usr/bin/env bash
# run_check.sh TFTRAIN TFTRACE TFDUMP HAVE_MPI [TFDIFF] [long]
#
# tfdump --check's detectors (docs/CHECK.md) on bug-zoo runs recorded ALONE,
# without a golden run: each row fires its detector at its step and tensor
# (check_findings.py), a healthy run of 1,000 steps gives no finding, an
# fp16 run whose activations grow until they overflow reports the growth
# (naming the layer) before the first non-finite value. The small model of
# the bug-zoo tests (../bugzoo/small_model.sh). 2-rank rows are skipped
# (said so) without mpirun or an MPI build. Every check runs even after one
# fails; exit 1 if any failed. Scratch kept on failure. With TFDIFF:
# tfdiff GOLDEN BAD names BAD's detector findings GOLDEN lacks (text and
# JSON bad_only_findings), and both HTML pages hold the findings' table.
# With "long" last: only the healthy 1,000-step run (check.long, label
# slow: about 3 s in a release build, minutes under ASan on a busy machine).
set -uo pipefail
if [ $# -lt 3 ]; then
    echo "usage: $0 TFTRAIN TFTRACE TFDUMP [HAVE_MPI]" >&2
    exit 2
fi
TFTRAIN=$1 TFTRACE=$2 TFDUMP=$3 HAVE_MPI=${4:-ON} TFDIFF=${5:-} PART=${6:-}
PY=${PYTHON3:-python3}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../bugzoo/small_model.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/tft-check.XXXXXX")
failures=0
trap '[ "$failures" = 0 ] && rm -rf "$work" || echo "scratch kept: $work"' EXIT
cd "$work" || exit 2
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# rec NAME [NRANKS] -- tftrain arguments: records NAME.trace (any exit status)
rec() {
    local name=$1 n=1
    shift
    if [ "$1" != -- ]; then n=$1; shift; fi
    shift
    local cmd=("$TFTRACE" -q -o "$name.trace" -- "$TFTRAIN" "$@")
    [ "$n" -gt 1 ] && cmd=("${MPIRUN[@]}" "${cmd[@]}")
    "${cmd[@]}" >"$name.log" 2>&1 || true
    [ -d "$name.trace" ] || fail "$name: no trace ($(tail -2 "$name.log"))"
}

# expect NAME WANT_RC [check_findings.py assertions]; tfdump takes the
# options in the array TARGS (thresholds) too
TARGS=()
expect() {
    local name=$1 want=$2 rc=0
    shift 2
    echo "+ tfdump --check --json ${TARGS[*]} $name.trace $*"
    "$TFDUMP" --check --json "${TARGS[@]}" "$name.trace" >"$name.json" 2>"$name.err" || rc=$?
    [ "$rc" = "$want" ] || fail "$name: tfdump --check exit $rc, want $want ($(head -2 "$name.err"))"
    "$PY" "$here/check_findings.py" "$name.json" "$@" || fail "$name"
}

if [ "$PART" = long ]; then
    # the healthy run of 1,000 steps: no finding (one grad-norm spike would be a note)
    rec long -- --steps 1000 "${SMALL[@]}"
    expect long 0 --clean
    [ "$failures" = 0 ] && echo "PASS check.long" && exit 0
    exit 1
fi
S=(--steps 4 "${SMALL[@]}")
rec golden -- "${S[@]}"
expect golden 0 --clean --verdict OK
rec label-shift -- "${S[@]}" --bug label-shift
expect label-shift 1 --finding 'label-shift@0:targets'
rec pos-zero -- "${S[@]}" --bug pos-zero
expect pos-zero 1 --finding 'init-zero@0:wpe'
rec causal-offbyone -- "${S[@]}" --bug causal-offbyone
expect causal-offbyone 1 --layer 0 --finding 'mask-future@0:L0.attn.*'
rec pad-mask -- "${S[@]}" --bug pad-mask
expect pad-mask 1 --layer 0 --finding 'mask-padding@0:L0.attn.mask'
rec no-scale -- "${S[@]}" --bug no-scale
expect no-scale 1 --layer 0 --finding 'attn-scale@0:L0.attn.scores'
rec no-warmup -- "${S[@]}" --bug no-warmup
# a schedule that starts at its peak is a note (Hugging Face's default does too) unless a parameter jumps
expect no-warmup 0 --finding 'no-warmup@0:lr'
rec token-oob -- "${S[@]}" --bug token-oob@2
expect token-oob 1 --finding 'token-range@2:tokens'
rec short-batch -- "${S[@]}" --bug short-batch@2
expect short-batch 1 --finding 'shape-change@2:tokens' --verdict 'verdict: '
rec fp16-mask -- "${S[@]}" --dtype fp16 --bug fp16-mask
expect fp16-mask 1 --nonfinite '0:L0.attn.probs'
# loss-mask-full needs min-steps (20) steps of loss_mask
rec loss-pad -- --steps 24 "${SMALL[@]}" --bug loss-pad
expect loss-pad 1 --finding 'loss-mask-full@0:loss_mask'
# the checkpoint rows: the resumed run alone (bugzoo's N = 3)
"$TFTRAIN" "${SMALL[@]}" --warmup 2 --steps 6 --ckpt-dir ckpt --ckpt-every 3 >first.log 2>&1 || fail "first run"
rec ckpt-optim -- "${SMALL[@]}" --warmup 2 --steps 6 --resume ckpt/ckpt-step-000003.bin --bug ckpt-optim
expect ckpt-optim 1 --finding 'ckpt-optim@3:adam.m.*'
rec resumed -- "${SMALL[@]}" --warmup 2 --steps 6 --resume ckpt/ckpt-step-000003.bin
expect resumed 0 --clean
# a job restarted under one recording (a supervisor, torchrun's restarts):
# the first process trains steps 0..2 and saves, the second resumes at 3.
# With ckpt-data its first batch is step 0's, in the first process's file
restarted() {
    local name=$1
    shift
    rm -rf "ckpt-$name"
    "$TFTRACE" -q -o "$name.trace" -- bash -c '"$1" "${@:3}" --steps 3 --ckpt-dir "$2" --ckpt-every 3 &&
        "$1" "${@:3}" --steps 6 --resume "$2/ckpt-step-000003.bin" $BUGARG' _ "$TFTRAIN" "ckpt-$name" \
        "${SMALL[@]}" --warmup 2 >"$name.log" 2>&1 || fail "$name: $(tail -2 "$name.log")"
}
BUGARG="--bug ckpt-data" restarted ckpt-data
expect ckpt-data 1 --finding 'ckpt-data@3:tokens'
BUGARG="" restarted restart-golden
expect restart-golden 0 --clean
# a small data file wraps its epoch: the repeated batch is a note only
for i in $(seq 1 20); do echo "document $i says hello"; done >docs.txt
rec epoch -- --steps 12 "${SMALL[@]}" --data docs.txt
expect epoch 0 --clean --finding 'data-repeat@9:tokens'
# all-padding rows, proved from counts (tftrain never pads a whole row: a
# program of the test's records tokens and loss_mask through the Python API)
rc=0
PYTHONPATH="$here/../../../python${PYTHONPATH:+:$PYTHONPATH}" "$TFTRACE" -q -o padrows.trace -- "$PY" \
    "$here/pad_rows.py" >padrows.log 2>&1 || rc=$?
if [ "$rc" = 0 ]; then
    expect padrows 1 --finding 'pad-rows@1:loss_mask' --finding 'data-repeat@2:tokens'
    TARGS=(--threshold pad-id=0)
    expect padrows 1 --finding 'pad-rows@1:tokens'
    TARGS=()
else
    fail "pad_rows.py under tftrace: exit $rc ($(tail -2 padrows.log))"
fi
# no-clip with SGD and lr 3 (bugzoo): the values grow, then overflow
rec sgd -- --steps 35 "${SMALL[@]}" --optim sgd --lr 3 --bug no-clip
expect sgd 1 --finding 'absmax-growth@*:*' --before-nonfinite absmax-growth --finding 'grad-spike@*:grad_norm' \
    --finding 'attn-collapse@*:L0.attn.probs' --finding 'update-ratio@*:param.*' --finding 'clip-always@0:grad_norm'
# ... values past fp16's range from step 12 (the first Inf: step 29), scores past exp's overflow point
expect sgd 1 --layer 0 --finding 'precision-risk@12:L0.attn.scores' --before-nonfinite precision-risk \
    --finding 'softmax-overflow@12:L0.attn.scores' --before-nonfinite softmax-overflow
# lr 0: the loss does not fall
rec flat -- --steps 24 "${SMALL[@]}" --lr 0
expect flat 1 --finding 'loss-flat@0:loss'
# ... and attention stays uniform (judged on runs of 200 steps by default: at
# 24 steps a healthy run is still uniform, warm-up being 20 steps)
TARGS=(--threshold uniform-steps=20)
expect flat 1 --layer 0 --finding 'attn-uniform@11:L0.attn.probs'
TARGS=()
# loosened thresholds: the grad-norm growth of grad-accum (3 rises, x1.3;
# the defaults, 8 rises and x4, keep the healthy runs quiet) and the init
# scale of the projections (0.7x their peers)
rec grad-accum -- --steps 6 "${SMALL[@]}" --bug grad-accum
TARGS=(--threshold growth-steps=3 --threshold growth=1.3)
expect grad-accum 1 --finding 'grad-growth@1:grad_norm'
TARGS=(--threshold init-std=1.3)
expect golden 1 --layer 0 --finding 'init-scale@0:L0.attn.proj.w'
TARGS=()
# a long run that goes bad late: fp16 storage and lr 0.5 without clipping;
# the residual stream of layer 1 grows past 1,000 (x10^4) at step 10, the
# first Inf comes at step 27
rec fp16 -- --steps 60 --layers 2 --d-model 32 --heads 2 --seq 16 --batch 4 --eval-every 0 -q \
    --dtype fp16 --lr 0.5 --clip 0
expect fp16 1 --layer 1 --finding 'absmax-growth@*:L1.*' --before-nonfinite absmax-growth
expect fp16 1 --finding 'clip-never@0:grad_norm' 
# the attention scores pass 88.7 (exp overflows f32) at step 8; at step 19 layer
# 1's residual stream is 4x layer 0's and past 1,000
expect fp16 1 --layer 0 --finding 'softmax-overflow@8:L0.attn.scores' --before-nonfinite softmax-overflow
expect fp16 1 --layer 1 --finding 'layer-growth@19:L1.res1' --before-nonfinite layer-growth
if [ "$HAVE_MPI" = ON ] && command -v mpirun >/dev/null 2>&1; then
    rec dp-shard 2 -- "${S[@]}" --bug dp-shard
    expect dp-shard 1 --rank 1 --finding 'data-shard@0:tokens'
    rec dp-golden 2 -- "${S[@]}"
    expect dp-golden 0 --clean
else
    echo "note: 2-rank rows skipped (no mpirun or no MPI build)"
fi
# thresholds: a bad --threshold is a usage error naming the flag; a loose one silences
rc=0
"$TFDUMP" --check --threshold spike=x golden.trace >bad.out 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q -- "--threshold" bad.out || fail "--threshold spike=x: exit $rc, $(cat bad.out)"
expect no-warmup 0 --finding 'no-warmup@0:lr'
rc=0
"$TFDUMP" --check --threshold init-std=5 --threshold vocab=300 golden.trace >/dev/null || rc=$?
[ "$rc" = 0 ] || fail "golden with --threshold: exit $rc"
rc=0
"$TFDUMP" --check --threshold vocab=100 golden.trace >v.out || rc=$?
[ "$rc" = 1 ] && grep -q "^error: token-range" v.out || fail "--threshold vocab=100: exit $rc, $(head -3 v.out)"
tail -1 v.out | grep -q "^verdict: " || fail "no verdict line last: $(tail -1 v.out)"
# tfdiff GOLDEN BAD: BAD's mask-padding, which GOLDEN lacks, in its own section
if [ -n "$TFDIFF" ]; then
    rc=0
    "$TFDIFF" --json golden.trace pad-mask.trace >d.json 2>d.err || rc=$?
    [ "$rc" = 1 ] || fail "tfdiff golden pad-mask: exit $rc ($(head -2 d.err))"
    "$PY" - d.json <<'PY' || fail "tfdiff --json bad_only_findings"
import json, sys
d = json.load(open(sys.argv[1]))
bo = d.get("bad_only_findings")
kinds = [(f["kind"], f["step"], f["tensor"]) for f in bo or []]
print("  bad_only_findings:", kinds)
assert ("mask-padding", 0, "L0.attn.mask") in kinds, kinds
PY
    rc=0
    "$TFDIFF" --json golden.trace golden.trace >same.json 2>/dev/null || rc=$?
    "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["bad_only_findings"] == [], d["bad_only_findings"]' \
        same.json || fail "tfdiff golden golden: bad_only_findings not empty"
    "$TFDIFF" golden.trace pad-mask.trace >d.txt 2>&1
    grep -q "^only in BAD: error: mask-padding: rank 0, step 0, L0.attn.mask" d.txt || fail "tfdiff text: no 'only in BAD' line"
    "$TFDIFF" --html d.html golden.trace pad-mask.trace >/dev/null 2>&1
    grep -q '<tr class="check error" data-kind="mask-padding" data-step="0">' d.html || fail "tfdiff --html: no findings row"
fi
rc=0
"$TFDUMP" --html p.html pad-mask.trace >/dev/null 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "tfdump --html pad-mask: exit $rc, want 1"
grep -q '<tr class="check error" data-kind="mask-padding" data-step="0">' p.html || fail "tfdump --html: no findings row"
grep -q 'id="verdict" data-status="findings" data-step="0">error: mask-padding' p.html || fail "tfdump --html: verdict"
rc=0
"$TFDUMP" --html s.html sgd.trace >/dev/null 2>&1 || rc=$?
grep -q '<tr class="check error" data-kind="precision-risk" data-step="12">' s.html || fail "tfdump --html sgd: no precision-risk row"
if [ "$failures" != 0 ]; then
    echo "check.detectors: $failures check(s) failed"
    exit 1
fi
echo "PASS check.detectors"
