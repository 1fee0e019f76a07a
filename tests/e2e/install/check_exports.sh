#!/usr/bin/env bash
# check_exports.sh BUILD SRC HAVE_MPI HAVE_CUDA CC [CXX] — the ABI fence of
# the installed tree (cmake --install BUILD):
#   - every installed header compiles alone (C17 -pedantic, and C++ when
#     CXX is given) with nothing but the installed include directory;
#   - libtftrace.so exports exactly
#       the functions the installed headers declare, at version LIBTFTRACE_1,
#       the CUDA plugin's entries (tracer/cuda/tft_cuda_plugin.h), at
#         LIBTFTRACE_PRIVATE,
#       the interposers of the parts built (tracer/lib/interposed.txt),
#         unversioned (the base version), so that they interpose glibc's
#         versioned malloc@GLIBC_2.2.5 and the like,
#     and nothing else: a symbol in none of those lists, a public function
#     missing or at another version, an interposer missing or versioned,
#     each fails;
#   - a program built against the installed header and library binds to
#     tft_tensor@LIBTFTRACE_1.
set -euo pipefail
build=$1 src=$2 have_mpi=$3 have_cuda=$4 cc=$5 cxx=${6:-}
tmp=$(mktemp -d /tmp/tft-exports-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/p" >/dev/null
inc=$tmp/p/include
lib=$(ls "$tmp"/p/lib*/libtftrace.so 2>/dev/null | head -1)
[ -n "$lib" ] || { echo "FAIL: libtftrace.so not installed"; exit 1; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }
is_on() { case $1 in ON|TRUE|1|YES|on|true|yes) return 0;; *) return 1;; esac; }

# ---- each installed header alone --------------------------------------------
headers=$(cd "$inc" && ls ./*.h | sed 's|^\./||')
[ -n "$headers" ] || { echo "FAIL: no headers installed"; exit 1; }
for h in $headers; do
  printf '#include "%s"\nint tft_header_alone_%s;\n' "$h" "${h%.h}" >"$tmp/one.c"
  "$cc" -std=c17 -pedantic -Wall -Wextra -Werror -I"$inc" -c "$tmp/one.c" -o "$tmp/one.o" 2>"$tmp/err" ||
      { cat "$tmp/err"; bad "$h does not compile alone as C17"; }
  if [ -n "$cxx" ]; then
    cp "$tmp/one.c" "$tmp/one.cc"
    "$cxx" -std=c++17 -Wall -Wextra -Werror -I"$inc" -c "$tmp/one.cc" -o "$tmp/one.o" 2>"$tmp/err" ||
        { cat "$tmp/err"; bad "$h does not compile alone as C++17"; }
  fi
done

# ---- what may be exported -----------------------------------------------------
# The functions a set of headers declares (not the static inline ones),
# from the compiler's own list of prototypes (GCC's -aux-info), so that
# the declarations are parsed, not matched.
declared() { # OUT DIR HEADER... — functions declared in the headers found in DIR
  local out=$1 dir=$2
  shift 2
  : >"$tmp/all.c"
  for h in "$@"; do printf '#include "%s"\n' "$h" >>"$tmp/all.c"; done
  "$cc" -std=c17 -I"$dir" -I"$inc" -aux-info "$tmp/aux" -c "$tmp/all.c" -o "$tmp/all.o"
  grep -F "/* $dir/" "$tmp/aux" | grep -v '\*/ static ' |
      sed -e 's|^/\*[^*]*\*/ ||' -e 's/ (.*//' -e 's/.*[ *]//' | sort -u >"$out"
}
if ! "$cc" -aux-info /dev/null -x c -c /dev/null -o /dev/null 2>/dev/null; then
  echo "SKIP: $cc has no -aux-info (GCC's); the header checks above passed"
  exit $fail
fi
# shellcheck disable=SC2086
declared "$tmp/public" "$inc" $headers
declared "$tmp/private" "$src/tracer/cuda" tft_cuda_plugin.h
grep -v '^tft_' "$tmp/public" | sed 's/^/public function not named tft_*: /' >"$tmp/odd" || true
[ -s "$tmp/odd" ] && { cat "$tmp/odd"; bad "the installed headers declare functions outside tft_*"; }
groups="alloc blas"
is_on "$have_mpi" && groups="$groups mpi"
is_on "$have_cuda" && groups="$groups cuda"
: >"$tmp/interposed"
for g in $groups; do
  awk -v g="$g" '$1 == g { print $2 }' "$src/tracer/lib/interposed.txt" >>"$tmp/interposed"
done
sort -u -o "$tmp/interposed" "$tmp/interposed"
awk '!/^#/ && NF { print $2 }' "$src/tracer/lib/interposed.txt" | sort -u >"$tmp/interposed_all"

