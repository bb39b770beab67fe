#!/usr/bin/env bash
# The shared library's ABI: it exports exactly the functions toy.h marks TOY_API (no
# internal symbol leaks, none is missing), and its soname is libtoy.so.MAJOR with
# MAJOR the header's TOY_VERSION_MAJOR.
set -u
toy="$1"
build=$(dirname "$toy")
src=${TOY_SOURCE_DIR:-$(dirname "$0")/..}
lib=$build/libtoy.so
[ -e "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
command -v nm >/dev/null || { echo "SKIP: nm (binutils) not installed"; exit 77; }

# declared: the name before the "(" on each TOY_API line
declared=$(grep -h '^TOY_API' "$src/include/toy.h" | sed -E 's/\(.*//; s/.*[ *]([a-z_0-9]+)$/\1/' | sort -u)
# exported: the shared library's defined dynamic symbols
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)

fail=0
extra=$(comm -13 <(echo "$declared") <(echo "$exported"))
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
[ -n "$extra" ] && { echo "FAIL: exported but not TOY_API in toy.h:"; echo "$extra"; fail=1; }
[ -n "$missing" ] && { echo "FAIL: TOY_API in toy.h but not exported:"; echo "$missing"; fail=1; }
n=$(echo "$declared" | wc -l)
[ "$n" -gt 100 ] || { echo "FAIL: only $n TOY_API functions found in toy.h: the parse is wrong"; fail=1; }

major=$(sed -n 's/^#define TOY_VERSION_MAJOR \([0-9]*\)$/\1/p' "$src/include/toy.h")
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libtoy.so.$major" ] || { echo "FAIL: soname '$soname', expected libtoy.so.$major"; fail=1; }
real=$(readlink -f "$lib")
case "$real" in
  */libtoy.so.$major.*.*) ;;
  *) echo "FAIL: libtoy.so resolves to $real, not libtoy.so.$major.MINOR.PATCH"; fail=1 ;;
esac

[ $fail -eq 0 ] && echo "cli_abi: $n functions exported, all and only toy.h's TOY_API; soname $soname"
exit $fail
