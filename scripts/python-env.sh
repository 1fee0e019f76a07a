#!/usr/bin/env bash
# python-env.sh: creates once, and afterwards reuses, the Python virtual
# environment that the PyTorch tests, the Python package's tests and the
# PyTorch benchmark run in: PyTorch, numpy and pandas from PyPI, pinned to
# the versions these tests were written against. Prints the environment's
# python on stdout (progress and errors go to stderr).
#
#   TFT_VENV=DIR   where the environment lives (default ~/.cache/tftrace/venv-torch)
#
# A fresh environment downloads about 3 GB (PyTorch's Linux wheel brings the
# CUDA libraries it links, though the tests run on the CPU) and takes a few
# minutes; an existing one that imports all three packages is used as it is.
set -euo pipefail
venv=${TFT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tftrace/venv-torch}
pins=(torch==2.15.0 numpy==2.4.6 pandas==3.1.1 setuptools wheel)
probe='import torch, numpy, pandas'
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$probe" 2>/dev/null; then
  echo "$venv/bin/python"; exit 0
fi
py=$(command -v python3) || { echo "python-env: python3 not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
echo "python-env: creating $venv (PyTorch, numpy, pandas: a few minutes the first time)" >&2
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$py" -m venv "$venv" >&2 || { echo "python-env: '$py -m venv' failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
"$venv/bin/python" -m pip install -q --disable-pip-version-check "${pins[@]}" >&2 ||
  { echo "python-env: pip install ${pins[*]} failed" >&2; rm -rf "$venv"; exit 1; }
"$venv/bin/python" -c "$probe" >&2 || { echo "python-env: the new environment does not import torch" >&2; exit 1; }
echo "$venv/bin/python"
