#!/usr/bin/env bash
# BF16 training against F32 on this CPU: `toy train --bench --compute f32` and `--compute
# bf16` alternately, ROUNDS times each, then the median tokens/s of each, their ratio,
# the peak RSS of each and the CPU with what toy runs on it (`toy --version`: "bf16 dot:
# vdpbf16ps" where the products multiply BF16 natively).
#
# usage: scripts/bench-train-compute.sh MODEL.gguf [ROUNDS] [THREADS] [STEPS]
#   defaults: 3 rounds, 2 threads, 2 timed steps a run (after one warm-up step);
#   TOY: the toy binary (default build/toy beside this script).
# The model: `toy init --preset smollm2-135m --vocab-from ggml-vocab-gpt-2.gguf --out M`
# is the shape docs/performance.md uses (8 x 512 tokens a step).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
toy="${TOY:-$here/../build/toy}"
[ $# -ge 1 ] || { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
model="$1" rounds="${2:-3}" threads="${3:-2}" steps="${4:-2}"
[ -x "$toy" ] || { echo "bench-train-compute: $toy not found (make, or set TOY)" >&2; exit 1; }
[ -f "$model" ] || { echo "bench-train-compute: $model not found" >&2; exit 1; }

declare -A rates rss
for ((r = 0; r < rounds; r++)); do
  for c in f32 bf16; do
    out=$("$toy" train --bench -m "$model" --steps "$steps" -t "$threads" --compute "$c")
    rates[$c]+="$(awk '/^throughput/ { print $2 }' <<< "$out") "
    rss[$c]="$(awk '/^peak RSS/ { print $3 }' <<< "$out")"
  done
done
median() { tr ' ' '\n' <<< "$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
f32=$(median "${rates[f32]}") bf16=$(median "${rates[bf16]}")
echo "CPU: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo); $("$toy" --version)"
echo "$model, $threads threads, $rounds alternating rounds of $steps timed steps"
echo "| compute | tokens/s (each round) | median | peak RSS |"
echo "|---|---|---|---|"
echo "| f32 | ${rates[f32]}| $f32 | ${rss[f32]} MB |"
echo "| bf16 | ${rates[bf16]}| $bf16 | ${rss[bf16]} MB |"
awk -v a="$bf16" -v b="$f32" 'BEGIN { printf "bf16 / f32: %.2fx\n", a / b }'
