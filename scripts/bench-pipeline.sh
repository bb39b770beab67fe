#!/usr/bin/env bash
# bench-pipeline.sh MODEL.gguf [RANKS] — pipeline parallelism against one process: prompt
# processing (toy bench, 512 tokens) and the throughput of 8 concurrent streams (toy serve
# and scripts/bench-serve.py), with RANKS processes of 1 thread each (default 2) against
# one process of RANKS threads. Prints medians and ratios.
#
# On several hosts, give mpirun's own options in MPIRUN_ARGS (a hostfile, the network):
#   MPIRUN_ARGS="--hostfile hosts --mca btl_tcp_if_include eth0" scripts/bench-pipeline.sh m.gguf 4
# The model must be at the same path on every host.
set -euo pipefail
model=${1:?usage: bench-pipeline.sh MODEL.gguf [RANKS]}
ranks=${2:-2}
here=$(cd "$(dirname "$0")" && pwd)
toy=${TOY:-$here/../build/toy}
mpi=(mpirun --allow-run-as-root --oversubscribe -np "$ranks" ${MPIRUN_ARGS:-})
port=$(python3 "$here/../tests/helpers.py" free-port)
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null; rm -rf "$tmp"' EXIT

# prefill|serving THREADS LAUNCHER...: the launcher is toy itself, or mpirun ... toy
prefill() { local t=$1; shift; "$@" bench -m "$model" -p 512 -n 0 -r 3 -t "$t" --json 2> /dev/null | python3 -c \
  'import json, sys; print(json.load(sys.stdin)["prompt_tokens_per_s"])'; }
serving() { # 8 streams of 64 tokens, aggregate tokens/s (median of 3 rounds)
  local t=$1; shift
  "$@" serve -m "$model" --port "$port" --parallel 8 -t "$t" 2> "$tmp/serve.log" > /dev/null &
  local pid=$! i
  for i in $(seq 1 600); do grep -q "http://" "$tmp/serve.log" 2> /dev/null && break; sleep 0.1; done
  python3 "$here/bench-serve.py" --port "$port" --clients 8 --tokens 64 --rounds 3 --json \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["aggregate_tokens_per_s"])'
  kill $pid
  wait $pid 2> /dev/null || true
}

echo "model: $model; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
p1=$(prefill "$ranks" "$toy") pn=$(prefill 1 "${mpi[@]}" "$toy")
s1=$(serving "$ranks" "$toy") sn=$(serving 1 "${mpi[@]}" "$toy")
python3 - "$ranks" "$p1" "$pn" "$s1" "$sn" <<'PY'
import sys
r, p1, pn, s1, sn = sys.argv[1], *map(float, sys.argv[2:])
print(f"| measure | 1 process x {r} threads | {r} ranks x 1 thread | ratio |")
print("|---|---|---|---|")
print(f"| prompt tokens/s (512) | {p1:.1f} | {pn:.1f} | {pn / p1:.2f} |")
print(f"| 8 streams, tokens/s | {s1:.1f} | {sn:.1f} | {sn / s1:.2f} |")
PY
