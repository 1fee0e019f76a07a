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
# find_package(tftrace)
cmake -S "$src/consumer" -B "$tmp/b" -DCMAKE_PREFIX_PATH="$tmp/p" >/dev/null
cmake --build "$tmp/b" >/dev/null
LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/b/consumer" | grep -q "tft_enabled=0 tft_tensor=0"
# pkg-config
PKG_CONFIG_PATH=$(dirname "$pc") cc -o "$tmp/pc" "$src/consumer/main.c" $(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs tftrace)
LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/pc" | grep -q "tft_enabled=0"
# the installed tftrace finds the installed library (../lib)
"$tmp/p/bin/tftrace" -q -o "$tmp/t.trace" -- env LD_LIBRARY_PATH="$(dirname "$lib")" "$tmp/pc" | grep -q "tft_enabled=1 tft_tensor=0"
"$tmp/p/bin/tfdump" --json "$tmp/t.trace" | python3 -c 'import json,sys; s=json.load(sys.stdin); assert s["tensors"]==1, s'
echo "PASS install"
