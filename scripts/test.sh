#!/usr/bin/env bash
# Runs the whole test suite from a fresh checkout: installs the Debian
# packages it needs and the Python virtual environment of the PyTorch tests
# (scripts/python-env.sh: made once, ~3 GB, reused after), builds (release, ASan+UBSan, TSan, fuzz), and runs ctest
# in each configuration plus a short libFuzzer run. Every configuration is
# built with -DTFT_WERROR=ON: a warning fails here (it is off by default, so
# that a user's or a distribution's build does not).
#   scripts/test.sh            everything (what CI runs)
#   TFT_QUICK=1 scripts/test.sh   the release build and its tests only
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc 2>/dev/null || echo 2)
fuzz_seconds=${TFT_FUZZ_SECONDS:-5} # per target: 5 targets two at a time, about 15 s (the suite stays under 20 min on 2 cores)

bash scripts/install-deps.sh

t0=$(date +%s)
step() { printf '\n==== %s   [%ds]\n' "$*" $(( $(date +%s) - t0 )); }
passed=0 failed=0
# Runs ctest in a build dir, adding its counts to the totals printed at the end.
run_ctest() {
  local dir=$1; shift
  local log; log=$(mktemp)
  local st=0
  (cd "$dir" && ctest --output-on-failure -j"$jobs" "$@") 2>&1 | tee "$log" || st=$?
  local line; line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$log" | tail -1)
  rm -f "$log"
  if [[ $line =~ ([0-9]+)\ tests\ failed\ out\ of\ ([0-9]+) ]]; then
    failed=$((failed + BASH_REMATCH[1])); passed=$((passed + BASH_REMATCH[2] - BASH_REMATCH[1]))
  fi
  if [ "$st" -ne 0 ]; then echo "$passed passed, $((failed > 0 ? failed : 1)) failed"; exit 1; fi
}

# run_ctest_split DIR [EXCLUDE]: the tests labelled "waits" (planted hangs
# that sleep until their --timeout) run in the background, beside the rest
# run with one test per core; EXCLUDE: a label regex neither runs.
run_ctest_split() {
  local dir=$1 excl=${2:-}
  local wlog; wlog=$(mktemp)
  local wargs=(-L waits)
  [ -n "$excl" ] && wargs+=(-LE "$excl")
  (cd "$dir" && ctest --output-on-failure -j2 "${wargs[@]}") >"$wlog" 2>&1 &
  local wpid=$!
  run_ctest "$dir" -LE "${excl:+$excl|}waits"
  local wst=0
  wait "$wpid" || wst=$?
  echo "---- the tests labelled waits, run beside the others:"
  cat "$wlog"
  local line; line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$wlog" | tail -1)
  rm -f "$wlog"
  if [[ $line =~ ([0-9]+)\ tests\ failed\ out\ of\ ([0-9]+) ]]; then
    failed=$((failed + BASH_REMATCH[1])); passed=$((passed + BASH_REMATCH[2] - BASH_REMATCH[1]))
  fi
  if [ "$wst" -ne 0 ]; then echo "$passed passed, $((failed > 0 ? failed : 1)) failed"; exit 1; fi
}

werror=-DTFT_WERROR=ON

step "Python environment for the PyTorch and pandas tests (scripts/python-env.sh)"
torch_python=$(bash scripts/python-env.sh)
echo "$torch_python"

step "release build (gcc, Release)"
cmake -S . -B build -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Release -DTFT_TORCH_PYTHON="$torch_python" $werror \
      >build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
cmake --build build -j"$jobs"
step "release tests"
# the planted hangs ("waits") beside the rest: the suite stays under 20
# minutes on 2 cores
run_ctest_split build

if [ -n "${TFT_QUICK:-}" ]; then echo "$passed passed, $failed failed"; exit 0; fi

step "ASan+UBSan build"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTFT_SANITIZE=address $werror >build-asan-configure.log 2>&1 || { cat build-asan-configure.log; exit 1; }
cmake --build build-asan -j"$jobs"
step "ASan+UBSan tests"
# the bug-zoo set and the long training test train many steps: release only
# (the fuzz corpora replay here too, through tests/fuzz/replay_main.c)
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_ctest_split build-asan "bugzoo|slow"

step "TSan build"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DTFT_SANITIZE=thread $werror >build-tsan-configure.log 2>&1 || { cat build-tsan-configure.log; exit 1; }
# only what the tests labelled tsan run (the whole tree under TSan costs minutes)
cmake --build build-tsan -j"$jobs" --target tftrace tftrace_launcher tfdump tfdiff rec_prog rec_check \
      cap_prog cap_mk dlopen_prog trainer_threads
step "TSan tests"
TSAN_OPTIONS=halt_on_error=1 run_ctest build-tsan -L tsan

if [ -f tests/fuzz/run-fuzz.sh ]; then
  step "libFuzzer (clang, ASan+UBSan), ${fuzz_seconds}s per target"
  cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DTFT_FUZZ=ON \
        -DTFT_SANITIZE=address -DTFT_CUDA=OFF $werror >build-fuzz-configure.log 2>&1 || { cat build-fuzz-configure.log; exit 1; }
  # fuzz_tracedir is left out here for time (each libFuzzer target compiles the
  # analyzers' sources anew, ~1 min on 2 cores): its seed corpus replays in the
  # release and ASan builds (fuzz.tracedir.corpus); campaigns build and run it
  cmake --build build-fuzz -j"$jobs" --target fuzz_reader fuzz_manifest fuzz_check fuzz_diff fuzz_capture
  run_ctest build-fuzz -L fuzz -E fuzz.tracedir
  # two at a time (2 cores): the targets' times overlap
  bash tests/fuzz/run-fuzz.sh build-fuzz "$fuzz_seconds" fuzz_reader fuzz_manifest fuzz_check & fz=$!
  fst=0
  bash tests/fuzz/run-fuzz.sh build-fuzz "$fuzz_seconds" fuzz_diff fuzz_capture || fst=1
  wait "$fz" || fst=1
  if [ "$fst" -eq 0 ]; then
    passed=$((passed + 1)); else
    failed=$((failed + 1)); echo "$passed passed, $failed failed"; exit 1; fi
fi
step "all test configurations passed"
echo "$passed passed, $failed failed"
