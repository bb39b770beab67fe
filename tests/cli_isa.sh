#!/usr/bin/env bash
# The same logits, to the bit, whichever instruction set runs: toy eval under
# TOY_ISA=scalar, avx2 and avx512 (those this CPU has), batched and token by token, with
# every KV cache type, on fixtures that cover GQA, head_dim 128, sliding windows and
# soft-capping. 70 tokens: more than two chunks of attention cells, so the SIMD
# attention's 16-row score blocks, its tails and its online softmax all run.
set -u
toy="$1"
. "$(dirname "$0")/fixtures.sh"
isas="scalar"
grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw f16c /proc/cpuinfo && isas="$isas avx2"
grep -qw avx512f /proc/cpuinfo 2>/dev/null && grep -qw avx512_vnni /proc/cpuinfo && isas="$isas avx512"
if [ "$isas" = scalar ]; then
  echo "SKIP: no SIMD instruction set on this CPU"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
tokens=$(seq -s, 1 70)
n_checked=0
for model in llama-spm-q4_k_m gemma2-f32 qwen3-f16 smollm2-f16; do
  for cache in "f32 f32" "f16 f16" "bf16 q8_0" "q8_0 f16"; do
    set -- $cache
    for mode in batch seq; do
      ref=""
      for isa in $isas; do
        out="$tmp/$model-$1-$2-$mode-$isa.f32"
        if ! TOY_ISA=$isa "$toy" eval -m "$fixtures/models/$model.gguf" --tokens "$tokens" \
            --dump-logits "$out" --mode $mode --cache-type-k $1 --cache-type-v $2 -t 2 2> "$tmp/err"; then
          echo "FAIL: $model ($isa, $mode, cache $1/$2): $(cat "$tmp/err")"
          fail=1
          continue
        fi
        if [ -z "$ref" ]; then
          ref="$out"
        elif ! cmp -s "$ref" "$out"; then
          echo "FAIL: $model ($mode, cache $1/$2): logits under $isa differ from scalar"
          fail=1
        fi
        n_checked=$((n_checked + 1))
      done
    done
  done
done
[ $fail -eq 0 ] && echo "OK: $n_checked runs over ISAs ($isas) bit-identical"
exit $fail
