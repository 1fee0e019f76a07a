#!/usr/bin/env bash
# bench/run.sh — one command for the whole benchmark table (bench/README.md).
# Builds what the benchmarks need (Release, in its own build dir), runs every
# benchmark of the registry below, collects the BENCH-RESULT lines they print
# and prints one table: each figure, its baseline, the ratio or delta, the
# goal, met or not. Writes the table as JSON to
# bench/results/<UTC date-time>-<short git hash>.json and bench/results/latest.json.
# Figures are never asserted: a goal not met is a row of the table, not a failure.
#
#   bench/run.sh [--only PATTERN] [--quick] [--no-build] [--build-dir DIR] [-v]
#   bench/run.sh --list                     the benchmarks and their commands
#   bench/run.sh --table [FILE.json]        the table of a results file (default latest.json)
#   bench/run.sh --compare A.json B.json    two results files side by side
#   bench/run.sh --update-doc [FILE.json]   rewrite docs/BENCHMARKS.md's summary table
#   bench/run.sh --check-doc [FILE.json]    fail if that table differs from FILE (latest.json)
#
#   --only PATTERN    run the benchmarks whose name matches PATTERN (an extended regex)
#   --quick           fewer repetitions: TFT_BENCH_REPS=1 and TFT_BENCH_QUICK=1 for
#                     every benchmark ($REPS and $QUICK in the commands below)
#   --no-build        use the build dir as it is
#   --build-dir DIR   default build-bench (TFT_BENCH_BUILD)
#   --registry FILE   benchmarks from FILE instead of the list below (same format;
#                     for the harness's own test)
#   --results-dir DIR default bench/results;  --doc FILE  default docs/BENCHMARKS.md
#   -v                also show each benchmark's output as it runs
# Exit status: 0 when every benchmark present gave results; 1 when one failed
# or printed none (the table says which, with its log); 2 usage or build error.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# The registry: one benchmark a line, "NAME | FILE | COMMAND". The command
# runs with bash in the repository root; $B is the build dir (absolute), $REPS
# the repetitions (3, or 1 with --quick), $QUICK 1 with --quick, else empty.
# FILE (or -) must exist, else the row says "not present". Each benchmark
# prints BENCH-RESULT lines (bench/README.md); its output goes to a log.
registry() {
    cat <<'EOF'
stats      | bench/stats/bench_stats.c          | "$B/bench/stats/bench_stats" ${QUICK:+--quick}
record     | bench/tracer/bench_record.c        | "$B/bench/tracer/bench_record" --reps "$REPS"
format     | bench/format/bench_format.c        | "$B/bench/format/bench_format" --reps "$REPS" ${QUICK:+--records 300000}
keep_steps | bench/format/bench_keep_steps.sh   | bash bench/format/bench_keep_steps.sh "$B"
interpose  | bench/interpose/bench_interpose.c  | "$B/bench/interpose/bench_interpose" --reps "$REPS"
numpy      | bench/interpose/bench_numpy.py     | /usr/bin/python3 bench/interpose/bench_numpy.py --reps "$REPS" --tftrace "$B/tracer/tftrace" --tfdump "$B/analyzer/tfdump"
mpi        | bench/mpi/bench_mpi.c              | "$B/bench/mpi/bench_mpi" --reps "$REPS"
train      | bench/runtime/bench_train.py       | python3 bench/runtime/bench_train.py "$B" "$REPS"
scale      | bench/analyzer/bench_scale.sh      | bash bench/analyzer/bench_scale.sh "$B" ${QUICK:+256 50}
peers      | bench/peers/bench_peers.sh         | bash bench/peers/bench_peers.sh "$B" --reps "$REPS"
export     | bench/analyzer/bench_export.sh     | bash bench/analyzer/bench_export.sh "$B" "$REPS" ${QUICK:+quick}
torch      | bench/torch/bench_overhead.py      | py=$(bash scripts/python-env.sh) && "$py" bench/torch/bench_overhead.py --tftrace "$B/tracer/tftrace" --python "$py" --reps "$REPS" ${QUICK:+--quick}
roundoff   | bench/analyzer/bench_roundoff.sh   | bash bench/analyzer/bench_roundoff.sh "$B" "$([ -n "${QUICK:-}" ] && echo 100 || echo 300)" "$REPS"
EOF
}

