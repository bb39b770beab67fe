#!/usr/bin/env bash
# toy bench and llama.cpp's llama-bench alternately on the same GGUF files and threads,
# then the medians and the ratios toy / llama.cpp for prompt processing and generation.
#
# usage: scripts/bench-vs-llama.sh [-t THREADS] [-p PROMPT] [-n GEN] [-r ROUNDS] MODEL.gguf...
# (LLAMA_CPP=path/to/llama.cpp overrides ../shared/llama.cpp beside the repository.)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
toy="${TOY:-$here/build/toy}"
llama_bench="${LLAMA_CPP:-$here/../shared/llama.cpp}/bin/llama-bench"
threads=2 prompt=512 gen=128 rounds=3
while getopts "t:p:n:r:" o; do
  case $o in
  t) threads=$OPTARG ;; p) prompt=$OPTARG ;; n) gen=$OPTARG ;; r) rounds=$OPTARG ;;
  *) echo "usage: $0 [-t THREADS] [-p PROMPT] [-n GEN] [-r ROUNDS] MODEL.gguf..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-t THREADS] [-p PROMPT] [-n GEN] [-r ROUNDS] MODEL.gguf..." >&2; exit 2; }
[ -x "$toy" ] || { echo "$toy not found: make first" >&2; exit 1; }
[ -x "$llama_bench" ] || { echo "$llama_bench not found (set LLAMA_CPP)" >&2; exit 1; }

cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
flags=$(grep -m1 "^flags" /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_vnni|avx512_bf16|avx512_fp16|amx_tile|amx_int8|amx_bf16)$' | tr '\n' ' ')
echo "CPU: $cpu ($(nproc) CPUs; $flags); $threads threads, -p $prompt -n $gen, $rounds rounds alternating"
echo "toy: $("$toy" --version)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '\n| model | toy prefill tok/s | llama.cpp prefill | ratio | toy decode tok/s | llama.cpp decode | ratio |\n'
printf '|---|---|---|---|---|---|---|\n'
for model in "$@"; do
  for r in $(seq 1 "$rounds"); do
    "$toy" bench -m "$model" -t "$threads" -p "$prompt" -n "$gen" -r 1 --json > "$tmp/toy.$r.json"
    "$llama_bench" -m "$model" -t "$threads" -p "$prompt" -n "$gen" -r 1 -o json > "$tmp/llama.$r.json" 2> /dev/null
  done
  python3 - "$tmp" "$rounds" "$(basename "$model")" <<'PY'
import json, statistics, sys
tmp, rounds, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tp, tg, lp, lg = [], [], [], []
for r in range(1, rounds + 1):
    t = json.load(open(f"{tmp}/toy.{r}.json"))
    tp.append(t["prompt_tokens_per_s"]); tg.append(t["gen_tokens_per_s"])
    for e in json.load(open(f"{tmp}/llama.{r}.json")):
        (lp if e["n_prompt"] > 0 else lg).append(e["avg_ts"])
m = statistics.median
print(f"| {name} | {m(tp):.1f} | {m(lp):.1f} | {m(tp) / m(lp):.2f}x | {m(tg):.1f} | {m(lg):.1f} | {m(tg) / m(lg):.2f}x |")
PY
done
