#!/usr/bin/env bash
# make deb's packages: built from this build, unpacked into a scratch root (dpkg -x), the
# command runs from there (its version, and the bundled model found without -m), and each
# package holds what it says and depends on what its binaries link.
. "$(dirname "$0")/../lib.sh"
not_sanitized
command -v dpkg-deb > /dev/null && command -v dpkg-shlibdeps > /dev/null ||
  skip "dpkg-deb or dpkg-shlibdeps (dpkg-dev) not installed"
version=$(sed -n 's/^#define TOY_VERSION_STRING "\(.*\)"$/\1/p' "$src/include/toy.h")
arch=$(dpkg --print-architecture)

bash "$src/scripts/make-deb.sh" "$build" "$tmp/out" > "$tmp/deb.log" 2>&1 || { echo "FAIL: make-deb: $(cat "$tmp/deb.log")"; exit 1; }
deb=$tmp/out/toy_${version}_${arch}.deb dev=$tmp/out/libtoy-dev_${version}_${arch}.deb
[ -f "$deb" ] && [ -f "$dev" ] || { echo "FAIL: no $deb or $dev: $(ls "$tmp/out")"; exit 1; }

dpkg -x "$deb" "$tmp/root" && dpkg -x "$dev" "$tmp/root" || { echo "FAIL: dpkg -x"; exit 1; }
got=$("$tmp/root/usr/bin/toy" --version)
case "$got" in "toy $version "*) ;; *) echo "FAIL: toy --version from the package: $got"; fail=1 ;; esac
out=$("$tmp/root/usr/bin/toy" run -p "And it came to pass" -n 8 --temp 0 2>&1) ||
  die "the packaged toy does not find its model: $out"
for f in usr/lib/libtoy.so.$version usr/share/man/man1/toy.1.gz usr/share/toy/toy-kjv.gguf usr/include/toy.h \
         usr/lib/libtoy.a usr/lib/pkgconfig/toy.pc usr/lib/cmake/toy/toyConfig.cmake; do
  [ -e "$tmp/root/$f" ] || die "$f in neither package"
done
[ "$(readlink "$tmp/root/usr/lib/libtoy.so")" = "libtoy.so.${version%%.*}" ] || die "libtoy.so link"
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libc6 libpcre2-8-0 libjansson4; do
  case "$depends" in *"$lib "*|*"$lib,"*|*"$lib") ;; *) echo "FAIL: toy's Depends lacks $lib: $depends"; fail=1 ;; esac
done
[ "$(dpkg-deb -f "$dev" Depends | cut -d, -f1)" = "toy (= $version)" ] || die "libtoy-dev's Depends"
# a C program against the unpacked libtoy-dev, through its toy.pc
PKG_CONFIG_PATH=$tmp/root/usr/lib/pkgconfig cc -std=c11 "$src/examples/tokenize.c" \
  $(PKG_CONFIG_PATH=$tmp/root/usr/lib/pkgconfig pkg-config --cflags --libs toy) -o "$tmp/tokenize" ||
  die "building against the unpacked libtoy-dev"
LD_LIBRARY_PATH=$tmp/root/usr/lib "$tmp/tokenize" "$tmp/root/usr/share/toy/toy-kjv.gguf" "And" > /dev/null ||
  die "that program does not run"
finish "$(basename "$deb") and $(basename "$dev") unpack and run (Depends: $depends)"
