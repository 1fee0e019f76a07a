#!/bin/bash
# run-all.sh — every GPU check, in one go, for a lent GPU machine (issues 6
# and 7; docs/GPU.md). From the repository root:
#
#     OUT=/some/dir bash tests/gpu/run-all.sh
#
# One build (build-gpu: release, -DTFT_CUDA=ON, the GPU's architecture)
# shared by the two scripts it runs, each bounded by a timeout so the
# whole stays within a few minutes of device time:
#   run-gpu-checks.sh      the interposers: cudaMalloc leak, cuBLAS GEMMs
#                          with a planted difference, a 1-rank NCCL
#                          all-reduce, a PyTorch loop recorded with a change
#   run-torch-checks.sh    tftrace --torch on the example GPT on CUDA (device
#                          statistics, no added syncs, bug localized, ops
#                          mode, DDP with NCCL on the one GPU)
#   run-backend-checks.sh  tftrain's CUDA backend: every kernel vs its CPU
#                          reference, the statistics kernel vs the CPU's,
#                          loss curves CUDA vs CPU, bug-zoo rows, bandwidth
#                          and traced/untraced ratios
# Results: $OUT/interpose/gpu-results.txt, $OUT/backend/gpu-backend-results.txt
# and their logs; a summary on stdout. Exit status: the number of scripts
# with failures.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 100
export TFT_GPU_BUILD_DIR=${TFT_GPU_BUILD_DIR:-$root/build-gpu}
export TFT_GPU_BACKEND_BUILD=$TFT_GPU_BUILD_DIR
out=${OUT:-$root/gpu-out}
bad=0
echo "== interposers (tests/gpu/run-gpu-checks.sh)"
OUT=$out/interpose timeout "${TFT_GPU_INTERPOSE_LIMIT:-330}" bash tests/gpu/run-gpu-checks.sh || bad=$((bad + 1))
echo "== CUDA backend (tests/gpu/run-backend-checks.sh)"
OUT=$out/backend timeout "${TFT_GPU_BACKEND_LIMIT:-330}" bash tests/gpu/run-backend-checks.sh || bad=$((bad + 1))
echo "== PyTorch under --torch (tests/gpu/run-torch-checks.sh)"
OUT=$out/torch timeout "${TFT_GPU_TORCH_LIMIT:-240}" bash tests/gpu/run-torch-checks.sh || bad=$((bad + 1))
echo "== summary"
cat "$out/interpose/gpu-results.txt" "$out/backend/gpu-backend-results.txt" "$out/torch/torch-results.txt" 2>/dev/null | grep -E "^(PASS|FAIL|SKIP)|total"
exit $bad
