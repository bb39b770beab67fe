#!/usr/bin/env bash
# toy serve driven by the official openai npm package (tests/node/serve_openai.mjs) on the
# bundled model and a fixture model, and its chat page in headless Chromium
# (tests/node/chat_page.mjs, Debian's chromium with playwright-core). On the
# bundled model and a fixture model (smollm2): completions and chat, streaming and not, stop, n,
# logprobs, usage, embeddings (float and base64, norm 1), errors; greedy answers equal toy
# run's. The npm packages come from tests/node/package-lock.json (npm ci, once); without node
# or npm the test is skipped.
. "$(dirname "$0")/../lib.sh"
node_ready || exit 77
run_model() { # MODEL ID PROMPT
  serve_start -m "$1" --parallel 4
  [ -n "$port" ] || return
  local expected
  expected=$("$toy" run -m "$1" -p "$3" -n 24 --temp 0 -t 2 2> /dev/null | python3 -c "
import sys; out = sys.stdin.read(); p = sys.argv[1]; print(out[len(p):].rstrip('\n'), end='')" "$3")
  node "$tests/node/serve_openai.mjs" "$port" "$2" "$3" "$expected" || fail=1
  serve_stop
}
run_model "$bundled" toy-kjv "And God said"
# the chat page in headless Chromium, on the bundled model; then on a server with an API
# key, where the page asks for it
if [ -x /usr/bin/chromium ]; then
  serve_start --parallel 2
  node "$tests/node/chat_page.mjs" "$port" /usr/bin/chromium || fail=1
  serve_stop
  serve_start --parallel 2 --api-key sesame
  node "$tests/node/chat_page.mjs" "$port" /usr/bin/chromium sesame || fail=1
  serve_stop
else
  echo "SKIP (the chat page only): /usr/bin/chromium is missing (apt-get install chromium)"
fi
# a fixture model of another architecture and tokenizer (its greedy text is valid UTF-8)
want_fixtures
if [ -n "$fixtures" ]; then
  run_model "$fixtures/models/smollm2-f16.gguf" smollm2-f16 "Hello world"
else
  echo "SKIP (smollm2 only): it is a fixture model"
fi
exit $fail
