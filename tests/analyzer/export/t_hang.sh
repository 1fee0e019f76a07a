# A 4-rank run whose last rank died inside its last step while the others
# waited in the all-reduce (tft_sample --crash): both exports show ranks
# 0-2 in an open MPI_Allreduce slice (entered, never returned) inside an
# open step, and the missing rank 3 with only its open step: what it was
# doing when the others hung.
source "$(dirname "$0")/lib.sh" "$@"

"$SAMPLE" "$tmp/h.trace" --ranks 4 --steps 3 --crash >/dev/null
expect_rc 0 "$TFDUMP" --export chrome "$tmp/h.json" "$tmp/h.trace"
has "$tmp/err" "rank-00003.tft"
expect_rc 0 "$TFDUMP" --export perfetto "$tmp/h.pftrace" "$tmp/h.trace"
pycheck '
import timeline as tl
def check(sl, what):
    open_ = [s for s in sl if s[5] is None]
    by = {}
    for pid, tid, name, cat, ts, dur in open_:
        by.setdefault(pid, set()).add((name, cat))
    for pid in (1, 2, 3):
        assert ("MPI_Allreduce", "collective") in by.get(pid, ()), (what, pid, by)
        assert ("step 2", "step") in by[pid], (what, pid, by)
    assert by.get(4) == {("step 2", "step")}, (what, "the missing rank", by.get(4))
    done = [s for s in sl if s[5] is not None and s[3] == "collective"]
    assert {s[0] for s in done} == {1, 2, 3, 4}, "the earlier all-reduces are complete"
sc = tl.slices_chrome(tl.chrome(sys.argv[1]))
check(sc, "chrome")
ev = tl.chrome(sys.argv[1])
b = [e for e in ev if e["ph"] == "B" and e["cat"] == "collective"]
assert all(e["args"]["coll_seq"] == 2 and "unfinished" in e["args"] for e in b), b
tracks, events = tl.perfetto_model(tl.perfetto(sys.argv[2], sys.argv[3]))
sp = [(s[0] or 0,) + s[1:] for s in tl.slices_perfetto(tracks, events)]
check([s for s in sp if s[0]], "perfetto")
' "$tmp/h.json" "$tmp/h.pftrace" "$PROTO"
echo PASS
