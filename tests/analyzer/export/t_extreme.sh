# Records with extreme and contradictory fields (mk_extreme, two ranks on
# two hosts): both exports succeed, the JSON parses, the protobuf decodes,
# both hold the same slices, every slice lasts >= 0, tracks stay within
# their bounds (499 device streams, then one shared track) and no
# collective fans out more flows than the trace has ranks.
source "$(dirname "$0")/lib.sh" "$@"
MK_EXTREME=$5

"$MK_EXTREME" "$tmp/x.trace" || fail "mk_extreme failed"
expect_rc 0 "$TFDUMP" --export chrome "$tmp/x.json" "$tmp/x.trace"
expect_rc 0 "$TFDUMP" --export perfetto "$tmp/x.pftrace" "$tmp/x.trace"
pycheck '
import timeline as tl
ev = tl.chrome(sys.argv[1])
for e in ev:
    assert "pid" in e and e["ph"] in "MXBisfC", e
    if e["ph"] == "X":
        assert e["dur"] >= 0 and e["ts"] >= 0, e
tn = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
for pid in (1, 2):
    dev = [t for t in tn if t[0] == pid and t[1] % 1000 >= 500]
    assert len(dev) == 500, len(dev)
    assert len([t for t in tn if t[0] == pid and t[1] % 1000 < 500]) <= 500
fl = {}
for e in ev:
    if e["ph"] in "sf":
        fl.setdefault(e["id"], []).append(e["ph"])
assert 0 < len(fl) <= 8 and all(len(v) <= 2 for v in fl.values()), fl
tracks, events = tl.perfetto_model(tl.perfetto(sys.argv[2], sys.argv[3]))
sp = tl.slices_perfetto(tracks, events)
sc = tl.slices_chrome(ev)
assert [s for s in sp if s[0] is not None] == [s for s in sc if s[1] % 1000 < 500], "the two exports disagree"
' "$tmp/x.json" "$tmp/x.pftrace" "$PROTO"
echo PASS
