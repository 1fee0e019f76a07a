#!/usr/bin/env bash
# run_dlopen_test.sh DLOPEN_PROG LIBTFTRACE TFDUMP [SANITIZER]: libtftrace.so loads
# with dlopen into a running program (its initial-exec TLS fits glibc's
# static TLS surplus) — from C, and from Python through ctypes when python3
# is there — and records in-process (TFT_OUTPUT) from two threads, scopes
# included.
set -u
prog=$1 lib=$2 tfdump=$3 sanitizer=${4:-}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# not traced: loads, records nothing
out=$(env -u LD_PRELOAD -u TFT_OUTPUT -u TFT_SHM "$prog" "$lib" 2>&1) || fail "untraced: $out"
# traced in-process
out=$(env -u LD_PRELOAD -u TFT_SHM TFT_OUTPUT="$tmp/d.trace" "$prog" "$lib" 2>&1) || fail "in-process: $out"
"$tfdump" --events --json "$tmp/d.trace" >"$tmp/ev.json" 2>"$tmp/err" || fail "tfdump: $(cat "$tmp/err")"
n=$(grep -c '"kind": *"tensor"' "$tmp/ev.json")
[ "$n" = 2 ] || fail "want 2 tensors, got $n: $(cat "$tmp/ev.json")"
grep -q '"main"' "$tmp/ev.json" || fail "the main thread's scope is missing"
grep -q '"worker"' "$tmp/ev.json" || fail "the worker's scope is missing"
# (a sanitizer build's library needs its runtime loaded first: not in python)
if [ -z "$sanitizer" ] && command -v python3 >/dev/null; then
    out=$(env -u LD_PRELOAD python3 -c "import ctypes, sys; l = ctypes.CDLL(sys.argv[1]); print(l.tft_enabled())" \
          "$lib" 2>&1) || fail "python ctypes: $out"
    [ "$out" = 0 ] || fail "python ctypes: tft_enabled() = $out untraced"
fi
echo PASS
