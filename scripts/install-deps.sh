#!/usr/bin/env bash
# Installs the Debian packages one tier of toy's work needs, only those missing.
#
#   install-deps.sh TIER           as root: apt-get installs what is missing; as another
#                                  user: prints the `sudo apt-get install -y ...` line and
#                                  exits 1 when something is missing (nothing is tried)
#   install-deps.sh --check TIER   installs nothing: names what is missing and the line that
#                                  installs it; exit 0 when the tier is complete, 1 if not
#   install-deps.sh --list TIER    the tier's packages, one a line
#
# Tiers, each holding the one before: build (`make`, `make build`, `make install`, `make
# deb`), run (`make run`), test (`make test`, `make test-sanitize`). fuzz (`make fuzz`) is
# build with clang's fuzzer. For the test of this script, TOY_DEPS_INSTALLED="PKG ..." stands
# in for the packages dpkg says are installed.
set -euo pipefail

# build: gcc and make (build-essential, which brings dpkg-dev for `make deb` too), cmake,
# pkg-config (finds the libraries below); libpcre2-dev: Unicode regexes of the BPE
# pre-tokenizers; libjansson-dev: JSON (chat data, the server); libmicrohttpd-dev: the
# HTTP server; libedit-dev: line editing in `toy chat`. Open MPI is not here: the build
# leaves data-parallel training out where libopenmpi-dev is missing.
build=(build-essential cmake pkg-config libpcre2-dev libjansson-dev libmicrohttpd-dev libedit-dev)

# run: the command needs only the shared libraries of the -dev packages above (libpcre2-8-0,
# libjansson4, libmicrohttpd12, libedit2), which they depend on; `make run` builds first, so
# its tier is the build tier.
run=("${build[@]}")

# test: python3 writes inputs and runs command tests and the Python bindings (python3-pip
# and python3-venv: their install with pip, into fresh venvs, is tested, cli_python); python3-numpy and python3-torch: the
# independent float64 reference that toy grad is tested against (cli_grad);
# python3-jsonschema: answers under JSON Schema grammars and forced tool calls are validated
# against their schemas (cli_json_schema, cli_serve_tools); python3-jinja2: the reference
# renderer of chat templates that toy's Jinja engine is compared with (cli_jinja_diff); chromium: the chat page's test
# (cli_serve_openai, which skips where node and npm are missing: they are not here because
# tests/node's playwright-core needs node 20 and Debian 12's nodejs is 18); nginx and curl:
# replicas behind a load balancer (cli_serve_nginx); libopenmpi-dev and openmpi-bin:
# data-parallel training under mpirun (cli_mpi); procps: pkill stops what the shards of
# cli_hostile_data run; clang and libclang-rt-14-dev (its sanitizer runtimes): the suite again
# under ASan+UBSan (`make test-sanitize`).
test=("${run[@]}" python3 python3-pip python3-venv python3-numpy python3-torch python3-jsonschema python3-jinja2 chromium
      nginx curl libopenmpi-dev openmpi-bin procps clang libclang-rt-14-dev)

# fuzz: clang, and libclang-rt-14-dev for libFuzzer and the sanitizers
fuzz=("${build[@]}" clang libclang-rt-14-dev)

usage() { echo "usage: install-deps.sh [--check | --list] build|run|test|fuzz" >&2; exit 2; }
mode=install
case "${1:-}" in
  --check) mode=check; shift ;;
  --list)  mode=list; shift ;;
esac
[ $# -eq 1 ] || usage
case "$1" in
  build) packages=("${build[@]}") ;;
  run)   packages=("${run[@]}") ;;
  test)  packages=("${test[@]}") ;;
  fuzz)  packages=("${fuzz[@]}") ;;
  *) echo "install-deps: unknown tier '$1' (build, run, test or fuzz)" >&2; exit 2 ;;
esac

if [ "$mode" = list ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

# What is installed, and what installed packages provide: Debian 12's npm is a package of
# its own, while NodeSource's nodejs provides it.
if [ -n "${TOY_DEPS_INSTALLED+set}" ]; then
  installed=" $TOY_DEPS_INSTALLED "
else
  installed=" $(dpkg-query -W -f='${db:Status-Abbrev} ${Package}, ${Provides}\n' 2>/dev/null |
    awk '$1 == "ii" { $1 = ""; gsub(/\([^)]*\)/, ""); gsub(/,/, " "); print }' | tr '\n' ' ') "
fi
missing=()
for p in "${packages[@]}"; do
  case "$installed" in *" $p "*) ;; *) missing+=("$p") ;; esac
done

if [ ${#missing[@]} -eq 0 ]; then
  [ "$mode" = check ] && echo "install-deps: the $1 tier is complete"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo "
line="${sudo}apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$mode" = check ] || [ -n "$sudo" ]; then
  echo "install-deps: the $1 tier misses ${missing[*]}; install them with:" >&2
  echo "  $line" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
