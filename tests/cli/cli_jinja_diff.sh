#!/usr/bin/env bash
# toy's Jinja engine against python3-jinja2 configured as transformers configures it
# (tests/python/jinja_diff.py): every real template of ../shared/templates (or
# $TOY_TEMPLATES) on the acceptance conversations and generated ones, then generated
# templates that cover each construct. The same prompt byte for byte, or an error from
# both. Through the Python bindings, so not under the sanitizers (test_jinja and the
# fuzz target run the engine there).
. "$(dirname "$0")/../lib.sh"
not_sanitized
python3 -c "import jinja2" 2> /dev/null ||
  skip "python3-jinja2 is needed (apt-get install python3-jinja2, or scripts/install-deps.sh test)"
templates="${TOY_TEMPLATES:-$src/../shared/templates}"
[ -f "$templates/tokens.tsv" ] || skip "no real templates at $templates (set TOY_TEMPLATES)"
major=$(sed -n 's/^#define TOY_VERSION_MAJOR \([0-9]*\)$/\1/p' "$src/include/toy.h")
TOY_LIBRARY="$build/libtoy.so.$major" python3 "$tests/python/jinja_diff.py" "$templates" \
  --conversations 20 --expressions 3000 || fail=1
finish