# The tools the benchmarks run; every bench_* target of the build is added.
tool_targets=(tftrace tftrace_launcher tfdiff tfdump tftrain tft_sample)

die() { echo "bench/run.sh: $*" >&2; exit 2; }

# JSON, tables and the doc: python3's standard library only.
IFS= read -r -d '' PY <<'PYEOF' || true
import json, os, re, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # bench/run.sh --table | head

KEYS_NUM = ("figure", "baseline", "value", "goal")

def parse_line(text):
    """A BENCH-RESULT line's object, or raise ValueError saying what is wrong."""
    try:
        r = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg} at column {e.colno})")
    if not isinstance(r, dict):
        raise ValueError("not a JSON object")
    if not isinstance(r.get("id"), str) or not r["id"]:
        raise ValueError("no \"id\"")
    if r.get("metric") not in ("ratio", "delta"):
        raise ValueError(f"{r['id']}: \"metric\" must be \"ratio\" or \"delta\"")
    for k in KEYS_NUM:
        v = r.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise ValueError(f"{r['id']}: \"{k}\" is not a number")
    if r.get("value") is None:
        f, b = r.get("figure"), r.get("baseline")
        if f is None or b is None or (r["metric"] == "ratio" and b == 0):
            raise ValueError(f"{r['id']}: no \"value\" (nor figure and baseline to compute it)")
        r["value"] = f / b if r["metric"] == "ratio" else f - b
    if r.get("goal") is not None and r.get("goal_op") not in ("<=", ">="):
        raise ValueError(f"{r['id']}: \"goal_op\" must be \"<=\" or \">=\" with a goal")
    return r

def met(r):
    if r.get("goal") is None:
        return None
    return r["value"] <= r["goal"] if r["goal_op"] == "<=" else r["value"] >= r["goal"]

def collect(manifest, out, meta_json):
    """Builds the results object from the manifest TSV of the run."""
    meta = json.loads(meta_json)
    benches, results, warnings = [], [], []
    for line in open(manifest):
        name, status, log, secs, cmd = line.rstrip("\n").split("\t", 4)
        b = {"name": name, "command": cmd, "status": status, "log": log,
             "seconds": float(secs) if secs else None, "results": [], "malformed": 0}
        found = {}
        if status not in ("not present",) and os.path.exists(log):
            for n, text in enumerate(open(log, errors="replace"), 1):
                m = re.match(r"\s*BENCH-RESULT\s+(.*\S)\s*$", text)
                if not m:
                    continue
                try:
                    r = parse_line(m.group(1))
                except ValueError as e:
                    b["malformed"] += 1
                    warnings.append(f"{name}: {log}:{n}: malformed BENCH-RESULT line: {e}")
                    continue
                if r["id"] in found:
                    warnings.append(f"{name}: {log}:{n}: {r['id']} given twice; the last one kept")
                r["bench"] = name
                r["met"] = met(r)
                found[r["id"]] = r
        if status == "ok" and not found:
            b["status"] = "no result"
        if b["status"] == "ok":
            b["results"] = list(found)
            results += found.values()
        benches.append(b)
    meta.update(benchmarks=benches, results=results, warnings=warnings)
    with open(out, "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")

def num(v, unit=""):
    if v is None:
        return "—"
    a = abs(v)
    s = f"{v:,.0f}" if a >= 1000 else f"{v:.3g}" if a >= 1 or a == 0 else f"{v:.3g}"
    return s + (f" {unit}" if unit else "")

def value_text(r):
    if r["metric"] == "ratio":
        return f"{r['value']:.3g}×" if r["value"] is not None else "—"
    return ("+" if r["value"] >= 0 else "") + num(r["value"], r.get("unit", ""))

def goal_text(r):
    if r.get("goal") is None:
        return "—"
    g = f"{r['goal']:g}×" if r["metric"] == "ratio" else num(r["goal"], r.get("unit", ""))
    return f"{r['goal_op']} {g}"

def met_text(r):
    return {True: "met", False: "NOT MET", None: "—"}[r.get("met")]

