#!/usr/bin/env bash
# The same logits, to the bit, whichever instruction set runs: toy eval under
# TOY_ISA=scalar, avx2, avxvnni, avx512 and amx (those this CPU has), batched and token by token, with
# every KV cache type, on fixtures that cover GQA, head_dim 128, sliding windows and
# soft-capping. 70 tokens: more than two chunks of attention cells, so the SIMD
# attention's 16-row score blocks, its tails and its online softmax all run; then 300
# tokens on two models, past one 256-cell segment, so the segment fold runs inside a
# task (batch) and after a split job (token by token). Without the fixtures: the bundled
# model and llama (GQA, Q4_K_M) and qwen2 (head_dim 128, biases, F16) models of toy init;
# sliding windows and soft-capping need the fixtures' gemma2.
. "$(dirname "$0")/../lib.sh"
want_fixtures
# an unknown TOY_ISA is an error naming the allowed values, never a silent scalar run:
# toy --version and a context (toy eval) fail with it
want="TOY_ISA=avx3: not an instruction set toy knows (scalar, avx2, avxvnni, avx512 or amx)"
for cmd in "--version" "eval -m $bundled --tokens 1,2,3 --dump-logits /dev/null"; do
  # shellcheck disable=SC2086
  if got=$(TOY_ISA=avx3 "$toy" $cmd 2>&1 > /dev/null); then
    echo "FAIL: TOY_ISA=avx3 toy $cmd succeeded"
    exit 1
  fi
  [ "${got#*"$want"}" != "$got" ] || { echo "FAIL: TOY_ISA=avx3 toy $cmd said '$got', not '$want'"; exit 1; }
done
# an instruction set runs where toy --version reports it under TOY_ISA; the others are
# named as skipped (AMX also needs Linux 5.16's tile permission)
isas="scalar"
for isa in avx2 avxvnni avx512 amx; do
  if TOY_ISA=$isa "$toy" --version | grep -q "kernels: $isa;"; then
    isas="$isas $isa"
  else
    echo "skipped: $isa (not on this CPU: toy --version under TOY_ISA=$isa says $(TOY_ISA=$isa "$toy" --version | sed 's/.*kernels: \([a-z0-9]*\).*/\1/'))"
  fi
done
[ "$isas" = scalar ] && skip "no SIMD instruction set on this CPU"
n_checked=0
models="$fixtures/models"
if [ -z "$fixtures" ]; then
  models="$tmp"
  ln -s "$bundled" "$tmp/toy-kjv.gguf"
  bare_model "$tmp/init-llama-q4_k_m.gguf" llama 256 2 4 2 512 --type Q4_K_M || fail=1
  bare_model "$tmp/init-qwen2-f16.gguf" qwen2 256 2 2 1 512 --type F16 || fail=1
fi
# check N_TOKENS "MODELS" "CACHES" (each cache "K V")
check() {
  local tokens model cache mode isa ref out k v
  tokens=$(seq -s, 1 "$1")
  for model in $2; do
    for cache in $3; do
      k=${cache%/*} v=${cache#*/}
      for mode in batch seq; do
        ref=""
        for isa in $isas; do
          out="$tmp/$model-$k-$v-$mode-$isa.f32"
          if ! TOY_ISA=$isa "$toy" eval -m "$models/$model.gguf" --tokens "$tokens" \
              --dump-logits "$out" --mode $mode --cache-type-k $k --cache-type-v $v -t 2 2> "$tmp/err"; then
            echo "FAIL: $model ($isa, $mode, cache $k/$v, $1 tokens): $(cat "$tmp/err")"
            fail=1
            continue
          fi
          if [ -z "$ref" ]; then
            ref="$out"
          elif ! cmp -s "$ref" "$out"; then
            echo "FAIL: $model ($mode, cache $k/$v, $1 tokens): logits under $isa differ from scalar"
            fail=1
          fi
          n_checked=$((n_checked + 1))
        done
      done
    done
  done
}
if [ -n "$fixtures" ]; then
  check 70 "llama-spm-q4_k_m gemma2-f32 qwen3-f16 smollm2-f16" "f32/f32 f16/f16 bf16/q8_0 q8_0/f16"
  check 300 "llama-spm-q4_k_m gemma2-f32" "f16/f16 q8_0/f32"
else
  check 70 "toy-kjv init-llama-q4_k_m init-qwen2-f16" "f32/f32 f16/f16 bf16/q8_0 q8_0/f16"
  check 300 "init-llama-q4_k_m init-qwen2-f16" "f16/f16 q8_0/f32"
fi
[ $fail -eq 0 ] && echo "OK: $n_checked runs over ISAs ($isas) bit-identical"
exit $fail
