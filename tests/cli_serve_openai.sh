#!/usr/bin/env bash
# toy serve driven by the official openai npm package (tests/node/serve_openai.mjs) on the
# bundled model and a fixture model, and its chat page in headless Chromium
# (tests/node/chat_page.mjs, Debian's chromium with playwright-core). On the
# bundled model and a fixture model (smollm2): completions and chat, streaming and not, stop, n,
# logprobs, usage, embeddings (float and base64, norm 1), errors; greedy answers equal toy
# run's. The npm packages come from tests/node/package-lock.json (npm ci, once); without node
# or npm the test is skipped.
set -u
toy="$1"
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
  echo "SKIP: node and npm are needed (apt-get install nodejs npm)"
  exit 77
fi
if [ ! -d "$here/node/node_modules/openai" ]; then
  (cd "$here/node" && npm ci --no-audit --no-fund --loglevel=error) || { echo "FAIL: npm ci in tests/node"; exit 1; }
fi
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2> /dev/null; rm -rf "$tmp"' EXIT
fail=0
start() { # toy serve ARGS...: sets pid and port
  "$toy" serve --port 0 -t 2 "$@" 2> "$tmp/log" &
  pid=$!
  port=""
  for i in $(seq 1 100); do
    port=$(grep -o 'http://127.0.0.1:[0-9]*' "$tmp/log" | cut -d: -f3)
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "FAIL: toy serve did not start: $(cat "$tmp/log")"; fail=1; }
}
stop() { # SIGTERM: toy serve must exit 0
  kill -TERM $pid
  wait $pid || { echo "FAIL: toy serve exited with $? after SIGTERM"; fail=1; }
  pid=
}
run_model() { # MODEL ID PROMPT
  start -m "$1" --parallel 4
  [ -n "$port" ] || return
  local expected
  expected=$("$toy" run -m "$1" -p "$3" -n 24 --temp 0 -t 2 2> /dev/null | python3 -c "
import sys; out = sys.stdin.read(); p = sys.argv[1]; print(out[len(p):].rstrip('\n'), end='')" "$3")
  node "$here/node/serve_openai.mjs" "$port" "$2" "$3" "$expected" || fail=1
  stop
}
run_model "$TOY_SOURCE_DIR/models/toy-kjv.gguf" toy-kjv "And God said"
# the chat page in headless Chromium, on the bundled model; then on a server with an API
# key, where the page asks for it
if [ -x /usr/bin/chromium ]; then
  start --parallel 2
  node "$here/node/chat_page.mjs" "$port" /usr/bin/chromium || fail=1
  stop
  start --parallel 2 --api-key sesame
  node "$here/node/chat_page.mjs" "$port" /usr/bin/chromium sesame || fail=1
  stop
else
  echo "SKIP (the chat page only): /usr/bin/chromium is missing (apt-get install chromium)"
fi
# a fixture model of another architecture and tokenizer (its greedy text is valid UTF-8)
. "$here/fixtures.sh"
run_model "$fixtures/models/smollm2-f16.gguf" smollm2-f16 "Hello world"
exit $fail
