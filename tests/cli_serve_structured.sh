#!/usr/bin/env bash
# Structured output in toy serve (tests/serve_structured.py): response_format json_schema
# and json_object, llama-server's grammar and json_schema fields, logit_bias, on
# random-weight fixture models at temperature 1, answers validated with python3-jsonschema;
# then the openai npm client's response_format and logit_bias (tests/node/serve_structured.mjs)
# when node is there.
set -u
toy="$1"
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/fixtures.sh"
if ! python3 -c "import jsonschema" 2> /dev/null; then
  echo "SKIP: python3-jsonschema is needed (apt-get install python3-jsonschema)"
  exit 77
fi
fail=0
python3 "$here/serve_structured.py" "$toy" "$fixtures" || fail=1
if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
  echo "SKIP (the openai client only): node and npm are needed"
  exit $fail
fi
if [ ! -d "$here/node/node_modules/openai" ]; then
  (cd "$here/node" && npm ci --no-audit --no-fund --loglevel=error) || { echo "FAIL: npm ci in tests/node"; exit 1; }
fi
log=$(mktemp)
pid=
trap '[ -n "$pid" ] && kill $pid 2> /dev/null; rm -f "$log"' EXIT
"$toy" serve -m "$fixtures/models/qwen2-f16.gguf" --port 0 -t 2 2> "$log" &
pid=$!
port=""
for i in $(seq 1 100); do
  port=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | cut -d: -f3)
  [ -n "$port" ] && break
  sleep 0.1
done
if [ -z "$port" ]; then
  echo "FAIL: toy serve did not start: $(cat "$log")"
  exit 1
fi
node "$here/node/serve_structured.mjs" "$port" qwen2-f16 || fail=1
kill -TERM $pid
wait $pid || { echo "FAIL: toy serve exited with $? after SIGTERM"; fail=1; }
pid=
exit $fail
