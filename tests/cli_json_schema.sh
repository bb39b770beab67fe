#!/usr/bin/env bash
# JSON Schema -> GBNF against python3-jsonschema (tests/json_schema_check.py): texts drawn
# from each schema's grammar are valid instances, valid instances are in the grammar,
# invalid ones are not. The driver is the test binary test_json_schema beside toy.
set -u
toy="$1"
driver="$(dirname "$toy")/test_json_schema"
if [ ! -x "$driver" ]; then
  echo "cli_json_schema: $driver is missing (build the test_json_schema target)" >&2
  exit 1
fi
if ! python3 -c "import jsonschema" 2>/dev/null; then
  echo "SKIP: python3-jsonschema is not installed (scripts/install-deps.sh)"
  exit 77
fi
count=60
[ "${TOY_SANITIZED:-0}" = 1 ] && count=20
python3 "$(dirname "$0")/json_schema_check.py" "$driver" --count $count
rc=$?
[ $rc -eq 0 ] && echo "cli_json_schema: ok"
exit $rc
