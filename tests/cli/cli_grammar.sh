#!/usr/bin/env bash
# toy run and toy chat under constraints, on the fixture models (random weights, so the
# text is noise, but it must still be in the language): --grammar-file outputs match the
# grammar, --json-schema outputs parse and validate (python3-jsonschema), every chat
# reply starts the grammar anew, --logit-bias moves and bans tokens, and each mistake a
# user can make is an error naming the file, the line and column or the JSON pointer.
# Without the fixtures: the bundled model and llama and qwen2 models of toy init with its
# tokenizer (4,096 tokens; end of text 4093 and <|im_end|> 4095 each end a generation).
. "$(dirname "$0")/../lib.sh"
want_fixtures
if [ -n "$fixtures" ]; then
  models_dir="$fixtures/models"
  models=$(grep -v '^#' "$fixtures/models/manifest.tsv" | cut -f1)
  # the model of the chat, logit-bias and error checks, one with another tokenizer, its
  # vocabulary size, and the biases that ban every token that ends a generation
  llama="$fixtures/models/llama-spm-f32.gguf" bpe="$fixtures/models/qwen2-f16.gguf" n_vocab=2048
  ban_end=(--logit-bias 2-inf)
else
  models_dir="$tmp" models="toy-kjv init-llama-f32 init-qwen2-f16"
  ln -s "$bundled" "$tmp/toy-kjv.gguf"
  bare_model "$tmp/init-llama-f32.gguf" llama 64 2 4 2 128 || fail=1
  bare_model "$tmp/init-qwen2-f16.gguf" qwen2 64 2 4 2 128 --type F16 || fail=1
  llama="$tmp/init-llama-f32.gguf" bpe="$tmp/init-qwen2-f16.gguf" n_vocab=4096
  ban_end=(--logit-bias 4093-inf --logit-bias 4095-inf)
fi
have_jsonschema=1
python3 -c "import jsonschema" 2>/dev/null || { have_jsonschema=0; echo "cli_grammar: python3-jsonschema is not installed; schema outputs are only parsed"; }

"$toy" run --help > "$tmp/help"
for opt in --grammar --grammar-file --json-schema --json-schema-strict --logit-bias; do
  grep -q -- "^  $opt " "$tmp/help" || die "toy run --help does not describe $opt"
done

# A list of at most 8 numbers: short whatever the model prefers, so every run ends.
cat > "$tmp/numbers.gbnf" <<'EOF'
# a list of numbers
root ::= "[" num ("," " "? num){0,7} "]"
num  ::= "-"? [1-9] [0-9]{0,3} | "0"   # no leading zeros
EOF
numbers_re='\[(-?[1-9][0-9]{0,3}|0)(, ?(-?[1-9][0-9]{0,3}|0)){0,7}\]'

# Bounded strings and arrays, so random text finishes within -n.
cat > "$tmp/person.json" <<'EOF'
{"type": "object",
 "properties": {"name": {"type": "string", "maxLength": 12},
                "age": {"type": "integer", "minimum": 0, "maximum": 150},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 3},
                "ok": {"type": "boolean"}},
 "required": ["name", "age", "tags"]}
EOF
mixed='{"type": "array", "minItems": 1, "maxItems": 4, "items": {"anyOf": [
  {"type": "integer", "minimum": -5, "maximum": 5}, {"enum": ["red", "green", null]},
  {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]{1,4}$"}}, "required": ["id"]}]}}'
echo "$mixed" > "$tmp/mixed.json"

# check KIND OUT PROMPT [SCHEMA]: the output is PROMPT, the text, a newline; the text
# in the language (KIND gbnf: numbers_re; json: valid under SCHEMA)
check() {
  python3 - "$@" "$numbers_re" "$have_jsonschema" <<'PY'
import json, re, sys
kind, out, prompt = sys.argv[1], sys.argv[2], sys.argv[3]
schema_path = sys.argv[4] if kind == "json" else None
numbers_re, have_jsonschema = sys.argv[-2], sys.argv[-1] == "1"
data = open(out, "rb").read().decode("utf-8")  # strict: a grammar's text is valid UTF-8
if not (data.startswith(prompt) and data.endswith("\n")):
    sys.exit("not PROMPT + text + newline: %r" % data)
text = data[len(prompt):-1]
if kind == "gbnf":
    if not re.fullmatch(numbers_re, text):
        sys.exit("not a list of numbers: %r" % text)
else:
    try:
        value = json.loads(text)
    except ValueError as e:
        sys.exit("not JSON (%s): %r" % (e, text))
    if have_jsonschema:
        import jsonschema
        try:
            jsonschema.validate(value, json.load(open(schema_path)))
        except jsonschema.ValidationError as e:
            sys.exit("invalid (%s): %r" % (e.message, text))
PY
}

