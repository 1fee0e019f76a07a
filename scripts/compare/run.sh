#!/usr/bin/env bash
# run.sh SRC BUILD TRACES OUT: runs tfdump, tfdiff and the Python reader of
# source tree SRC and build tree BUILD over every trace in TRACES (made by
# collect.sh) and writes, per command, its exit status and the sha256 of its
# stdout, its stderr and any file it wrote, one line each, into OUT/results
# (OUT/outputs keeps the outputs themselves for reading a difference).
# CMP_ONLY="check diff-json ..." runs only the commands it names (the second
# word of a results line: dump dump-json events events-json verify check
# check-json html chrome perfetto captures extract self-diff self-diff-json
# python; pairs: diff diff-json diff-md diff-html diff-junit).
# Two runs compare with `diff OUT1/results OUT2/results`.
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: run.sh SRC BUILD TRACES OUT" >&2; exit 2; }
src=$(cd "$1" && pwd); build=$(cd "$2" && pwd); traces=$(cd "$3" && pwd); out=$4
mkdir -p "$out/outputs"; out=$(cd "$out" && pwd)
find1() { find "$build" -name "$1" -type f -perm -u+x ! -path '*/CMakeFiles/*' | head -1; }
export TFDUMP=$(find1 tfdump) TFDIFF=$(find1 tfdiff)
export TFT_LIB=$(find "$build" -name 'libtftrace.so.*.*' -type f | head -1)
export PYTHONPATH="$src/python" CMP_OUT=$out CMP_HERE=$(cd "$(dirname "$0")" && pwd)
py=${TFT_TORCH_PYTHON:-$HOME/.cache/tftrace/venv-torch/bin/python}
export CMP_PY=$py
[ -x "$TFDUMP" ] && [ -x "$TFDIFF" ] && [ -f "$TFT_LIB" ] || { echo "run.sh: tools not found in $build" >&2; exit 2; }

# one(ID, FILE-OR-EMPTY, CMD...): runs CMD in a fresh work dir, records rc and hashes;
# with CMP_ONLY set (e.g. "check check-json diff"), only the commands it names
one() {
  local id=$1 file=$2; shift 2
  if [ -n "${CMP_ONLY:-}" ]; then case " $CMP_ONLY " in *" ${id##* } "*) ;; *) return 0 ;; esac; fi
  local w; w=$(mktemp -d /tmp/cmp-work.XXXXXX)
  local rc=0
  # the work dir's name differs from run to run: commands see it as ./
  (cd "$w" && timeout 120 "$@" >"$w/stdout" 2>"$w/stderr") || rc=$?
  local line="$id rc=$rc out=$(sha256sum <"$w/stdout" | cut -c1-16) err=$(sha256sum <"$w/stderr" | cut -c1-16)"
  if [ -n "$file" ]; then
    if [ -e "$w/$file" ]; then line+=" file=$(find "$w/$file" -type f -print0 | sort -z | xargs -0 cat | sha256sum | cut -c1-16)"
    else line+=" file=none"; fi
  fi
  local keep="$CMP_OUT/outputs/$(printf '%s' "$id" | tr '/ ' '__')"
  mkdir -p "$keep"; head -c 4000000 "$w/stdout" >"$keep/stdout"; head -c 1000000 "$w/stderr" >"$keep/stderr"
  [ -n "$file" ] && [ -f "$w/$file" ] && head -c 4000000 "$w/$file" >"$keep/file"
  /bin/rm -rf "$w"
  printf '%s\n' "$line"
}
export -f one

per_trace() {
  local t=$1 n; n=$(basename "$t")
  one "$n dump" "" "$TFDUMP" "$t"
  one "$n dump-json" "" "$TFDUMP" --json "$t"
  one "$n events" "" "$TFDUMP" --events "$t"
  one "$n events-json" "" "$TFDUMP" --events --json "$t"
  one "$n verify" "" "$TFDUMP" --verify "$t"
  one "$n check" "" "$TFDUMP" --check "$t"
  one "$n check-json" "" "$TFDUMP" --check --json "$t"
  one "$n html" page.html "$TFDUMP" --html page.html "$t"
  one "$n chrome" x.json "$TFDUMP" --export chrome x.json "$t"
  one "$n perfetto" x.pb "$TFDUMP" --export perfetto x.pb "$t"
  one "$n captures" "" "$TFDUMP" --captures "$t"
  one "$n extract" ex.trace "$TFDUMP" --extract --steps 0:2 "$t" ex.trace
  one "$n self-diff" "" "$TFDIFF" "$t" "$t"
  one "$n self-diff-json" "" "$TFDIFF" --json "$t" "$t"
  one "$n python" "" "$CMP_PY" "$CMP_HERE/read_all.py" "$t"
}
per_pair() {
  local a=$1 b=$2 n; n="$(basename "$a")~$(basename "$b")"
  one "$n diff" "" "$TFDIFF" "$a" "$b"
  one "$n diff-json" "" "$TFDIFF" --json "$a" "$b"
  one "$n diff-md" "" "$TFDIFF" --markdown - "$a" "$b"
  one "$n diff-html" page.html "$TFDIFF" --html page.html "$a" "$b"
  one "$n diff-junit" j.xml "$TFDIFF" --junit j.xml "$a" "$b"
}
export -f per_trace per_pair

list=$(find "$traces" -mindepth 1 -maxdepth 1 -type d | sort)
# pairs: traces a test made in one directory, in the order they were kept (at most 6 per directory)
pairs=$(for t in $list; do [ -f "$t.from" ] && printf '%s\t%s\n' "$(dirname "$(cat "$t.from")")" "$t"; done |
  sort -s -k1,1 | awk -F'\t' '{ if ($1 != d) { d = $1; n = 0; prev = "" } if (prev != "" && n < 6) { print prev " " $2; print $2 " " prev; n++ } prev = $2 }')
{
  printf '%s\n' $list | xargs -P"$(nproc)" -I{} bash -c 'per_trace "$1"' _ {}
  printf '%s\n' "$pairs" | grep . | xargs -P"$(nproc)" -L1 bash -c 'per_pair "$1" "$2"' _
} | sort >"$out/results"
echo "run.sh: $(wc -l <"$out/results") commands over $(printf '%s\n' $list | wc -l) traces -> $out/results"
