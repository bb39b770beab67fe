#!/usr/bin/env bash
# Models that carry real chat templates (../shared/templates, or $TOY_TEMPLATES) as their
# tokenizer.chat_template, on random-weight fixture models whose replies a grammar forces:
# - toy chat uses the model's own template (one that refuses says so), shows a thinking
#   model's reasoning apart from its answer (--show-reasoning, the default: "Thinking...",
#   the reasoning, "...done thinking.", the answer) or hides it (--hide-reasoning), also
#   where the template opens the thinking itself (the DeepSeek R1 distills); a model
#   without a template says its fallback once; a broken template file is an error naming
#   its line and column;
# - toy serve on every shared template (tests/python/serve_templates.py): the template's
#   prompt byte for byte, BOS once, calls in each model's syntax, forced calls, reasoning;
# - the openai npm client reads reasoning_content and tool_calls, and its parse() loop
#   works (tests/node/serve_templates.mjs).
. "$(dirname "$0")/../lib.sh"
need_fixtures "random-weight models to carry the templates"
templates="${TOY_TEMPLATES:-$src/../shared/templates}"
[ -f "$templates/tokens.tsv" ] || skip "no real templates at $templates (set TOY_TEMPLATES)"
python3 -c "import jinja2" 2> /dev/null ||
  skip "python3-jinja2 is needed (apt-get install python3-jinja2, or scripts/install-deps.sh test)"
need_jsonschema
m="$fixtures/models/qwen2-f16.gguf"

# ---- toy chat: reasoning shown apart, or hidden; two turns each
python3 "$py" with-template "$m" "$tmp/qwen3.gguf" "$templates/Qwen-Qwen3-0.6B.jinja" || die "with-template"
reply='root ::= "<think>\nI should greet.\n</think>\n\nHello there."'
shown=$'Thinking...\nI should greet.\n...done thinking.\n\nHello there.'
printf 'Hi\nAgain\n' | "$toy" chat -m "$tmp/qwen3.gguf" --grammar "$reply" -n 60 > "$tmp/out" 2> "$tmp/err" ||
  die "toy chat: $(cat "$tmp/err")"
[ "$(cat "$tmp/out")" = "$shown"$'\n'"$shown" ] || die "toy chat shows: $(cat "$tmp/out")"
grep -q "chat template" "$tmp/err" && die "toy chat did not use the model's template: $(cat "$tmp/err")"
printf 'Hi\nAgain\n' | "$toy" chat -m "$tmp/qwen3.gguf" --grammar "$reply" -n 60 --hide-reasoning > "$tmp/out" \
  2> "$tmp/err" || die "toy chat --hide-reasoning: $(cat "$tmp/err")"
[ "$(cat "$tmp/out")" = $'Hello there.\nHello there.' ] || die "toy chat --hide-reasoning shows: $(cat "$tmp/out")"

# the template opens the thinking: the reply starts inside it
python3 "$py" with-template "$m" "$tmp/r1.gguf" "$templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja" ||
  die "with-template"
printf 'Hi\n' | "$toy" chat -m "$tmp/r1.gguf" --grammar 'root ::= "I reason.\n</think>\n\nAnswer."' -n 60 \
  > "$tmp/out" 2> "$tmp/err" || die "toy chat, R1: $(cat "$tmp/err")"
[ "$(cat "$tmp/out")" = $'Thinking...\nI reason.\n...done thinking.\n\nAnswer.' ] || die "toy chat, R1: $(cat "$tmp/out")"

# the model's own template is the one used: this one refuses every conversation
printf '{{ raise_exception("only the model'"'"'s own template says this") }}' > "$tmp/refuse.jinja"
python3 "$py" with-template "$m" "$tmp/refuse.gguf" "$tmp/refuse.jinja" || die "with-template"
printf 'Hi\n' | "$toy" chat -m "$tmp/refuse.gguf" -n 5 > /dev/null 2> "$tmp/err" && die "a refusing template passed"
grep -q "the chat template refused the conversation: only the model's own template says this" "$tmp/err" ||
  die "toy chat with a refusing template: $(cat "$tmp/err")"

# no template: the fallback is said once, on stderr
printf 'Hi\nAgain\n' | "$toy" chat -m "$m" -n 3 > /dev/null 2> "$tmp/err" || die "toy chat without a template"
[ "$(grep -c 'has no chat template' "$tmp/err")" = 1 ] || die "the fallback, said $(grep -c 'has no chat template' "$tmp/err") times: $(cat "$tmp/err")"

# a broken template file: its line and column
printf '{%% if x %%}\n{{ bad ) }}\n' > "$tmp/bad.jinja"
printf 'Hi\n' | "$toy" chat -m "$m" --chat-template-file "$tmp/bad.jinja" -n 3 > /dev/null 2> "$tmp/err" &&
  die "a broken template file passed"
grep -q "bad.jinja: chat template: 2:8: expected '}}', got ')'" "$tmp/err" || die "a broken template: $(cat "$tmp/err")"

# ---- toy serve on every template
mkdir "$tmp/models"
python3 "$tests/python/serve_templates.py" "$toy" "$fixtures" "$templates" "$tmp/models" || fail=1

# ---- the openai client: reasoning, calls, parse()
if node_ready "the openai client only"; then
  serve_start -m "$tmp/qwen3.gguf"
  [ -n "$port" ] && node "$tests/node/serve_templates.mjs" "$port" qwen3 || fail=1
  [ -n "$serve_pid" ] && serve_stop
fi
finish