seeds="1 2 3"
n_runs=0
for name in $models; do
  model="$models_dir/$name.gguf"
  [ -f "$model" ] || { die "$model missing"; continue; }
  for seed in $seeds; do
    "$toy" run -m "$model" -p "Numbers:" --temp 1 --seed $seed -n 400 --grammar-file "$tmp/numbers.gbnf" \
      > "$tmp/out" 2> "$tmp/err" || { die "$name seed $seed: --grammar-file: $(cat "$tmp/err")"; continue; }
    check gbnf "$tmp/out" "Numbers:" > "$tmp/why" 2>&1 || die "$name seed $seed: --grammar-file: $(tail -1 "$tmp/why")"
    n_runs=$((n_runs + 1))
    # a schema from a file on two seeds, one given inline on the third
    if [ $seed -lt 3 ]; then
      "$toy" run -m "$model" -p "JSON:" --temp 1 --seed $seed -n 400 --json-schema "$tmp/person.json" \
        > "$tmp/out" 2> "$tmp/err" || { die "$name seed $seed: --json-schema FILE: $(cat "$tmp/err")"; continue; }
      check json "$tmp/out" "JSON:" "$tmp/person.json" > "$tmp/why" 2>&1 \
        || die "$name seed $seed: --json-schema FILE: $(tail -1 "$tmp/why")"
    else
      "$toy" run -m "$model" -p "JSON:" --temp 1 --seed $seed -n 400 --json-schema "$mixed" --json-schema-strict \
        > "$tmp/out" 2> "$tmp/err" || { die "$name seed $seed: --json-schema JSON: $(cat "$tmp/err")"; continue; }
      check json "$tmp/out" "JSON:" "$tmp/mixed.json" > "$tmp/why" 2>&1 \
        || die "$name seed $seed: --json-schema JSON: $(tail -1 "$tmp/why")"
    fi
    n_runs=$((n_runs + 1))
  done
done


model="$llama"

# toy chat: three replies, each a whole list of numbers (the grammar starts over each
# turn; were it not, the second reply could only end)
for m in "$model" "$bpe"; do
  printf 'hello\nagain\nonce more\n' | "$toy" chat -m "$m" --grammar-file "$tmp/numbers.gbnf" --temp 1 --seed 5 \
    -n 100 > "$tmp/chat" 2> "$tmp/err" || die "$(basename "$m"): toy chat --grammar-file: $(cat "$tmp/err")"
  python3 - "$tmp/chat" "$numbers_re" <<'PY' || die "$(basename "$m"): toy chat replies not each a list of numbers"
import re, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
replies = [l.replace("> ", "") for l in lines if l.replace("> ", "").strip()]
ok = len(replies) == 3 and all(re.fullmatch(sys.argv[2], r) for r in replies)
sys.exit(0 if ok else "replies: %r" % replies)
PY
done

# --logit-bias: greedy, the argmax A of the prompt's last row (from toy eval) banned
# gives the runner-up B, as does B raised above everything; neither is A's text
for m in "$model" "$bpe"; do
  ids=$("$toy" tokenize -m "$m" "The quick brown fox" | tr -s ' \n' ',' | sed 's/,$//')
  "$toy" eval -m "$m" --tokens "$ids" --dump-logits "$tmp/logits.bin" -t 2 || { die "toy eval failed"; continue; }
  read -r a b < <(python3 - "$tmp/logits.bin" "$ids" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
n_tok = len(sys.argv[2].split(","))
n_vocab = len(data) // 4 // n_tok
row = struct.unpack_from("<%df" % n_vocab, data, 4 * n_vocab * (n_tok - 1))
order = sorted(range(n_vocab), key=lambda i: -row[i])
assert row[order[0]] - row[order[1]] > 1e-3 and row[order[1]] - row[order[2]] > 1e-3, "ties at the top"
print(order[0], order[1])
PY
)
  [ -n "${b:-}" ] || { die "$(basename "$m"): no argmax"; continue; }
  run1() { "$toy" run -m "$m" -p "The quick brown fox" --temp 0 -n 1 "$@" 2> /dev/null; }
  plain=$(run1) && banned=$(run1 --logit-bias "$a-inf") && banned100=$(run1 --logit-bias "$a-100") \
    && raised=$(run1 --logit-bias "$b+1000") || { die "$(basename "$m"): toy run --logit-bias failed"; continue; }
  [ "$banned" != "$plain" ] || die "$(basename "$m"): banning the argmax $a changes nothing: '$plain'"
  [ "$banned" = "$raised" ] || die "$(basename "$m"): $a banned gives '$banned', $b raised gives '$raised'"
  [ "$banned100" = "$banned" ] || die "$(basename "$m"): a bias of -100 does not ban: '$banned100'"
  [ "$(run1 --logit-bias "$a+0.0001")" = "$plain" ] || die "$(basename "$m"): a tiny bias changed the argmax"
