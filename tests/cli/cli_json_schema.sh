#!/usr/bin/env bash
# JSON Schema -> GBNF against python3-jsonschema (tests/python/json_schema_check.py): texts drawn
# from each schema's grammar are valid instances, valid instances are in the grammar,
# invalid ones are not. The driver is the test binary test_json_schema beside toy.
. "$(dirname "$0")/../lib.sh"
driver="$build/test_json_schema"
if [ ! -x "$driver" ]; then
  echo "cli_json_schema: $driver is missing (build the test_json_schema target)" >&2
  exit 1
fi
need_jsonschema
count=60
python3 "$tests/python/json_schema_check.py" "$driver" --count $count || fail=1
finish
