#!/usr/bin/env bash
# run_layout_test.sh PYTHON3 SOURCE_DIR: the source tree's includes keep
# to the rooms of docs/ARCHITECTURE.md (scripts/check-layout.py), and the
# check does fail on an include across a boundary (a statistics kernel
# including the recording API, on a small tree made here) and on an
# analyzer function without its room's prefix.
set -u
py=$1 src=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$("$py" "$src/scripts/check-layout.py" "$src" 2>&1) || fail "the tree crosses its boundaries:
$out"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tracer/include" "$tmp/kernels/stats" "$tmp/formats/include"
echo '#include "tft_types.h"' >"$tmp/tracer/include/tft.h"
: >"$tmp/formats/include/tft_types.h"
printf '#include "tft_types.h"\n#include "tft.h"\n' >"$tmp/kernels/stats/stats.c"
rc=0
"$py" "$src/scripts/check-layout.py" "$tmp" >"$tmp/out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "a kernel including tft.h passed (exit $rc): $(cat "$tmp/out")"
grep -q "kernels/stats/stats.c:2: stats includes tracer/include/tft.h" "$tmp/out" ||
    fail "the message does not name the file and line: $(cat "$tmp/out")"
# an analyzer room's exported function without the room's prefix fails too
rm -f "$tmp/kernels/stats/stats.c"
mkdir -p "$tmp/analyzer/leak"
printf 'static int helper(void)\n{\n    return 0;\n}\n\nint leak_ok(void)\n{\n    return helper();\n}\n\nint find_leaks(void)\n{\n    return 1;\n}\n' >"$tmp/analyzer/leak/leak.c"
rc=0
"$py" "$src/scripts/check-layout.py" "$tmp" >"$tmp/out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "an unprefixed analyzer function passed (exit $rc): $(cat "$tmp/out")"
grep -q "analyzer/leak/leak.c:11: find_leaks() does not start with its room's prefix leak_" "$tmp/out" ||
    fail "the prefix message does not name the file, line and function: $(cat "$tmp/out")"
grep -q "helper\|leak_ok" "$tmp/out" && fail "a static or prefixed function was named: $(cat "$tmp/out")"
"$py" "$src/scripts/check-layout.py" --bogus >/dev/null 2>&1
[ $? = 2 ] || fail "a bad option is not exit 2"
echo PASS
