#!/usr/bin/env bash
# Does BF16 training keep up with F32 on the bundled model's text? Trains the same model
# from the same seed on the same KJV data twice, `--compute f32` and `--compute bf16`,
# and compares the validation losses: every evaluation's is printed, and the final one of
# the BF16 run must lie within TOL percent (default 1) of the F32 run's, or it exits 1.
#
# usage: scripts/check-bf16-training.sh [--shape small|bundled] [--steps N] [--tol PCT]
#                                       [-t THREADS] [--dir DIR]
#   --shape small (default): 4 layers of 128, 4 query and 2 KV heads, FFN 352, 8 x 256
#           tokens a step, 300 steps: a few minutes on two cores.
#   --shape bundled: the bundled model's shape and schedule (docs/training.md: 6 layers
#           of 256, 16 x 512 tokens a step, lr 2e-3 to 2e-4, warmup 50), 702 steps (its 6
#           epochs) unless --steps says otherwise: about 15 minutes a run on two cores.
#   --dir DIR keeps the corpus, the tokenizer and both runs' logs there (reused by a later
#           run); by default a temporary folder, removed at exit.
#   TOY: the toy binary (default build/toy beside this script).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
toy="${TOY:-$here/../build/toy}"
shape=small steps="" tol=1 threads=2 dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --shape) shape="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --tol) tol="$2"; shift 2 ;;
    -t) threads="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "check-bf16-training: unknown option $1 (--help lists them)" >&2; exit 2 ;;
  esac
done
case "$shape" in
  small)
    model=(--n-embd 128 --n-layer 4 --n-head 4 --n-head-kv 2 --n-ff 352 --ctx 256)
    sched=(--seq 256 --batch 8 --lr 2e-3 --min-lr 2e-4 --warmup 30 --eval-every 50)
    steps="${steps:-300}" ;;
  bundled)
    model=(--n-embd 256 --n-layer 6 --n-head 8 --n-head-kv 4 --n-ff 704 --ctx 512)
    sched=(--seq 512 --batch 16 --lr 2e-3 --min-lr 2e-4 --warmup 50 --eval-every 50)
    steps="${steps:-702}" ;;
  *) echo "check-bf16-training: --shape must be small or bundled, got '$shape'" >&2; exit 2 ;;
esac
[ -x "$toy" ] || { echo "check-bf16-training: no toy binary at $toy (make, or set TOY)" >&2; exit 2; }
if [ -z "$dir" ]; then
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
fi
mkdir -p "$dir"
[ -s "$dir/kjv-train.txt" ] && [ -s "$dir/kjv-valid.txt" ] || "$here/kjv-corpus.sh" "$dir"
[ -s "$dir/kjv-tok.gguf" ] ||
  "$toy" tokenizer train --vocab-size 4096 --data "$dir/kjv-train.txt" --out "$dir/kjv-tok.gguf" -t "$threads" > /dev/null

for c in f32 bf16; do
  echo "check-bf16-training: $shape shape, $steps steps, --compute $c" >&2
  start=$(date +%s)
  "$toy" train --name "kjv-$c" --vocab-from "$dir/kjv-tok.gguf" "${model[@]}" \
    --data "$dir/kjv-train.txt" --eval-data "$dir/kjv-valid.txt" "${sched[@]}" --steps "$steps" \
    --seed 42 -t "$threads" --compute "$c" --out "$dir/kjv-$c.gguf" > "$dir/kjv-$c.log" 2>&1 ||
    { cat "$dir/kjv-$c.log" >&2; exit 1; }
  echo "check-bf16-training: --compute $c took $(($(date +%s) - start)) s" >&2
done

# MODEL.csv: step,tokens,lr,loss,grad_norm,eval_loss,eval_ppl; eval_loss is empty on the
# steps without an evaluation, and the last step always has one
python3 - "$dir/kjv-f32.csv" "$dir/kjv-bf16.csv" "$tol" <<'PY'
import csv, sys
def evals(path):
    return {int(r["step"]): float(r["eval_loss"]) for r in csv.DictReader(open(path)) if r["eval_loss"]}
f, b, tol = evals(sys.argv[1]), evals(sys.argv[2]), float(sys.argv[3])
if sorted(f) != sorted(b) or not f:
    sys.exit(f"check-bf16-training: the runs evaluated at different steps: {sorted(f)} and {sorted(b)}")
print(f"{'step':>6} {'eval loss F32':>14} {'eval loss BF16':>15} {'BF16 - F32':>11} {'relative':>9}")
for s in sorted(f):
    print(f"{s:>6} {f[s]:>14.4f} {b[s]:>15.4f} {b[s] - f[s]:>+11.4f} {100 * (b[s] - f[s]) / f[s]:>+8.3f}%")
last = max(f)
rel = abs(b[last] - f[last]) / f[last]
ok = rel <= tol / 100
print(f"final validation loss after {last} steps: F32 {f[last]:.4f}, BF16 {b[last]:.4f}: "
      f"{100 * rel:.3f} % apart, {'within' if ok else 'NOT within'} {tol:g} %")
sys.exit(0 if ok else 1)
PY
