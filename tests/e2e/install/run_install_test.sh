#!/usr/bin/env bash
# cmake --install puts programs, library, headers, pkg-config and CMake
# package files in place; an outside project builds against them both ways.
set -euo pipefail
build=$1 src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/tft-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/p" >/dev/null
for f in bin/tftrace bin/tfdump include/tft.h include/tft_format.h include/tft_types.h; do
  [ -e "$tmp/p/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
lib=$(ls "$tmp"/p/lib*/libtftrace.so 2>/dev/null | head -1)
[ -n "$lib" ] || { echo "FAIL: libtftrace.so not installed"; exit 1; }
pc=$(ls "$tmp"/p/lib*/pkgconfig/tftrace.pc | head -1)
# the versions, from the installed headers: the library's and every
# program's --version say the same
macro() { sed -n "s/^#define $1 \([0-9][0-9]*\).*/\1/p" "$2"; }
ver=$(macro TFT_VERSION_MAJOR "$tmp/p/include/tft.h").$(macro TFT_VERSION_MINOR "$tmp/p/include/tft.h").$(macro TFT_VERSION_PATCH "$tmp/p/include/tft.h")
fmt=$(macro TFT_FORMAT_MAJOR "$tmp/p/include/tft_format.h").$(macro TFT_FORMAT_MINOR "$tmp/p/include/tft_format.h")
echo "$ver $fmt" | grep -Eqx '[0-9]+\.[0-9]+\.[0-9]+ [0-9]+\.[0-9]+' || { echo "FAIL: versions '$ver' '$fmt' from the headers"; exit 1; }
for prog in tftrace tfdump tfdiff tftrain; do
  [ -x "$tmp/p/bin/$prog" ] || continue
  out=$(LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/p/bin/$prog" --version) # tftrain: no rpath
  case $out in
    "$prog $ver (trace format $fmt)"|"$prog (tftrace) $ver (trace format $fmt)") ;;
    *) echo "FAIL: $prog --version: '$out', want $ver and trace format $fmt"; exit 1 ;;
  esac
done
# find_package(tftrace)
cmake -S "$src/consumer" -B "$tmp/b" -DCMAKE_PREFIX_PATH="$tmp/p" >/dev/null
cmake --build "$tmp/b" >/dev/null
out=$(LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/b/consumer")
[ "$out" = "tft_enabled=0 tft_tensor=0 header=$ver version=$ver format=$fmt" ] ||
    { echo "FAIL: consumer: '$out', want version $ver, format $fmt"; exit 1; }
# pkg-config
PKG_CONFIG_PATH=$(dirname "$pc") cc -o "$tmp/pc" "$src/consumer/main.c" $(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs tftrace)
LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/pc" | grep "tft_enabled=0" >/dev/null
# the installed tftrace finds the installed library (../lib)
"$tmp/p/bin/tftrace" -q -o "$tmp/t.trace" -- env LD_LIBRARY_PATH="$(dirname "$lib")" "$tmp/pc" | grep "tft_enabled=1 tft_tensor=0" >/dev/null
"$tmp/p/bin/tfdump" --json "$tmp/t.trace" | python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["tensors"]==1, s'
echo "PASS install"
