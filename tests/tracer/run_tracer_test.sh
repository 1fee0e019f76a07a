#!/usr/bin/env bash
# One tracer end-to-end case: record rec_prog under tftrace, check with rec_check.
set -euo pipefail
case_name=$1 tftrace=$2 prog=$3 check=$4
tmp=$(mktemp -d /tmp/tft-tracer-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
tr=$tmp/t.trace
# in sanitizer builds, let crashes reach the program's (the recorder's) handlers
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0:handle_abort=0"
export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}handle_segv=0:handle_abort=0"
expect_status() { # want got
  if [ "$1" != "$2" ]; then echo "FAIL: exit status $2, want $1"; exit 1; fi
}
case $case_name in
  threads)
    "$tftrace" -q -o "$tr" -- "$prog" threads 4 && st=0 || st=$?
    expect_status 0 $st
    "$check" threads "$tr" 4 ;;
  crash-segv|crash-abort|crash-kill)
    kind=${case_name#crash-}
    "$tftrace" -q -o "$tr" -- "$prog" crash "$kind" 5 && st=0 || st=$?
    case $kind in segv) want=139;; abort) want=134;; kill) want=137;; esac
    expect_status $want $st
    "$check" crash "$tr" 5 "$kind" ;;
  crash-exit)
    "$tftrace" -q -o "$tr" -- "$prog" crash exit3 4 && st=0 || st=$?
    expect_status 3 $st
    "$check" crash "$tr" 4 exit3 ;;
  timeout)
    start=$(date +%s)
    "$tftrace" -q --timeout 1 --grace 1 -o "$tr" -- "$prog" sleep && st=0 || st=$?
    end=$(date +%s)
    expect_status 143 $st
    [ $((end - start)) -lt 20 ] || { echo "FAIL: timeout took $((end - start)) s"; exit 1; }
    "$check" sleep "$tr" ;;
  overflow)
    out=$("$tftrace" -o "$tr" --ring-kb 64 -- "$prog" flood 300000 2>&1) && st=0 || st=$?
    expect_status 0 $st
    echo "$out"
    echo "$out" | grep -q "flood: [1-9][0-9]* of 300000 dropped" || { echo "FAIL: program saw no drops"; exit 1; }
    echo "$out" | grep -Eq "[1-9][0-9]* dropped" || { echo "FAIL: summary shows no drops"; exit 1; }
    "$check" dropped "$tr" ;;
  untraced)
    # without tftrace and TFT_*: every call a no-op, nothing written
    (cd "$tmp" && env -u TFT_OUTPUT -u TFT_SHM "$prog" threads 2)
    if ls "$tmp" | grep -q trace; then echo "FAIL: untraced run wrote a trace"; exit 1; fi ;;
  inproc)
    # no launcher: TFT_OUTPUT makes the library write the trace itself
    TFT_OUTPUT=$tr "$prog" threads 3
    [ -f "$tr/manifest.json" ] || { echo "FAIL: no manifest"; exit 1; }
    "$check" threads "$tr" 3 ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo "PASS $case_name"
