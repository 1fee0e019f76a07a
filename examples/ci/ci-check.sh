#!/usr/bin/env bash
# ci-check.sh — record a short training run under tftrace, compare it with a
# stored golden trace, and leave what a CI job archives in one directory:
#
#   tfdiff-junit.xml    JUnit XML: a failing case per finding, the report attached
#   tfdiff-summary.md   Markdown summary for a pull-request comment / job summary
#   tfdiff-report.html  the HTML report: one self-contained page (docs/REPORTS.md)
#   tfdiff.txt          tfdiff's text report
#   bad-window.trace/   the steps around the divergence of this run (tfdump --extract)
#   golden-window.trace/ the same steps of the golden trace, so the pair compares offline
#
# The full trace of the run is deleted at the end (KEEP_FULL=1 keeps it as
# run.trace/): the window is what is worth keeping, not gigabytes.
#
# Usage:
#   ci-check.sh [--golden DIR] [--out DIR] [--window N] -- TRAIN_COMMAND [ARGS...]
#   ci-check.sh --refresh [--golden DIR] -- TRAIN_COMMAND [ARGS...]
#
#   --golden DIR   the golden trace (default: ci/golden.trace)
#   --out DIR      the artifacts directory (default: tftrace-artifacts; emptied first)
#   --window N     steps kept on each side of the divergent step (default 2)
#   --refresh      record TRAIN_COMMAND as the new golden trace (replacing DIR
#                  only once the recording succeeded) and compare nothing
#
# Environment: TFTRACE, TFDIFF, TFDUMP (the programs; default: from PATH),
# TFDIFF_OPTS (more tfdiff options, e.g. "--rtol 1e-3 --ranks 0"),
# TFTRACE_OPTS (more tftrace options, e.g. "--stats health"), KEEP_FULL=1,
# GITHUB_STEP_SUMMARY (GitHub Actions: the summary is appended to it).
#
# Exit status: tfdiff's — 0 no difference, 1 divergence (the job fails), 3
# incomplete (records dropped, a rank missing: fails too, look at the
# summary); 2 usage error, no golden trace, or a tool failed.
set -uo pipefail

die() {
    echo "ci-check: $*" >&2
    exit 2
}

golden=ci/golden.trace
out=tftrace-artifacts
window=2
refresh=0
while [ $# -gt 0 ]; do
    case $1 in
    --golden) [ $# -ge 2 ] || die "--golden needs a directory"; golden=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift 2 ;;
    --window)
        [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] || die "--window needs a number of steps"
        window=$2
        shift 2
        ;;
    --refresh) refresh=1; shift ;;
    --) shift; break ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (the training command goes after --)" ;;
    esac
done
[ $# -gt 0 ] || die "no training command: ci-check.sh [options] -- TRAIN_COMMAND [ARGS...]"

TFTRACE=${TFTRACE:-tftrace}
TFDIFF=${TFDIFF:-tfdiff}
TFDUMP=${TFDUMP:-tfdump}
for p in "$TFTRACE" "$TFDIFF" "$TFDUMP"; do
    command -v "$p" >/dev/null 2>&1 || die "$p: not found (install tftrace, or set TFTRACE, TFDIFF and TFDUMP)"
done
# shellcheck disable=SC2206  # word splitting of the extra options is wanted
tftrace_opts=(${TFTRACE_OPTS:-})
# shellcheck disable=SC2206
tfdiff_opts=(${TFDIFF_OPTS:-})

# record DIR CMD...: the run under tftrace; the command's own failure is a
# finding for tfdiff (its exit is in the trace), not an error here.
record() {
    local dir=$1 rc=0
    shift
    rm -rf "$dir"
    "$TFTRACE" "${tftrace_opts[@]}" -o "$dir" -- "$@" || rc=$?
    [ -f "$dir/manifest.json" ] || die "tftrace wrote no trace at $dir (exit status $rc)"
    [ "$rc" = 0 ] || echo "ci-check: the training command exited with status $rc; comparing what it recorded" >&2
}

if [ "$refresh" = 1 ]; then
    parent=$(dirname "$golden")
    mkdir -p "$parent" || die "cannot create $parent"
    new="$golden.new.$$"
    record "$new" "$@"
    "$TFDUMP" --verify "$new" >/dev/null || die "the new recording $new does not verify; the golden trace is unchanged"
    rm -rf "$golden.old.$$"
    if [ -e "$golden" ]; then mv "$golden" "$golden.old.$$" || die "cannot move the old golden trace aside"; fi
    mv "$new" "$golden" || die "cannot move $new to $golden"
    rm -rf "$golden.old.$$"
    echo "ci-check: $golden refreshed from: $*"
    echo "ci-check: review and commit it deliberately (git add $golden), see examples/ci/README.md"
    exit 0
fi

[ -d "$golden" ] || die "no golden trace at $golden: record one deliberately with: ci-check.sh --refresh --golden $golden -- $*"
rm -rf "$out"
mkdir -p "$out" || die "cannot create $out"
record "$out/run.trace" "$@"

reports=(--junit "$out/tfdiff-junit.xml" --markdown "$out/tfdiff-summary.md" --html "$out/tfdiff-report.html")
rc=0
"$TFDIFF" -q "${tfdiff_opts[@]}" "${reports[@]}" "$golden" "$out/run.trace" >"$out/tfdiff.txt" || rc=$?
cat "$out/tfdiff.txt"
[ "$rc" != 2 ] || die "tfdiff could not compare $golden with $out/run.trace (see above)"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f "$out/tfdiff-summary.md" ]; then
    cat "$out/tfdiff-summary.md" >>"$GITHUB_STEP_SUMMARY"
fi

if [ "$rc" != 0 ]; then
    # the step of the first finding ("... step 17 ..."), else the run's last step
    step=$(grep -m1 -E '^(first divergence|first non-finite|desync|leak|rank [0-9]+: BAD)' "$out/tfdiff.txt" |
        grep -oE 'step -?[0-9]+' | head -1 | grep -oE -- '-?[0-9]+$' || true)
    if [ -z "$step" ]; then
        step=$("$TFDUMP" --json "$out/run.trace" 2>/dev/null | grep -oE '"steps":\[-?[0-9]+,-?[0-9]+\]' |
            grep -oE -- '-?[0-9]+\]' | tr -d ']' || true)
    fi
    if [ -n "$step" ]; then
        lo=$((step - window))
        [ "$lo" -ge 0 ] || lo=0
        hi=$((step + window))
        for side in bad golden; do
            src=$out/run.trace
            [ "$side" = golden ] && src=$golden
            if "$TFDUMP" --extract --steps "$lo:$hi" "$src" "$out/$side-window.trace" &&
                "$TFDUMP" --verify "$out/$side-window.trace" >/dev/null; then
                echo "ci-check: kept steps $lo..$hi of $src in $out/$side-window.trace"
            else
                echo "ci-check: could not extract steps $lo..$hi of $src" >&2
            fi
        done
    else
        echo "ci-check: the run recorded no steps: keeping the whole trace" >&2
        KEEP_FULL=1
    fi
fi
[ "${KEEP_FULL:-0}" = 1 ] || rm -rf "$out/run.trace"
exit "$rc"
