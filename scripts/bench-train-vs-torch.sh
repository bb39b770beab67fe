#!/usr/bin/env bash
# toy train --bench against the same training step in PyTorch (scripts/bench-train-torch.py),
# alternately, on one machine: prints each run and the ratio of the medians.
#
# usage: scripts/bench-train-vs-torch.sh MODEL.gguf [ROUNDS] [THREADS] [COMPUTE]
#   MODEL.gguf: a llama model toy init wrote, e.g.
#     build/toy init --arch llama --preset smollm2-135m \
#       --vocab-from ../shared/fixtures/vocab/ggml-vocab-gpt-2.gguf --out smollm2-135m.gguf
#   The PyTorch model has the same shape (SmolLM2-135M's dims unless TORCH_DIMS says
#   n_embd,n_layer,n_head,n_head_kv,n_ff) and vocabulary size (TORCH_VOCAB, 50257).
#   COMPUTE: f32 (default), bf16 (toy train --compute bf16 against PyTorch's CPU autocast
#   to BF16, bench-train-torch.py --compute bf16), or both (each round runs the four).
#   BATCH and SEQ (default 8 and 512) set the tokens of a step.
set -euo pipefail
model="${1:?usage: $0 MODEL.gguf [ROUNDS] [THREADS] [f32|bf16|both]}"
rounds="${2:-3}"
threads="${3:-2}"
case "${4:-f32}" in
  f32|bf16) computes="${4:-f32}" ;;
  both) computes="f32 bf16" ;;
  *) echo "bench-train-vs-torch: COMPUTE must be f32, bf16 or both, got '$4'" >&2; exit 2 ;;
esac
batch="${BATCH:-8}"
seq="${SEQ:-512}"
here="$(cd "$(dirname "$0")" && pwd)"
toy="${TOY:-$here/../build/toy}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq 1 "$rounds"); do
  for c in $computes; do
    "$toy" train --bench -m "$model" --batch "$batch" --seq "$seq" --steps 3 -t "$threads" --compute "$c" \
      --json > "$tmp/toy.$c.$r.json"
    peak=$(python3 -c "import json; print(json.load(open('$tmp/toy.$c.$r.json'))['peak_gflops'])")
    /usr/bin/python3 "$here/bench-train-torch.py" --batch "$batch" --seq "$seq" --steps 3 --threads "$threads" \
      --vocab "${TORCH_VOCAB:-50257}" --dims "${TORCH_DIMS:-576,30,9,3,1536}" --peak-gflops "$peak" \
      --compute "$c" --json > "$tmp/torch.$c.$r.json"
    python3 - "$tmp/toy.$c.$r.json" "$tmp/torch.$c.$r.json" "$r" "$c" <<'PY'
import json, sys
t, p = (json.load(open(f)) for f in sys.argv[1:3])
print(f"round {sys.argv[3]}, {sys.argv[4]}: toy {t['tokens_per_s']:.1f} tokens/s ({100 * t['utilisation']:.1f} % of "
      f"{t['peak_gflops']:.0f} GFLOP/s, {t['peak_rss_mb']:.0f} MB)   PyTorch {p['tokens_per_s']:.1f} tokens/s "
      f"({100 * p['utilisation']:.1f} %, {p['peak_rss_mb']:.0f} MB; {p['matmul']} products of "
      f"{'/'.join(p['product_dtypes'])})")
PY
  done
done
python3 - "$tmp" "$rounds" $computes <<'PY'
import json, statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
for c in sys.argv[3:]:
    load = lambda who, k: statistics.median(json.load(open(f"{d}/{who}.{c}.{r}.json"))[k] for r in range(1, n + 1))
    tt, pt = load("toy", "tokens_per_s"), load("torch", "tokens_per_s")
    tm, pm = load("toy", "peak_rss_mb"), load("torch", "peak_rss_mb")
    print(f"{c}, medians of {n}: toy {tt:.1f} tokens/s, PyTorch {pt:.1f} tokens/s: toy / PyTorch = {tt / pt:.2f}; "
          f"peak RSS {tm:.0f} MB against {pm:.0f} MB ({pm / tm:.1f}x less)")
PY
