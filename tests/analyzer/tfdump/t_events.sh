# --events: orders, and each filter (--rank, --steps, --name, --kind, and
# combinations) gives exactly the records of the full dump that match it.
source "$(dirname "$0")/lib.sh" "$@"

# 20 steps span several 64 KiB chunks per rank, so --steps seeks for real.
"$SAMPLE" "$tmp/e.trace" --ranks 2 --steps 20 >/dev/null
T=$tmp/e.trace
"$TFDUMP" --events --json "$T" >"$tmp/all.jsonl"
"$TFDUMP" --events --json --order time "$T" >"$tmp/time.jsonl"

# check_subset FILE FILTER-EXPRESSION: FILE holds exactly the records of the
# full dump for which the python expression (over e) is true, in the same order.
check_subset() {
    pycheck '
allr = [json.loads(l) for l in open(sys.argv[1])]
got = [json.loads(l) for l in open(sys.argv[2])]
want = [e for e in allr if eval(sys.argv[3])]
assert want, "the filter selects nothing in the fixture: " + sys.argv[3]
assert got == want, "%s: got %d records, wanted %d" % (sys.argv[3], len(got), len(want))
' "$tmp/all.jsonl" "$1" "$2"
}

# default order: by (step, seq); records without a step sort with the last
# step seen on their rank; each rank keeps its file order
pycheck '
ev = [json.loads(l) for l in open(sys.argv[1])]
last = {}
keys = []
for e in ev:
    if e["step"] is not None:
        last[e["rank"]] = e["step"]
    seq = e["seq"] if e["seq"] is not None else -1
    keys.append((last.get(e["rank"], -1), seq))
assert keys == sorted(keys), "not in (step, seq) order"
assert {e["rank"] for e in ev} == {0, 1}
tm = [json.loads(l) for l in open(sys.argv[2])]
assert len(tm) == len(ev)
assert [e["ts"] for e in tm] == sorted(e["ts"] for e in tm), "--order time not sorted by ts"
for r in (0, 1):
    assert [e for e in tm if e["rank"] == r] == [e for e in ev if e["rank"] == r], "rank order changed"
' "$tmp/all.jsonl" "$tmp/time.jsonl"

"$TFDUMP" --events --json --rank 1 "$T" >"$tmp/f.jsonl"
check_subset "$tmp/f.jsonl" 'e["rank"] == 1'

"$TFDUMP" --events --json --steps 15:16 "$T" >"$tmp/f.jsonl"
check_subset "$tmp/f.jsonl" 'e["step"] is not None and 15 <= e["step"] <= 16'

# one rank + steps: the reader seeks to the first chunk holding the range.
# Start at a step that straddles two chunks: a seek one chunk too far loses
# its beginning.
S=$("$TFDUMP" --chunks --json --rank 0 "$T" | "$PY" -c '
import json, sys
c = [json.loads(l) for l in sys.stdin]
assert len(c) >= 3, "the fixture should span several chunks"
print(c[1]["steps"][1])')
"$TFDUMP" --events --json --rank 0 --steps "$S:$((S + 1))" "$T" >"$tmp/f.jsonl"
check_subset "$tmp/f.jsonl" "e['rank'] == 0 and e['step'] is not None and $S <= e['step'] <= $S + 1"
pycheck '
got = [json.loads(l) for l in open(sys.argv[1])]
s = int(sys.argv[2])
marks = [(e["step"], e["phase"]) for e in got if e["kind"] == "step"]
assert marks == [(s, "begin"), (s, "end"), (s + 1, "begin"), (s + 1, "end")], marks
' "$tmp/f.jsonl" "$S"

"$TFDUMP" --events --json --steps 3 "$T" >"$tmp/f.jsonl"
check_subset "$tmp/f.jsonl" 'e["step"] == 3'
"$TFDUMP" --events --json --steps 18: "$T" >"$tmp/f.jsonl"
check_subset "$tmp/f.jsonl" 'e["step"] is not None and e["step"] >= 18'

"$TFDUMP" --events --json --name 'L1.attn.*' "$T" >"$tmp/f.jsonl"
check_subset "$tmp/f.jsonl" 'e["name"] is not None and fnmatch.fnmatchcase(e["name"], "L1.attn.*")'

"$TFDUMP" --events --json --kind collective "$T" >"$tmp/f.jsonl"
check_subset "$tmp/f.jsonl" 'e["kind"] == "collective"'
[ "$(wc -l <"$tmp/f.jsonl")" = 80 ] || fail "wanted 80 collective records (2 ranks x 20 steps x enter/exit)"

"$TFDUMP" --events --json --kind step,checkpoint --kind process "$T" >"$tmp/f.jsonl"
check_subset "$tmp/f.jsonl" 'e["kind"] in ("step", "checkpoint", "process")'

"$TFDUMP" --events --json --rank 1 --steps 2:3 --kind tensor,op --name 'L0.*' "$T" >"$tmp/f.jsonl"
check_subset "$tmp/f.jsonl" 'e["rank"] == 1 and e["step"] in (2, 3) and e["kind"] in ("tensor", "op") and fnmatch.fnmatchcase(e["name"] or "", "L0.*")'

# text mode: one line per record, the same selection, the compact format
"$TFDUMP" --events "$T" >"$tmp/all.txt"
[ "$(wc -l <"$tmp/all.txt")" = "$(wc -l <"$tmp/all.jsonl")" ] || fail "text and JSON record counts differ"
"$TFDUMP" --events --rank 0 --steps 3 --name L0.qkv "$T" >"$tmp/f.txt"
[ "$(wc -l <"$tmp/f.txt")" = 1 ] || fail "wanted the one L0.qkv tensor of rank 0 step 3"
has_re "$tmp/f.txt" '^r0 s3 q[0-9]+ tensor L0\.qkv f32\[4,64,768\] .*nan=0 .*min=[-0-9.e]+ max=[-0-9.e]+ mean=[-0-9.e]+ .*fp=[0-9a-f]{16}$'
"$TFDUMP" --events --rank 1 --steps 4 --kind collective "$T" >"$tmp/f.txt"
has_re "$tmp/f.txt" '^r1 s4 q[0-9]+ collective MPI_Allreduce allreduce enter comm=c0ffee0000000001 cseq=4 count=[0-9]+ f32 sum rank=1/2$'
has_re "$tmp/f.txt" '^r1 s4 q[0-9]+ collective MPI_Allreduce allreduce comm=c0ffee0000000001 cseq=4 count=[0-9]+ f32 sum rank=1/2 dur=[0-9.]+us result=[0-9]+$'
echo PASS
