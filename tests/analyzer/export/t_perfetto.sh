# --export perfetto on a 2-rank synthetic run: the file is a protobuf Trace
# (protoc --decode_raw reads it; --decode against the schema subset gives
# the packets), each rank its own packet sequence that starts by clearing
# its incremental state, names interned, one process track per rank with a
# thread and a device track under it, the same slices as the Chrome export
# of the same trace, flows joining the ranks' collectives, counters.
source "$(dirname "$0")/lib.sh" "$@"

"$SAMPLE" "$tmp/p.trace" --ranks 2 --steps 4 >/dev/null
T=$tmp/p.trace
expect_rc 0 "$TFDUMP" --export perfetto "$tmp/p.pftrace" "$T"
expect_rc 0 "$TFDUMP" --export chrome "$tmp/p.json" "$T"
protoc --decode_raw <"$tmp/p.pftrace" >"$tmp/raw.txt" || fail "protoc --decode_raw cannot read the export"
has_re "$tmp/raw.txt" '^1 \{$'

pycheck '
import timeline as tl
pk = tl.perfetto(sys.argv[1], sys.argv[2])
assert len(pk) > 400, len(pk)
seqs = {}
for p in pk:
    seqs.setdefault(tl.one(p, "trusted_packet_sequence_id"), []).append(p)
assert sorted(seqs) == [1, 2], sorted(seqs)
for s, ps in seqs.items():
    first = ps[0]
    assert tl.one(first, "sequence_flags") == 1 and tl.one(first, "first_packet_on_sequence") == "true", first
    assert all(tl.one(p, "sequence_flags", 0) != 1 for p in ps[1:]), "incremental state cleared twice"
    proc = tl.one(tl.one(first, "track_descriptor"), "process")
    assert tl.one(proc, "pid") == s and tl.one(proc, "process_name").startswith("rank %d " % (s - 1)), proc
tracks, events = tl.perfetto_model(pk)
procs = [t for t in tracks.values() if "process" in t]
threads = [t for t in tracks.values() if "thread" in t]
counters = {tl.one(t, "name"): t for t in tracks.values() if "counter" in t}
devices = [t for t in tracks.values() if tl.one(t, "name", "").startswith("cuda:0 stream")]
assert len(procs) == 2 and len(threads) == 2 and len(devices) == 2, (len(procs), len(threads), len(devices))
for t in threads + devices + list(counters.values()):
    assert tl.one(t, "parent_uuid") in {tl.one(p, "uuid") for p in procs}, t
assert set(counters) == {"live bytes host", "rss bytes", "loss", "grad_norm"}, set(counters)
assert tl.one(tl.one(counters["live bytes host"], "counter"), "unit") == "UNIT_SIZE_BYTES"
# every event before its track is described, and refers to a known track
seen = set()
for p in pk:
    td = tl.one(p, "track_descriptor")
    if td:
        seen.add(tl.one(td, "uuid"))
    te = tl.one(p, "track_event")
    if te:
        assert tl.one(te, "track_uuid") in seen, "an event before its track descriptor"
# the same slices as the Chrome export (thread tracks), and as many on device tracks
sp = tl.slices_perfetto(tracks, events)
sc = tl.slices_chrome(tl.chrome(sys.argv[3]))
assert [s for s in sp if s[0] is not None] == [s for s in sc if s[1] % 1000 < 500], "the two exports disagree"
assert len([s for s in sp if s[0] is None]) == len([s for s in sc if s[1] % 1000 >= 500]) > 0
ops = [e for e in events if e["type"] == "TYPE_SLICE_BEGIN" and e["cat"] == "op" and e["args"]["kind"] == "gemm"]
assert ops and all(e["name"] == "matmul" and "scope" in e["args"] and "step" in e["args"] for e in ops), ops[:1]
# flows: each id on exactly two collective slices, one per rank
fl = {}
for e in events:
    for f in e["flows"]:
        fl.setdefault(f, []).append(e)
assert len(fl) == 4, len(fl)
for f, evs in fl.items():
    assert len(evs) == 2 and {e["seq"] for e in evs} == {1, 2}, evs
    assert all(e["cat"] == "collective" and e["name"] == "MPI_Allreduce" for e in evs)
    assert evs[0]["args"]["coll_seq"] == evs[1]["args"]["coll_seq"]
loss = [e["counter"] for e in events if e["type"] == "TYPE_COUNTER" and tl.one(tracks[e["track"]], "name") == "loss"]
cl = [c["args"]["value"] for c in tl.chrome(sys.argv[3]) if c["ph"] == "C" and c["name"] == "loss"]
assert len(loss) == 8 and [round(v, 9) for v in loss] == [round(v, 9) for v in cl], (loss, cl)
' "$tmp/p.pftrace" "$PROTO" "$tmp/p.json"

# --steps and --ranks select here too
expect_rc 0 "$TFDUMP" --export perfetto "$tmp/f.pftrace" --ranks 0 --steps 1:2 "$T"
pycheck '
import timeline as tl
tracks, events = tl.perfetto_model(tl.perfetto(sys.argv[1], sys.argv[2]))
assert {e["seq"] for e in events} == {1}
assert sorted(e["name"] for e in events if e.get("cat") == "step" and e["type"] == "TYPE_SLICE_BEGIN") == ["step 1", "step 2"]
assert len([t for t in tracks.values() if "process" in t]) == 1
' "$tmp/f.pftrace" "$PROTO"
echo PASS
