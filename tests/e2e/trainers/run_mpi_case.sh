#!/bin/bash
# MPI trainer cases (tests/e2e/trainers/mpi.cmake): a program run on 4 ranks
# under tftrace, golden (mode ok) and bad (the planted bug); what tfdump
# --check --json, tfdiff --json and the records say is checked field by
# field by check_mpi_case.py.
# Usage: run_mpi_case.sh CASE TFTRACE TFDUMP TFDIFF PROG
#   CASE: grid-ok grid-count p2p-ok p2p-tag p2p-nosend mpi4py-ok mpi4py-count
#   PROG: mpi_grid (grid-*), mpi_pipeline (p2p-*), none (mpi4py-*)
set -euo pipefail
case_name=$1 tftrace=$2 tfdump=$3 tfdiff=$4 prog=$5
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-trainers-mpi.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 0; }
family=${case_name%%-*} mode=${case_name#*-}
py=/usr/bin/python3
if [ "$family" = mpi4py ]; then
    $py -c "import mpi4py, numpy" 2>/dev/null || { echo "SKIP: mpi4py or numpy missing for $py"; exit 0; }
    cmd=($py "$here/mpi4py_grid.py")
else
    cmd=("$prog")
fi

# Open MPI as root in a container; a rank's tftrace ends its command at
# --timeout, and Open MPI must not kill the other tftrace processes when
# the first exits non-zero (a collector killed before it closes its rank
# file can lose its last chunk). The planted bugs hang: their runs last
# the whole --timeout, long enough for 4 ranks to reach the planted
# iteration on a loaded machine (a correct run takes about a second).
# Ranks blocked in a hang yield their core (yield_when_idle) instead of
# spinning on it: they measured 4 x 32 % of two cores against 4 x 3-15 %,
# CPU the tests running beside them ("waits", scripts/test.sh) get back.
mpi4() {
    OMPI_MCA_orte_abort_on_non_zero_status=0 OMPI_MCA_mpi_yield_when_idle=1 \
        mpirun --allow-run-as-root --oversubscribe -np 4 "$@"
}
hang_secs=20
[ "$family" = mpi4py ] && hang_secs=40

want=$(mpi4 "${cmd[@]}" ok)
mpi4 "$tftrace" -q --timeout 120 -o "$tmp/golden.trace" -- "${cmd[@]}" ok >"$tmp/out"
[ "$(cat "$tmp/out")" = "$want" ] || fail "results changed under tftrace: $(cat "$tmp/out") vs $want"

# json FILE CMD...: runs a tool that exits 0 (nothing found) or 1 (found)
json() {
    local out=$1 st=0
    shift
    "$@" >"$out" || st=$?
    [ "$st" -le 1 ] || fail "$* exited $st: $(head -c 600 "$out")"
    echo "$st" >"$out.status"
}
json "$tmp/golden.check.json" "$tfdump" --check --json "$tmp/golden.trace"
"$tfdump" --events --json -k comm,collective "$tmp/golden.trace" >"$tmp/golden.events.json"
if [ "$mode" = ok ]; then
    "$py" "$here/check_mpi_case.py" "$case_name" "$tmp" || fail "$case_name"
    echo "PASS $case_name"
    exit 0
fi

mpi4 "$tftrace" -q --timeout $hang_secs -o "$tmp/bad.trace" -- "${cmd[@]}" "$mode" >/dev/null 2>&1 || true
json "$tmp/bad.check.json" "$tfdump" --check --json "$tmp/bad.trace"
"$tfdump" --check "$tmp/bad.trace" >"$tmp/bad.check.txt" || true
"$tfdump" --events --json -k comm,collective "$tmp/bad.trace" >"$tmp/bad.events.json"
json "$tmp/diff.json" "$tfdiff" --json "$tmp/golden.trace" "$tmp/bad.trace"
"$py" "$here/check_mpi_case.py" "$case_name" "$tmp" || {
    echo "--- tfdump --check:" >&2
    cat "$tmp/bad.check.txt" >&2
    fail "$case_name"
}
echo "PASS $case_name"
