# tfdiff --mpi: the rank files split over the processes of an MPI job give
# the same report (text and JSON, byte for byte, and the same exit status)
# as one process, on 5 ranks with a planted divergence (rank 1, step 2)
# and a planted desync (rank 2's all-reduce count at step 3); without
# mpirun --mpi runs as one process.
#   run_mpi_test.sh TFDIFF TFT_SAMPLE
set -u
TFDIFF=$1 SAMPLE=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tfdiff-mpi.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2)

"$SAMPLE" "$tmp/g.trace" --ranks 5 --steps 5 || fail "tft_sample GOLDEN"
"$SAMPLE" "$tmp/b.trace" --ranks 5 --steps 5 --diverge 1:2 --desync 2:3 || fail "tft_sample BAD"

rc=0; "$TFDIFF" -q "$tmp/g.trace" "$tmp/b.trace" >"$tmp/plain.txt" 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] || fail "plain tfdiff: want exit 1, got $rc: $(cat "$tmp/err")"
grep -q "first divergence: rank 1, step 2, .*L0.qkv" "$tmp/plain.txt" || fail "planted divergence not found: $(cat "$tmp/plain.txt")"
grep -q "desync: count at step 3" "$tmp/plain.txt" || fail "planted desync not found: $(cat "$tmp/plain.txt")"
rc=0; "$TFDIFF" --json "$tmp/g.trace" "$tmp/b.trace" >"$tmp/plain.json" 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] || fail "plain tfdiff --json: want exit 1, got $rc"

for form in txt json; do
    args=(-q)
    [ "$form" = json ] && args=(--json)
    rc=0; "${MPIRUN[@]}" "$TFDIFF" --mpi "${args[@]}" "$tmp/g.trace" "$tmp/b.trace" >"$tmp/mpi.$form" 2>"$tmp/err" || rc=$?
    [ "$rc" = 1 ] || fail "mpirun -np 2 tfdiff --mpi ($form): want exit 1, got $rc: $(cat "$tmp/err")"
    cmp -s "$tmp/plain.$form" "$tmp/mpi.$form" ||
        fail "--mpi over 2 processes ($form) differs from one process: $(diff "$tmp/plain.$form" "$tmp/mpi.$form" | head -20)"
done

# --mpi without mpirun: one process, the same report
rc=0; "$TFDIFF" --mpi -q "$tmp/g.trace" "$tmp/b.trace" >"$tmp/solo.txt" 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] || fail "tfdiff --mpi without mpirun: want exit 1, got $rc: $(cat "$tmp/err")"
cmp -s "$tmp/plain.txt" "$tmp/solo.txt" || fail "tfdiff --mpi without mpirun differs: $(diff "$tmp/plain.txt" "$tmp/solo.txt" | head)"
echo PASS
