#!/usr/bin/env bash
# Installs the Debian packages toy needs, only those missing. Run as root (CI is);
# as another user it only reports what is missing.
set -euo pipefail

# compilers and build: gcc, cmake, clang (sanitizers, libFuzzer); dpkg-dev: make deb;
# python3 runs a few command tests and the Python bindings (python3-pip: their install with
# pip is tested); libpcre2-dev: Unicode regexes of the BPE pre-tokenizers; libedit-dev:
# line editing in `toy chat`; libjansson-dev: JSON (chat data, the server); libmicrohttpd-dev:
# the HTTP server; python3-torch and python3-numpy: the independent float64 reference that
# toy grad is tested against; chromium: the chat page's test (with playwright-core from npm,
# tests/node); python3-jsonschema: answers under JSON Schema grammars and forced tool calls
# are validated against their schemas (cli_json_schema, serve_tools); nginx: the test of
# replicas behind a load balancer; libopenmpi-dev and openmpi-bin: data-parallel training
# under mpirun (the build leaves it out where they are missing).
packages=(build-essential cmake clang libclang-rt-14-dev pkg-config python3 python3-pip dpkg-dev libpcre2-dev
          libedit-dev libjansson-dev libmicrohttpd-dev python3-numpy python3-torch python3-jsonschema chromium nginx libopenmpi-dev
          openmpi-bin)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]} (run as root: apt-get install ${missing[*]})" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
