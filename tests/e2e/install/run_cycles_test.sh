#!/usr/bin/env bash
# run_cycles_test.sh PYTHON3 SOURCE_DIR LISTING: no two source files of the
# libraries in LISTING ("TARGET OBJECT" lines, written by CMake) call each
# other (scripts/check-cycles.py; calls to the functions libtftrace
# interposes, tracer/lib/interposed.txt, go to the library they stand in
# for), and the check does fail on two files
# that do (compiled here).
set -u
py=$1 src=$2 listing=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
[ -s "$listing" ] || fail "no object listing at $listing"
out=$("$py" "$src/scripts/check-cycles.py" --interposed "$src/tracer/lib/interposed.txt" "$listing" 2>&1) || fail "files call each other:
$out"
echo "$(wc -l <"$listing") object files: no cycle"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
printf 'int pong(int);\nint ping(int n) { return n ? pong(n - 1) : 0; }\n' >"$tmp/ping.c"
printf 'int ping(int);\nint pong(int n) { return n ? ping(n - 1) : 1; }\nint leaf(void) { return 2; }\n' >"$tmp/pong.c"
printf 'int leaf(void);\nint top(void) { return leaf(); }\n' >"$tmp/top.c"
for f in ping pong top; do cc -c -o "$tmp/$f.c.o" "$tmp/$f.c" || fail "cc"; done
printf 'demo %s\n' "$tmp/ping.c.o" "$tmp/pong.c.o" "$tmp/top.c.o" >"$tmp/list"
rc=0
"$py" "$src/scripts/check-cycles.py" "$tmp/list" >"$tmp/out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "two files calling each other passed (exit $rc): $(cat "$tmp/out")"
grep -q "demo: ping.c, pong.c call each other" "$tmp/out" || fail "the message does not name them: $(cat "$tmp/out")"
grep -q top "$tmp/out" && fail "a one-way call was named: $(cat "$tmp/out")"
echo PASS