done

# errors: status, and the message naming what is wrong
# expect STATUS PATTERN ARGS...: toy run with ARGS exits with STATUS, stderr matching PATTERN
expect() {
  local want=$1 pattern=$2
  shift 2
  "$toy" run -m "$model" -p "x" -n 4 "$@" > /dev/null 2> "$tmp/err"
  local got=$?
  [ $got -eq "$want" ] || die "toy run $*: exit $got, expected $want ($(cat "$tmp/err"))"
  grep -qE -- "$pattern" "$tmp/err" || die "toy run $*: message '$(cat "$tmp/err")' does not match '$pattern'"
  grep -qiE "sanitizer|segmentation|abort" "$tmp/err" && die "toy run $*: crashed"
}
printf 'root ::= "[" num "]"\nnum  ::= [0-9\n' > "$tmp/bad.gbnf"
printf '{\n  "type": "object",\n  "properties": {"a": {"type": "string"},}\n}\n' > "$tmp/bad.json"
printf '{"type": "object", "properties": {"a": {"type": "strin"}}}' > "$tmp/badtype.json"
printf 'root ::= "a"\0 | "b"\n' > "$tmp/nul.gbnf"
expect 1 "$tmp/missing.gbnf: cannot open" --grammar-file "$tmp/missing.gbnf"
expect 1 "--grammar-file $tmp/bad.gbnf: line 2, column 10: unterminated character class" --grammar-file "$tmp/bad.gbnf"
expect 1 "--grammar: line 1, column 16: '\(' is not closed" --grammar 'root ::= "a" | ('
expect 1 "--grammar: line 1, column 10: rule 'nums' is not defined" --grammar 'root ::= nums'
expect 1 "--grammar-file $tmp/nul.gbnf: holds a NUL byte" --grammar-file "$tmp/nul.gbnf"
expect 1 "$tmp/missing.json: cannot open" --json-schema "$tmp/missing.json"
expect 1 "--json-schema $tmp/bad.json: .*line 3, column" --json-schema "$tmp/bad.json"
expect 1 "--json-schema: .*invalid JSON at line 1, column 19" --json-schema '{"type": "object",}'
expect 1 "--json-schema $tmp/badtype.json: JSON schema #/properties/a/type" --json-schema "$tmp/badtype.json"
expect 1 'JSON schema #/items/uniqueItems: unsupported keyword "uniqueItems"' \
  --json-schema '{"type": "array", "items": {"uniqueItems": true}}' --json-schema-strict
expect 0 'generation' --json-schema '{"type": "array", "maxItems": 2, "items": {"type": "integer", "maximum": 9, "minimum": 0}, "uniqueItems": true}'
expect 2 "--json-schema cannot be combined with --grammar" --grammar 'root ::= "a"' --json-schema "$tmp/person.json"
expect 2 "--grammar-file cannot be combined with --json-schema" --json-schema "$tmp/person.json" --grammar-file "$tmp/numbers.gbnf"
expect 2 "--grammar is given twice" --grammar 'root ::= "a"' --grammar 'root ::= "b"'
expect 2 "--json-schema-strict needs --json-schema" --json-schema-strict
expect 2 "--grammar-file needs a value" --grammar-file
for bad in 5 5x1 +5+1 -5-1 5+ x+1; do
  expect 2 "--logit-bias '$(printf %s "$bad" | sed 's/[+]/[+]/g')': expected TOKEN[+]BIAS" --logit-bias "$bad"
done
for bad in 5+inf 5-nan 5--1 5+1x; do
  expect 2 "--logit-bias '$(printf %s "$bad" | sed 's/[+]/[+]/g')': the bias must be a number" --logit-bias "$bad"
done
expect 1 "--logit-bias: token 99999 is not in the vocabulary \($n_vocab tokens\)" --logit-bias 99999-1
# a grammar whose text is complete after "a", with the end of text banned: the command
# fails saying so, in run and in chat
expect 1 "generated token 2: every token the grammar allows here is banned" --grammar 'root ::= "a"' "${ban_end[@]}"
printf 'hi\n' | "$toy" chat -m "$model" --grammar 'root ::= "a"' "${ban_end[@]}" -n 8 > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "toy chat: generated token 2: every token the grammar allows" "$tmp/err" \
  || die "toy chat with a dead-end grammar: exit $rc, '$(cat "$tmp/err")'"

finish "$n_runs constrained runs in their languages; chat, logit bias and errors as expected"
