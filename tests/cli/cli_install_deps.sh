#!/usr/bin/env bash
# scripts/install-deps.sh, without installing anything: the tiers nest (build within run
# within test, build within fuzz), --check names what is missing and the line that installs
# it, and the install mode hands apt-get exactly the missing packages as root and, as
# another user, only prints the `sudo apt-get install` line. The installed packages are
# stood in for by TOY_DEPS_INSTALLED, and apt-get by a script that records its arguments.
. "$(dirname "$0")/../lib.sh"
cp "$src/scripts/install-deps.sh" "$tmp/install-deps.sh"
deps() { bash "$tmp/install-deps.sh" "$@"; }

for t in build run test fuzz; do
  deps --list "$t" > "$tmp/$t" || die "--list $t"
  [ -s "$tmp/$t" ] || die "tier $t is empty"
done
# each of A's packages is in B
within() { local extra; extra=$(grep -vxF -f "$tmp/$2" "$tmp/$1"); [ -z "$extra" ] || die "$1 is not within $2: $extra"; }
within build run; within run test; within build fuzz
for p in cmake pkg-config libpcre2-dev libjansson-dev libmicrohttpd-dev libedit-dev; do
  grep -qxF "$p" "$tmp/build" || die "build tier lacks $p"
done
for p in libopenmpi-dev nginx chromium python3-torch clang; do
  grep -qxF "$p" "$tmp/build" && die "build tier holds $p, which only the tests need"
  grep -qxF "$p" "$tmp/test" || die "test tier lacks $p"
done
grep -qxF libclang-rt-14-dev "$tmp/fuzz" || die "fuzz tier lacks libclang-rt-14-dev (libFuzzer)"
deps --list nonsense > /dev/null 2>&1; [ $? = 2 ] || die "an unknown tier is not a usage error"

# a complete tier, then the test tier less nginx and curl: build is still complete
all=$(tr '\n' ' ' < "$tmp/test")
out=$(TOY_DEPS_INSTALLED="$all" deps --check test 2>&1) || die "--check test with all installed: $out"
less=$(grep -vxE 'nginx|curl' "$tmp/test" | tr '\n' ' ')
out=$(TOY_DEPS_INSTALLED="$less" deps --check build 2>&1) || die "--check build without nginx: $out"
out=$(TOY_DEPS_INSTALLED="$less" deps --check test 2>&1); rc=$?
[ $rc = 1 ] || die "--check test without nginx and curl: exit $rc"
case "$out" in
  *"misses nginx curl;"*"apt-get install -y --no-install-recommends nginx curl") ;;
  *) die "--check test without nginx and curl: $out" ;;
esac

# the install mode, apt-get being a recorder
mkdir "$tmp/bin"
printf '#!/bin/sh\necho "$*" >> %s/apt.log\n' "$tmp" > "$tmp/bin/apt-get"
chmod 755 "$tmp/bin/apt-get" "$tmp" "$tmp/install-deps.sh"
PATH="$tmp/bin:$PATH" TOY_DEPS_INSTALLED="$all" deps test > /dev/null 2>&1 || die "install with nothing missing"
[ -e "$tmp/apt.log" ] && die "apt-get ran with nothing missing: $(cat "$tmp/apt.log")"
as_user() {   # install mode as a user other than root: the sudo line, exit 1, no apt-get
  out=$(env PATH="$tmp/bin:$PATH" TOY_DEPS_INSTALLED="$less" "$@" bash "$tmp/install-deps.sh" test 2>&1); rc=$?
  [ $rc = 1 ] || die "as a user, install with nginx and curl missing: exit $rc"
  case "$out" in *"  sudo apt-get install -y --no-install-recommends nginx curl") ;; *) die "as a user: $out" ;; esac
  [ -e "$tmp/apt.log" ] && die "apt-get ran as a user: $(cat "$tmp/apt.log")"
}
if [ "$(id -u)" -ne 0 ]; then
  as_user
else
  PATH="$tmp/bin:$PATH" TOY_DEPS_INSTALLED="$less" deps test > /dev/null 2>&1 || die "install as root"
  [ "$(tail -n 1 "$tmp/apt.log")" = "install -y -qq --no-install-recommends nginx curl" ] ||
    die "as root, apt-get was asked: $(cat "$tmp/apt.log" 2>/dev/null)"
  rm -f "$tmp/apt.log"
  if command -v runuser > /dev/null && id nobody > /dev/null 2>&1; then
    as_user runuser -u nobody --
  else
    echo "cli_install_deps: no runuser or no user nobody; the install as another user was not tried"
  fi
fi
exit $fail
