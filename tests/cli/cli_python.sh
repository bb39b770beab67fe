#!/usr/bin/env bash
# The Python bindings (python/toy): their unittest suite against this build's toy and
# libtoy.so, the ctypes structs' sizes against the C compiler's, and installs with pip
# (where pip exists): into a folder, into fresh venvs from the source tree and from a
# wheel, each then loading the libtoy the package bundles and generating as toy run does.
. "$(dirname "$0")/../lib.sh"
not_sanitized
major=$(sed -n 's/^#define TOY_VERSION_MAJOR \([0-9]*\)$/\1/p' "$src/include/toy.h")
export TOY="$toy" TOY_LIBRARY="$build/libtoy.so.$major" TOY_MODEL_PATH="$bundled"

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
    S("TrainerParams", toy_trainer_params);
    return 0;
}
C
cc -I"$src/include" "$tmp/sizes.c" -o "$tmp/sizes" || { echo "FAIL: the struct-size program does not build"; exit 1; }
export TOY_STRUCT_SIZES="$("$tmp/sizes")"

PYTHONPATH="$src/python" python3 -m unittest discover -s "$src/python/tests" -v 2>&1 | tail -25
[ "${PIPESTATUS[0]}" -eq 0 ] || fail=1

# examples/train_in_memory.py: a model made, trained and inspected in memory, then saved
if python3 -c 'import numpy' 2> /dev/null; then
  (cd "$tmp" && PYTHONPATH="$src/python" python3 "$src/examples/train_in_memory.py" "$tmp/psalm.gguf" 60) \
    > "$tmp/ex.out" 2>&1 || die "examples/train_in_memory.py: $(tail -3 "$tmp/ex.out")"
  last=$(grep '^step  59' "$tmp/ex.out" | awk '{print $4}')
  python3 -c "import sys; sys.exit(not float('${last:-99}') < 1.5)" || die "train_in_memory.py: last loss '$last'"
  "$toy" run -m "$tmp/psalm.gguf" -p "The LORD is my shepherd" -n 8 --temp 0 > "$tmp/psalm.txt" 2> /dev/null \
    || die "toy run on the example's model"
  echo "train_in_memory.py: loss $(grep '^step   0' "$tmp/ex.out" | awk '{print $4}') -> $last; toy run: $(head -c 60 "$tmp/psalm.txt" | tr '\n' ' ')"
else
  echo "SKIP (examples/train_in_memory.py): numpy is not installed"
fi

if python3 -m pip --version > /dev/null 2>&1; then
  # offline: the package's own build backend needs nothing from an index. It bundles
  # libtoy; TOY_BUILD_DIR lets it reuse this build's rather than build its own.
  export TOY_BUILD_DIR="$build"
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

  # In a fresh venv, from elsewhere, with nothing pointing at a libtoy: the installed
  # package loads its bundled copy and generates as toy run does.
  prompt="In the beginning"
  want=$("$toy" run -m "$TOY_MODEL_PATH" -p "$prompt" -n 20 --temp 0)
  mkdir -p "$tmp/elsewhere"
  generate() {  # $1: a venv
    (cd "$tmp/elsewhere" && env -u TOY_LIBRARY -u LD_LIBRARY_PATH -u PYTHONPATH "$1/bin/python" -c '
import sys, toy
m = toy.Model(sys.argv[1])
print(toy._c._name == toy.__file__.rsplit("/", 1)[0] + "/libtoy.so.'"$major"'", end=" ")
print(sys.argv[2] + m.generate(sys.argv[2], max_tokens=20, temperature=0, stream=False))' "$TOY_MODEL_PATH" "$prompt")
  }
  fresh_venv() {  # $1: its folder; a venv's own pip comes from ensurepip, offline
    python3 -m venv "$1" > "$tmp/venv.log" 2>&1 || { echo "FAIL: python3 -m venv $1:"; cat "$tmp/venv.log"; return 1; }
  }
  if fresh_venv "$tmp/venv1"; then
    if "$tmp/venv1/bin/pip" install --quiet --no-index --no-build-isolation "$src/python" > "$tmp/pip.log" 2>&1; then
      got=$(generate "$tmp/venv1")
      [ "$got" = "True $want" ] || die "pip install ./python in a venv: got '$got', toy run gives '$want'"
    else
      echo "FAIL: pip install ./python in a venv:"; cat "$tmp/pip.log"; fail=1
    fi
  else
    fail=1
  fi

  # A wheel built once installs elsewhere: platform-tagged, the library inside it.
  if python3 -m pip wheel --quiet --no-index --no-deps --no-build-isolation -w "$tmp/wheels" "$src/python" \
       > "$tmp/pip.log" 2>&1; then
    wheel=$(ls "$tmp"/wheels/toy-*.whl)
    case "$(basename "$wheel")" in
      toy-*-py3-none-linux_*.whl) ;;
      *) echo "FAIL: the wheel's name has no platform tag: $wheel"; fail=1 ;;
    esac
    python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); n = z.namelist()
w = [x for x in n if x.endswith(".dist-info/WHEEL")][0]
sys.exit(0 if "toy/libtoy.so.'"$major"'" in n and "Root-Is-Purelib: false" in z.read(w).decode() else 1)' "$wheel" \
      || die "$wheel lacks toy/libtoy.so.$major or says it is pure Python"
    if fresh_venv "$tmp/venv2"; then
      if (cd "$tmp/elsewhere" && "$tmp/venv2/bin/pip" install --quiet --no-index "$wheel") > "$tmp/pip.log" 2>&1; then
        got=$(generate "$tmp/venv2")
        [ "$got" = "True $want" ] || die "the wheel in a venv: got '$got', toy run gives '$want'"
      else
        echo "FAIL: pip install $wheel:"; cat "$tmp/pip.log"; fail=1
      fi
    else
      fail=1
    fi
  else
    echo "FAIL: pip wheel ./python:"; cat "$tmp/pip.log"; fail=1
  fi

  # python/ alone cannot build libtoy, so there is no sdist: the refusal says what to do
  got=$(cd "$src/python" && python3 -c 'import toy_build; toy_build.build_sdist("'"$tmp"'")' 2>&1)
  case "$got" in
    *"no sdist"*"pip wheel ./python"*) ;;
    *) echo "FAIL: build_sdist: $got"; fail=1 ;;
  esac
else
  echo "cli_python: pip is not installed here; the install with pip was not tried"
fi
finish "the bindings agree with the command line"
