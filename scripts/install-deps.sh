#!/usr/bin/env bash
# Installs the Debian packages that tftrace's build and tests need.
# Idempotent: when every package is already installed it prints nothing and
# touches no package list. Needs root (or sudo) only when something is missing.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config git ca-certificates
  libzstd-dev zstd libxxhash-dev libcjson-dev
  libbpf-dev clang llvm bpftool libelf-dev libdw-dev zlib1g-dev
  libopenblas-dev openmpi-bin libopenmpi-dev
  python3 python3-dev python3-numpy python3-mpi4py python3-venv python3-pytest
  libclang-rt-dev
  protobuf-c-compiler libprotobuf-c-dev protobuf-compiler
  # headless Chromium for tests/e2e/reports (its recommended fonts-liberation is left
  # out by --no-install-recommends: DejaVu gives the screenshots a font)
  chromium fonts-dejavu-core
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
