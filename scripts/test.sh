#!/usr/bin/env bash
# Runs the whole test suite from a fresh checkout: installs the Debian
# packages it needs, builds (release, ASan+UBSan, TSan, fuzz), and runs ctest
# in each configuration plus a short libFuzzer run.
#   scripts/test.sh            everything (what CI runs)
#   TFT_QUICK=1 scripts/test.sh   the release build and its tests only
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc 2>/dev/null || echo 2)
fuzz_seconds=${TFT_FUZZ_SECONDS:-30}

bash scripts/install-deps.sh

step() { printf '\n==== %s\n' "$*"; }

step "release build"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
cmake --build build -j"$jobs"
step "release tests"
(cd build && ctest --output-on-failure -j"$jobs")

if [ -n "${TFT_QUICK:-}" ]; then exit 0; fi

step "ASan+UBSan build"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTFT_SANITIZE=address >build-asan-configure.log 2>&1 || { cat build-asan-configure.log; exit 1; }
cmake --build build-asan -j"$jobs"
step "ASan+UBSan tests"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
   ctest --output-on-failure -j"$jobs")

step "TSan build"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DTFT_SANITIZE=thread >build-tsan-configure.log 2>&1 || { cat build-tsan-configure.log; exit 1; }
cmake --build build-tsan -j"$jobs"
step "TSan tests"
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j"$jobs" -L tsan)

if [ -f tests/fuzz/run-fuzz.sh ]; then
  step "libFuzzer (clang, ASan+UBSan), ${fuzz_seconds}s per target"
  cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DTFT_FUZZ=ON \
        -DTFT_SANITIZE=address -DTFT_CUDA=OFF >build-fuzz-configure.log 2>&1 || { cat build-fuzz-configure.log; exit 1; }
  cmake --build build-fuzz -j"$jobs" --target fuzz_reader fuzz_manifest
  (cd build-fuzz && ctest --output-on-failure -L fuzz)
  bash tests/fuzz/run-fuzz.sh build-fuzz "$fuzz_seconds"
fi
step "all test configurations passed"
