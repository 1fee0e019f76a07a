#!/usr/bin/env bash
# run-fuzz.sh — fuzzes each libFuzzer target for a fixed time on a copy of
# its seed corpus (the seeds in tests/fuzz/corpus/ are never modified).
#
#   tests/fuzz/run-fuzz.sh BUILD_DIR SECONDS [TARGET...]
#
# A dictionary tests/fuzz/TARGET.dict is used when present.
# BUILD_DIR was configured with -DCMAKE_C_COMPILER=clang -DTFT_FUZZ=ON
# (and usually -DTFT_SANITIZE=address); targets default to all of them.
# Prints the executions of each target; exits 1 when a target crashed,
# leaked, timed out or ran out of memory, and keeps its work directory
# (crashing input, log) for inspection. Extra libFuzzer flags: FUZZ_ARGS.
set -u

usage() { echo "usage: $0 BUILD_DIR SECONDS [fuzz_reader|fuzz_manifest|fuzz_check|fuzz_diff|fuzz_capture|fuzz_tracedir ...]" >&2; exit 2; }
[ $# -ge 2 ] || usage
build=$1
secs=$2
shift 2
case $secs in ''|*[!0-9]*) usage ;; esac
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_reader fuzz_manifest fuzz_check fuzz_diff fuzz_capture fuzz_tracedir)

here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tft-fuzz.XXXXXX") || exit 1
status=0

for t in "${targets[@]}"; do
    bin=$build/tests/fuzz/$t
    seeds=$here/corpus/${t#fuzz_}
    if [ ! -x "$bin" ]; then
        echo "$t: $bin not built (configure with clang and -DTFT_FUZZ=ON, then build $t)" >&2
        status=1
        continue
    fi
    mkdir -p "$work/$t/corpus" "$work/$t/artifacts"
    [ -d "$seeds" ] && cp "$seeds"/* "$work/$t/corpus/" 2>/dev/null
    log=$work/$t/fuzz.log
    dict=()
    [ -f "$here/$t.dict" ] && dict=(-dict="$here/$t.dict")
    # the analyzers' targets print what tfdump and tfdiff would: keep it out of the log
    case $t in fuzz_check|fuzz_diff|fuzz_capture|fuzz_tracedir) dict+=(-close_fd_mask=3) ;; esac
    # shellcheck disable=SC2086
    "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 \
        -artifact_prefix="$work/$t/artifacts/" ${dict[@]+"${dict[@]}"} ${FUZZ_ARGS:-} "$work/$t/corpus" >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1)
    if [ $rc -eq 0 ]; then
        echo "$t: ok, ${runs:-?} runs in ${secs} s (${speed:-?}/s), $cov"
    else
        status=1
        echo "$t: FAILED (exit $rc) after ${runs:-?} runs; log $log" >&2
        grep -E 'ERROR: |SUMMARY: |invariant failed|runtime error' "$log" | head -5 >&2
        for a in "$work/$t/artifacts"/*; do
            [ -e "$a" ] && echo "$t: reproduce with: $bin $a" >&2
        done
    fi
done

if [ $status -eq 0 ]; then
    rm -rf "$work"
else
    echo "work directory kept: $work" >&2
fi
exit $status
