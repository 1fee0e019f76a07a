# A crashed run (tft_sample --crash): the last rank file was never closed,
# it has no exit record, the manifest was never finished; the other ranks
# were killed. tfdump says so, and --verify fails.
source "$(dirname "$0")/lib.sh" "$@"

"$SAMPLE" "$tmp/c.trace" --ranks 3 --steps 5 --crash >/dev/null

expect_rc 0 "$TFDUMP" "$tmp/c.trace"
has_re "$tmp/out" '^integrity +torn$'
has_re "$tmp/out" 'rank 2: unknown \(no exit recorded\)'
has_re "$tmp/out" 'rank 0: killed by signal 15'
has_re "$tmp/out" '^collectives +14 calls, 2 entered and never returned'
has_re "$tmp/out" 'rank 1: MPI_Allreduce comm=c0ffee0000000001 cseq=4 step 4$'
has "$tmp/err" "rank-00002.tft"

expect_rc 0 "$TFDUMP" --json "$tmp/c.trace"
pycheck '
s = json.load(open(sys.argv[1]))
assert s["integrity"] == "torn", s["integrity"]
assert s["exit"] == {"0": {"signal": 15}, "1": {"signal": 15}, "2": None}, s["exit"]
assert s["manifest"]["complete"] is False and s["manifest"]["exit_status"] is None
f = {x["rank"]: x for x in s["files"]}
assert not f[2]["closed"] and f[2]["integrity"] == "torn" and f[0]["closed"], f
assert s["steps"] == [0, 4]
# the killed ranks hung in the last all-reduce: entered, never returned
u = [(x["rank"], x["name"], x["coll_seq"], x["step"]) for x in s["collectives_unfinished"]]
assert u == [(0, "MPI_Allreduce", 4, 4), (1, "MPI_Allreduce", 4, 4)], u
assert s["collectives"] == 14, s["collectives"]
' "$tmp/out"

expect_rc 0 "$TFDUMP" --events --json --kind process "$tmp/c.trace"
pycheck '
ev = [json.loads(l) for l in open(sys.argv[1])]
exits = {e["rank"] for e in ev if e["event"] == "exit"}
assert exits == {0, 1}, exits
assert any(e["rank"] == 2 and e["event"] == "start" for e in ev)
' "$tmp/out"

# an exit the rank file lacks is taken from the manifest (a launcher that
# saw the rank die writes it there)
"$PY" -c '
import json, sys
m = json.load(open(sys.argv[1]))
m["ranks"][2]["exit"] = {"signal": 11}
m["ranks"][0]["exit"] = {"code": 7}
json.dump(m, open(sys.argv[1], "w"))' "$tmp/c.trace/manifest.json"
expect_rc 0 "$TFDUMP" --json "$tmp/c.trace"
pycheck '
s = json.load(open(sys.argv[1]))
assert s["exit"] == {"0": {"signal": 15}, "1": {"signal": 15}, "2": {"signal": 11}}, s["exit"]
' "$tmp/out"

expect_rc 1 "$TFDUMP" --verify "$tmp/c.trace"
has_re "$tmp/out" 'c\.trace/rank-00002\.tft: .*not closed'
has_re "$tmp/out" '^FAILED: .*1 torn, 0 damaged'
echo PASS
