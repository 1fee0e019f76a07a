# Sourced by the t_*.sh scripts: arguments, a scratch directory, assertions.
# Usage inside a test: source "$(dirname "$0")/lib.sh" "$@"
set -euo pipefail

# shellcheck disable=SC2034  # used by the scripts that source this file
TFDUMP=$1
# shellcheck disable=SC2034
SAMPLE=$2
# shellcheck disable=SC2034
MK_ODD=${3:-}
PY=${PYTHON3:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfdump-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# expect_rc WANT CMD...: runs CMD with stdout in $tmp/out and stderr in
# $tmp/err; fails unless its exit status is WANT.
expect_rc() {
    local want=$1 rc=0
    shift
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [ "$rc" != "$want" ]; then
        echo "--- stdout:" >&2; head -20 "$tmp/out" >&2
        echo "--- stderr:" >&2; cat "$tmp/err" >&2
        fail "exit status $rc, wanted $want: $*"
    fi
}

# has FILE TEXT: FILE contains TEXT (fixed string).
has() {
    if ! grep -qF -- "$2" "$1"; then
        echo "--- $1:" >&2; head -40 "$1" >&2
        fail "$(basename "$1") lacks '$2'"
    fi
}

# has_re FILE REGEX: some line of FILE matches the extended REGEX.
has_re() {
    if ! grep -qE -- "$2" "$1"; then
        echo "--- $1:" >&2; head -40 "$1" >&2
        fail "$(basename "$1") has no line matching '$2'"
    fi
}

# one_line FILE: FILE holds exactly one line (a one-line error message).
one_line() {
    local n
    n=$(wc -l <"$1")
    [ "$n" = 1 ] || { cat "$1" >&2; fail "$(basename "$1") has $n lines, wanted 1"; }
}

# pycheck CODE ARGS...: runs python3 CODE with ARGS as sys.argv[1:]; the code
# asserts (assert ..., msg) and its failure fails the test.
pycheck() {
    local code=$1
    shift
    "$PY" -c "import json, sys, os, fnmatch, re
$code" "$@" || fail "python check failed"
}