def rows(d):
    """(cells...) per result, then one row per benchmark without results."""
    out = []
    for r in d["results"]:
        out.append((r["id"], r.get("what", ""), num(r.get("figure"), r.get("unit", "")),
                    num(r.get("baseline"), r.get("unit", "")), value_text(r), goal_text(r), met_text(r)))
    for b in d["benchmarks"]:
        if b["status"] == "ok":
            continue
        if b["status"] == "not present":
            note = f"not present ({b['log']})"
        else:
            note = f"no result: {b['status']} (log: {b['log']})" if b["status"] != "no result" \
                else f"no result (log: {b['log']})"
        out.append((b["name"], note, "", "", "", "", ""))
    return out

HEAD = ("id", "what", "figure", "baseline", "ratio/delta", "goal", "met")

def header(d):
    la = d.get("loadavg_start") or []
    q = ", quick" if d.get("quick") else ""
    return (f"{d.get('date', '?')}  git {d.get('git', '?')}{' (modified)' if d.get('git_dirty') else ''}"
            f"  {d.get('host', '')}  {d.get('nproc', '?')} CPUs  load average "
            f"{' '.join(f'{x:.2f}' for x in la)}{q}")

def table(path):
    d = json.load(open(path))
    rs = rows(d)
    w = [max(len(c) for c in col) for col in zip(HEAD, *rs)]
    w[1] = min(w[1], 60)
    print(header(d))
    fmt = lambda cells: "  ".join(c.ljust(w[i]) if i < 2 else c.rjust(w[i]) for i, c in enumerate(cells)).rstrip()
    print(fmt(HEAD))
    for r in rs:
        if not r[2] and not r[4]:
            print(f"{r[0].ljust(w[0])}  {r[1]}")
        else:
            print(fmt((r[0], r[1][:60]) + r[2:]))
    n = len(d["results"])
    m = sum(1 for r in d["results"] if r["met"] is True)
    nm = sum(1 for r in d["results"] if r["met"] is False)
    nr = sum(1 for b in d["benchmarks"] if b["status"] not in ("ok", "not present"))
    print(f"{n} figures: {m} met, {nm} not met, {n - m - nm} without a goal; "
          f"{nr} benchmark(s) without a result")
    for wmsg in d.get("warnings", []):
        print("warning: " + wmsg)

def compare(a_path, b_path):
    A, B = json.load(open(a_path)), json.load(open(b_path))
    ra = {r["id"]: r for r in A["results"]}
    rb = {r["id"]: r for r in B["results"]}
    ids = list(ra) + [i for i in rb if i not in ra]
    print(f"A: {a_path}: {header(A)}")
    print(f"B: {b_path}: {header(B)}")
    head = ("id", "A", "A met", "B", "B met", "B vs A")
    rs = []
    for i in ids:
        x, y = ra.get(i), rb.get(i)
        va = value_text(x) if x else "—"
        vb = value_text(y) if y else "—"
        ch = ""
        if x and y and x["metric"] == y["metric"]:
            if x["metric"] == "ratio" and x["value"]:
                ch = f"{y['value'] / x['value']:.3g}×"
            elif x["metric"] == "delta":
                ch = ("+" if y["value"] - x["value"] >= 0 else "") + num(y["value"] - x["value"], y.get("unit", ""))
        rs.append((i, va, met_text(x) if x else "—", vb, met_text(y) if y else "—", ch))
    w = [max(len(c) for c in col) for col in zip(head, *rs)]
    for r in [head] + rs:
        print("  ".join(c.ljust(w[k]) if k == 0 else c.rjust(w[k]) for k, c in enumerate(r)).rstrip())

BEGIN, END = "<!-- bench-table:begin -->", "<!-- bench-table:end -->"

def doc_table(path, shown):
    d = json.load(open(path))
    lines = [f"_Generated by `bench/run.sh --update-doc` from `{shown}`: {header(d)}._", "",
             "| " + " | ".join(HEAD) + " |", "| " + " | ".join("---" for _ in HEAD) + " |"]
    for r in rows(d):
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
    return "\n".join(lines) + "\n"

def split_doc(doc):
    text = open(doc).read()
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < i:
        sys.exit(f"bench/run.sh: {doc}: no {BEGIN} ... {END} markers (add them where the table goes)")
    return text[:i + len(BEGIN)] + "\n", text[i + len(BEGIN):j].lstrip("\n"), text[j:]

def update_doc(path, shown, doc):
    pre, _, post = split_doc(doc)
    with open(doc, "w") as f:
        f.write(pre + doc_table(path, shown) + post)
    print(f"{doc}: table rewritten from {shown}")

