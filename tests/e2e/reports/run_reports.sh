#!/usr/bin/env bash
# run_reports.sh TFTRAIN TFTRACE TFDIFF TFDUMP HAVE_MPI ARTIFACTS  (reports.browser)
#
# The HTML reports in headless Chromium (docs/REPORTS.md, "Tested in a
# browser"): for the bug-zoo cases causal-offbyone, fp16-mask, leak@1 and
# dp-skip@1 it records GOLDEN and BAD with the bug zoo's small model
# (../bugzoo/small_model.sh), writes `tfdiff --html`, and has
# browser_check.py load the page: no console error, no network request, the
# DOM contract with the case's expectations (verdict, step, sections, marks).
# Two `tfdump --html` pages too (a golden trace; dp-skip's hung BAD).
# Pages and screenshots go to ARTIFACTS/<case>.html / .png (the log names them).
#
# Prints "SKIP: ..." and exits 0 without chromium or when tfdiff has no
# --html; dp-skip alone is left out (said so) without mpirun or MPI, the
# tfdump pages without tfdump --html.
# The scratch directory ($REPORTS_WORK, else one in $TMPDIR) is removed on
# success and kept on failure.
set -euo pipefail
if [ $# -lt 6 ]; then
    echo "usage: $0 TFTRAIN TFTRACE TFDIFF TFDUMP HAVE_MPI ARTIFACTS" >&2
    exit 2
fi
abspath() { # the scratch directory is the working directory: absolute paths
    case $1 in /*) echo "$1" ;; */*) echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" ;; *) command -v "$1" ;; esac
}
TFTRAIN=$(abspath "$1") TFTRACE=$(abspath "$2") TFDIFF=$(abspath "$3") TFDUMP=$(abspath "$4")
HAVE_MPI=$5 ART=$6
PY=${PYTHON3:-python3}
here=$(cd "$(dirname "$0")" && pwd)
# SMALL, MPIRUN, DP_SKIP_TIMEOUT: the bug zoo's way of running tftrain
. "$here/../bugzoo/small_model.sh"
CHECK=("$PY" "$here/browser_check.py" --timeout 60 --page-timeout 20)

if [ -n "${CHROMIUM:-}" ]; then
    command -v "$CHROMIUM" >/dev/null 2>&1 || { echo "SKIP: CHROMIUM=$CHROMIUM not found"; exit 0; }
elif ! command -v chromium >/dev/null 2>&1; then
    echo "SKIP: no chromium (Debian's chromium package; scripts/install-deps.sh installs it)"
    exit 0
fi
if ! "$TFDIFF" --help 2>&1 | grep -q -- '--html'; then
    echo "SKIP: this tfdiff has no --html (tfdiff --help does not mention it)"
    exit 0
fi

# tfdump --html came after tfdiff --html: its pages are left out (said so) without it
dump_html=ON
if ! "$TFDUMP" --help 2>&1 | grep -q -- '--html'; then
    dump_html=OFF
    echo "note: the tfdump --html pages left out: tfdump --help does not mention --html"
fi

mkdir -p "$ART"
ART=$(cd "$ART" && pwd)
if [ -n "${REPORTS_WORK:-}" ]; then
    work=$REPORTS_WORK
    rm -rf "$work"
    mkdir -p "$work"
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/reports.XXXXXX")
fi
failures=0
cleanup() {
    if [ "$failures" = 0 ] && [ -z "${REPORTS_KEEP:-}" ]; then
        rm -rf "$work"
    else
        echo "scratch directory kept: $work"
    fi
}
trap cleanup EXIT
cd "$work"

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# record DIR/NAME NRANKS WANT_RC [tftrace options] -- tftrain arguments
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
    [ "$n" -gt 1 ] && cmd=("${MPIRUN[@]}" "${cmd[@]}")
    echo "+ ${cmd[*]}"
    "${cmd[@]}" >"$out.log" 2>"$out.err" || rc=$?
    if { [ "$want" = any-nonzero ] && [ "$rc" = 0 ]; } || { [ "$want" != any-nonzero ] && [ "$rc" != "$want" ]; }; then
        sed 's/^/  stderr: /' "$out.err" | tail -20
        fail "$out: exit status $rc, expected $want"
        return 1
    fi
}

# page CASE WANT_RC TOOL INPUTS... -- browser_check.py expectations:
# TOOL (tfdiff or tfdump) --html ARTIFACTS/CASE.html INPUTS (its exit status
# one of WANT_RC, e.g. "0 1"); the page and its expectations join the batch
# that one browser checks at the end.
BATCH=$work/pages.batch
: >"$BATCH"
page() {
    local c=$1 want=$2 tool=$3 rc=0
    shift 3
    local inputs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        inputs+=("$1")
        shift
    done
    shift
    local exe=$TFDIFF
    [ "$tool" = tfdump ] && exe=$TFDUMP
    rm -f "$ART/$c.html" "$ART/$c.png"
    echo "+ $tool --html $ART/$c.html ${inputs[*]}"
    "$exe" --html "$ART/$c.html" "${inputs[@]}" >"$c.$tool.out" 2>"$c.$tool.err" || rc=$?
    sed 's/^/  stderr: /' "$c.$tool.err" | head -5
    case " $want " in *" $rc "*) ;; *) fail "$c: $tool --html exit status $rc, expected $want" ;; esac
    if [ ! -s "$ART/$c.html" ]; then
        fail "$c: $tool --html wrote no page"
        return
    fi
    printf '%q --screenshot %q' "$ART/$c.html" "$ART/$c.png" >>"$BATCH"
    printf ' %q' "$@" >>"$BATCH"
    echo >>"$BATCH"
}

