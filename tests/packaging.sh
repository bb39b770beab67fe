# Sourced by the tests of what others build on (cli_install, cli_python, cli_deb) with the
# toy binary as $1: sets $toy, $build (its folder), $src (the source tree) and $tmp (a
# scratch folder removed at exit), or skips in a sanitizer build, whose libtoy needs the
# sanitizer's runtime in the program that loads it (python3, cc's programs and the
# packages' users have none; the plain build runs these tests).
[ "${TOY_SANITIZED:-0}" = 1 ] && { echo "SKIP: a sanitizer build (the plain build runs this test)"; exit 77; }
toy="$1"
build=$(cd "$(dirname "$toy")" && pwd)
src=$(cd "${TOY_SOURCE_DIR:-$(dirname "$0")/..}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
