#!/usr/bin/env bash
# Tool calling in toy serve (tests/serve_tools.py): conversations with tool calls and
# results in each family's syntax, streamed answers equal to whole ones, forced calls
# (tool_choice required and named) whose arguments validate against the function's
# parameters (python3-jsonschema), the 400s; then the openai npm client's
# chat.completions.create with tools (tests/node/serve_tools.mjs) when node is there.
# On random-weight fixture models.
set -u
toy="$1"
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/fixtures.sh"
if ! python3 -c "import jsonschema" 2> /dev/null; then
  echo "SKIP: python3-jsonschema is needed (apt-get install python3-jsonschema)"
  exit 77
fi
fail=0
python3 "$here/serve_tools.py" "$toy" "$fixtures"
rc=$?
[ $rc = 77 ] && skipped=1 || skipped=0
[ $rc != 0 ] && [ $rc != 77 ] && fail=1
if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
  echo "SKIP (the openai client only): node and npm are needed"
  [ $fail = 0 ] && [ $skipped = 1 ] && exit 77
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
node "$here/node/serve_tools.mjs" "$port" qwen2-f16 || fail=1
kill -TERM $pid
wait $pid || { echo "FAIL: toy serve exited with $? after SIGTERM"; fail=1; }
pid=
[ $fail = 0 ] && [ $skipped = 1 ] && exit 77
exit $fail
