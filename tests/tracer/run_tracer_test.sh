#!/usr/bin/env bash
# One tracer end-to-end case: record rec_prog under tftrace, check with rec_check.
set -euo pipefail
case_name=$1 tftrace=$2 prog=$3 check=$4 tfdump=${5:-tfdump} extra=${6:-}
tmp=$(mktemp -d /tmp/tft-tracer-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
tr=$tmp/t.trace
# in sanitizer builds, let crashes reach the program's (the recorder's) handlers
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0:handle_abort=0"
export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}handle_segv=0:handle_abort=0"
expect_status() { # want got
  if [ "$1" != "$2" ]; then echo "FAIL: exit status $2, want $1"; exit 1; fi
}
case $case_name in
  threads)
    "$tftrace" -q -o "$tr" -- "$prog" threads 4 && st=0 || st=$?
    expect_status 0 $st
    "$check" threads "$tr" 4 ;;
  crash-segv|crash-abort|crash-kill)
    kind=${case_name#crash-}
    "$tftrace" -q -o "$tr" -- "$prog" crash "$kind" 5 && st=0 || st=$?
    case $kind in segv) want=139;; abort) want=134;; kill) want=137;; esac
    expect_status $want $st
    "$check" crash "$tr" 5 "$kind" ;;
  crash-exit)
    "$tftrace" -q -o "$tr" -- "$prog" crash exit3 4 && st=0 || st=$?
    expect_status 3 $st
    "$check" crash "$tr" 4 exit3 ;;
  timeout)
    start=$(date +%s)
    "$tftrace" -q --timeout 1 --grace 1 -o "$tr" -- "$prog" sleep && st=0 || st=$?
    end=$(date +%s)
    expect_status 143 $st
    [ $((end - start)) -lt 20 ] || { echo "FAIL: timeout took $((end - start)) s"; exit 1; }
    "$check" sleep "$tr" ;;
  rss)
    # the collector samples each recording process's resident set (TFT_RSS_MS):
    # 8 MiB kept at each of 8 steps shows as a rise of most of 56 MiB, and in
    # tfdump's memory line; TFT_RSS_MS=0 writes none
    TFT_RSS_MS=50 "$tftrace" -q -o "$tr" -- "$prog" grow 8 8 && st=0 || st=$?
    expect_status 0 $st
    "$tfdump" --events "$tr" | awk '$4 == "process" && $5 == "rss" { sub("rss=", "", $7); v[n++] = $7 }
      END { if (n < 5) { print "FAIL: " n+0 " RSS samples, want 5 or more"; exit 1 }
            if (v[n-1] - v[0] < 40 * 1048576) { print "FAIL: RSS rose " (v[n-1] - v[0]) " bytes, want 40 MiB or more"; exit 1 }
            print "rss: " n " samples, " v[0] " -> " v[n-1] }'
    "$tfdump" "$tr" | grep -E '^memory +peak RSS [0-9.]+ MiB \(rank 0\)' || { echo "FAIL: no memory line"; "$tfdump" "$tr"; exit 1; }
    rm -rf "$tr"
    TFT_RSS_MS=0 "$tftrace" -q -o "$tr" -- "$prog" grow 1 3
    if "$tfdump" --events "$tr" | grep -q ' process rss '; then echo "FAIL: RSS samples with TFT_RSS_MS=0"; exit 1; fi ;;
  timeout-kill)
    # a program that ignores SIGTERM is killed after the grace period
    "$tftrace" -q --timeout 1 --grace 1 -o "$tr" -- "$prog" sleep noterm && st=0 || st=$?
    expect_status 137 $st
    "$check" sleep "$tr" ;;
  default-name)
    # without -o: a new name each run, never overwriting
    (cd "$tmp" && "$tftrace" -q -- "$prog" threads 1 && "$tftrace" -q -- "$prog" threads 1)
    n=$(ls -d "$tmp"/tftrace-*.trace | wc -l)
    [ "$n" = 2 ] || { echo "FAIL: $n trace directories, want 2"; exit 1; }
    for d in "$tmp"/tftrace-*.trace; do "$check" threads "$d" 1; done ;;
  usage)
    "$tftrace" --help | grep -- "--timeout" >/dev/null || { echo "FAIL: --help"; exit 1; }
    "$tftrace" --version | grep "^tftrace " >/dev/null || { echo "FAIL: --version"; exit 1; }
    for bad in "--bogus -- true" "--every 0 -- true" "--stats fast -- true" "--timeout x -- true" "" \
               "--alloc-min 4X -- true" "--alloc-min -1 -- true" "--until-step x -- true" "--step-range= -- true"; do
      # shellcheck disable=SC2086
      "$tftrace" $bad >/dev/null 2>"$tmp/err" && st=0 || st=$?
      expect_status 2 $st
      [ -s "$tmp/err" ] || { echo "FAIL: no message for '$bad'"; exit 1; }
    done
    "$tftrace" -q -o "$tr" -- /nonexistent/program && st=0 || st=$?
    expect_status 127 $st
    # the child's environment: options, and the NVTX / CUDA injection hooks
    "$tftrace" -q -o "$tmp/env.trace" --alloc-min 2M --step-range iter -- env >"$tmp/env"
    for want in TFT_ALLOC_MIN=2M TFT_STEP_RANGE=iter "NVTX_INJECTION64_PATH=/.*libtftrace\.so"; do
      grep -Eq "^$want" "$tmp/env" || { echo "FAIL: child environment lacks $want"; exit 1; }
    done
    # (a second trace: tftrace refuses a directory that holds one)
    NVTX_INJECTION64_PATH=/mine "$tftrace" -q -o "$tmp/env2.trace" -- env >"$tmp/env"
    grep -qx "NVTX_INJECTION64_PATH=/mine" "$tmp/env" || { echo "FAIL: a user's NVTX injection replaced"; exit 1; } ;;
  overflow)
    # no wait before dropping (TFT_RING_WAIT_MS=0) and a tiny ring: drops,
    # said loudly, by kind and step, by tftrace, tfdump and tfdiff
    out=$(TFT_RING_WAIT_MS=0 "$tftrace" -o "$tr" --ring-kb 64 -- "$prog" flood 300000 30 2>&1) && st=0 || st=$?
    expect_status 0 $st
    echo "$out"
    echo "$out" | grep "flood: [1-9][0-9]* of 300000 dropped" >/dev/null || { echo "FAIL: program saw no drops"; exit 1; }
    echo "$out" | grep -Eq "[1-9][0-9]* dropped" || { echo "FAIL: summary shows no drops"; exit 1; }
    warn='^tftrace: WARNING: [0-9,]+ records dropped \((tensor|op) [0-9,]+(, [a-z]+ [0-9,]+)*\) in steps? [0-9]+(\.\.[0-9]+)? of rank 0 — raise --ring-kb or use --no-drop$'
    echo "$out" | grep -Eq "$warn" || { echo "FAIL: no WARNING line with kinds and steps"; exit 1; }
    "$check" dropped "$tr" 300000 30
    "$tfdump" "$tr" >"$tmp/sum.txt"
    grep -Eq '^WARNING      rank 0: [0-9,]+ records dropped \((op|tensor) [0-9,]+.*\) in steps? [0-9]+.*; the trace is incomplete there$' \
        "$tmp/sum.txt" || { echo "FAIL: tfdump summary: $(grep -i drop "$tmp/sum.txt")"; exit 1; }
    "$tfdump" --json "$tr" | python3 -c '
