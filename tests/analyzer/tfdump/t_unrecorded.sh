# A run that recorded nothing: a trace directory with its manifest and no
# rank file (the command was killed before its first record, as tftrace
# writes it for `tftrace -o X -- sh -c 'kill -9 $$'`). Every mode says what
# the manifest knows instead of "not a tftrace trace": the summary and
# --verify exit 0, --check 1 (nothing could be checked), --tensor 2. A
# manifest that lists rank files none of which is there: --verify exit 1.
source "$(dirname "$0")/lib.sh" "$@"

"$SAMPLE" "$tmp/a.trace" --ranks 2 --steps 2 >/dev/null
mkdir "$tmp/k.trace"
"$PY" -c '
import json, sys
m = json.load(open(sys.argv[1]))
m["command"] = ["/usr/bin/tftrace", "-o", "k.trace", "--", "./train", "--steps", "100"]
m["start_ns"], m["end_ns"] = "1700000000000000000", "1700000002500000000"
m["complete"], m["exit_status"], m["ranks"], m["world_size"] = True, 137, [], 0
json.dump(m, open(sys.argv[2], "w"))' "$tmp/a.trace/manifest.json" "$tmp/k.trace/manifest.json"

expect_rc 0 "$TFDUMP" "$tmp/k.trace"
has_re "$tmp/out" '^command +/usr/bin/tftrace -o k.trace -- ./train --steps 100$'
has_re "$tmp/out" '^duration +2\.500 s$'
has_re "$tmp/out" '^exit +killed by signal 9 \(status 137\)$'
has_re "$tmp/out" '^recorded +nothing \(no rank file: the command ended before its first record\)$'
[ ! -s "$tmp/err" ] || fail "warnings for a trace that recorded nothing: $(cat "$tmp/err")"

expect_rc 0 "$TFDUMP" --json "$tmp/k.trace"
pycheck '
s = json.load(open(sys.argv[1]))
assert s["recorded"] is False and s["command_exit"] == {"signal": 9}, s
assert s["duration_ns"] == 2500000000, s["duration_ns"]
assert s["ranks"] == 0 and s["records"] == 0 and s["files"] == [] and s["exit"] == {}, s
assert s["manifest"]["exit_status"] == 137 and s["manifest"]["command"][4] == "./train", s["manifest"]
' "$tmp/out"
# a recorded trace says so too, with its command exit from the manifest
expect_rc 0 "$TFDUMP" --json "$tmp/a.trace"
pycheck '
s = json.load(open(sys.argv[1]))
assert s["recorded"] is True and s["command_exit"] == {"code": 0}, s
' "$tmp/out"

expect_rc 1 "$TFDUMP" --check "$tmp/k.trace"
has "$tmp/out" "nothing to check: nothing was recorded"
has "$tmp/out" "killed by signal 9"
expect_rc 1 "$TFDUMP" --check --json "$tmp/k.trace"
pycheck '
s = json.load(open(sys.argv[1]))
assert s["recorded"] is False and s["leaks"] == [] and s["desync"] == [] and s["first_nonfinite"] is None, s
assert s["command_exit"] == {"signal": 9} and "nothing was recorded" in s["unrecorded"], s
' "$tmp/out"

expect_rc 0 "$TFDUMP" --verify "$tmp/k.trace"
has_re "$tmp/out" '^OK: .*k\.trace: no rank files, none listed in manifest\.json: nothing was recorded$'
expect_rc 0 "$TFDUMP" --verify --json "$tmp/k.trace"
pycheck '
s = json.load(open(sys.argv[1]))
assert s["ok"] is True and s["files"] == [] and s["recorded"] is False, s
' "$tmp/out"

for mode in --events --chunks --captures; do
    expect_rc 0 "$TFDUMP" $mode "$tmp/k.trace"
    [ ! -s "$tmp/out" ] || fail "$mode printed something: $(head -3 "$tmp/out")"
    one_line "$tmp/err"
    has "$tmp/err" "k.trace: nothing was recorded"
done
expect_rc 2 "$TFDUMP" --tensor x "$tmp/k.trace"
has "$tmp/err" "nothing was recorded"

# the manifest lists rank files and none is there: lost, not "nothing"
"$PY" -c '
import json, sys
m = json.load(open(sys.argv[1]))
m["ranks"] = [{"rank": 0, "pid": 7, "file": "rank-00000.tft"}]
m["exit_status"] = 0
json.dump(m, open(sys.argv[1], "w"))' "$tmp/k.trace/manifest.json"
expect_rc 0 "$TFDUMP" "$tmp/k.trace"
has_re "$tmp/out" '^recorded +nothing \(no rank file, though manifest\.json lists 1 \(rank-00000\.tft\): lost\)$'
has_re "$tmp/out" '^exit +code 0$'
expect_rc 1 "$TFDUMP" --verify "$tmp/k.trace"
has "$tmp/out" "k.trace/rank-00000.tft: listed in manifest.json for rank 0 but missing"
has_re "$tmp/out" '^FAILED: '
expect_rc 1 "$TFDUMP" --verify --json "$tmp/k.trace"
pycheck '
s = json.load(open(sys.argv[1]))
assert s["ok"] is False and s["integrity"] == "damaged" and len(s["problems"]) == 1, s
' "$tmp/out"

# an unreadable manifest and no rank file: still not a trace
echo '{"format": "tftrace", "garbage' >"$tmp/k.trace/manifest.json"
expect_rc 2 "$TFDUMP" "$tmp/k.trace"
has "$tmp/err" "no rank files"
echo PASS
