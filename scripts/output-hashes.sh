#!/usr/bin/env bash
# Hashes of what toy computes, for showing that a change to the code changes no number:
# logits (batch and token by token, F32 and Q8_0 KV caches), greedy text, gradients
# (model and LoRA), quantized files of every type, models written by toy init, toy train,
# toy finetune and a LoRA fine-tune, under every instruction set this CPU runs (TOY_ISA).
# One line per output: "NAME ISA SHA256" (or "NAME ISA error: ..."), sorted.
#
#   scripts/output-hashes.sh build/toy > before.txt
#   ... change the code, rebuild ...
#   scripts/output-hashes.sh build/toy > after.txt && diff before.txt after.txt
#
# The models: every GGUF in $TOY_FIXTURES/models (default ../shared/fixtures/models) that
# is not a .ref.gguf, and the bundled model.
set -u
toy=$(realpath "${1:?usage: scripts/output-hashes.sh TOY_BINARY}")
root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=$(realpath -m "${TOY_FIXTURES:-$root/../shared/fixtures}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

isas="scalar"
for isa in avx2 avxvnni avx512 amx; do
  TOY_ISA=$isa "$toy" --version | grep -q "kernels: $isa;" && isas="$isas $isa"
done

models="$root/models/toy-kjv.gguf"
[ -d "$fixtures/models" ] && models="$models $(ls "$fixtures"/models/*.gguf | grep -v '\.ref\.gguf$')"

# hash NAME ISA FILE: prints the line for FILE (or the last line of $tmp/err)
hash() {
  if [ -s "$3" ]; then echo "$1 $2 $(sha256sum < "$3" | cut -c1-64)"
  else echo "$1 $2 error: $(tail -1 "$tmp/err" 2> /dev/null | sed "s|$fixtures/models/||g; s|$root/||g")"; fi
  rm -f "$3"
}
text="$tmp/text.txt"
printf 'In the beginning God created the heaven and the earth. And the earth was without form, and void.\n%.0s' \
  $(seq 1 40) > "$text"
tokens="$tmp/tokens.txt"

for isa in $isas; do
  export TOY_ISA=$isa
  for m in $models; do
    name=$(basename "$m" .gguf)
    ids=$("$toy" tokenize -m "$m" "In the beginning God created the heaven and the earth." 2> /dev/null \
          | tr ' ' ',' | cut -d, -f1-24)
    [ -n "$ids" ] || ids=1,2,3,4,5,6,7,8
    for mode in batch seq; do
      "$toy" eval -m "$m" --tokens "$ids" --dump-logits "$tmp/out" --mode $mode -t 2 2> "$tmp/err"
      hash "$name.logits.$mode" $isa "$tmp/out"
    done
    "$toy" eval -m "$m" --tokens "$ids" --dump-logits "$tmp/out" --mode seq -t 2 \
      --cache-type-k q8_0 --cache-type-v q8_0 2> "$tmp/err"
    hash "$name.logits.q8_0-cache" $isa "$tmp/out"
    "$toy" run -m "$m" -p "In the beginning" -n 16 --temp 0 -t 2 > "$tmp/out" 2> "$tmp/err"
    hash "$name.text" $isa "$tmp/out"
    "$toy" grad -m "$m" --tokens "$ids" --out "$tmp/out" -t 2 > /dev/null 2> "$tmp/err"
    hash "$name.grad" $isa "$tmp/out"
  done

  # quantization of every type, from an F32 model
  f32="$fixtures/models/llama-spm-f32.gguf"
  [ -f "$f32" ] || { "$toy" quantize "$root/models/toy-kjv.gguf" "$tmp/f32.gguf" F32 -t 2 > /dev/null 2>&1; f32="$tmp/f32.gguf"; }
  for type in F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K; do
    "$toy" quantize "$f32" "$tmp/out" $type -t 2 > /dev/null 2> "$tmp/err"
    hash "quantize.$type" $isa "$tmp/out"
  done

  # toy init, train, finetune (full and LoRA), and the LoRA's gradient
  small=(--n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 128 --ctx 128)
  for arch in llama qwen2; do
    "$toy" init --arch $arch "${small[@]}" --vocab-from "$root/models/toy-kjv.gguf" --out "$tmp/init.gguf" \
      --type F32 -t 2 > /dev/null 2> "$tmp/err"
    cp "$tmp/init.gguf" "$tmp/init-$arch.gguf" 2> /dev/null
    hash "init.$arch" $isa "$tmp/init.gguf"
  done
  train=(--data "$text" --seq 32 --batch 2 --steps 4 --warmup 1 -t 2)
  "$toy" train --arch llama "${small[@]}" --vocab-from "$root/models/toy-kjv.gguf" "${train[@]}" \
    --out "$tmp/t.gguf" > /dev/null 2> "$tmp/err"
  hash "train" $isa "$tmp/t.gguf"
  for arch in llama qwen2; do
    "$toy" finetune -m "$tmp/init-$arch.gguf" "${train[@]}" --out "$tmp/f.gguf" > /dev/null 2> "$tmp/err"
    hash "finetune.$arch" $isa "$tmp/f.gguf"
  done
  "$toy" finetune -m "$root/models/toy-kjv.gguf" "${train[@]}" --lora-rank 4 --lora-dropout 0.1 \
    --out "$tmp/l.gguf" > /dev/null 2> "$tmp/err"
  cp "$tmp/l.gguf" "$tmp/lora.gguf" 2> /dev/null
  hash "finetune.lora" $isa "$tmp/l.gguf"
  "$toy" grad -m "$root/models/toy-kjv.gguf" --lora "$tmp/lora.gguf" --tokens 1,2,3,4,5,6,7,8 \
    --out "$tmp/out" -t 2 > /dev/null 2> "$tmp/err"
  hash "grad.lora" $isa "$tmp/out"
  rm -f "$tmp"/*.gguf "$tmp"/*.csv "$tmp"/*.svg
done | sort
