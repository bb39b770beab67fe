# lib.sh — sourced first by every command test (cli/cli_*.sh) with the toy binary as $1: the
# shared prelude and helpers, so that each test says only what it checks. A test is a
# program: exit 0 passes, 77 skips (ctest's SKIP_RETURN_CODE, with a line saying what is
# missing), anything else fails.
#
# Sets: $toy (the binary, absolute), $build (its folder), $src (the source tree, also
# exported as TOY_SOURCE_DIR for Python), $tests (src/tests), $py (the shared Python
# helpers, tests/helpers.py), $bundled (the bundled model), $llama_cpp (TOY_LLAMA_CPP or
# ../shared/llama.cpp beside the source tree), $tmp (a scratch folder removed at exit),
# fail=0. Functions: die, skip, finish, at_exit, need_fixtures / want_fixtures,
# bare_text, bare_model, not_sanitized, nap, poll_until, proc_ids / ended, serve_start /
# serve_stop / serve_port, node_ready, check_resume.
set -u
src=$(cd "${TOY_SOURCE_DIR:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)
export TOY_SOURCE_DIR="$src"
tests="$src/tests"
py="$tests/helpers.py"
if [ $# -gt 0 ] && [ -n "$1" ]; then
  toy=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
  build=$(dirname "$toy")
fi
bundled="$src/models/toy-kjv.gguf"
llama_cpp="${TOY_LLAMA_CPP:-$src/../shared/llama.cpp}"
fail=0

# die MESSAGE: a failed check; the test goes on to the next one and exits 1 at the end
die() { echo "FAIL: $*"; fail=1; }
# skip WHY: the test cannot run here (exit 77)
skip() { echo "SKIP: $*"; exit 77; }
# finish [SUMMARY]: "NAME: SUMMARY" (or "NAME: ok") when every check passed; exits 0 or 1
finish() {
  [ "$fail" = 0 ] && echo "$(basename "$0" .sh): ${1:-ok}"
  exit "$fail"
}

# at_exit COMMAND: run at exit, before $tmp is removed (servers to stop, ...)
tmp=$(mktemp -d)
_at_exit=()
at_exit() { _at_exit+=("$1"); }
_lib_exit() {
  local c
  for c in "${_at_exit[@]}"; do eval "$c"; done
  rm -rf "$tmp"
}
trap _lib_exit EXIT

# ---------------------------------------------------------------- waiting
# No check may depend on how fast the machine is: a test waits for an event (a line in a
# log, a file, a process's end) by polling it with a generous deadline, never by sleeping
# a fixed time and assuming the work is done (or not yet done). Every pause between polls
# is a nap: TOY_TEST_SLEEP_SCALE=10 makes each ten times as long, which is how the suite
# checks that no test relies on a sleep being short (a fast machine, relatively).

# nap SECONDS: sleep SECONDS times TOY_TEST_SLEEP_SCALE (default 1)
nap() { sleep "$(awk -v s="$1" -v k="${TOY_TEST_SLEEP_SCALE:-1}" 'BEGIN { print s * k }')"; }
# poll_until SECONDS COMMAND...: runs COMMAND every 0.1 s (a nap) until it succeeds (0) or
# SECONDS of wall time have passed (1); the deadline does not grow with the naps
poll_until() {
  local limit=$1 t0=${EPOCHREALTIME/,/.}
  shift
  until "$@"; do
    awk -v t0="$t0" -v now="${EPOCHREALTIME/,/.}" -v lim="$limit" 'BEGIN { exit !(now - t0 >= lim) }' && return 1
    nap 0.1
  done
}
# proc_ids PID...: "PID:START" for each process that is there (START, its start time, tells
# it from a later process given the same PID)
proc_ids() {
  local p f
  for p in "$@"; do
    read -r -a f < <(sed 's/.*) //' "/proc/$p/stat" 2> /dev/null) && echo "$p:${f[19]}"
  done
}
# ended PID:START...: true when none of these processes runs still (a zombie, whose parent
# has yet to read its status, has ended); else sets $left to the PID of one that runs
ended() {
  local id f
  left=
  for id in "$@"; do
    read -r -a f < <(sed 's/.*) //' "/proc/${id%:*}/stat" 2> /dev/null) || continue
    [ "${f[0]}" != Z ] && [ "${f[19]}" = "${id#*:}" ] && { left=${id%:*}; return 1; }
  done
  return 0
}

# ---------------------------------------------------------------- fixtures
# The reference fixtures: $TOY_FIXTURES or ../shared/fixtures beside the source tree
# (TOY_FIXTURES set to a missing folder means no fixtures, as on a bare clone).
_fixtures_dir="${TOY_FIXTURES:-$src/../shared/fixtures}"

# need_fixtures WHAT: sets $fixtures, or skips saying what the test needs of them
need_fixtures() {
  fixtures="$_fixtures_dir"
  [ -f "$fixtures/README.md" ] ||
    skip "fixtures not found at $fixtures (set TOY_FIXTURES)${1:+; this test needs $1}"
}
# want_fixtures [WITHOUT]: sets $fixtures, or without them empty $fixtures after saying
# what the test does instead (WITHOUT; by default it runs on the bundled model ($bundled),
# the text of bare_text and models of bare_model)
want_fixtures() {
  fixtures="$_fixtures_dir"
  if [ ! -f "$fixtures/README.md" ]; then
    echo "no fixtures at $fixtures: ${1:-the bundled model and models of toy init}"
    fixtures=
  fi
}

# bare_text FILE: English text of the source tree (its Markdown, at most 60,000 bytes)
bare_text() {
  cat "$src"/README.md "$src"/docs/*.md 2> /dev/null | head -c 60000 > "$1"
}
# bare_model OUT ARCH N_EMBD N_LAYER N_HEAD N_HEAD_KV N_FF [toy init options]: a
# random-weight model with the bundled model's tokenizer and a context of 512 (a later
# --ctx replaces it); 1 (after a FAIL line) if not
bare_model() {
  local out="$1"
  "$toy" init --arch "$2" --n-embd "$3" --n-layer "$4" --n-head "$5" --n-head-kv "$6" --n-ff "$7" \
    --ctx 512 --vocab-from "$bundled" --out "$out" -t 2 "${@:8}" > /dev/null 2> "$out.err" \
    || { echo "FAIL: toy init ${*:2}: $(tail -1 "$out.err")"; return 1; }
}

# need_jsonschema: skips unless python3 has jsonschema (the validator of JSON outputs)
need_jsonschema() {
  python3 -c "import jsonschema" 2> /dev/null ||
    skip "python3-jsonschema is needed (apt-get install python3-jsonschema, or scripts/install-deps.sh test)"
}

# not_sanitized: skips in a sanitizer build. The tests of what others build on (install,
# the Python package, the Debian packages) load libtoy into programs without the
# sanitizer's runtime (python3, cc's programs, the packages' users); the plain build runs them.
not_sanitized() {
  [ "${TOY_SANITIZED:-0}" = 1 ] && skip "a sanitizer build (the plain build runs this test)"
  return 0
}

# ---------------------------------------------------------------- toy serve
# serve_port LOG [PID]: the port a toy serve logged, waiting for the line up to 300 s (a
# large model, sanitized, on a loaded machine), or until process PID has ended; empty if none
serve_port() {
  local p
  _logged_port() {
    p=$(grep -o 'http://127.0.0.1:[0-9]*' "$1" 2> /dev/null | cut -d: -f3)
    [ -n "$p" ] || { [ -n "${2:-}" ] && ! kill -0 "$2" 2> /dev/null; }
  }
  poll_until 300 _logged_port "$@"
  echo "$p"
}
# serve_start ARGS...: toy serve on a free port; sets $serve_pid and $port (empty, after
# a FAIL line, when it did not start). Stopped at exit if the test does not.
serve_pid=
at_exit '[ -n "$serve_pid" ] && kill $serve_pid 2> /dev/null'
serve_start() {
  "$toy" serve --port 0 -t 2 "$@" 2> "$tmp/serve.log" &
  serve_pid=$!
  port=$(serve_port "$tmp/serve.log" $serve_pid)
  [ -n "$port" ] || die "toy serve did not start: $(cat "$tmp/serve.log")"
}
# serve_stop: SIGTERM, and toy serve must exit 0
serve_stop() {
  kill -TERM $serve_pid
  wait $serve_pid || die "toy serve exited with $? after SIGTERM"
  serve_pid=
}

# node_ready [WHAT]: true when node, npm and the packages of tests/node/package-lock.json
# are there (npm ci once); else says why ("SKIP (WHAT)" when node or npm is missing)
node_ready() {
  if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
    echo "SKIP${1:+ ($1)}: node and npm are needed (apt-get install nodejs npm)"
    return 1
  fi
  if [ ! -d "$tests/node/node_modules/openai" ]; then
    (cd "$tests/node" && npm ci --no-audit --no-fund --loglevel=error) || { die "npm ci in tests/node"; return 1; }
  fi
}

# ---------------------------------------------------------------- toy train, toy finetune
# check_resume WHAT STEPS COMMAND...: Ctrl-C and --resume. COMMAND (a toy train or finetune
# line without --steps or --out) runs STEPS steps whole into $tmp/full.gguf, then into
# $tmp/int.gguf stopped by SIGINT (exit 130, a checkpoint written), and again with
# --resume: the two files must be the same. WHAT names the output ("model", "adapter").
# The interrupt lands on an event: the run's first "step" line, read from its stderr as
# it is written, so at least one step is done on any machine. A run whose other steps
# all end before the signal lands (a machine fast for STEPS) proves nothing: both runs
# go again with twice the steps, up to 8 x STEPS.
check_resume() {
  local what=$1 steps=$2 most=$(($2 * 8)) pid rc line sent
  shift 2
  rm -f "$tmp/int.fifo"
  mkfifo "$tmp/int.fifo"
  while :; do
    "$@" --steps "$steps" --out "$tmp/full.gguf" 2> "$tmp/full.err" \
      || { die "the uninterrupted run failed: $(tail -1 "$tmp/full.err")"; return; }
    "$@" --steps "$steps" --out "$tmp/int.gguf" 2> "$tmp/int.fifo" &
    pid=$!
    sent=
    : > "$tmp/int.err"
    while IFS= read -r line; do
      printf '%s\n' "$line" >> "$tmp/int.err"
      case $line in "step "[1-9]*) [ -n "$sent" ] || { kill -INT $pid 2> /dev/null; sent=1; } ;; esac
    done < "$tmp/int.fifo"
    wait $pid
    rc=$?
    grep -q "stopped; checkpoint" "$tmp/int.err" && break
    # the last step's line, then exit 0 (or 130: SIGINT after toy_train returned)
    if { [ $rc -ne 0 ] && [ $rc -ne 130 ]; } || ! grep -q "^step $steps/$steps " "$tmp/int.err"; then
      die "Ctrl-C: exit code $rc and no checkpoint message: $(tail -1 "$tmp/int.err")"
      return
    fi
    [ "$steps" -ge $most ] && { die "Ctrl-C: all $steps steps ended before the interrupt landed"; return; }
    echo "  (all $steps steps ended before the interrupt landed: again with $((2 * steps)))"
    steps=$((2 * steps))
  done
  [ $rc -eq 130 ] || die "Ctrl-C: exit code $rc, expected 130"
  "$@" --steps "$steps" --out "$tmp/int.gguf" --resume 2> "$tmp/err" || die "--resume: $(tail -1 "$tmp/err")"
  cmp -s "$tmp/full.gguf" "$tmp/int.gguf" || die "interrupted and resumed: a different $what than the uninterrupted run"
  echo "interrupted $(grep -o "after [0-9]* steps" "$tmp/int.err") of $steps, resumed: the same $what"
}
