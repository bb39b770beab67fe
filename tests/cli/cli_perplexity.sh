#!/usr/bin/env bash
# toy perplexity against llama.cpp's llama-perplexity on fixture models (an F32 llama, an
# F16 qwen2 whose vocabulary adds no BOS, a Q8_0 llama), the format of its output, that
# batch size and --chunks change nothing but what is asked, and its errors.
# Without the fixtures: llama (F32, and its Q8_0 copy) and qwen2 (F16) models of toy init
# with the bundled model's tokenizer, on the source tree's text (compared with llama.cpp
# where it is there).
. "$(dirname "$0")/../lib.sh"
want_fixtures

llama_ppl="$llama_cpp/bin/llama-perplexity"
if [ ! -x "$llama_ppl" ]; then
  echo "SKIP (llama.cpp comparison only): $llama_ppl not found (set TOY_LLAMA_CPP)"
  llama_ppl=
fi

"$toy" perplexity --help > "$tmp/help" 2>&1 || die "toy perplexity --help exits non-zero"
grep -q "usage: toy perplexity" "$tmp/help" || die "toy perplexity --help prints no usage"

# A text of about 11,000 tokens from files that do not change (the fixtures are read-only),
# so the margins measured below hold: the fixtures' README and their tokenizer test text.
text="$tmp/text.txt"
if [ -n "$fixtures" ]; then
  cat "$fixtures/README.md" "$fixtures/vocab/ggml-vocab-llama-spm.gguf.inp" > "$text"
  models_dir="$fixtures/models" names="llama-spm-f32 qwen2-f16 llama-spm-q8_0" f32=llama-spm-f32
else
  bare_text "$tmp/all.txt"
  head -c 20000 "$tmp/all.txt" > "$text"   # about as many tokens as the fixtures' text
  models_dir="$tmp" names="init-llama-f32 init-qwen2-f16 init-llama-q8_0" f32=init-llama-f32
  bare_model "$tmp/init-llama-f32.gguf" llama 64 2 4 2 128 || fail=1
  "$toy" quantize "$tmp/init-llama-f32.gguf" "$tmp/init-llama-q8_0.gguf" Q8_0 > /dev/null 2>&1 || die "toy quantize failed"
  bare_model "$tmp/init-qwen2-f16.gguf" qwen2 64 2 4 2 128 --type F16 || fail=1
fi

# Checks toy's stdout ($1: the file, $2: windows expected or "" for any) and prints its
# final PPL: one line of "[i]x," for i = 1..n, then "Final estimate: PPL = x +/- y" whose
# x is the last running figure.
check_format() {
  python3 - "$1" "$2" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().split("\n")
if len(lines) != 3 or lines[2] != "":
    print(f"  expected two lines, got {lines!r:.300}"); sys.exit(1)
running = re.findall(r"\[(\d+)\](\d+\.\d{4}),", lines[0])
if "".join(f"[{i}]{x}," for i, x in running) != lines[0] or not running:
    print(f"  bad running line {lines[0]!r:.200}"); sys.exit(1)
if [int(i) for i, _ in running] != list(range(1, len(running) + 1)):
    print("  the windows are not numbered 1..n"); sys.exit(1)
if sys.argv[2] and len(running) != int(sys.argv[2]):
    print(f"  {len(running)} windows, expected {sys.argv[2]}"); sys.exit(1)
m = re.fullmatch(r"Final estimate: PPL = (\d+\.\d{4}) \+/- (\d+\.\d{5})", lines[1])
if not m or m.group(1) != running[-1][1]:
    print(f"  bad final line {lines[1]!r}"); sys.exit(1)
print(m.group(1))
PY
}

for name in $names; do
  model="$models_dir/$name.gguf"
  [ -f "$model" ] || { die "$model missing"; continue; }
  "$toy" perplexity -m "$model" -f "$text" -c 128 -t 2 > "$tmp/toy.out" 2> "$tmp/toy.err" \
    || { die "$name: toy perplexity failed: $(cat "$tmp/toy.err")"; continue; }
  ppl_toy=$(check_format "$tmp/toy.out" "") || { die "$name: toy's output: $ppl_toy"; continue; }
  n_chunks=$(grep -o '\[[0-9]*\]' "$tmp/toy.out" | wc -l)
  [ -n "$llama_ppl" ] || { echo "  $name: toy PPL $ppl_toy ($n_chunks windows)"; continue; }
  "$llama_ppl" -m "$model" -f "$text" -c 128 -t 2 > "$tmp/llama.out" 2>&1 \
    || { die "$name: llama-perplexity failed: $(tail -3 "$tmp/llama.out")"; continue; }
  ppl_llama=$(python3 "$py" ppl "$tmp/llama.out")
  n_llama=$(grep -o '\[[0-9]*\][0-9.]*,' "$tmp/llama.out" | wc -l)
  [ "$n_chunks" = "$n_llama" ] || die "$name: toy scores $n_chunks windows, llama.cpp $n_llama"
  # 1e-3: the acceptance bar. llama-perplexity runs with flash attention and an F16 KV
  # cache; toy has the same cache but plain attention, and these random-weight models'
  # perplexities of ~38000-46000 (large, sharp logits) magnify such differences far
  # beyond a trained model's; measured on this text: -4.4e-5 (F32), +1.3e-4 (qwen2
  # F16), -1.1e-4 (Q8_0).
  python3 "$py" close "$ppl_toy" "$ppl_llama" 1e-3 "$name: toy PPL against llama-perplexity's" \
    || die "$name: toy and llama.cpp disagree"
