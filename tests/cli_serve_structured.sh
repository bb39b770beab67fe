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
. "$here/serve_node.sh"
if node_ready "the openai client only"; then
  serve_start -m "$fixtures/models/qwen2-f16.gguf"
  [ -n "$port" ] && node "$here/node/serve_structured.mjs" "$port" qwen2-f16 || fail=1
  [ -n "$pid" ] && serve_stop
fi
exit $fail
