#!/usr/bin/env bash
# run.sh NAME [DIR]: record a golden and a buggy tftrain run for one row of
# the bug zoo (runtime/README.md) into DIR (default ./bugzoo-NAME) and show
# where they part: the first differing tensor of every rank, and what the
# row is about (non-finite values, a hung collective, a leak...).
#
#   NAME   label-shift pos-zero causal-offbyone pad-mask loss-pad no-scale
#          fp16-mask no-warmup grad-accum no-clip token-oob[@S] short-batch[@S]
#          ckpt-optim ckpt-data dp-mean dp-shard dp-skip[@S] dp-nosync leak[@S]
#          nondet
#
# The programs come from $TFTRAIN, $TFTRACE, $TFDUMP, else the build tree
# next to this script (../../build), else PATH. 2-rank rows need mpirun.
# Compares with tests/e2e/bugzoo/compare.py (tfdiff GOLDEN BAD: README.md).
set -euo pipefail

if [ $# -lt 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit $(( $# < 1 ? 2 : 0 ))
fi
bug=$1
name=${bug%@*}
dir=${2:-bugzoo-$name}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
CMP=$root/tests/e2e/bugzoo/compare.py
PY=${PYTHON3:-python3}

find_tool() { # VAR NAME BUILD_SUBDIR
    local v=${!1:-}
    if [ -n "$v" ]; then echo "$v"; return; fi
    if [ -x "$root/build/$3/$2" ]; then echo "$root/build/$3/$2"; return; fi
    command -v "$2" || { echo "run.sh: $2 not found: build the project or set $1" >&2; exit 2; }
}
TFTRAIN=$(find_tool TFTRAIN tftrain runtime)
TFTRACE=$(find_tool TFTRACE tftrace tracer)
TFDUMP=$(find_tool TFDUMP tfdump analyzer)
export TFDUMP

# A small model, so every row records in a second or two.
SMALL=(--layers 1 --d-model 32 --heads 2 --seq 16 --batch 4 --eval-every 0 -q)
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2)
steps=4 ranks=1 extra=() topts=() step=${bug#*@}
[ "$step" = "$bug" ] && step=2
case $name in
    label-shift | pos-zero | causal-offbyone | pad-mask | loss-pad | no-scale | no-warmup | grad-accum) ;;
    fp16-mask) extra=(--dtype fp16) ;;
    no-clip) extra=(--lr 1.0 --clip 3) steps=6 ;;
    nondet) steps=8 ;;
    token-oob | short-batch | leak) bug=$name@$step ;;
    ckpt-optim | ckpt-data) steps=6 ;;
    dp-mean | dp-shard | dp-nosync) ranks=2 ;;
    dp-skip) ranks=2 bug=$name@$step topts=(--timeout 10 --grace 2) ;;
    *) echo "run.sh: unknown bug '$name' (see runtime/README.md, "The bug zoo")" >&2; exit 2 ;;
esac
if [ "$ranks" -gt 1 ] && ! command -v mpirun >/dev/null; then
    echo "run.sh: $name needs mpirun (2 ranks)" >&2
    exit 2
fi

mkdir -p "$dir"
cd "$dir"
rm -rf golden.trace bad.trace ckpt

# trace OUT TFTRACE_OPTIONS... -- TFTRAIN_ARGS...: one recorded run; prints
# the command and its exit status (a buggy run may fail: that is recorded).
trace() {
    local out=$1 rc=0
    shift
    local t=()
    while [ "$1" != -- ]; do t+=("$1"); shift; done
    shift
    local cmd=("$TFTRACE" -q -o "$out.trace" "${t[@]}" -- "$TFTRAIN" "${SMALL[@]}" "$@")
    [ "$ranks" -gt 1 ] && cmd=("${MPIRUN[@]}" "${cmd[@]}")
    echo "\$ ${cmd[*]}"
    "${cmd[@]}" >"$out.log" 2>"$out.err" || rc=$?
    grep -h "^tftrain:\|^tftrace:" "$out.err" | sed 's/^/    /' || true
    echo "    exit status $rc"
}

echo "== recording into $dir"
trace golden -- --steps $steps "${extra[@]}"
if [ "$name" = ckpt-optim ] || [ "$name" = ckpt-data ]; then
    # the same 6 steps saving at step 3, then resume from step 3 with the bug
    echo "\$ $TFTRAIN ${SMALL[*]} --steps 6 --ckpt-dir ckpt --ckpt-every 3"
    "$TFTRAIN" "${SMALL[@]}" --steps 6 --ckpt-dir ckpt --ckpt-every 3
    trace bad -- --steps 6 --resume ckpt/ckpt-step-000003.bin --bug "$bug"
    range=(--steps 3:)
else
    trace bad "${topts[@]}" -- --steps $steps "${extra[@]}" --bug "$bug"
    range=()
fi

echo "== the first divergence (compare.py diff golden.trace bad.trace)"
"$PY" "$CMP" diff "${range[@]}" golden.trace bad.trace || true
case $name in
    fp16-mask)
        echo "== the first non-finite tensor"
        "$PY" "$CMP" nonfinite golden.trace bad.trace --step 0 --name L0.attn.probs || true ;;
    no-clip)
        echo "== against golden's grad_norm"
        "$PY" "$CMP" no-clip golden.trace bad.trace --clip 3 || true ;;
    nondet)
        echo "== the statistics (bitwise differences only)"
        "$PY" "$CMP" stats-close golden.trace bad.trace --rtol 1e-6 --rtol-later 1e-5 || true ;;
    dp-skip)
        echo "== the hung collective"
        "$PY" "$CMP" coll-hang bad.trace --step "$step" --hung 0 --skipped 1 || true
        echo "\$ tfdump --events --kind collective --steps $step bad.trace"
        "$TFDUMP" --events --kind collective --steps "$step" bad.trace 2>/dev/null | sed 's/^/    /' ;;
    dp-nosync)
        echo "== the initial parameters across ranks"
        "$PY" "$CMP" rank-values golden.trace --step 0 --name wte --equal || true
        "$PY" "$CMP" rank-values bad.trace --step 0 --name wte --differ || true ;;
    leak)
        echo "== allocations at tftrain:leak_buffer"
        "$PY" "$CMP" leak golden.trace bad.trace --step "$step" --site tftrain:leak_buffer --bytes 1048576 || true ;;
    token-oob | short-batch)
        echo "== BAD's exit, as recorded"
        "$TFDUMP" --json bad.trace 2>/dev/null | "$PY" -c 'import json,sys; s=json.load(sys.stdin); print("    exit", s["exit"], "steps", s["steps"], "integrity", s["integrity"])' ;;
esac
echo "== traces: $dir/golden.trace $dir/bad.trace (tfdump --events TRACE to read them)"
