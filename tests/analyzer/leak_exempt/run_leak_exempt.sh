#!/bin/bash
# Real recordings of what no leak rule reports (analyzer/leak/leak_exempt.c),
# each checked to hold what it is about, so the case cannot pass vacuously.
# Usage: run_leak_exempt.sh CASE TFTRACE TFDUMP TFDIFF
#   gxx      g++ compiling a file with heavy C++ headers: cc1plus keeps its
#            collected heap (ggc_internal_alloc, ~200 MiB in ~90 blocks) to
#            its end. tfdump --check: no leak (before: an at-exit leak).
#   python   leak_objects.py under /usr/bin/python3: the small objects it
#            keeps grow CPython's arenas over the run. tfdump --check: no
#            leak (before: growth at the arena site); tfdiff against a run
#            that keeps nothing: numpy's kept arrays, at the peak, and not
#            the arenas.
# SKIP when g++, or numpy for /usr/bin/python3, is missing, and in sanitizer
# builds (the interposers record nothing there). Verdicts come
# from record order and byte counts, not timing.
set -euo pipefail
case_name=$1 tftrace=$2 tfdump=$3 tfdiff=$4
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-leak-exempt.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# leaks JSON: the sites of the "leaks" array of a --json report, one a line
leaks() { python3 -c 'import json,sys; [print(l["site"], l["how"]) for l in json.load(open(sys.argv[1]))["leaks"]]' "$1"; }

# (grep reads all of ldd's output: a grep -q could kill ldd by SIGPIPE)
sanitized() { ldd "$tftrace" | grep -E 'lib[at]san' >/dev/null; }
skip_if_sanitized() {
    if sanitized; then
        echo "SKIP: sanitizer build: its malloc precedes the interposers (nothing to record)"
        exit 0
    fi
}

# blocks TRACE SITE_RE BYTES: how many ALLOC records of BYTES at a site matching SITE_RE
blocks() { "$tfdump" --events "$1" | grep -c -E " alloc .*bytes=$3 site=($2) " || true; }

case $case_name in
gxx)
    command -v g++ >/dev/null || { echo "SKIP: no g++"; exit 0; }
    "$tftrace" -q -o "$tmp/gxx.trace" -- g++ -O0 -c -o "$tmp/heavy.o" "$here/leak_heavy.cpp" ||
        fail "g++ under tftrace"
    skip_if_sanitized
    n=$("$tfdump" --events "$tmp/gxx.trace" | grep -c ' alloc .*site=_Z18ggc_internal_alloc' || true)
    [ "$n" -ge 16 ] || fail "cc1plus recorded $n ggc blocks; the case needs its heap in the trace"
    st=0
    "$tfdump" --check --json "$tmp/gxx.trace" >"$tmp/check.json" || st=$?
    [ -z "$(leaks "$tmp/check.json")" ] || fail "a compiler's leak: $(leaks "$tmp/check.json")"
    [ "$st" = 0 ] || fail "tfdump --check exit $st"
    ;;
python)
    py=/usr/bin/python3
    "$py" -c 'import numpy' 2>/dev/null || { echo "SKIP: numpy is not installed for $py"; exit 0; }
    for keep in none all; do
        "$tftrace" -q -o "$tmp/$keep.trace" -- "$py" "$here/leak_objects.py" --keep $keep >"$tmp/$keep.out" ||
            fail "leak_objects.py --keep $keep under tftrace"
    done
    skip_if_sanitized
    arena='_PyObject_ArenaMmap|_PyMem_ArenaAlloc|(lib)?python[0-9.a-z_-]*\+0x[0-9a-f]+'
    n=$(blocks "$tmp/all.trace" "$arena" 1048576)
    [ "$n" -ge 40 ] || fail "$n arenas recorded; the case needs CPython's arenas growing in the trace"
    st=0
    "$tfdump" --check --json "$tmp/all.trace" >"$tmp/check.json" || st=$?
    [ -z "$(leaks "$tmp/check.json")" ] || fail "tfdump --check: $(leaks "$tmp/check.json")"
    [ "$st" = 0 ] || fail "tfdump --check exit $st"
    st=0
    "$tfdiff" --json "$tmp/none.trace" "$tmp/all.trace" >"$tmp/diff.json" || st=$?
    got=$(leaks "$tmp/diff.json")
    [ "$(echo "$got" | wc -l)" = 1 ] && [[ $got == _multiarray_umath*" peak" ]] ||
        fail "tfdiff's leaks: want numpy's at the peak alone, got: $got"
    ;;
*)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS $case_name"
