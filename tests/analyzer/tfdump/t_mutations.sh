# Damaged rank files of every sort (flipped bytes, cuts, overwritten runs,
# fields set to extreme values, spliced holes) never make tfdump crash or
# hang: each run ends with exit status 0, 1 or 2 within the time limit.
source "$(dirname "$0")/lib.sh" "$@"

"$SAMPLE" "$tmp/m.trace" --ranks 1 --steps 12 >/dev/null
SRC=$tmp/m.trace/rank-00000.tft
N=${TFDUMP_MUTATIONS:-60}

"$PY" - "$SRC" "$tmp" "$N" <<'PYEOF'
import random, sys
src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
base = open(src, "rb").read()
for seed in range(n):
    r = random.Random(seed)
    b = bytearray(base)
    mode = seed % 5
    if mode == 0:
        for _ in range(r.randint(1, 8)):
            b[r.randrange(len(b))] = r.randrange(256)
    elif mode == 1:
        b = b[:r.randrange(len(b))]
    elif mode == 2:
        i = r.randrange(len(b)); j = min(len(b), i + r.randint(1, 2000))
        b[i:j] = bytes(r.randrange(256) for _ in range(j - i))
    elif mode == 3:
        i = r.randrange(0, len(b) - 4) & ~3
        b[i:i + 4] = r.choice([0xffffffff, 0x7fffffff, 0x80000000, 0, 1, 0x10000]).to_bytes(4, "little")
    else:
        i, j = sorted((r.randrange(len(b)), r.randrange(len(b))))
        b = b[:i] + b[j:]
    open("%s/mut-%03d.tft" % (out, seed), "wb").write(b)
PYEOF

for f in "$tmp"/mut-*.tft; do
    for mode in "" --verify "--events --json" "--events --steps 4:6" "--chunks"; do
        rc=0
        # shellcheck disable=SC2086
        timeout 20 "$TFDUMP" $mode "$f" >/dev/null 2>"$tmp/err" || rc=$?
        if [ "$rc" -gt 2 ]; then
            cp "$f" "${TMPDIR:-/tmp}/tfdump-crash.tft" 2>/dev/null || true
            head -5 "$tmp/err" >&2
            fail "tfdump $mode $(basename "$f"): exit status $rc (kept as ${TMPDIR:-/tmp}/tfdump-crash.tft)"
        fi
    done
done
echo PASS
