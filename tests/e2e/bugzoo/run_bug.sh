#!/usr/bin/env bash
# run_bug.sh CASE TFTRAIN TFTRACE TFDUMP [HAVE_MPI]
#
# One bug-zoo test (runtime/README.md, "The bug zoo"): records GOLDEN (tftrain without
# --bug) and BAD (with it) under tftrace, with a small model so it runs in
# about a second, and checks the row's expectation at the runtime level with
# compare.py (tensor fingerprints aligned by step and name), and, when
# $TFDIFF names the tfdiff program, what `tfdiff --json` must report for
# the row. CASE is a bug name, or determinism, resume-golden, dp-match.
#
# 2-rank cases run `mpirun -np 2 tftrace -o X.trace -- tftrain ...` and print
# "SKIP: ..." and exit 0 without mpirun or an MPI build (HAVE_MPI != ON).
# Every check runs even after one fails; the exit status is 1 if any failed.
# The scratch directory ($BUGZOO_WORK/CASE, else a new one in $TMPDIR) is
# removed on success and kept (and named) on failure; BUGZOO_KEEP=1 keeps it.
set -euo pipefail

if [ $# -lt 4 ]; then
    echo "usage: $0 CASE TFTRAIN TFTRACE TFDUMP [HAVE_MPI]" >&2
    exit 2
fi
case_name=$1
abspath() { # the scratch directory is the working directory: absolute paths
    case $1 in /*) echo "$1" ;; */*) echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" ;; *) command -v "$1" ;; esac
}
TFTRAIN=$(abspath "$2")
TFTRACE=$(abspath "$3")
TFDUMP=$(abspath "$4")
HAVE_MPI=${5:-ON}
PY=${PYTHON3:-python3}
here=$(cd "$(dirname "$0")" && pwd)
CMP=$here/compare.py
export TFDUMP

if [ -n "${BUGZOO_WORK:-}" ]; then
    work=$BUGZOO_WORK/$case_name
    rm -rf "$work"
    mkdir -p "$work"
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/bugzoo-$case_name.XXXXXX")
fi
failures=0
cleanup() {
    if [ "$failures" = 0 ] && [ -z "${BUGZOO_KEEP:-}" ]; then
        rm -rf "$work"
    else
        echo "scratch directory kept: $work"
    fi
}
trap cleanup EXIT
cd "$work"

# SMALL (the small model's flags), MPIRUN, DP_SKIP_TIMEOUT
. "$here/small_model.sh"

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

need_mpi() {
    if [ "$HAVE_MPI" != ON ]; then
        echo "SKIP: tftrain was built without MPI"
        exit 0
    fi
    if ! command -v mpirun >/dev/null 2>&1; then
        echo "SKIP: no mpirun"
        exit 0
    fi
}

# record OUT NRANKS WANT_RC [tftrace options] -- tftrain arguments
# Records OUT.trace (stdout in OUT.log, stderr in OUT.err) and checks the
# exit status ("any-nonzero" accepts any failure); dumps every record to
# OUT.jsonl and the summary to OUT.json.
record() {
    local out=$1 n=$2 want=$3 rc=0
    shift 3
    local topts=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        topts+=("$1")
        shift
    done
    shift
    local cmd=("$TFTRACE" -q -o "$out.trace" "${topts[@]}" -- "$TFTRAIN" "$@")
    if [ "$n" -gt 1 ]; then
        cmd=("${MPIRUN[@]}" "${cmd[@]}")
    fi
    echo "+ ${cmd[*]}"
    "${cmd[@]}" >"$out.log" 2>"$out.err" || rc=$?
    if { [ "$want" = any-nonzero ] && [ "$rc" = 0 ]; } || { [ "$want" != any-nonzero ] && [ "$rc" != "$want" ]; }; then
        sed 's/^/  stderr: /' "$out.err" | tail -20
        fail "$out: exit status $rc, expected $want"
    fi
    dump "$out"
}

dump() {
    local out=$1 rc=0
    "$TFDUMP" --events --json "$out.trace" >"$out.jsonl" 2>"$out.dump.err" || rc=$?
    [ "$rc" = 0 ] || fail "$out: tfdump --events --json exit status $rc: $(head -3 "$out.dump.err")"
    rc=0
    "$TFDUMP" --json "$out.trace" >"$out.json" 2>>"$out.dump.err" || rc=$?
    [ "$rc" = 0 ] || fail "$out: tfdump --json exit status $rc"
}

