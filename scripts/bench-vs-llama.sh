#!/usr/bin/env bash
# toy bench and llama.cpp's llama-bench alternately on the same GGUF files and threads,
# then the medians and the ratios toy / llama.cpp for prompt processing and generation.
#
# usage: scripts/bench-vs-llama.sh [-t THREADS] [-p PROMPT] [-n GEN] [-r ROUNDS] MODEL.gguf...
#        scripts/bench-vs-llama.sh -l 512,2048,4096 [-t THREADS] [-r ROUNDS] MODEL.gguf...
# -l: long prompts instead: prompts of each length alone (no generation), and the share
# of the first length's speed each engine keeps at the others.
# (LLAMA_CPP=path/to/llama.cpp overrides ../shared/llama.cpp beside the repository.)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
toy="${TOY:-$here/build/toy}"
llama_bench="${LLAMA_CPP:-$here/../shared/llama.cpp}/bin/llama-bench"
usage="usage: $0 [-t THREADS] [-p PROMPT] [-n GEN] [-r ROUNDS] [-l LENGTH,...] MODEL.gguf..."
threads=2 prompt=512 gen=128 rounds=3 lengths=
while getopts "t:p:n:r:l:" o; do
  case $o in
  t) threads=$OPTARG ;; p) prompt=$OPTARG ;; n) gen=$OPTARG ;; r) rounds=$OPTARG ;; l) lengths=$OPTARG ;;
  *) echo "$usage" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
[[ -z "$lengths" || "$lengths" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "-l: prompt lengths (at least 1) separated by commas, not '$lengths'" >&2; exit 2; }
[ -x "$toy" ] || { echo "$toy not found: make first" >&2; exit 1; }
[ -x "$llama_bench" ] || { echo "$llama_bench not found (set LLAMA_CPP)" >&2; exit 1; }

cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
flags=$(grep -m1 "^flags" /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_vnni|avx512_bf16|avx512_fp16|amx_tile|amx_int8|amx_bf16)$' | tr '\n' ' ')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
runs=$([ -n "$lengths" ] && echo "prompts of $lengths tokens" || echo "-p $prompt -n $gen")
echo "CPU: $cpu ($(nproc) CPUs; $flags); $threads threads, $runs, $rounds rounds alternating"
echo "toy: $("$toy" --version)"

# both engines, round after round, on one model: $2 prompt tokens, $3 generated; the JSON
# of round r in $1/toy.r.json and $1/llama.r.json
alternate() {
  mkdir -p "$1"
  for r in $(seq 1 "$rounds"); do
    "$toy" bench -m "$model" -t "$threads" -p "$2" -n "$3" -r 1 --json > "$1/toy.$r.json"
    "$llama_bench" -m "$model" -t "$threads" -p "$2" -n "$3" -r 1 -o json > "$1/llama.$r.json" 2> /dev/null
  done
}

if [ -n "$lengths" ]; then
  printf '\n| model | prompt | toy tok/s | kept | llama.cpp tok/s | kept | toy / llama.cpp |\n'
  printf '|---|---|---|---|---|---|---|\n'
  for model in "$@"; do
    for len in ${lengths//,/ }; do alternate "$tmp/$len" "$len" 0; done
    python3 - "$tmp" "$rounds" "$(basename "$model")" "$lengths" <<'PY'
import json, statistics, sys
tmp, rounds, name, lengths = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(",")
first = None
for n in lengths:
    tp = [json.load(open(f"{tmp}/{n}/toy.{r}.json"))["prompt_tokens_per_s"] for r in range(1, rounds + 1)]
    lp = [e["avg_ts"] for r in range(1, rounds + 1) for e in json.load(open(f"{tmp}/{n}/llama.{r}.json"))]
    t, l = statistics.median(tp), statistics.median(lp)
    first = first or (t, l)
    print(f"| {name} | {n} | {t:.1f} | {100 * t / first[0]:.0f} % | {l:.1f} | {100 * l / first[1]:.0f} % | {t / l:.2f}x |")
PY
  done
  exit 0
fi

printf '\n| model | toy prefill tok/s | llama.cpp prefill | ratio | toy decode tok/s | llama.cpp decode | ratio |\n'
printf '|---|---|---|---|---|---|---|\n'
for model in "$@"; do
  alternate "$tmp" "$prompt" "$gen"
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
