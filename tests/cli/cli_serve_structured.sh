#!/usr/bin/env bash
# Structured output in toy serve (tests/python/serve_structured.py): response_format json_schema
# and json_object, llama-server's grammar and json_schema fields, logit_bias, on
# random-weight fixture models at temperature 1, answers validated with python3-jsonschema;
# then the openai npm client's response_format and logit_bias (tests/node/serve_structured.mjs)
# when node is there. Without the fixtures: qwen2 and llama models of toy init with the
# bundled model's tokenizer (a context of 4096: JSON takes many of its tokens).
. "$(dirname "$0")/../lib.sh"
want_fixtures
need_jsonschema
if [ -n "$fixtures" ]; then
  python3 "$tests/python/serve_structured.py" "$toy" "$fixtures" || fail=1
  qwen2=qwen2-f16
else
  fixtures="$tmp" qwen2=init-qwen2-f16
  mkdir "$tmp/models"
  bare_model "$tmp/models/$qwen2.gguf" qwen2 64 2 4 2 128 --type F16 --ctx 4096 || fail=1
  bare_model "$tmp/models/init-llama-q8_0.gguf" llama 64 2 4 2 128 --type Q8_0 --ctx 4096 || fail=1
  python3 "$tests/python/serve_structured.py" "$toy" "$fixtures" "$qwen2 init-llama-q8_0" || fail=1
fi
if node_ready "the openai client only"; then
  serve_start -m "$fixtures/models/$qwen2.gguf"
  [ -n "$port" ] && node "$tests/node/serve_structured.mjs" "$port" $qwen2 || fail=1
  [ -n "$serve_pid" ] && serve_stop
fi
exit $fail
