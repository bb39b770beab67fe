#!/usr/bin/env bash
# Builds the Debian packages from a finished build: toy (the command, libtoy.so.MAJOR, the
# man page and the bundled model) and libtoy-dev (toy.h, libtoy.so, libtoy.a, toy.pc, the
# CMake package), with dpkg-shlibdeps for the run-time dependencies and dpkg-deb.
# Usage: make-deb.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^#define TOY_VERSION_STRING "\(.*\)"$/\1/p' "$src/include/toy.h")
major=${version%%.*}
arch=$(dpkg --print-architecture)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# everything under /usr, staged (the component keeps the build's install_manifest.txt)
DESTDIR="$work/stage" cmake --install "$build" --prefix /usr --component Unspecified > /dev/null
stage=$work/stage/usr

# move PATH (relative to /usr) from the stage into package PKG
take() {
  local pkg=$1 path=$2
  mkdir -p "$work/$pkg/usr/$(dirname "$path")"
  mv "$stage/$path" "$work/$pkg/usr/$path"
}
take toy bin/toy
for f in "$stage"/lib/libtoy.so."$major"*; do take toy "lib/$(basename "$f")"; done
take toy share/toy
take toy share/man/man1/toy.1
gzip -9n "$work/toy/usr/share/man/man1/toy.1"
take libtoy-dev include/toy.h
take libtoy-dev lib/libtoy.so
take libtoy-dev lib/libtoy.a
take libtoy-dev lib/pkgconfig
take libtoy-dev lib/cmake
left=$(cd "$stage" && find . -type f)
[ -z "$left" ] || { echo "make-deb: installed files in no package: $left" >&2; exit 1; }

for pkg in toy libtoy-dev; do
  mkdir -p "$work/$pkg/usr/share/doc/$pkg"
  printf 'toy %s\n\nBuilt from the toy source tree; see its README.md.\n' "$version" \
    > "$work/$pkg/usr/share/doc/$pkg/copyright"
done

# the shared libraries the binary and libtoy.so need, as Debian package names
mkdir -p "$work/shlibs/debian"
printf 'Source: toy\n\nPackage: toy\nArchitecture: any\n' > "$work/shlibs/debian/control"
depends=$(cd "$work/shlibs" && dpkg-shlibdeps -O -e"$work/toy/usr/bin/toy" \
  -e"$work/toy/usr/lib/libtoy.so.$version" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')

control() { # PKG DEPENDS DESCRIPTION
  mkdir -p "$work/$1/DEBIAN"
  {
    echo "Package: $1"
    echo "Version: $version"
    echo "Architecture: $arch"
    echo "Maintainer: toy developers <toy@localhost>"
    echo "Section: science"
    echo "Priority: optional"
    echo "Installed-Size: $(du -sk "$work/$1/usr" | cut -f1)"
    echo "Depends: $2"
    echo "Description: $3"
  } > "$work/$1/DEBIAN/control"
}
control toy "$depends" "run, serve and train llama-family language models (GGUF)
 toy runs, serves (OpenAI's HTTP API) and trains llama-family language models stored
 as GGUF files, on the CPU. This package holds the toy command, the shared library
 libtoy.so.$major and a small model trained by toy."
control libtoy-dev "toy (= $version), libpcre2-dev, libjansson-dev" "development files of libtoy
 The header toy.h, libtoy.so and libtoy.a, the pkg-config file toy.pc and the CMake
 package (find_package(toy), target toy::toy)."
echo "activate-noawait ldconfig" > "$work/toy/DEBIAN/triggers"

for pkg in toy libtoy-dev; do
  dpkg-deb --root-owner-group --build "$work/$pkg" "$out/${pkg}_${version}_${arch}.deb" > /dev/null
  echo "$out/${pkg}_${version}_${arch}.deb"
done
