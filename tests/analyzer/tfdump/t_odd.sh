# Well-formed but odd records (mk_odd): a kind this build does not know,
# string ids without a definition, enumerations out of range, a newline in a
# name, dropped counts. tfdump shows them all and never crashes.
source "$(dirname "$0")/lib.sh" "$@"

[ -x "$MK_ODD" ] || fail "mk_odd not built"
"$MK_ODD" "$tmp/odd.tft"

expect_rc 0 "$TFDUMP" --json "$tmp/odd.tft"
pycheck '
s = json.load(open(sys.argv[1]))
assert s["records"] == 9, s["records"]
assert s["records_by_kind"]["unknown(200)"] == 1, s["records_by_kind"]
assert s["dropped"] == 8, s["dropped"]
assert s["integrity"] == "complete" and s["steps"] == [7, 7]
assert s["exit"] == {"0": {"code": 3}}, s["exit"]
' "$tmp/out"
expect_rc 0 "$TFDUMP" "$tmp/odd.tft"
has_re "$tmp/out" 'unknown\(200\) 1'
has_re "$tmp/out" '^exit +code 3$'

expect_rc 0 "$TFDUMP" --events --json "$tmp/odd.tft"
[ "$(wc -l <"$tmp/out")" = 9 ] || fail "wanted 9 JSON lines"
pycheck '
ev = [json.loads(l) for l in open(sys.argv[1])]
k = {e["kind"]: e for e in ev}
u = k["unknown(200)"]
assert u["len"] == 48 and u["name"] is None, u
t = k["tensor"]
assert t["name"] == "#1234abcd5678ef00", t["name"]
assert t["dtype"] == "?" and t["mode"] == "?" and len(t["shape"]) == 8 and t["shape"][1] == 2**63 - 1, t
o = k["op"]
assert o["name"] == "weird\nname" and o["scope"] == "#00000000deadbeef" and o["op_kind"] == "?", o
assert o["inputs"] == [1, 2, 2**64 - 1] and o["attrs"] == [-5, 42] and o["outputs"] == [], o
c = k["collective"]
assert c["type"] == "?" and c["op"] == "?" and c["dtype"] == "?", c
assert k["dropped"]["count"] == 5 and k["dropped"]["reason"] == "?"
' "$tmp/out"

# text: one line per record even with a newline inside a name
expect_rc 0 "$TFDUMP" --events "$tmp/odd.tft"
[ "$(wc -l <"$tmp/out")" = 9 ] || fail "a name with a newline split a text line"
has_re "$tmp/out" '^r0 s- q- unknown\(200\) len=48$'
has "$tmp/out" 'op weird\x0aname'
has "$tmp/out" 'tensor #1234abcd5678ef00'

expect_rc 0 "$TFDUMP" --events --kind unknown "$tmp/odd.tft"
[ "$(wc -l <"$tmp/out")" = 1 ] || fail "--kind unknown should select the one unknown record"
expect_rc 0 "$TFDUMP" --events --name '#1234*' "$tmp/odd.tft"
[ "$(wc -l <"$tmp/out")" = 1 ] || fail "--name should match an undefined string by its #id"
expect_rc 0 "$TFDUMP" --verify "$tmp/odd.tft"
echo PASS