import json, sys
s = json.load(sys.stdin)
d = s["files"][0]["drops"]
assert d["count"] == s["dropped"] > 0 and d["kind_unknown"] == 0, d
assert sum(d["by_kind"].values()) == d["count"] and {"op", "tensor"} <= set(d["by_kind"]) <= {"op", "tensor", "string", "step", "process"}, d
assert 0 <= d["steps"][0] <= d["steps"][1] <= 29 and d["text"].startswith("{:,} records dropped".format(d["count"])), d'
    "$tfdump" --check "$tr" >"$tmp/check.txt" && st=0 || st=$?
    expect_status 0 $st
    grep -Eq '^incomplete: rank 0 lost [0-9,]+ records dropped \((op|tensor) [0-9,]+.*\) in steps? [0-9]+.*; what follows covers only what was recorded$' \
        "$tmp/check.txt" && grep -q '^OK: no non-finite values, leaks or desyncs in what was recorded$' "$tmp/check.txt" ||
        { echo "FAIL: tfdump --check: $(cat "$tmp/check.txt")"; exit 1; }
    "$tfdump" --check --json "$tr" | python3 -c '
import json, sys
c = json.load(sys.stdin)
d = c["dropped"]
assert len(d) == 1 and d[0]["rank"] == 0 and d[0]["count"] > 0 and 0 <= d[0]["first_step"] <= d[0]["last_step"] <= 29, d'
    tfdiff=$(dirname "$tfdump")/tfdiff
    "$tfdiff" "$tr" "$tr" >"$tmp/diff.txt" && st=0 || st=$?
    expect_status 3 $st
    grep -Eq '^no divergence found, but the comparison is incomplete: steps? [0-9]+(\.\.[0-9]+)? of rank 0 \(GOLDEN\) dropped records; steps? [0-9.]+ of rank 0 \(BAD\) dropped records$' \
        "$tmp/diff.txt" || { echo "FAIL: tfdiff: $(head -3 "$tmp/diff.txt")"; exit 1; }
    grep -Eq '^incomplete: rank 0: BAD lost [0-9]+ records \(dropped by the recorder\) in steps? [0-9]+' "$tmp/diff.txt" ||
        { echo "FAIL: tfdiff does not name the steps: $(head -4 "$tmp/diff.txt")"; exit 1; } ;;
  old-drops)
    # a rank file of format 1.3 with a 48-byte DROPPED record (count 7 in
    # step 5): read, the count kept, kinds and steps said to be unknown
    mkdir "$tr"
    "$extra" "$tr"
    "$check" dropped "$tr"
    "$tfdump" "$tr" >"$tmp/sum.txt"
    grep -q '^WARNING      rank 0: 7 records dropped (kinds not recorded), steps not recorded (a trace before format 1.4); the trace is incomplete there$' \
        "$tmp/sum.txt" || { echo "FAIL: tfdump: $(cat "$tmp/sum.txt")"; exit 1; }
    "$tfdump" --json "$tr" | python3 -c '