# compare SUBCOMMAND ARGS...: a compare.py assertion (its output indented).
compare() {
    local rc=0
    echo "+ compare.py $*"
    "$PY" "$CMP" "$@" >"$work/cmp.out" 2>&1 || rc=$?
    sed 's/^/  /' "$work/cmp.out"
    [ "$rc" = 0 ] || fail "compare.py $1 (exit status $rc)"
}

# tfdiff_expect WANT_RC [tfdiff options] -- [check_tfdiff.py assertions]:
# runs tfdiff --json golden.trace bad.trace (when $TFDIFF is set) and
# asserts what it must report for this row.
tfdiff_expect() {
    [ -n "${TFDIFF:-}" ] || return 0
    local want=$1 rc=0
    shift
    local topts=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        topts+=("$1")
        shift
    done
    [ $# -gt 0 ] && shift
    echo "+ tfdiff --json ${topts[*]} golden.trace bad.trace"
    "$TFDIFF" --json "${topts[@]}" golden.trace bad.trace >tfdiff.json 2>tfdiff.err || rc=$?
    sed 's/^/  stderr: /' tfdiff.err | head -5
    [ "$rc" = "$want" ] || fail "tfdiff exit status $rc, expected $want"
    rc=0
    "$PY" "$here/check_tfdiff.py" tfdiff.json "$@" >"$work/tfd.out" 2>&1 || rc=$?
    sed 's/^/  /' "$work/tfd.out"
    [ "$rc" = 0 ] || fail "tfdiff report"
}

# summary OUT RANKS EXIT [STEPS] [INTEGRITY]: tfdump --json of OUT.trace
# has RANKS ranks, every rank's exit is EXIT ("code=N", "signal" = killed by
# any signal), its steps are STEPS ("A:B") and its integrity INTEGRITY.
summary() {
    local rc=0
    "$PY" - "$1.json" "$2" "$3" "${4:-}" "${5:-}" >"$work/sum.out" 2>&1 <<'PY' || rc=$?
import json, sys
path, ranks, want, steps, integ = sys.argv[1:6]
s = json.load(open(path))
errs = []
if s.get("ranks") != int(ranks):
    errs.append("ranks %r, expected %s" % (s.get("ranks"), ranks))
ex = s.get("exit") or {}
for r in range(int(ranks)):
    e = ex.get(str(r))
    if e is None:
        errs.append("rank %d: no exit recorded" % r)
    elif want == "signal":
        if "signal" not in e:
            errs.append("rank %d: exit %r, expected a signal" % (r, e))
    elif e != {"code": int(want.split("=")[1])}:
        errs.append("rank %d: exit %r, expected %s" % (r, e, want))
# the steps run: those with step records (a checkpoint record carries the
# step it resumes at, one past the last step run, and counts in s["steps"])
ran = sorted({r["step"] for r in map(json.loads, open(path[:-len(".json")] + ".jsonl"))
              if r.get("kind") == "step"})
if steps:
    a, b = (int(x) for x in steps.split(":"))
    if ran != list(range(a, b + 1)):
        errs.append("step records for steps %s, expected %d..%d" % (ran, a, b))
if integ and s.get("integrity") != integ:
    errs.append("integrity %r, expected %r; problems: %s" % (s.get("integrity"), integ, s.get("problems")))
for f in s.get("files", []):
    if not f.get("closed"):
        errs.append("%s: not closed" % f.get("file"))
print("%s: %d rank(s), steps run %s, exit %s, integrity %s%s" % (path, s.get("ranks"),
      "%d..%d" % (ran[0], ran[-1]) if ran else "none",
      json.dumps(ex, sort_keys=True), s.get("integrity"),
      "; problems: %s" % s["problems"] if s.get("problems") else ""))
for e in errs:
    print("FAIL: " + e)
sys.exit(1 if errs else 0)
PY
    sed 's/^/  /' "$work/sum.out"
    [ "$rc" = 0 ] || fail "$1: summary"
}

# Integrity expected of a run's trace: 2-rank traces written by N tftrace
# instances are checked for readability only (see the report of the tracer
# problem with run ids: every instance announces its own run id).
single_rank_pair() {
    record golden 1 0 -- "${SMALL[@]}" --steps "${STEPS:-4}" "${EXTRA[@]}"
    record bad 1 0 -- "${SMALL[@]}" --steps "${STEPS:-4}" "${EXTRA[@]}" --bug "$1"
    summary golden 1 code=0 "0:$((${STEPS:-4} - 1))" complete
    summary bad 1 code=0 "0:$((${STEPS:-4} - 1))" complete
}

two_rank_pair() {
    need_mpi
    record golden 2 0 -- "${SMALL[@]}" --steps "${STEPS:-4}" "${EXTRA[@]}"
    record bad 2 0 -- "${SMALL[@]}" --steps "${STEPS:-4}" "${EXTRA[@]}" --bug "$1"
    summary golden 2 code=0 "0:$((${STEPS:-4} - 1))"
    summary bad 2 code=0 "0:$((${STEPS:-4} - 1))"
}

EXTRA=()
N=3 # checkpoint rows: run 2N steps saving at N, resume from step N's checkpoint
CKPT_N=ckpt/$(printf 'ckpt-step-%06d.bin' $N)
WARM=(--warmup 2) # N > warm-up: the resumed run is inside the cosine decay
case "$case_name" in
    label-shift)
        single_rank_pair label-shift
        compare expect-diff golden.jsonl bad.jsonl --step 0 --name targets
        tfdiff_expect 1 -- --verdict diverged --first-step 0 --first-tensor targets --origin-tensor targets ;;
    pos-zero)
        single_rank_pair pos-zero
        compare expect-diff golden.jsonl bad.jsonl --step 0 --name wpe
        tfdiff_expect 1 -- --first-step 0 --first-tensor wpe ;;
    causal-offbyone | pad-mask)
        single_rank_pair "$case_name"
        compare expect-diff golden.jsonl bad.jsonl --step 0 --name L0.attn.mask
        tfdiff_expect 1 -- --first-step 0 --first-tensor L0.attn.mask ;;
    loss-pad)
        single_rank_pair loss-pad
        compare expect-diff golden.jsonl bad.jsonl --step 0 --name loss_mask,loss
        tfdiff_expect 1 -- --first-step 0 --first-tensor loss_mask,loss ;;
    no-scale)
        single_rank_pair no-scale
        compare expect-diff golden.jsonl bad.jsonl --step 0 --name L0.attn.scores
        tfdiff_expect 1 -- --first-step 0 --first-tensor L0.attn.scores ;;
    no-warmup)
        single_rank_pair no-warmup
        compare expect-diff golden.jsonl bad.jsonl --step 0 --name lr
        tfdiff_expect 1 -- --first-step 0 --first-tensor lr ;;
    grad-accum)
        single_rank_pair grad-accum
        compare expect-diff golden.jsonl bad.jsonl --step 1 --name 'grad.*'
        tfdiff_expect 1 -- --first-step 1 --first-tensor 'grad.*' ;;
    fp16-mask)
        EXTRA=(--dtype fp16)
        single_rank_pair fp16-mask
        compare nonfinite golden.jsonl bad.jsonl --step 0 --name L0.attn.probs
        # the scores are recorded before the masked fill: they agree
        compare expect-diff golden.jsonl bad.jsonl --step 0 --name L0.attn.probs
        tfdiff_expect 1 -- --nonfinite-step 0 --nonfinite-tensor L0.attn.probs --nonfinite-in-golden no ;;
    no-clip)
        # the clip at 3: golden's grad_norm is below it at step 0 and above
        # it from step 1 (lr 1.0), so the first divergence is at step 1
        EXTRA=(--lr 1.0 --clip 3)
        STEPS=6 single_rank_pair no-clip
        compare no-clip golden.jsonl bad.jsonl --clip 3
        tfdiff_expect 1 -- --first-step 1 --first-tensor 'grad.*,adam.*,param.*'
        # the default clip 1.0 already acts at step 0 (grad_norm ~2.2):
        # BAD's first moments are golden's times grad_norm/clip
        mkdir -p clip1 && cd clip1
        EXTRA=(--lr 1.0)
        STEPS=6 single_rank_pair no-clip
        compare no-clip golden.jsonl bad.jsonl --clip 1
        cd ..
        # the blow-up: with SGD (its step grows with the gradient, unlike
        # AdamW's) and a large learning rate, golden stays finite and BAD's
        # loss goes to NaN: tfdiff reports a non-finite BAD alone has
        mkdir -p sgd && cd sgd
        EXTRA=(--optim sgd --lr 3)
        STEPS=35 single_rank_pair no-clip
        tfdiff_expect 1 -- --first-tensor 'grad.*,adam.*,param.*' --nonfinite-tensor '*' --nonfinite-in-golden no
        cd .. ;;
    nondet)
        STEPS=8 single_rank_pair nondet
        # last-bit differences only: some fingerprint differs, the first at
        # grad_norm; every mean and std agrees to 1e-6 of the tensor's scale
        # up to the step of the first difference, to 1e-5 after it (AdamW
        # divides by sqrt(v): last bits of tiny moments grow to ~1.5e-6)
        compare stats-close golden.jsonl bad.jsonl --rtol 1e-6 --rtol-later 1e-5 --expect-first grad_norm
        tfdiff_expect 0 -- --verdict match --within-tolerance-min 1
        tfdiff_expect 1 --rtol 0 --atol 0 -- --verdict diverged --first-tensor grad_norm ;;
    token-oob | short-batch)
        S=2
        record golden 1 0 -- "${SMALL[@]}" --steps 4
        record bad 1 1 -- "${SMALL[@]}" --steps 4 --bug "$case_name@$S"
        grep -q "tftrain: rank 0: step $S: " bad.err || fail "no 'tftrain: rank 0: step $S:' error on stderr"
        sed 's/^/  stderr: /' bad.err
        summary golden 1 code=0 0:3 complete
        summary bad 1 code=1 "0:$S" complete
        if [ "$case_name" = short-batch ]; then
            compare expect-diff golden.jsonl bad.jsonl --step $S --name tokens --kind shape
            tfdiff_expect 1 -- --first-step $S --first-tensor tokens --first-kind shape --ended-early
        else
            compare expect-diff golden.jsonl bad.jsonl --step $S --name tokens --kind value
            tfdiff_expect 1 -- --first-step $S --first-tensor tokens --ended-early
        fi ;;
    ckpt-optim | ckpt-data)
        record golden 1 0 -- "${SMALL[@]}" "${WARM[@]}" --steps $((2 * N))
        echo "+ $TFTRAIN ${SMALL[*]} ${WARM[*]} --steps $((2 * N)) --ckpt-dir ckpt --ckpt-every $N"
        "$TFTRAIN" "${SMALL[@]}" "${WARM[@]}" --steps $((2 * N)) --ckpt-dir ckpt --ckpt-every $N >first.log 2>&1 ||
            fail "the first run: exit status $? ($(tail -2 first.log))"
        record bad 1 0 -- "${SMALL[@]}" "${WARM[@]}" --steps $((2 * N)) --resume "$CKPT_N" --bug "$case_name"
        summary bad 1 code=0 "$N:$((2 * N - 1))" complete
        if [ "$case_name" = ckpt-optim ]; then
            compare expect-diff golden.jsonl bad.jsonl --steps "$N:" --step $N --name 'adam.m.*,adam.v.*'
            tfdiff_expect 1 -- --first-step $N --first-tensor 'adam.m.*,adam.v.*'
        else
            compare expect-diff golden.jsonl bad.jsonl --steps "$N:" --step $N --name tokens
            tfdiff_expect 1 -- --first-step $N --first-tensor tokens
        fi ;;
    resume-golden)
        # the runtime's guarantee: a resumed run is bit-identical to the
        # straight run from the checkpoint's step on
        record golden 1 0 -- "${SMALL[@]}" "${WARM[@]}" --steps $((2 * N))
        record first 1 0 -- "${SMALL[@]}" "${WARM[@]}" --steps $((2 * N)) --ckpt-dir ckpt --ckpt-every $N
        record resumed 1 0 -- "${SMALL[@]}" "${WARM[@]}" --steps $((2 * N)) --resume "$CKPT_N"
        summary resumed 1 code=0 "$N:$((2 * N - 1))" complete
        grep -q '"kind":"checkpoint".*"save"' first.jsonl || fail "first: no checkpoint save record"
        grep -q '"kind":"checkpoint".*"resume"' resumed.jsonl || fail "resumed: no checkpoint resume record"
        compare same golden.jsonl first.jsonl --steps ":$((2 * N - 1))"
        compare same golden.jsonl resumed.jsonl --steps "$N:"
        mv bad.trace bad.trace.unused 2>/dev/null || true
        mv resumed.trace bad.trace
        tfdiff_expect 0 -- --verdict match ;;
    determinism)
        record golden 1 0 -- "${SMALL[@]}" --steps 4
        record again 1 0 -- "${SMALL[@]}" --steps 4
        compare same golden.jsonl again.jsonl --collectives
        mv again.trace bad.trace
        tfdiff_expect 0 -- --verdict match ;;
    dp-mean)
        two_rank_pair dp-mean
        compare expect-diff golden.jsonl bad.jsonl --rank 0 --step 0 --name 'grad.*'
        compare expect-diff golden.jsonl bad.jsonl --rank 1 --step 0 --name 'grad.*'
        tfdiff_expect 1 -- --first-step 0 --first-tensor 'grad.*' ;;
    dp-shard)
        two_rank_pair dp-shard
        compare expect-diff golden.jsonl bad.jsonl --rank 1 --step 0 --name tokens
        # rank 0 reads its own shard in both runs (its loss and gradients
        # still change: the token count and the all-reduce see rank 1)
        compare same golden.jsonl bad.jsonl --rank 0 --names tokens,targets,loss_mask
        # and BAD's rank 1 reads rank 0's shard at every step
        compare rank-values bad.jsonl --name tokens --equal
        compare rank-values golden.jsonl --name tokens --differ
        tfdiff_expect 1 -- --first-step 0 --first-tensor tokens --first-rank 1 ;;
    dp-skip)
        need_mpi
        S=1
        record bad 2 any-nonzero "${DP_SKIP_TIMEOUT[@]}" -- "${SMALL[@]}" --steps 4 --bug "dp-skip@$S"
        grep -q "timeout" bad.err || fail "tftrace did not report its timeout"
        summary bad 2 signal "0:$S"
        compare coll-hang bad.jsonl --step $S --hung 0 --skipped 1
        if [ -n "${TFDUMP:-}" ]; then
            rc=0; "$TFDUMP" --check --json bad.trace >check.json 2>check.err || rc=$?
            [ "$rc" = 1 ] || fail "tfdump --check exit status $rc, expected 1"
            "$PY" "$here/check_tfdiff.py" check.json --desync-kind missing --desync-step $S --desync-ranks 1 \
                >"$work/chk.out" 2>&1 || fail "tfdump --check report"
            sed 's/^/  /' "$work/chk.out"
        fi ;;
    dp-nosync)
        two_rank_pair dp-nosync
        # the initial parameters (recorded at step 0) and the parameters
        # after the first update differ across ranks in BAD only
        compare rank-values bad.jsonl --step 0 --name wte --differ
        compare rank-values bad.jsonl --step 0 --name param.wte --differ
        compare rank-values golden.jsonl --step 0 --name param.wte --equal
        compare rank-values golden.jsonl --step 0 --name wte --equal
        tfdiff_expect 1 -- --desync-kind values --desync-step 0
        rc=0; "$TFDUMP" --check --json bad.trace >check.json 2>check.err || rc=$?
        [ "$rc" = 1 ] || fail "tfdump --check on BAD alone: exit status $rc, expected 1"
        "$PY" "$here/check_tfdiff.py" check.json --desync-kind values --desync-step 0 >"$work/chk.out" 2>&1 ||
            fail "tfdump --check report"
        sed 's/^/  /' "$work/chk.out" ;;
    leak)
        if [ "$HAVE_MPI" = ON ] && command -v mpirun >/dev/null 2>&1; then
            two_rank_pair leak@1
        else
            single_rank_pair leak@1
        fi
        compare leak golden.jsonl bad.jsonl --step 1 --site tftrain:leak_buffer --bytes $((1 << 20))
        compare same golden.jsonl bad.jsonl
        tfdiff_expect 1 -- --leak-site tftrain:leak_buffer --leak-from 1 --leak-bytes $((1 << 20)) ;;
    dp-match)
        # 2 ranks x B rows against 1 rank x 2B rows: the same global batch
        need_mpi
        LOGARGS=(--layers 1 --d-model 32 --heads 2 --seq 16 --eval-every 0 --log-every 1 --steps 5)
        record one 1 0 -- "${LOGARGS[@]}" --batch 8
        record two 2 0 -- "${LOGARGS[@]}" --batch 4
        compare losses one.log two.log --rtol 1e-4 --min-steps 5
        compare dp-match one.jsonl two.jsonl --rtol 1e-5 ;;
    *)
        echo "run_bug.sh: unknown case '$case_name'" >&2
        exit 2 ;;
esac
echo "time: ${SECONDS}s"
if [ "$failures" != 0 ]; then
    echo "bugzoo.$case_name: $failures check(s) failed"
    exit 1
fi
echo "PASS bugzoo.$case_name"
