#!/usr/bin/env bash
# Structured output in toy serve (tests/serve_structured.py): response_format json_schema
# and json_object, llama-server's grammar and json_schema fields, logit_bias, on
# random-weight fixture models at temperature 1, answers validated with python3-jsonschema.
set -u
toy="$1"
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/fixtures.sh"
if ! python3 -c "import jsonschema" 2> /dev/null; then
  echo "SKIP: python3-jsonschema is needed (apt-get install python3-jsonschema)"
  exit 77
fi
exec python3 "$here/serve_structured.py" "$toy" "$fixtures"
