#!/usr/bin/env bash
# Installs the build into a temporary prefix, as `make install PREFIX=...` does, then
# builds programs outside the tree against it twice, through pkg-config and through
# CMake's find_package(toy), and runs them; the installed command finds its bundled model
# and man page where they were put.
. "$(dirname "$0")/../lib.sh"
not_sanitized
prefix=$tmp/prefix

# the install component, so that the build's install_manifest.txt (what `make
# uninstall` removes) stays the user's
cmake --install "$build" --prefix "$prefix" --component Unspecified > "$tmp/install.log" 2>&1 ||
  { echo "FAIL: cmake --install: $(tail -5 "$tmp/install.log")"; exit 1; }
for f in bin/toy include/toy.h lib/libtoy.a lib/libtoy.so lib/pkgconfig/toy.pc lib/cmake/toy/toyConfig.cmake \
         lib/cmake/toy/toyConfigVersion.cmake share/man/man1/toy.1 share/toy/toy-kjv.gguf; do
  [ -e "$prefix/$f" ] || die "$f not installed"
done
so=$(cd "$prefix/lib" && ls libtoy.so.*.*.* 2>/dev/null)
[ -n "$so" ] && [ -L "$prefix/lib/libtoy.so" ] || die "no libtoy.so.MAJOR.MINOR.PATCH behind libtoy.so"
grep -q '^\.SS toy run$' "$prefix/share/man/man1/toy.1" || die "the man page has no toy run section"
grep -q 'no-mmap' "$prefix/share/man/man1/toy.1" || die "the man page lacks the commands' options"

# the installed command: its version, and the bundled model found without -m
"$prefix/bin/toy" --version | grep -q "^toy $(sed -n 's/^#define TOY_VERSION_STRING "\(.*\)"$/\1/p' "$src/include/toy.h") " ||
  die "installed toy --version: $("$prefix/bin/toy" --version)"
prompt="And it came to pass"
(cd / && "$prefix/bin/toy" run -p "$prompt" -n 24 --temp 0 > "$tmp/run.txt" 2> "$tmp/run.err") ||
  die "installed toy run without -m: $(cat "$tmp/run.err")"

# 1. pkg-config
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[ "$(pkg-config --modversion toy)" = "$(sed -n 's/^#define TOY_VERSION_STRING "\(.*\)"$/\1/p' "$src/include/toy.h")" ] ||
  die "pkg-config --modversion toy: $(pkg-config --modversion toy)"
cc -std=c11 -Wall -Werror "$src/examples/tokenize.c" $(pkg-config --cflags --libs toy) -Wl,-rpath,"$prefix/lib" \
   -o "$tmp/tokenize" 2> "$tmp/cc.log" || die "cc with pkg-config: $(cat "$tmp/cc.log")"
ldd "$tmp/tokenize" | grep -q "$prefix/lib/libtoy.so" || die "tokenize is not linked to the installed libtoy.so"
got=$("$tmp/tokenize" "$prefix/share/toy/toy-kjv.gguf" "$prompt" | head -1)
want=$("$prefix/bin/toy" tokenize -m "$prefix/share/toy/toy-kjv.gguf" "$prompt")
[ -n "$got" ] && [ "$got" = "$want" ] || die "pkg-config build: tokenize '$got', toy tokenize '$want'"
# a static link, with the libraries pkg-config --static names
cc -std=c11 "$src/examples/tokenize.c" -I"$prefix/include" "$prefix/lib/libtoy.a" \
   $(pkg-config --static --libs-only-l --libs-only-L toy | sed 's/-ltoy//') -o "$tmp/tokenize_static" 2> "$tmp/cc.log" ||
  die "static link with pkg-config --static: $(cat "$tmp/cc.log")"
[ "$("$tmp/tokenize_static" "$prefix/share/toy/toy-kjv.gguf" "$prompt" | head -1)" = "$want" ] ||
  die "the static build tokenizes otherwise"

# 2. CMake: find_package(toy) and toy::toy
cmake -S "$src/tests/install" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DEXAMPLES_DIR="$src/examples" \
  -DCMAKE_BUILD_TYPE=Release > "$tmp/cmake.log" 2>&1 && cmake --build "$tmp/consumer" >> "$tmp/cmake.log" 2>&1 ||
  { die "find_package(toy) build:"; tail -20 "$tmp/cmake.log"; }
"$tmp/consumer/generate" "$prefix/share/toy/toy-kjv.gguf" "$prompt" 24 > "$tmp/gen.txt" 2>/dev/null ||
  die "the find_package build does not run"
cmp -s "$tmp/gen.txt" "$tmp/run.txt" || { die "find_package build's text and installed toy run differ:"; diff "$tmp/gen.txt" "$tmp/run.txt"; }
# make uninstall removes every file the install wrote (the manifest of this install)
mkdir -p "$tmp/fakebuild"
cp "$build/install_manifest_Unspecified.txt" "$tmp/fakebuild/install_manifest.txt"
make -s -C "$src" uninstall BUILD="$tmp/fakebuild" PREFIX="$prefix" > "$tmp/uninstall.log" 2>&1 ||
  die "make uninstall: $(cat "$tmp/uninstall.log")"
left=$(find "$prefix" -type f -o -type l)
[ -z "$left" ] || die "make uninstall left: $left"

finish "installed to a prefix; pkg-config, static and find_package builds run and agree; make uninstall removes it all"
