#!/usr/bin/env bash
# The shared library's ABI: it exports exactly the functions toy.h marks TOY_API (no
# internal symbol leaks, none is missing), libtoy.a's other globals all start with ty_,
# and its soname is libtoy.so.MAJOR with
# MAJOR the header's TOY_VERSION_MAJOR.
. "$(dirname "$0")/../lib.sh"
lib=$build/libtoy.so
[ -e "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
command -v nm >/dev/null || skip "nm (binutils) not installed"

# declared: the name before the "(" on each TOY_API line
declared=$(grep -h '^TOY_API' "$src/include/toy.h" | sed -E 's/\(.*//; s/.*[ *]([a-z_0-9]+)$/\1/' | sort -u)
# exported: the shared library's defined dynamic symbols
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)

extra=$(comm -13 <(echo "$declared") <(echo "$exported"))
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
[ -n "$extra" ] && { die "exported but not TOY_API in toy.h:"; echo "$extra"; }
[ -n "$missing" ] && { die "TOY_API in toy.h but not exported:"; echo "$missing"; }
n=$(echo "$declared" | wc -l)
[ "$n" -gt 100 ] || die "only $n TOY_API functions found in toy.h: the parse is wrong"

# The static library: every global it defines is public (toy.h's) or internal (ty_), so a
# program linked against libtoy.a meets no other name of ours.
static=$build/libtoy.a
if [ -e "$static" ]; then
  others=$(nm -g --defined-only "$static" 2>/dev/null | awk 'NF == 3 {print $3}' | sort -u |
           grep -v '^ty_' | comm -23 - <(echo "$declared"))
  [ -n "$others" ] && { die "libtoy.a defines globals neither TOY_API nor ty_:"; echo "$others"; }
fi

major=$(sed -n 's/^#define TOY_VERSION_MAJOR \([0-9]*\)$/\1/p' "$src/include/toy.h")
soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libtoy.so.$major" ] || die "soname '$soname', expected libtoy.so.$major"
real=$(readlink -f "$lib")
case "$real" in
  */libtoy.so.$major.*.*) ;;
  *) echo "FAIL: libtoy.so resolves to $real, not libtoy.so.$major.MINOR.PATCH"; fail=1 ;;
esac

finish "$n functions exported, all and only toy.h's TOY_API; soname $soname"
