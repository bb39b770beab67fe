#!/usr/bin/env bash
# toy serve's POST /v1/embeddings (tests/python/serve_embeddings.py) on the fixture models: the
# vectors of every architecture against llama-server --embeddings (mean, cls, last
# pooling; cosine > 0.9999 each), base64, usage, inputs pooled across steps and beside a
# generating request, the slot's cache reused after, and the bad-request errors. Without
# llama.cpp (TOY_LLAMA_CPP, or ../shared/llama.cpp beside the source tree) the comparison
# is skipped and the rest runs. Without the fixtures: llama and qwen2 models of toy init
# with the bundled model's tokenizer (contexts of 2048 and 4096 for the long input).
. "$(dirname "$0")/../lib.sh"
want_fixtures
llama_bin="$llama_cpp/bin"
if [ ! -x "$llama_bin/llama-server" ]; then
  echo "SKIP (the llama-server comparison only): $llama_bin/llama-server not found (set TOY_LLAMA_CPP)"
  llama_bin=""
fi
if [ -n "$fixtures" ]; then
  python3 "$tests/python/serve_embeddings.py" "$toy" "$fixtures/models" "$llama_bin"
  exit
fi
bare_model "$tmp/init-llama-f32.gguf" llama 64 2 4 2 128 --ctx 2048 || fail=1
bare_model "$tmp/init-qwen2-f16.gguf" qwen2 64 2 4 2 128 --type F16 --ctx 4096 || fail=1
bare_model "$tmp/init-llama-q8_0.gguf" llama 64 2 4 2 128 --type Q8_0 --ctx 4096 || fail=1
python3 "$tests/python/serve_embeddings.py" "$toy" "$tmp" "$llama_bin" "init-llama-f32 init-qwen2-f16 init-llama-q8_0" \
  || fail=1
exit $fail
