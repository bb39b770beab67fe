#!/usr/bin/env bash
# Tool calling in toy serve (tests/python/serve_tools.py): conversations with tool calls and
# results in each family's syntax, streamed answers equal to whole ones, forced calls
# (tool_choice required and named) whose arguments validate against the function's
# parameters (python3-jsonschema), the 400s; then the openai npm client's
# chat.completions.create with tools (tests/node/serve_tools.mjs) when node is there.
# On random-weight fixture models; without the fixtures, on models of toy init with the
# bundled model's tokenizer (a context of 4096: JSON takes many of its tokens).
. "$(dirname "$0")/../lib.sh"
want_fixtures
need_jsonschema
if [ -n "$fixtures" ]; then
  qwen2=qwen2-f16
  python3 "$tests/python/serve_tools.py" "$toy" "$fixtures"
  rc=$?
else
  fixtures="$tmp" qwen2=init-qwen2-f16
  mkdir "$tmp/models"
  bare_model "$tmp/models/$qwen2.gguf" qwen2 64 2 4 2 128 --type F16 --ctx 4096 || fail=1
  bare_model "$tmp/models/init-llama-f16.gguf" llama 64 2 4 2 128 --type F16 --ctx 4096 || fail=1
  python3 "$tests/python/serve_tools.py" "$toy" "$fixtures" \
    "$qwen2:chatml init-llama-f16:llama3 init-llama-f16:mistral-v3 init-llama-f16:phi3"
  rc=$?
fi
[ $rc = 77 ] && skipped=1 || skipped=0
[ $rc != 0 ] && [ $rc != 77 ] && fail=1
if node_ready "the openai client only"; then
  serve_start -m "$fixtures/models/$qwen2.gguf"
  [ -n "$port" ] && node "$tests/node/serve_tools.mjs" "$port" $qwen2 || fail=1
  [ -n "$serve_pid" ] && serve_stop
fi
[ $fail = 0 ] && [ $skipped = 1 ] && exit 77
exit $fail
