#!/usr/bin/env bash
# --no-mmap on every command that loads a model: each says so in --help, and reading the
# file into memory gives the same bytes out as mapping it (logits, text, gradients, a
# quantized file, perplexity, a fine-tuned model).
. "$(dirname "$0")/../lib.sh"
model=$bundled

for c in run chat eval perplexity bench serve grad finetune train cka quantize "lora merge"; do
  $toy $c --help | grep -q -- "--no-mmap" || die "toy $c --help does not describe --no-mmap"
done

same() { # NAME FILE_A FILE_B
  cmp -s "$2" "$3" || die "$1 differs with --no-mmap"
}
for m in "" --no-mmap; do
  k=${m:-mmap}
  $toy eval -m "$model" --tokens 1,296,353,472,289,623 --dump-logits "$tmp/eval.$k" -t 2 $m || fail=1
  $toy run -m "$model" -p "And it came to pass" -n 24 --seed 5 -t 2 $m > "$tmp/run.$k" 2>/dev/null || fail=1
  $toy grad -m "$model" --tokens 1,296,353,472 --out "$tmp/grad.$k.gguf" -t 2 $m > /dev/null || fail=1
  $toy quantize $m "$model" "$tmp/q.$k.gguf" Q4_0 -t 2 > /dev/null 2>&1 || die "quantize $m"
  printf 'And it came to pass in those days, that there went out a decree. %.0s' $(seq 40) > "$tmp/text.txt"
  $toy perplexity -m "$model" -f "$tmp/text.txt" -c 64 -t 2 $m 2>&1 | grep "Final estimate" > "$tmp/ppl.$k" || fail=1
  $toy finetune -m "$model" --data "$tmp/text.txt" --steps 2 --batch 1 --seq 16 --warmup 1 -t 2 \
    --out "$tmp/ft.$k.gguf" $m > /dev/null 2>&1 || die "finetune $m"
done
same "toy eval's logits" "$tmp/eval.mmap" "$tmp/eval.--no-mmap"
same "toy run's text" "$tmp/run.mmap" "$tmp/run.--no-mmap"
same "toy grad's gradients" "$tmp/grad.mmap.gguf" "$tmp/grad.--no-mmap.gguf"
same "toy quantize's file" "$tmp/q.mmap.gguf" "$tmp/q.--no-mmap.gguf"
same "toy perplexity's figure" "$tmp/ppl.mmap" "$tmp/ppl.--no-mmap"
same "toy finetune's model" "$tmp/ft.mmap.gguf" "$tmp/ft.--no-mmap.gguf"
[ -s "$tmp/ppl.mmap" ] || die "no perplexity printed"
$toy eval -m /nonexistent.gguf --tokens 1 --dump-logits "$tmp/x" --no-mmap 2> "$tmp/err" && fail=1
grep -q "/nonexistent.gguf: cannot open" "$tmp/err" || die "the --no-mmap error: $(cat "$tmp/err")"
finish "every command describes --no-mmap; the same output with and without it"
