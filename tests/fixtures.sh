# Sourced by the cli_*.sh tests that use the reference fixtures: sets $fixtures to
# $TOY_FIXTURES or ../shared/fixtures beside the source tree (TOY_FIXTURES set to a
# missing folder means no fixtures, as on a bare clone). Without them a test is skipped
# (exit 77, ctest's skip code) with a message (and $fixtures_need, what it needs of them,
# where the test set it), unless it set fixtures_optional=1 before:
# it then finds $fixtures empty and runs on the bundled model ($bundled), the text of
# bare_text and models of bare_model.
fixtures="${TOY_FIXTURES:-$TOY_SOURCE_DIR/../shared/fixtures}"
if [ ! -f "$fixtures/README.md" ]; then
  if [ "${fixtures_optional:-0}" != 1 ]; then
    echo "SKIP: fixtures not found at $fixtures (set TOY_FIXTURES)${fixtures_need:+; this test needs $fixtures_need}"
    exit 77
  fi
  echo "no fixtures at $fixtures: the bundled model and models of toy init"
  fixtures=
fi
bundled="$TOY_SOURCE_DIR/models/toy-kjv.gguf"
# bare_text FILE: English text of the source tree (its Markdown, at most 60,000 bytes)
bare_text() {
  cat "$TOY_SOURCE_DIR"/README.md "$TOY_SOURCE_DIR"/docs/*.md 2> /dev/null | head -c 60000 > "$1"
}
# bare_model OUT ARCH N_EMBD N_LAYER N_HEAD N_HEAD_KV N_FF [toy init options]: a
# random-weight model with the bundled model's tokenizer and a context of 512 (a later
# --ctx replaces it); 1 (after a FAIL line) if not
bare_model() {
  local out="$1"
  "$toy" init --arch "$2" --n-embd "$3" --n-layer "$4" --n-head "$5" --n-head-kv "$6" --n-ff "$7" \
    --ctx 512 --vocab-from "$bundled" --out "$out" -t 2 "${@:8}" > /dev/null 2> "$out.err" \
    || { echo "FAIL: toy init ${*:2}: $(tail -1 "$out.err")"; return 1; }
}
