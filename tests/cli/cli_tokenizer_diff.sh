#!/usr/bin/env bash
# toy's token ids against llama.cpp's llama-tokenize on generated text (mixed scripts,
# accents precomposed and decomposed, emoji sequences, combining marks, zero-width and
# bidi controls, whitespace runs, numbers, code, punctuation, bytes that are not UTF-8)
# for every fixture vocabulary, one model per distinct tokenizer and toy-kjv.gguf:
# tests/python/tokenizer_diff.py with 400 strings per vocabulary (200 under sanitizers). For a
# long run from the source tree:
#   python3 tests/python/tokenizer_diff.py build/toy --count 5000 [--seed S] [--vocab FILE]...
. "$(dirname "$0")/../lib.sh"
need_fixtures "the fixtures' vocabularies and llama.cpp's test strings (vocab/*.gguf, *.inp, *.out)"
count=400
export TOY_FIXTURES="$fixtures"
python3 "$tests/python/tokenizer_diff.py" "$toy" --count $count
rc=$?
[ $rc -eq 0 ] && echo "cli_tokenizer_diff: ok"
exit $rc
