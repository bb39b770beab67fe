#!/usr/bin/env bash
# The Python bindings (python/toy): their unittest suite against this build's toy and
# libtoy.so, the ctypes structs' sizes against the C compiler's, and an install with pip
# (where pip exists) that imports and runs.
set -u
. "$(dirname "$0")/packaging.sh"
major=$(sed -n 's/^#define TOY_VERSION_MAJOR \([0-9]*\)$/\1/p' "$src/include/toy.h")
export TOY="$toy" TOY_LIBRARY="$build/libtoy.so.$major" TOY_MODEL_PATH="$src/models/toy-kjv.gguf"
fail=0

# sizeof of each struct the bindings mirror, from the header itself
cat > "$tmp/sizes.c" <<'C'
#include <stdio.h>
#include "toy.h"
#define S(py, c) printf("%s=%zu ", py, sizeof(c))
int main(void) {
    S("ModelParams", toy_model_params); S("ContextParams", toy_context_params);
    S("SamplerParams", toy_sampler_params); S("Batch", toy_batch); S("GenerateParams", toy_generate_params);
    S("GenerateResult", toy_generate_result); S("ChatMessage", toy_chat_message); S("InitParams", toy_init_params);
    S("TrainProgress", toy_train_progress); S("TrainParams", toy_train_params); S("TrainResult", toy_train_result);
    return 0;
}
C
cc -I"$src/include" "$tmp/sizes.c" -o "$tmp/sizes" || { echo "FAIL: the struct-size program does not build"; exit 1; }
export TOY_STRUCT_SIZES="$("$tmp/sizes")"

PYTHONPATH="$src/python" python3 -m unittest discover -s "$src/python/tests" -v 2>&1 | tail -25
[ "${PIPESTATUS[0]}" -eq 0 ] || fail=1

if python3 -m pip --version > /dev/null 2>&1; then
  # offline: the package's own build backend needs nothing from an index
  if python3 -m pip install --quiet --no-index --no-deps --target "$tmp/site" "$src/python" > "$tmp/pip.log" 2>&1; then
    got=$(cd "$tmp" && PYTHONPATH="$tmp/site" python3 -c \
      'import toy; m = toy.Model("'"$TOY_MODEL_PATH"'"); print(toy.__file__, m.tokenize("And it came to pass"))')
    case "$got" in
      "$tmp/site/toy/__init__.py [4093, 296, 353, 472, 289, 623]") ;;
      *) echo "FAIL: the pip-installed package: $got"; fail=1 ;;
    esac
  else
    echo "FAIL: pip install ./python:"; cat "$tmp/pip.log"; fail=1
  fi
else
  echo "cli_python: pip is not installed here; the install with pip was not tried"
fi
[ $fail -eq 0 ] && echo "cli_python: the bindings agree with the command line"
exit $fail
