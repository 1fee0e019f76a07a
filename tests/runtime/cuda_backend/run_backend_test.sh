#!/usr/bin/env bash
# run_backend_test.sh CASE TFTRAIN — tftrain's --backend choice as a user
# meets it on a machine without a GPU (CI):
#   nodevice  --backend cuda stops at once: exit 2, "tftrain: --backend
#             cuda: no CUDA device (<the CUDA error>)" (SKIP: a device exists)
#   auto      the default (and --backend auto) trains on the CPU and says
#             so; --backend cpu too; a bad name is a usage error
set -euo pipefail
case_name=$1 tftrain=$2
tmp=$(mktemp -d /tmp/tft-backend-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
SMALL=(--steps 3 --log-every 1 --eval-every 0 --layers 1 --d-model 32 --heads 2 --seq 16 --batch 4)
have_device() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep '^GPU' >/dev/null; }
case $case_name in
  nodevice)
    st=0; "$tftrain" --backend cuda "${SMALL[@]}" >"$tmp/out" 2>"$tmp/err" || st=$?
    if [ "$st" = 0 ] && grep -q "(cuda backend)" "$tmp/out"; then
      echo "SKIP: a CUDA device is present (the GPU script tests/gpu/run-backend-checks.sh covers it)"; exit 0
    fi
    cat "$tmp/err"
    [ "$st" = 2 ] || fail "--backend cuda without a device: exit $st, want 2"
    grep -q "^tftrain: --backend cuda: no CUDA device" "$tmp/err" || fail "no 'no CUDA device' message"
    [ ! -s "$tmp/out" ] || fail "--backend cuda without a device printed progress: $(head -2 "$tmp/out")"
    # the reason is CUDA's own words, or the build's
    grep -Eq "no CUDA device \((.+)\)" "$tmp/err" || fail "no reason given" ;;
  auto)
    if have_device; then echo "SKIP: a GPU is present: auto would pick it"; exit 0; fi
    for sel in "" "--backend auto" "--backend cpu"; do
      # shellcheck disable=SC2086
      "$tftrain" $sel "${SMALL[@]}" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; fail "'$sel': exit $?"; }
      grep -q "(cpu backend)" "$tmp/out" || fail "'$sel': banner does not say the CPU backend: $(head -1 "$tmp/out")"
      n=$(grep -c '^step' "$tmp/out")
      [ "$n" = 3 ] || fail "'$sel': $n step lines, want 3"
      echo "'${sel:-default}': $(head -1 "$tmp/out")"
    done
    # same seed, same backend: the same losses whichever way CPU was chosen
    a=$("$tftrain" "${SMALL[@]}" | awk '/^step/ {print $5}')
    b=$("$tftrain" --backend cpu "${SMALL[@]}" | awk '/^step/ {print $5}')
    [ "$a" = "$b" ] || fail "auto and cpu losses differ: $a vs $b"
    st=0; "$tftrain" --backend tpu >/dev/null 2>"$tmp/err" || st=$?
    [ "$st" = 2 ] && grep -q "must be cpu, cuda or auto" "$tmp/err" || fail "--backend tpu: exit $st" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo "PASS $case_name"