import json, sys
s = json.load(sys.stdin)
d = s["files"][0]["drops"]
assert s["dropped"] == 7 and s["records_by_kind"]["tensor"] == 10, s
assert d["count"] == 7 and d["kind_unknown"] == 7 and d["by_kind"] == {} and d["steps"] is None and not d["steps_known"], d'
    "$(dirname "$tfdump")/tfdiff" "$tr" "$tr" >"$tmp/diff.txt" && st=0 || st=$?
    expect_status 3 $st
    grep -q '^no divergence found, but the comparison is incomplete: rank 0 (GOLDEN) dropped records in steps not recorded; rank 0 (BAD) dropped records in steps not recorded$' \
        "$tmp/diff.txt" || { echo "FAIL: tfdiff: $(head -3 "$tmp/diff.txt")"; exit 1; } ;;
  overflow-wait)
    # the default: a full ring waits while the collector drains, so the
    # same flood through the same tiny ring loses nothing (the limit is
    # raised here only so that a loaded machine cannot stall the collector
    # past it; the default, 200 ms, is the same mechanism)
    out=$(TFT_RING_WAIT_MS=5000 "$tftrace" -o "$tr" --ring-kb 64 -- "$prog" flood 300000 30 2>&1) && st=0 || st=$?
    expect_status 0 $st
    echo "$out" | grep "flood: 0 of 300000 dropped" >/dev/null || { echo "FAIL: $out"; exit 1; }
    echo "$out" | grep -q " 0 dropped" || { echo "FAIL: summary: $out"; exit 1; }
    if echo "$out" | grep -q WARNING; then echo "FAIL: a warning without drops: $out"; exit 1; fi
    TFT_RING_WAIT_MS=x "$tftrace" -q -o "$tmp/x.trace" -- "$prog" flood 10 2>"$tmp/err" >/dev/null
    grep -q "TFT_RING_WAIT_MS=x is not a number" "$tmp/err" || { echo "FAIL: bad TFT_RING_WAIT_MS: $(cat "$tmp/err")"; exit 1; } ;;
  untraced)
    # without tftrace and TFT_*: every call a no-op, nothing written
    (cd "$tmp" && env -u TFT_OUTPUT -u TFT_SHM "$prog" threads 2)
    if ls "$tmp" | grep trace >/dev/null; then echo "FAIL: untraced run wrote a trace"; exit 1; fi ;;
  inproc)
    # no launcher: TFT_OUTPUT makes the library write the trace itself
    TFT_OUTPUT=$tr "$prog" threads 3
    [ -f "$tr/manifest.json" ] || { echo "FAIL: no manifest"; exit 1; }
    "$check" threads "$tr" 3
    # interposers forced on in a linked program: set-up's own large mmap
    # must not re-enter the recorder's initialisation (it hung)
    TFT_INTERPOSE=1 TFT_OUTPUT=$tmp/ip.trace timeout 60 "$prog" threads 3 ||
        { echo "FAIL: TFT_INTERPOSE=1 in-process run (124: hung)"; exit 1; }
    "$check" threads "$tmp/ip.trace" 3 ;;
  fork)
    # a forked child is its own process: its own rank file
    "$tftrace" -q -o "$tr" -- "$prog" fork
    "$check" names "$tr" "rank-00000.tft:parent.before=1,parent=100" "rank-00001.tft:child=100" ;;
  torch-procs)
    # under --torch a process a rank forks or starts waits, and is a rank
    # only once it joins (trains): the waiting worker and helper leave no
    # file, the joined ones one each, numbered after the parent
    "$tftrace" -q -o "$tr" --torch -- "$prog" spawn "$prog"
    "$check" names "$tr" "rank-00000.tft:parent.before=1,parent=100,worker=0" \
        "rank-00001.tft:forkjoined=5" "rank-00002.tft:joined=10,t0.0=0" ;;
  exec)
    # an exec'd program records through the same session: its own rank file
    "$tftrace" -q -o "$tr" -- "$prog" exec "$prog" threads 1
    "$check" names "$tr" "rank-00000.tft:before_exec=1" "rank-00001.tft:t0.0=1" ;;
  rankless)
    # a process without a rank (a launcher like torchrun's parent) numbered
    # 0 by its index, then a process given RANK=0: both files readable, the
    # rankless one read under a free number, the trace not "damaged"
    "$tftrace" -q -o "$tr" -- bash -c "\"$prog\" threads 1 && RANK=0 \"$prog\" threads 1"
    ls "$tr" | grep -c '^rank-.*\.tft$' | grep -x 2 >/dev/null || { echo "FAIL: want 2 rank files: $(ls "$tr")"; exit 1; }
    "$tfdump" "$tr" >"$tmp/sum" 2>&1 || { cat "$tmp/sum"; echo "FAIL: tfdump on a trace with a rankless process"; exit 1; }
    grep -q "ranks        2" "$tmp/sum" && ! grep -q "damaged\|both claim" "$tmp/sum" ||
        { cat "$tmp/sum"; echo "FAIL: summary"; exit 1; }
    "$tfdump" --verify "$tr" >/dev/null || { echo "FAIL: --verify"; exit 1; } ;;
  inproc-sigwait)
    # the in-process writer thread blocks signals: a SIGTERM the program
    # blocks and waits for reaches the program, not the writer
    TFT_OUTPUT=$tr "$prog" sigwait && st=0 || st=$?
    expect_status 0 $st
    "$check" names "$tr" "rank-00000.tft:before_sigwait=1" ;;
  capture-occurrence)
    # first-divergence-of beside another alternative: the tensors that
    # alternative captures still count as occurrences of their name, so the
    # divergence found is h's 4th (seq 3), not a misaligned earlier one
    "$tftrace" -q -o "$tmp/g.trace" -- "$prog" repeat 0
    "$tftrace" -q -o "$tr" --capture "seq=0;first-divergence-of=$tmp/g.trace" -- "$prog" repeat 1
    "$tfdump" --captures --json "$tr" >"$tmp/caps.json"
    python3 - "$tmp/caps.json" <<'PY'