def check_doc(path, shown, doc):
    import difflib
    _, have, _ = split_doc(doc)
    want = doc_table(path, shown)
    if have == want:
        print(f"{doc}: the table matches {shown}")
        return
    sys.stdout.writelines(difflib.unified_diff(have.splitlines(True), want.splitlines(True),
                                               f"{doc} (table)", shown))
    sys.exit(f"bench/run.sh: {doc}'s table differs from {shown}: run bench/run.sh --update-doc")

cmd = sys.argv[1]
if cmd == "collect":
    collect(*sys.argv[2:5])
elif cmd == "table":
    table(sys.argv[2])
elif cmd == "compare":
    compare(sys.argv[2], sys.argv[3])
elif cmd == "update-doc":
    update_doc(*sys.argv[2:5])
elif cmd == "check-doc":
    check_doc(*sys.argv[2:5])
elif cmd == "finish":
    # the run's metadata, its results collected, the JSON written, the table printed
    manifest, out, latest, date, git, dirty, load0, load1, quick, only, bdir = sys.argv[2:13]
    la = lambda s: [float(x) for x in s.split()]
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
    meta = {"format": "tftrace bench results 1", "date": date, "git": git, "git_dirty": dirty == "true",
            "host": os.uname().nodename, "nproc": os.cpu_count(), "cpu": cpu, "loadavg_start": la(load0),
            "loadavg_end": la(load1), "quick": quick == "1", "only": only or None, "build_dir": bdir}
    collect(manifest, out, json.dumps(meta))
    import shutil
    shutil.copyfile(out, latest)
    print()
    table(out)
    print(f"results: {out} (and {latest})")
    d = json.load(open(out))
    sys.exit(1 if any(b["status"] not in ("ok", "not present") for b in d["benchmarks"]) else 0)
PYEOF
# Debian's python3 first: a version manager's shim can cost a second a call
python=${TFT_BENCH_PYTHON:-$(command -v /usr/bin/python3 || command -v python3 || true)}
py() { "$python" -c "$PY" "$@"; }

# ---- arguments -------------------------------------------------------------
only= quick= build=1 verbose= mode=run registry_file=
bdir=${TFT_BENCH_BUILD:-build-bench}
results=bench/results doc=docs/BENCHMARKS.md
args=()
while [ $# -gt 0 ]; do
    case $1 in
        --only) [ $# -ge 2 ] || die "--only needs a PATTERN"; only=$2; shift ;;
        --quick) quick=1 ;;
        --no-build) build= ;;
        --build-dir) [ $# -ge 2 ] || die "--build-dir needs a DIR"; bdir=$2; shift ;;
        --registry) [ $# -ge 2 ] || die "--registry needs a FILE"; registry_file=$2; shift ;;
        --results-dir) [ $# -ge 2 ] || die "--results-dir needs a DIR"; results=$2; shift ;;
        --doc) [ $# -ge 2 ] || die "--doc needs a FILE"; doc=$2; shift ;;
        -v) verbose=1 ;;
        --list) mode=list ;;
        --table) mode=table ;;
        --compare) mode=compare ;;
        --update-doc) mode=update-doc ;;
        --check-doc) mode=check-doc ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $1 (bench/run.sh --help)" ;;
        *) args+=("$1") ;;
    esac
    shift
done

