#!/usr/bin/env bash
# toy grad against an independent float64 reference (tests/python/grad_reference.py, PyTorch
# autograd) on every dense fixture model: the loss within 0.1 % and every tensor's
# gradient within 1e-3 relative RMS (quantized models: the reference reads the F32
# conversion that toy quantize writes, the same dequantized values toy grad
# differentiates); then the same for LoRA adapters (toy grad --lora) on float and
# quantized bases, and for toy's design's per-head LoRA-Q adapters; the same for GPT-2 (F32 and Q8_0 models of toy init, the fixtures having
# none). MoE models and bad input give errors naming the problem. Without the
# fixtures: llama (F32, Q4_K_M), qwen2 (F16) and mixtral-shaped models of toy init with
# the bundled model's tokenizer, on fixed tokens and the source tree's text.
. "$(dirname "$0")/../lib.sh"
want_fixtures
torch_py=/usr/bin/python3   # Debian's, with python3-torch
if ! "$torch_py" -c "import torch, numpy" 2> /dev/null; then
  skip "$torch_py cannot import torch and numpy (scripts/install-deps.sh installs python3-torch)"
fi
ref="$tests/python/grad_reference.py"
text="$tmp/text.txt"
if [ -n "$fixtures" ]; then
  models="$fixtures/models"
  refs=("$models"/*.ref.gguf)
  lora_models="llama-spm-f32 llama-spm-q4_k_m llama-spm-q8_0 qwen2-f16 gemma2-f32 llama3-bpe-f16 phi3-f16"
  f32=llama-spm-f32
  cat "$fixtures/README.md" > "$text"
else
  models="$tmp/models"
  mkdir "$models"
  bare_model "$models/init-llama-f32.gguf" llama 64 2 4 2 128 || fail=1
  bare_model "$models/init-llama-q4_k_m.gguf" llama 256 2 4 2 512 --type Q4_K_M || fail=1
  bare_model "$models/init-qwen2-f16.gguf" qwen2 64 2 4 2 128 --type F16 || fail=1
  bare_model "$models/init-mixtral.gguf" llama 64 1 4 2 64 --preset mixtral-tiny || fail=1
  refs=(init-llama-f32 init-llama-q4_k_m init-qwen2-f16 init-mixtral)
  lora_models="init-llama-f32 init-llama-q4_k_m init-qwen2-f16"
  f32=init-llama-f32
  bare_text "$text"
fi

# toy's gradients first, then one run of the reference over them all (PyTorch's import
# costs more than a comparison): jobs holds "OUTPUT MODEL TOKENS GRADS [--lora A]" lines
jobs="$tmp/jobs"
: > "$jobs"
job_names=()
add_job() { # NAME MODEL TOKENS GRADS [ARGS...]: MODEL as the reference reads it (F32 for quantized)
  local name=$1 model=$2 i=${#job_names[@]}
  shift 2
  case "$model" in
  *-f32.gguf | *-f16.gguf | *-bf16.gguf) ;;
  *) "$toy" quantize "$model" "$tmp/f32-$i.gguf" F32 > /dev/null 2>&1 || { die "$name: toy quantize to F32 failed"; return; }
     model="$tmp/f32-$i.gguf" ;;
  esac
  echo "$tmp/out-$i $model $* --tol 1e-3" >> "$jobs"
  job_names+=("$name")
}

for f in "${refs[@]}"; do
  name=$(basename "$f" .ref.gguf)
  if [ -n "$fixtures" ]; then
    tokens=$(python3 "$py" ref-tokens "$f")
  else
    tokens="1,$(seq -s, 40 7 200)"
  fi
  case "$name" in
  mixtral* | qwen2moe* | qwen3moe* | olmoe* | init-mixtral)
    if "$toy" grad -m "$models/$name.gguf" --tokens "$tokens" --out "$tmp/g.gguf" 2> "$tmp/err"; then
      die "$name: toy grad accepted a MoE model"
    fi
    grep -q "training not supported for" "$tmp/err" || die "$name: unexpected error: $(cat "$tmp/err")"
    continue ;;
  esac
  g="$tmp/g-$name.gguf"
  "$toy" grad -m "$models/$name.gguf" --tokens "$tokens" --out "$g" -t 2 > /dev/null 2> "$tmp/err" \
    || { die "$name: toy grad failed: $(cat "$tmp/err")"; continue; }
  add_job "$name" "$models/$name.gguf" "$tokens" "$g"
done

# GPT-2, of which the fixtures have no model: toy init's, stirred (helpers.py), F32 and
# Q8_0, with the fixtures' GPT-2 vocabulary (else the bundled model's)
gpt2_vocab="$bundled"
[ -n "$fixtures" ] && gpt2_vocab="$fixtures/vocab/ggml-vocab-gpt-2.gguf"
gpt2="$tmp/gpt2-f32.gguf"
"$toy" init --arch gpt2 --n-embd 64 --n-layer 2 --n-head 4 --n-ff 256 --ctx 64 --vocab-from "$gpt2_vocab" \
  --out "$gpt2" -t 2 > /dev/null 2> "$tmp/err" || die "toy init --arch gpt2: $(tail -1 "$tmp/err")"
python3 "$py" stir "$gpt2" || die "stirring $gpt2"
"$toy" quantize "$gpt2" "$tmp/gpt2-q8_0.gguf" Q8_0 -t 2 > /dev/null 2>&1 || die "toy quantize gpt2 Q8_0"
tokens="1,$(seq -s, 40 7 200)"
for name in gpt2-f32 gpt2-q8_0; do
  g="$tmp/g-$name.gguf"
  "$toy" grad -m "$tmp/$name.gguf" --tokens "$tokens" --out "$g" -t 2 > /dev/null 2> "$tmp/err" \
    || { die "$name: toy grad failed: $(cat "$tmp/err")"; continue; }
  add_job "$name" "$tmp/$name.gguf" "$tokens" "$g"
done

# LoRA: the adapters' gradients (toy grad --lora), the base frozen in its own type; the
# adapters come from a few steps of toy finetune, so that B is no longer zero
for model in $(for name in $lora_models; do echo "$models/$name.gguf"; done) "$gpt2" "$tmp/gpt2-q8_0.gguf"; do
  name=$(basename "$model" .gguf)
  a="$tmp/a-$name.gguf" g="$tmp/g-lora-$name.gguf"
  "$toy" finetune -m "$model" --data "$text" --seq 32 --batch 2 --steps 3 --warmup 1 --lr 1e-2 --lora-rank 4 \
    --lora-alpha 8 --out "$a" -t 2 2> "$tmp/err" || { die "$name: LoRA finetune: $(tail -1 "$tmp/err")"; continue; }
  tokens="1,$(seq -s, 40 7 200)"
  "$toy" grad -m "$model" --lora "$a" --tokens "$tokens" --out "$g" -t 2 > /dev/null 2> "$tmp/err" \
    || { die "$name: toy grad --lora: $(cat "$tmp/err")"; continue; }
  add_job "$name LoRA" "$model" "$tokens" "$g" --lora "$a"
done

# toy's design's LoRA-Q (--lora-per-head: one pair per query head, moments beside each
# tensor), against the reference's per-head product
for name in $f32 $(echo $lora_models | cut -d' ' -f2); do
  model="$models/$name.gguf" a="$tmp/ph-$name.gguf" g="$tmp/g-ph-$name.gguf"
  "$toy" finetune -m "$model" --data "$text" --seq 32 --batch 2 --steps 3 --warmup 1 --lr 1e-2 --lora-rank 2 \
    --lora-targets q --lora-per-head --lora-init-scale 0.01 --lora-alpha 4 --out "$a" -t 2 2> "$tmp/err" \
    || { die "$name: per-head LoRA finetune: $(tail -1 "$tmp/err")"; continue; }
  tokens="1,$(seq -s, 40 7 200)"
  "$toy" grad -m "$model" --lora "$a" --tokens "$tokens" --out "$g" -t 2 > /dev/null 2> "$tmp/err" \
    || { die "$name: toy grad --lora (per head): $(cat "$tmp/err")"; continue; }
  add_job "$name LoRA per head" "$model" "$tokens" "$g" --lora "$a"
done

case "$tmp" in *" "*) die "a space in $tmp: the jobs file cannot hold it" ;; esac
"$torch_py" "$ref" --jobs "$jobs" > "$tmp/ref.out" 2>&1
for i in "${!job_names[@]}"; do
  out="$tmp/out-$i"
  if grep -q "): ok$" "$out" 2> /dev/null; then
    printf '%-26s %s; %s\n' "${job_names[$i]}" "$(head -1 "$out")" "$(tail -1 "$out")"
  else
    die "${job_names[$i]}: $(grep -E 'over the tolerance|FAILED|Error|error' "$out" 2> /dev/null | head -5)$(tail -3 "$tmp/ref.out")"
  fi
done
[ ${#job_names[@]} -gt 0 ] || die "no gradients compared"

# bad input: errors that name the problem
m="$models/$f32.gguf"
"$toy" grad -m "$m" --tokens 1 --out "$tmp/g.gguf" 2> "$tmp/err" && die "one token accepted"
grep -q "at least 2 tokens" "$tmp/err" || die "one token: $(cat "$tmp/err")"
"$toy" grad -m "$m" --tokens 1,99999 --out "$tmp/g.gguf" 2> "$tmp/err" && die "token 99999 accepted"
grep -q "token 1: id 99999 out of range" "$tmp/err" || die "bad id: $(cat "$tmp/err")"
"$toy" grad -m "$m" --tokens 1,x --out "$tmp/g.gguf" 2> "$tmp/err" && die "token x accepted"
grep -q "item 2 ('x')" "$tmp/err" || die "bad item: $(cat "$tmp/err")"
"$toy" grad -m "$tmp/none.gguf" --tokens 1,2 --out "$tmp/g.gguf" 2> "$tmp/err" && die "missing model accepted"
grep -q "none.gguf" "$tmp/err" || die "missing model: $(cat "$tmp/err")"
"$toy" grad -m "$m" --tokens 1,2 --out "$tmp/no/such/dir/g.gguf" 2> "$tmp/err" && die "unwritable output accepted"
grep -q "no/such/dir" "$tmp/err" || die "unwritable output: $(cat "$tmp/err")"
exit $fail