import json, sys
seqs = sorted(c["seq"] for c in map(json.loads, open(sys.argv[1])))
assert seqs == [0, 3], "captured ops %s, want [0, 3]" % seqs
PY
    ;;
  keydtor)
    # a record from a thread's exit after the recorder retired its ring
    # (the collector takes that ring back) is written, not lost
    "$tftrace" -q -o "$tr" -- "$prog" keydtor
    "$check" names "$tr" "rank-00000.tft:main.before=1,t.body=1,t.dtor=1" ;;
  api)
    "$tftrace" -q -o "$tr" -- "$prog" api
    "$check" api "$tr" ;;
  structs)
    # tft_coll_info / tft_comm_info of callers built against older and newer
    # tft.h versions (sz smaller or larger than the library's)
    "$tftrace" -q -o "$tr" -- "$prog" structs
    "$check" structs "$tr" ;;
  tensor-api)
    # tft_tensor_stats and tft_tensor_dev (no CUDA device or plugin here:
    # the device tensors get shape and dtype only) under the default mode,
    # then under a lesser one with steps skipped
    "$tftrace" -q -o "$tr" -- "$prog" tensor-api
    "$check" tensor-api "$tr" full 1
    "$tftrace" -q -o "$tmp/h.trace" --stats health --every 2 -- "$prog" tensor-api
    "$check" tensor-api "$tmp/h.trace" health 2
    "$tftrace" -q -o "$tmp/s.trace" --stats shape -- "$prog" tensor-api
    "$check" tensor-api "$tmp/s.trace" shape 1 ;;
  no-drop)
    # --no-drop: a tiny ring makes the program wait for the collector, nothing is lost
    out=$("$tftrace" -o "$tr" --no-drop --ring-kb 64 -- "$prog" flood 100000 2>&1)
    echo "$out"
    echo "$out" | grep "flood: 0 of 100000 dropped" >/dev/null || { echo "FAIL: the program saw drops"; exit 1; }
    "$check" names "$tr" "rank-00000.tft:flood=100000" ;;
  closefds)
    "$tftrace" -q -o "$tr" -- "$prog" closefds
    "$check" threads "$tr" 2 ;;
  mpirun)
    # N copies of tftrace started by mpirun share one trace directory
    command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 0; }
    mpirun --allow-run-as-root --oversubscribe -np 3 "$tftrace" -q -o "$tr" -- "$prog" threads 1
    "$check" names "$tr" "rank-00000.tft:t0.0=1" "rank-00001.tft:t0.0=1" "rank-00002.tft:t0.0=1"
    python3 - "$tr/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
assert m["complete"] and sorted(r["rank"] for r in m["ranks"]) == [0, 1, 2], m
assert all(r["exit"] == {"code": 0} for r in m["ranks"]), m
PY
    # one run: every rank file carries the manifest's run id
    "$check" runid "$tr"
    # without the launcher: TFT_OUTPUT makes each rank write its own file
    mpirun --allow-run-as-root --oversubscribe -np 2 -x TFT_OUTPUT="$tmp/inproc.trace" "$prog" threads 1
    "$check" names "$tmp/inproc.trace" "rank-00000.tft:t0.0=1" "rank-00001.tft:t0.0=1"
    python3 -c "import json,sys; m=json.load(open(sys.argv[1])); assert sorted(r['rank'] for r in m['ranks'])==[0,1] and m['complete'], m" "$tmp/inproc.trace/manifest.json" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo "PASS $case_name"
