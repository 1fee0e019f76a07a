# Memory flat in trace length: exporting 400 steps takes no more peak
# memory than 20 steps, give or take 4 MiB, in both formats, while the
# output grows about 20-fold (ratios in one run, no timing).
source "$(dirname "$0")/lib.sh" "$@"
# under ASan, freed memory waits in a quarantine that grows with the work done
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0"

"$SAMPLE" "$tmp/s.trace" --ranks 1 --steps 20 >/dev/null
"$SAMPLE" "$tmp/l.trace" --ranks 1 --steps 400 >/dev/null
pycheck '
import resource, subprocess
def peak(fmt, trace, out):
    # a fresh process per export: its own peak RSS, read from wait4
    p = subprocess.Popen([sys.argv[1], "--export", fmt, out, trace])
    _, status, ru = os.wait4(p.pid, 0)
    assert status == 0, (fmt, trace, status)
    return ru.ru_maxrss * 1024, os.path.getsize(out)
for fmt in ("chrome", "perfetto"):
    small, s_out = peak(fmt, sys.argv[2], sys.argv[4] + "/s." + fmt)
    large, l_out = peak(fmt, sys.argv[3], sys.argv[4] + "/l." + fmt)
    assert l_out > 15 * s_out, (fmt, s_out, l_out)
    assert large < small + 4 * 2**20, "%s: peak RSS %d KiB for 400 steps vs %d KiB for 20" % (fmt, large >> 10, small >> 10)
    print("%s: peak %d KiB (20 steps) %d KiB (400 steps), output %d -> %d bytes" % (fmt, small >> 10, large >> 10, s_out, l_out))
' "$TFDUMP" "$tmp/s.trace" "$tmp/l.trace" "$tmp"
echo PASS
