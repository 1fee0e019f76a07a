#!/usr/bin/env bash
# run_python_install_test.sh BUILD SRC PYTHON3 [VENV_PYTHON]: the Python
# package installed two ways works with no environment set:
#   - cmake --install: PREFIX/lib/tftrace/python/tftrace next to
#     PREFIX/lib/libtftrace.so; the installed tftrace finds it for --torch;
#   - pip install ./python (with VENV_PYTHON, whose setuptools builds it
#     offline), the library then found through TFT_LIB.
# Both report the C library's version and ship the package's py.typed (PEP
# 561); pip's also its license file.
set -u
build=$1 src=$2 py=$3 venv_py=${4:-}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/p" >/dev/null || fail "cmake --install"
pkg=$(find "$tmp/p" -path '*/tftrace/python/tftrace/__init__.py' | head -1)
[ -n "$pkg" ] || fail "no tftrace/python/tftrace in the installed tree"
pydir=$(dirname "$(dirname "$pkg")")
[ -f "$pydir/tftrace/py.typed" ] || fail "no tftrace/py.typed in the installed tree"
want=$(sed -n 's/^#define TFT_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' "$src/tracer/include/tft.h" | paste -sd.)
out=$(env -u TFT_LIB -u LD_PRELOAD PYTHONPATH="$pydir" "$py" -c \
      "import tftrace; print(tftrace.__version__, tftrace.library_version(), tftrace.library_path())" 2>&1) ||
    fail "import tftrace from the installed tree: $out"
set -- $out
[ "$1" = "$want" ] && [ "$2" = "$want" ] || fail "versions '$1' (package) '$2' (library), want $want"
case "$3" in "$tmp/p/"*) ;; *) fail "the installed package loaded $3, not the installed library";; esac
# the installed launcher puts the installed package on PYTHONPATH for --torch
out=$(env -u TFT_LIB -u TFT_PYTHON_DIR "$tmp/p/bin/tftrace" -q -o "$tmp/t.trace" --torch -- "$py" -c \
      "import os, sys; print(os.environ['TFT_TORCH']); import tftrace; print(tftrace.enabled(), tftrace.__file__)" 2>&1) ||
    fail "installed tftrace --torch: $out"
echo "$out" | grep -x modules >/dev/null || fail "TFT_TORCH not set: $out"
echo "$out" | grep "^True $pydir/tftrace/__init__.py" >/dev/null || fail "not the installed package, or not recording: $out"
# the installed programs that link libtftrace find it through their
# RUNPATH ($ORIGIN/../LIBDIR) at any prefix, with no LD_LIBRARY_PATH
for prog in tftrain toy_train; do
    [ -x "$tmp/p/bin/$prog" ] || continue
    out=$(env -u LD_LIBRARY_PATH "$tmp/p/bin/$prog" --help 2>&1 </dev/null)
    case $out in *"cannot open shared object"*) fail "installed $prog does not find libtftrace: $out" ;; esac
done
if [ -n "$venv_py" ]; then
    # from a copy: setuptools writes build/ and *.egg-info beside the sources
    cp -r "$src/python" "$tmp/src" && rm -rf "$tmp/src/build" "$tmp/src"/*.egg-info
    "$venv_py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
        --target "$tmp/site" "$tmp/src" >"$tmp/pip.log" 2>&1 || fail "pip install ./python: $(tail -5 "$tmp/pip.log")"
    lib=$(find "$tmp/p" -name 'libtftrace.so' | head -1)
    out=$(cd "$tmp" && env -u LD_PRELOAD PYTHONPATH="$tmp/site" TFT_LIB="$lib" "$venv_py" -c \
          "import tftrace; print(tftrace.__version__, tftrace.library_version(), tftrace.__file__)" 2>&1) ||
        fail "import tftrace after pip install: $out"
    set -- $out
    [ "$1" = "$want" ] && [ "$2" = "$want" ] || fail "pip-installed versions '$1' '$2', want $want"
    case "$3" in "$tmp/site/"*) ;; *) fail "imported $3, not the pip-installed package";; esac
    [ -f "$tmp/site/tftrace/py.typed" ] || fail "pip install ./python: no tftrace/py.typed"
    ls "$tmp/site"/tftrace-*.dist-info/licenses/LICENSE >/dev/null 2>&1 ||
        fail "pip install ./python: no LICENSE in its dist-info"
fi
echo PASS