entries() { # the registry as "name<TAB>file<TAB>command" lines, filtered by --only
    if [ -n "$registry_file" ]; then cat "$registry_file"; else registry; fi |
        sed -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*$/d' |
        while IFS='|' read -r name file command; do
            name=$(trim "$name") file=$(trim "$file") command=$(trim "$command")
            if [ -n "$only" ] && ! [[ $name =~ $only ]]; then continue; fi
            printf '%s\t%s\t%s\n' "$name" "$file" "$command"
        done
}
trim() { local s=${1#"${1%%[![:space:]]*}"}; printf '%s' "${s%"${s##*[![:space:]]}"}"; }

one_file() { # the results file a read-only mode works on
    local f=${args[0]:-$results/latest.json}
    [ -f "$f" ] || die "$f: no such results file (run bench/run.sh first)"
    echo "$f"
}

case $mode in
    list)
        entries | while IFS=$'\t' read -r name file command; do
            present=; [ "$file" = - ] || [ -e "$file" ] || present="  (not present: $file)"
            printf '%-11s %s%s\n' "$name" "$command" "$present"
        done
        exit 0 ;;
    table) py table "$(one_file)"; exit 0 ;;
    compare)
        [ ${#args[@]} -eq 2 ] || die "--compare needs two results files: A.json B.json"
        for f in "${args[@]}"; do [ -f "$f" ] || die "$f: no such results file"; done
        py compare "${args[0]}" "${args[1]}"; exit 0 ;;
    update-doc|check-doc)
        f=$(one_file)
        [ -f "$doc" ] || die "$doc: no such file"
        py "$mode" "$f" "${args[0]:-bench/results/latest.json}" "$doc"; exit $? ;;
esac
[ ${#args[@]} -eq 0 ] || die "unexpected argument ${args[0]} (bench/run.sh --help)"
[ -n "$python" ] || die "python3 is needed (apt-get install python3)"

# ---- build -------------------------------------------------------------------
mkdir -p "$bdir"
B=$(cd "$bdir" && pwd)
if [ -n "$build" ]; then
    jobs=$(nproc 2>/dev/null || echo 2)
    echo "== build: $bdir (Release)"
    cmake -S . -B "$bdir" -DCMAKE_BUILD_TYPE=Release >"$B/bench-configure.log" 2>&1 \
        || { cat "$B/bench-configure.log" >&2; die "configure failed ($B/bench-configure.log)"; }
    mapfile -t benches < <(cmake --build "$bdir" --target help 2>/dev/null |
                           sed -n 's/^\.\.\. \(bench_[A-Za-z0-9_]*\|tftrace_pyrec\).*/\1/p' | sort -u)
    cmake --build "$bdir" -j"$jobs" --target "${tool_targets[@]}" "${benches[@]}" >"$B/bench-build.log" 2>&1 \
        || { tail -30 "$B/bench-build.log" >&2; die "build failed ($B/bench-build.log)"; }
fi

# ---- run -------------------------------------------------------------------------
now=$(date -u +%s)
stamp=$(date -u -d "@$now" +%Y%m%dT%H%M%SZ) iso=$(date -u -d "@$now" +%Y-%m-%dT%H:%M:%SZ)
hash=$(git rev-parse --short HEAD 2>/dev/null || echo nogit)
dirty=false
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || dirty=true
logs=$B/bench-logs/$stamp
mkdir -p "$logs" "$results"
manifest=$logs/manifest.tsv
: >"$manifest"
export B REPS=3 QUICK=
[ -z "$quick" ] || { REPS=1; QUICK=1; }
export TFT_BENCH_REPS=$REPS TFT_BENCH_QUICK=$QUICK
load0=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "0 0 0")
timeout_s=${TFT_BENCH_TIMEOUT:-1800}
while IFS=$'\t' read -r name file command; do
    log=$logs/$name.log shown=${logs#"$root"/}/$name.log
    if [ "$file" != - ] && [ ! -e "$file" ]; then
        echo "== $name: not present ($file)"
        printf '%s\tnot present\t%s\t\t%s\n' "$name" "$file missing" "$command" >>"$manifest"
        continue
    fi
    echo "== $name: $command"
    t0=$(date +%s%N)
    st=0
    if [ -n "$verbose" ]; then
        timeout "$timeout_s" bash -c "$command" </dev/null 2>&1 | tee "$log" || st=${PIPESTATUS[0]}
    else
        timeout "$timeout_s" bash -c "$command" </dev/null >"$log" 2>&1 || st=$?
    fi
    ms=$((($(date +%s%N) - t0) / 1000000))
    secs=$((ms / 1000)).$((ms % 1000 / 100))
    status=ok
    if [ "$st" = 124 ]; then status="timed out after ${timeout_s} s"
    elif [ "$st" != 0 ]; then status="failed (exit $st)"; fi
    n=$(grep -c 'BENCH-RESULT' "$log" || true)
    echo "   $status, $n BENCH-RESULT lines, ${secs} s, log $shown"
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "$shown" "$secs" "$command" >>"$manifest"
done < <(entries)

load1=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "0 0 0")
out=$results/$stamp-$hash.json
st=0
py finish "$manifest" "$out" "$results/latest.json" "$iso" "$hash" "$dirty" "$load0" "$load1" "$quick" "$only" "$bdir" \
    || st=$?
exit $st