done

# With the same arithmetic (F32 model, F32 KV cache, no flash attention) only the
# summation order differs, so every running figure and the uncertainty agree to 1e-5
# (measured: 1e-8): the method (windows, BOS, the half scored, the statistics) is
# llama.cpp's, not just close to it.
model="$models_dir/$f32.gguf"
if [ -n "$llama_ppl" ]; then
  "$toy" perplexity -m "$model" -f "$text" -c 128 -t 2 --cache-type-k f32 --cache-type-v f32 \
    > "$tmp/toy.out" 2> "$tmp/toy.err" || die "toy perplexity --cache-type-k f32 failed: $(cat "$tmp/toy.err")"
  "$llama_ppl" -m "$model" -f "$text" -c 128 -t 2 -fa off -ctk f32 -ctv f32 > "$tmp/llama.out" 2>&1 \
    || die "llama-perplexity -fa off failed: $(tail -3 "$tmp/llama.out")"
  PYTHONPATH="$tests" python3 - "$tmp/toy.out" "$tmp/llama.out" <<'PY' || die "F32 arithmetic: toy and llama.cpp differ by more than 1e-5"
import sys
from helpers import perplexity
def figures(path):
    p = perplexity(path)
    return p.running + [p.ppl, p.err]
a, b = figures(sys.argv[1]), figures(sys.argv[2])
worst = max(abs(x / y - 1) for x, y in zip(a, b)) if len(a) == len(b) else 1
print(f"  the F32 model, F32 KV cache, no flash attention: {len(a) - 2} running figures, PPL "
      f"and +/-: largest |ratio - 1| {worst:.1e}")
sys.exit(0 if worst < 1e-5 else 1)
PY
fi

# The batch size decides only how windows are grouped into forward passes (a slice of
# one, or several as sequences), and toy's logits do not depend on it; --chunks keeps
# the first windows.
"$toy" perplexity -m "$model" -f "$text" -c 128 -t 2 --chunks 7 > "$tmp/ref.out" 2>/dev/null \
  || die "toy perplexity --chunks 7 failed"
check_format "$tmp/ref.out" 7 > /dev/null || die "--chunks 7 does not score 7 windows"
for b in 48 128 384 100000; do
  case $b in 100000) want=2 ;; *) want=0 ;; esac
  "$toy" perplexity -m "$model" -f "$text" -c 128 -b $b -t 2 --chunks 7 > "$tmp/b.out" 2> "$tmp/b.err"
  rc=$?
  if [ $want -eq 2 ]; then
    [ $rc -eq 2 ] && grep -q -- "-b" "$tmp/b.err" && grep -q "100000" "$tmp/b.err" \
      || die "-b 100000: expected exit 2 naming the flag and value, got $rc: $(cat "$tmp/b.err")"
    continue
  fi
  [ $rc -eq 0 ] || { die "-b $b failed: $(cat "$tmp/b.err")"; continue; }
  cmp -s "$tmp/ref.out" "$tmp/b.out" || die "-b $b changes the output: $(head -c 200 "$tmp/b.out")"
done

# errors a user can provoke: one line on stderr naming the file or flag, exit 1 or 2
printf 'Hello world. This text is far too short.\n' > "$tmp/short.txt"
"$toy" perplexity -m "$model" -f "$tmp/short.txt" -c 128 > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] || die "a too-short text: exit $rc, expected 1"
[ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "short.txt" "$tmp/err" && grep -q "at least 256" "$tmp/err" \
  || die "the too-short error does not name the file and the 256 tokens needed: $(cat "$tmp/err")"
"$toy" perplexity -m "$model" -f "$tmp/nonexistent.txt" > /dev/null 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "nonexistent.txt" "$tmp/err" \
  || die "a missing text: exit $rc, expected 1 naming the file: $(cat "$tmp/err")"
"$toy" perplexity -m /nonexistent.gguf -f "$text" > /dev/null 2> "$tmp/err"
[ $? -eq 1 ] && grep -q "/nonexistent.gguf" "$tmp/err" || die "a missing model: $(cat "$tmp/err")"
for bad in "-c 2" "-c x" "-c 99999999" "--chunks 0" "-t 0" "--cache-type-k q4_0"; do
  "$toy" perplexity -m "$model" -f "$text" $bad > /dev/null 2> "$tmp/err"
  rc=$?
  read -r flag value <<< "$bad"
  [ $rc -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q -- "$flag" "$tmp/err" \
    && grep -q -- "$value" "$tmp/err" \
    || die "'$bad': exit $rc, expected 2 with one line naming the flag and value: $(cat "$tmp/err")"
done
"$toy" perplexity -m "$model" > /dev/null 2> "$tmp/err" && die "no -f was accepted"
grep -q -- "-f" "$tmp/err" || die "the missing -f error does not say so: $(cat "$tmp/err")"

finish
