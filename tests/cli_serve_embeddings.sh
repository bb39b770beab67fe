#!/usr/bin/env bash
# toy serve's POST /v1/embeddings (tests/serve_embeddings.py) on the fixture models: the
# vectors of every architecture against llama-server --embeddings (mean, cls, last
# pooling; cosine > 0.9999 each), base64, usage, inputs pooled across steps and beside a
# generating request, the slot's cache reused after, and the bad-request errors. Without
# llama.cpp (TOY_LLAMA_CPP, or ../shared/llama.cpp beside the source tree) the comparison
# is skipped and the rest runs.
set -u
toy="$1"
. "$(dirname "$0")/fixtures.sh"
llama_cpp="${TOY_LLAMA_CPP:-$TOY_SOURCE_DIR/../shared/llama.cpp}"
llama_bin="$llama_cpp/bin"
if [ ! -x "$llama_bin/llama-server" ]; then
  echo "SKIP (the llama-server comparison only): $llama_bin/llama-server not found (set TOY_LLAMA_CPP)"
  llama_bin=""
fi
exec python3 "$(dirname "$0")/serve_embeddings.py" "$toy" "$fixtures/models" "$llama_bin"