# ---- what is exported ---------------------------------------------------------
# The versions the library defines (the first, flagged BASE, is its soname).
readelf -V -W "$lib" | sed -n '/^Version definition/,/^Version needs/p' |
    awk '/Name:/ && !/Flags: BASE/ { print $NF }' | sort -u >"$tmp/vdefs"
grep -qx LIBTFTRACE_1 "$tmp/vdefs" || bad "libtftrace.so defines no version LIBTFTRACE_1 (no version script?)"
# readelf: Num: Value Size Type Bind Vis Ndx Name[@@VERSION]; defined only,
# without the version definitions' own ABS entries.
readelf --dyn-syms -W "$lib" | awk 'NF >= 8 && $7 != "UND" && $1 ~ /^[0-9]+:$/ { print $7, $8 }' |
  while read -r ndx name; do
    sym=${name%%@*} ver=
    [ "$sym" != "$name" ] && ver=${name##*@}
    [ "$ndx" = ABS ] && grep -qx -- "$sym" "$tmp/vdefs" && continue
    echo "$sym ${ver:-BASE}"
  done | sort -u >"$tmp/exported"
awk '$2 == "LIBTFTRACE_1" { print $1 }' "$tmp/exported" >"$tmp/v1"
awk '$2 == "LIBTFTRACE_PRIVATE" { print $1 }' "$tmp/exported" >"$tmp/vpriv"
awk '$2 == "BASE" { print $1 }' "$tmp/exported" >"$tmp/vbase"
awk '$2 != "LIBTFTRACE_1" && $2 != "LIBTFTRACE_PRIVATE" && $2 != "BASE"' "$tmp/exported" >"$tmp/vother"

report() { # FILE MESSAGE — fails with the names in FILE, if any
  if [ -s "$1" ]; then
    echo "FAIL: $2:"
    sed 's/^/    /' "$1"
    fail=1
  fi
}
comm -23 "$tmp/public" "$tmp/v1" >"$tmp/d"
report "$tmp/d" "declared in the installed headers but not exported at LIBTFTRACE_1 (missing TFT_API, or not in tracer/lib/libtftrace.map.in)"
comm -13 "$tmp/public" "$tmp/v1" >"$tmp/d"
report "$tmp/d" "exported at LIBTFTRACE_1 but declared in no installed header"
comm -13 "$tmp/private" "$tmp/vpriv" >"$tmp/d"
report "$tmp/d" "exported at LIBTFTRACE_PRIVATE but not declared in tracer/cuda/tft_cuda_plugin.h"
if is_on "$have_cuda"; then
  comm -23 "$tmp/private" "$tmp/vpriv" >"$tmp/d"
  report "$tmp/d" "the CUDA plugin's entries (tft_cuda_plugin.h) not exported at LIBTFTRACE_PRIVATE"
fi
comm -23 "$tmp/interposed" "$tmp/vbase" >"$tmp/d"
report "$tmp/d" "interposers of the parts built ($groups; tracer/lib/interposed.txt) not exported unversioned"
comm -13 "$tmp/interposed_all" "$tmp/vbase" >"$tmp/d"
report "$tmp/d" "exported unversioned but not in tracer/lib/interposed.txt (a leak: give it hidden visibility; or a public function missing from tracer/lib/libtftrace.map.in)"
comm -12 "$tmp/interposed_all" <(cut -d' ' -f1 "$tmp/exported" | sort -u | comm -23 - "$tmp/vbase") >"$tmp/d"
report "$tmp/d" "interposers exported with a version (they must not be in the version script)"
report "$tmp/vother" "exported at an unknown version"

# ---- a program binds to the versioned API -----------------------------------
printf '#include "tft.h"\nint main(void) { return tft_tensor("x", TFT_F32, 0, 0, 0); }\n' >"$tmp/prog.c"
"$cc" -std=c17 -I"$inc" "$tmp/prog.c" -o "$tmp/prog" -L"$(dirname "$lib")" -ltftrace
readelf --dyn-syms -W "$tmp/prog" | grep ' tft_tensor@LIBTFTRACE_1' >/dev/null ||
    bad "a program built against the installed library does not reference tft_tensor@LIBTFTRACE_1"

[ $fail = 0 ] || exit 1
echo "PASS exports: $(wc -l <"$tmp/exported") symbols: $(wc -l <"$tmp/v1") public (LIBTFTRACE_1)," \
     "$(wc -l <"$tmp/vpriv") plugin (LIBTFTRACE_PRIVATE), $(wc -l <"$tmp/vbase") interposers ($groups);" \
     "headers alone: $(echo $headers)"
