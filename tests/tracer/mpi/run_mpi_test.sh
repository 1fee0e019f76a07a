#!/bin/bash
# MPI interposer cases of mpi_life.c under tftrace (tests/tracer/mpi):
# communicators freed and their handles reused, MPI_THREAD_MULTIPLE, byte
# buffers. Usage: run_mpi_test.sh CASE TFTRACE TFDUMP PROG
set -euo pipefail
case_name=$1 tftrace=$2 tfdump=$3 prog=$4
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-mpi.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 0; }
np=4
[ "$case_name" = bytes ] && np=2
[ "$case_name" = threads ] && np=2
# every rank's output, each line prefixed by its rank ("[1,0]<stdout>:")
OMPI_MCA_orte_abort_on_non_zero_status=0 \
    mpirun --allow-run-as-root --oversubscribe --tag-output -np $np \
    "$tftrace" -q --timeout 60 -o "$tmp/t.trace" -- "$prog" "$case_name" >"$tmp/out" \
    || fail "$case_name exited $? under tftrace: $(head -c 2000 "$tmp/out")"
grep -q "SKIP:" "$tmp/out" && { grep -m1 "SKIP:" "$tmp/out" | sed 's/^.*SKIP/SKIP/'; exit 0; }
st=0; "$tfdump" --check --json "$tmp/t.trace" >"$tmp/check.json" || st=$?
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['desync']==[], j['desync']" "$tmp/check.json" \
    || fail "false desync (exit $st): $(head -c 2000 "$tmp/check.json")"
"$tfdump" --events --json "$tmp/t.trace" >"$tmp/all.json"
# ASan's quarantine keeps freed memory from coming back at once: there
# MPI hands out no freed communicator handle, and only the naming is checked
need_reuse=1
if ldd "$prog" 2>/dev/null | grep libasan >/dev/null; then need_reuse=0; fi
python3 "$here/check_mpi_life.py" "$case_name" "$tmp/out" "$tmp/all.json" $need_reuse || fail "$case_name: records"
