# --verify on a good trace: exit 0, "OK", every file intact.
source "$(dirname "$0")/lib.sh" "$@"

"$SAMPLE" "$tmp/g.trace" --ranks 3 --steps 12 >/dev/null
expect_rc 0 "$TFDUMP" --verify "$tmp/g.trace"
has_re "$tmp/out" '^OK: .*g\.trace: 3 rank files, [0-9]+ chunks, every checksum verified$'
[ "$(wc -l <"$tmp/out")" = 1 ] || fail "a good trace should give one OK line"
[ ! -s "$tmp/err" ] || fail "warnings on a good trace: $(cat "$tmp/err")"

expect_rc 0 "$TFDUMP" --verify --json "$tmp/g.trace"
pycheck '
v = json.load(open(sys.argv[1]))
assert v["ok"] is True and v["integrity"] == "complete" and v["problems"] == [], v
assert len(v["files"]) == 3
for f in v["files"]:
    assert f["integrity"] == "complete" and f["closed"] and f["chunks"] >= 2 and f["chunks_bad"] == 0, f
' "$tmp/out"

expect_rc 0 "$TFDUMP" --verify "$tmp/g.trace/rank-00002.tft"
has "$tmp/out" "OK: "
echo PASS
