# A real hang: tftrain on 4 MPI ranks where the last rank skips the
# gradient all-reduce of step 1 (--bug dp-skip@1), ended by tftrace
# --timeout. The Chrome export shows ranks 0-2 in an open gradient
# all-reduce and rank 3, the one missing from it, open in the next
# collective on another communicator: where each rank waited.
source "$(dirname "$0")/lib.sh" "$@"
TFTRACE=$5 TFTRAIN=$6
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 0; }
OMPI_MCA_orte_abort_on_non_zero_status=0 \
    mpirun --allow-run-as-root --oversubscribe -np 4 "$TFTRACE" -q --timeout 4 -o "$tmp/h.trace" -- \
    "$TFTRAIN" --steps 3 --bug dp-skip@1 >/dev/null 2>&1 || true
expect_rc 0 "$TFDUMP" --export chrome "$tmp/h.json" "$tmp/h.trace"
expect_rc 0 "$TFDUMP" --export perfetto "$tmp/h.pftrace" "$tmp/h.trace"
pycheck '
import timeline as tl
ev = tl.chrome(sys.argv[1])
b = {}
for e in ev:
    if e["ph"] == "B" and e["cat"] == "collective":
        b.setdefault(e["pid"], []).append((e["args"]["comm"], e["args"]["coll_seq"]))
assert sorted(b) == [1, 2, 3, 4], b
calls = {pid: v[0] for pid, v in b.items()}
assert calls[1] == calls[2] == calls[3] and calls[4] != calls[1], calls
steps = {e["pid"] for e in ev if e["ph"] == "B" and e["cat"] == "step" and e["args"]["step"] == 1}
assert steps == {1, 2, 3, 4}, steps
tracks, events = tl.perfetto_model(tl.perfetto(sys.argv[2], sys.argv[3]))
opened = [s for s in tl.slices_perfetto(tracks, events) if s[5] is None and s[3] == "collective"]
assert len(opened) >= 4, opened
' "$tmp/h.json" "$tmp/h.pftrace" "$PROTO"
echo PASS