# dp-skip@1: rank 1 skips step 1's all-reduce, rank 0 waits for it until
# tftrace's timeout. Recorded in the background (it mostly waits) while the
# other cases run; its output is shown when it is checked.
dp_skip=""
if [ "$HAVE_MPI" != ON ]; then
    echo "note: dp-skip left out: tftrain was built without MPI"
elif ! command -v mpirun >/dev/null 2>&1; then
    echo "note: dp-skip left out: no mpirun"
else
    mkdir dp-skip
    (
        record dp-skip/golden 2 0 -- "${SMALL[@]}" --steps 4 || exit 1
        # BAD must have reached its hang: tfdump --check finds rank 1
        # missing from step 1's all-reduce. On a loaded machine a run can
        # be ended before that: once more, with twice the time.
        timeouts=("${DP_SKIP_TIMEOUT[@]}")
        for try in 1 2; do
            rm -rf dp-skip/bad.trace
            record dp-skip/bad 2 any-nonzero "${timeouts[@]}" -- "${SMALL[@]}" --steps 4 --bug dp-skip@1 || exit 1
            rc=0
            "$TFDUMP" --check --json dp-skip/bad.trace >dp-skip/check.json 2>dp-skip/check.err || rc=$?
            if [ "$rc" = 1 ] && "$PY" "$here/../bugzoo/check_tfdiff.py" dp-skip/check.json \
                    --desync-kind missing --desync-step 1 --desync-ranks 1 >dp-skip/check.out 2>&1; then
                exit 0
            fi
            [ -f dp-skip/check.out ] && sed 's/^/  /' dp-skip/check.out | head -5
            echo "note: dp-skip's BAD (try $try) did not record its hang at step 1 (tfdump --check exit status $rc)"
            timeouts=(--timeout $((2 * ${DP_SKIP_TIMEOUT[1]})) --grace "${DP_SKIP_TIMEOUT[3]}")
        done
        exit 1
    ) >dp-skip/record.out 2>&1 &
    dp_skip=$!
fi

# causal-offbyone: the mask lets each position see the next one
mkdir causal-offbyone
record causal-offbyone/golden 1 0 -- "${SMALL[@]}" --steps 4 &&
record causal-offbyone/bad 1 0 -- "${SMALL[@]}" --steps 4 --bug causal-offbyone &&
page causal-offbyone 1 tfdiff causal-offbyone/golden.trace causal-offbyone/bad.trace -- \
    --report diff --status diverged --step 0 --section first-divergence,heatmap,curves --marked \
    --verdict-contains DIVERGED --verdict-contains L0.attn.mask
# one trace: a golden run has no findings
[ "$dump_html" = ON ] && [ -d causal-offbyone/golden.trace ] &&
page dump-golden "0 1" tfdump causal-offbyone/golden.trace -- --report dump --status ok --step none --section curves

# fp16-mask: the fp16 masked fill overflows to -inf, the softmax gives NaN
mkdir fp16-mask
record fp16-mask/golden 1 0 -- "${SMALL[@]}" --steps 4 --dtype fp16 &&
record fp16-mask/bad 1 0 -- "${SMALL[@]}" --steps 4 --dtype fp16 --bug fp16-mask &&
page fp16-mask 1 tfdiff fp16-mask/golden.trace fp16-mask/bad.trace -- \
    --report diff --status diverged --step 0 --section nonfinite --marked \
    --verdict-contains DIVERGED --verdict-contains L0.attn.probs

# leak@1: 1 MiB a step from step 1 on
mkdir leak
record leak/golden 1 0 -- "${SMALL[@]}" --steps 4 &&
record leak/bad 1 0 -- "${SMALL[@]}" --steps 4 --bug leak@1 &&
page leak 1 tfdiff leak/golden.trace leak/bad.trace -- --report diff --status diverged --section leaks --marked \
    --verdict-contains DIVERGED --verdict-contains tftrain:leak_buffer

# dp-skip, recorded above
if [ -n "$dp_skip" ]; then
    rc=0
    wait "$dp_skip" || rc=$?
    cat dp-skip/record.out
    if [ "$rc" != 0 ]; then
        fail "dp-skip: recording failed (above)"
    else
        page dp-skip 1 tfdiff dp-skip/golden.trace dp-skip/bad.trace -- \
            --report diff --status diverged --step 1 --section desync --marked --verdict-contains DIVERGED
        [ "$dump_html" = ON ] &&
        page dump-dp-skip "0 1" tfdump dp-skip/bad.trace -- \
            --report dump --status findings --step 1 --section collectives,check --verdict-contains missing
    fi
fi

# every page in one browser: console, network, DOM contract, screenshot
if [ -s "$BATCH" ]; then
    rc=0
    echo "+ browser_check.py --batch $BATCH ($(wc -l <"$BATCH") pages)"
    "${CHECK[@]}" --batch "$BATCH" >browser.out 2>&1 || rc=$?
    sed 's/^/  /' browser.out
    if [ "$rc" != 0 ]; then
        fail "pages failed in the browser: $(grep -c '^FAILED' browser.out) (their FAIL lines above; the contract: docs/REPORTS.md)"
    fi
fi
echo "pages and screenshots: $ART"
echo "time: ${SECONDS}s"
if [ "$failures" != 0 ]; then
    echo "reports.browser: $failures check(s) failed"
    exit 1
fi
echo "PASS reports.browser"
