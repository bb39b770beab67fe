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
. "$here/serve_node.sh"
if node_ready "the openai client only"; then
  serve_start -m "$fixtures/models/qwen2-f16.gguf"
  [ -n "$port" ] && node "$here/node/serve_tools.mjs" "$port" qwen2-f16 || fail=1
  [ -n "$pid" ] && serve_stop
fi
[ $fail = 0 ] && [ $skipped = 1 ] && exit 77
exit $fail
