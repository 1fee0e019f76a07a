#!/usr/bin/env bash
# collect.sh BUILD OUT [CTEST-ARGS...]: runs the test suite of build tree
# BUILD with rm(1) replaced on PATH by keep-rm, so that every trace a test
# makes and removes is kept in OUT; the traces a test leaves in BUILD are
# copied there too. OUT then feeds scripts/compare/run.sh. For checking
# that a restructuring changes no output (docs/CONTRIBUTING.md).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: collect.sh BUILD OUT [CTEST-ARGS...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd); out=$2; shift 2
mkdir -p "$out"; out=$(cd "$out" && pwd)
shim=$(mktemp -d); trap '/bin/rm -rf "$shim"' EXIT
ln -s "$here/keep-rm" "$shim/rm"
(cd "$build" && PATH="$shim:$PATH" TFT_KEEP_TRACES="$out" TFT_KEEP=1 ctest -j"$(nproc)" "$@") || true
find "$build" -maxdepth 8 -name manifest.json -type f -printf '%h\n' | sort -u | while read -r d; do
  dst="$out/$(date +%s%N)-build-$(basename "$d")"
  mkdir "$dst" && (cd "$d" && find . -maxdepth 1 -type f -exec cp -p {} "$dst/" \;)
  printf '%s\n' "$d" >"$dst.from"
done
echo "collect: $(find "$out" -mindepth 1 -maxdepth 1 -type d | wc -l) traces in $out"
