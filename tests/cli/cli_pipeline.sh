#!/usr/bin/env bash
# Pipeline parallelism: `mpirun -np N toy run|eval|perplexity|serve` splits the model's
# layers into N stages, one per process, on this machine:
#  - eval's logits of 200 tokens (in micro-batches that flow from stage to stage) are the
#    one process's bytes with 2 and 3 ranks, and with --split; greedy text and perplexity
#    are equal too;
#  - toy serve under mpirun answers 8 concurrent streams (greedy and seeded sampling) as
#    one process does, with 2 and 3 ranks (its slots in as many groups, each group's batch
#    in flight while the others' are), the second time from the prompt cache;
#  - each rank holds its share of the weights: on a TinyLlama-shaped Q4_K_M model of 8
#    layers, each of 2 ranks' peak RSS is at most 60 % of one process's (plain build);
#  - killing rank 1 of a serving pipeline ends every rank (none is left running; the time
#    it took is printed), and mpirun names the rank and its host;
#  - a split that cannot be made, or a rank that cannot open the model, is an error on rank
#    0 that says why (and which rank, on which host).
# Skipped without MPI in the build or without mpirun.
. "$(dirname "$0")/../lib.sh"
"$toy" --version | grep -q "mpirun: yes" || skip "toy was built without MPI (libopenmpi-dev)"
command -v mpirun > /dev/null || skip "no mpirun (openmpi-bin)"
# every mpirun under timeout(1), so that a hang fails the check rather than the whole test:
# 300 s, a hang rather than a slow machine (sanitized, on one loaded core)
mpi() { local n=$1; shift; timeout -k 5 300 mpirun --allow-run-as-root --oversubscribe -np "$n" "$toy" "$@"; }
export LSAN_OPTIONS="suppressions=$tests/cli/lsan-openmpi.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export OMPI_MCA_mca_base_component_disable_dlclose=1
[ "${TOY_SANITIZED:-0}" = 1 ] && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
m=$bundled # 6 layers
[ -f "$m" ] || skip "$m not found"

# eval: the same bytes
toks=$(seq -s, 10 19 4000 | cut -d, -f1-200)
"$toy" eval -m "$m" --tokens "$toks" --dump-logits "$tmp/l1.bin" -t 2 2> "$tmp/err" || die "eval: $(tail -1 "$tmp/err")"
for np in 2 3; do
  mpi $np eval -m "$m" --tokens "$toks" --dump-logits "$tmp/l$np.bin" -t 1 > /dev/null 2> "$tmp/err" \
    || { die "eval, $np ranks: $(grep -v '^-' "$tmp/err" | head -3)"; continue; }
  cmp -s "$tmp/l1.bin" "$tmp/l$np.bin" || die "eval with $np ranks: other logits than one process"
done
mpi 2 eval -m "$m" --tokens "$toks" --dump-logits "$tmp/ls.bin" -t 1 --split 1,5 > /dev/null 2> "$tmp/err" \
  || die "eval --split 1,5: $(grep -v '^-' "$tmp/err" | head -3)"
cmp -s "$tmp/l1.bin" "$tmp/ls.bin" || die "eval --split 1,5: other logits than one process"
echo "eval: 200 tokens' logits with 2, 3 ranks and --split 1,5 are one process's bytes"

# greedy text and perplexity
"$toy" run -m "$m" -p "And it came to pass" -n 40 --temp 0 -t 2 > "$tmp/r1.txt" 2> /dev/null || die "run"
for np in 2 3; do
  mpi $np run -m "$m" -p "And it came to pass" -n 40 --temp 0 -t 1 > "$tmp/r2.txt" 2> "$tmp/err" \
    || die "run, $np ranks: $(grep -v '^-' "$tmp/err" | head -3)"
  cmp -s "$tmp/r1.txt" "$tmp/r2.txt" || die "run with $np ranks: other text: $(head -c 200 "$tmp/r2.txt")"
done
bare_text "$tmp/text.txt"
ppl() { "$@" perplexity -m "$m" -f "$tmp/text.txt" -c 128 --chunks 4 -t 1 2> /dev/null | grep -o 'PPL = [0-9.]*'; }
p1=$(ppl "$toy") p2=$(ppl mpi 2) p3=$(ppl mpi 3)
[ -n "$p1" ] && [ "$p1" = "$p2" ] && [ "$p1" = "$p3" ] || die "perplexity: one process $p1, 2 ranks $p2, 3 ranks $p3"
echo "run: the same 40 greedy tokens with 2 and 3 ranks; perplexity: $p1 with 1 process, 2 and 3 ranks"

# toy serve: 8 streams at once, as one process answers them
answers() { # PORT OUT: 8 concurrent completions, greedy and seeded, one answer a line in order
  python3 - "$1" > "$2" <<'PY'
import http.client, json, sys, threading
port, out = int(sys.argv[1]), [None] * 8
prompts = ["And it came to pass", "The LORD is my shepherd", "In the beginning", "Blessed are the meek",
           "Then said Jesus", "And Moses went up", "Hear, O Israel", "Let there be light"]
def ask(i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)  # a hang, not a slow machine
    body = {"prompt": prompts[i], "max_tokens": 24, "temperature": 0 if i % 2 else 0.9, "seed": i}
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    out[i] = json.loads(c.getresponse().read())["choices"][0]["text"]
ts = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
print("\n".join(json.dumps(x) for x in out))
PY
}
serve_start -m "$m" --parallel 8
[ -n "$port" ] && answers "$port" "$tmp/a1.txt" && serve_stop
descendants() { local c; for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
rank_pid() { # the process of rank $1 under the mpirun of this test started last ($mpi_pid)
  local p
  for p in $(descendants "$mpi_pid"); do
    tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "$p"
  done
}
# 3 ranks: the slots in 3 groups whose batches are in flight at once; twice, the second
# time with the prompts in the cache
mpi 3 serve -m "$m" --port 0 --parallel 8 -t 1 > /dev/null 2> "$tmp/serve3.log" &
mpi_pid=$!
port3=$(serve_port "$tmp/serve3.log" $mpi_pid)
if [ -n "$port3" ]; then
  for round in 1 2; do
    answers "$port3" "$tmp/a3.txt" || die "serve, 3 ranks: the client failed"
    cmp -s "$tmp/a1.txt" "$tmp/a3.txt" || die "serve with 3 ranks, round $round: $(diff "$tmp/a1.txt" "$tmp/a3.txt" | head -4)"
  done
  kill -TERM "$(rank_pid 0)" # toy serve's own shutdown: rank 0 exits, and with it the others
  wait $mpi_pid 2> /dev/null || die "serve, 3 ranks: no clean exit after SIGTERM ($?)"
else
  die "serve, 3 ranks: did not start: $(grep -v '^-' "$tmp/serve3.log" | head -3)"
fi
mpi 2 serve -m "$m" --port 0 --parallel 8 -t 1 > /dev/null 2> "$tmp/serve2.log" &
mpi_pid=$!
at_exit "kill $mpi_pid 2> /dev/null"
port2=$(serve_port "$tmp/serve2.log" $mpi_pid)
if [ -n "$port2" ]; then
  answers "$port2" "$tmp/a2.txt" || die "serve, 2 ranks: the client failed"
  cmp -s "$tmp/a1.txt" "$tmp/a2.txt" || die "serve with 2 ranks answers otherwise: $(diff "$tmp/a1.txt" "$tmp/a2.txt" | head -4)"
  echo "serve: 8 concurrent answers with 3 ranks (twice) and 2 ranks are one process's"
  # a rank that dies ends them all (mpirun, the ranks, the mpi() around them), named; 120 s
  # is a hang, not a slow machine
  rank1=$(rank_pid 1) all=$(proc_ids $mpi_pid $(descendants "$mpi_pid"))
  if [ -n "$rank1" ]; then
    t0=${EPOCHREALTIME/,/.}
    kill -9 "$rank1"
    poll_until 120 ended $all || die "killing rank 1: process $left is left 120 s later: $(tr '\0' ' ' < "/proc/$left/cmdline" 2> /dev/null)"
    secs=$(awk -v t0="$t0" -v t1="${EPOCHREALTIME/,/.}" 'BEGIN { printf "%.1f", t1 - t0 }')
    wait $mpi_pid 2> /dev/null
    grep -q "rank 1 .* on node .* exited on signal 9" "$tmp/serve2.log" || die "killing rank 1: $(tail -5 "$tmp/serve2.log")"
    echo "kill -9 of rank 1: all $(wc -w <<< "$all") processes ended in $secs s; mpirun: $(grep -o 'process rank 1 .*' "$tmp/serve2.log")"
  else
    die "serve, 2 ranks: no process of rank 1 found"
  fi
else
  die "serve, 2 ranks: did not start: $(grep -v '^-' "$tmp/serve2.log" | head -3)"
fi

# splits that cannot be made
mpi 2 eval -m "$m" --tokens 1,2 --dump-logits "$tmp/x.bin" --split 2,2,2 > /dev/null 2> "$tmp/err" && die "--split of 3 stages on 2 ranks accepted"
grep -q -- "--split gives 3 stages, and there are 2 processes" "$tmp/err" || die "--split 2,2,2: $(grep toy "$tmp/err")"
mpi 2 eval -m "$m" --tokens 1,2 --dump-logits "$tmp/x.bin" --split 6,1 > /dev/null 2> "$tmp/err" && die "--split 6,1 accepted"
grep -q -- "--split gives 7 layers, .* has 6" "$tmp/err" || die "--split 6,1: $(grep toy "$tmp/err")"
mpi 7 eval -m "$m" --tokens 1,2 --dump-logits "$tmp/x.bin" > /dev/null 2> "$tmp/err" && die "7 stages of 6 layers accepted"
grep -q "6 layers cannot be split into 7 stages" "$tmp/err" || die "-np 7: $(grep toy "$tmp/err")"
# a rank that cannot load the model (a path that is not there on its host: here, another
# working directory) is an error on rank 0 that names it
mkdir "$tmp/a" "$tmp/b"
ln -s "$m" "$tmp/a/model.gguf"
timeout -k 5 300 mpirun --allow-run-as-root --oversubscribe -np 1 --wdir "$tmp/a" "$toy" eval -m model.gguf --tokens 1,2 \
  --dump-logits "$tmp/x.bin" : -np 1 --wdir "$tmp/b" "$toy" eval > /dev/null 2> "$tmp/err" && die "a rank without the model accepted"
grep -q "toy eval: rank 1 (.*): model.gguf: cannot open" "$tmp/err" || die "a rank without the model: $(grep toy "$tmp/err")"
for bad in 3, ,3 0,6 x 3,,3; do
  mpi 2 eval -m "$m" --tokens 1,2 --dump-logits "$tmp/x.bin" --split "$bad" > /dev/null 2> "$tmp/err" && die "--split '$bad' accepted"
  grep -q -- "--split must be layer counts, one per process ('10,12'), got '$bad'" "$tmp/err" \
    || die "--split '$bad': $(grep toy "$tmp/err")"
done
"$toy" eval -m "$m" --tokens 1,2 --dump-logits "$tmp/x.bin" --split 3,3 > /dev/null 2> "$tmp/err" && die "--split without mpirun accepted"
grep -q "for a pipeline of processes (mpirun -np N)" "$tmp/err" || die "--split alone: $(cat "$tmp/err")"

# memory: each rank maps the file and touches its own layers only
if [ "${TOY_SANITIZED:-0}" != 1 ]; then
  big="$tmp/tinyllama-8.gguf"
  "$toy" init --arch llama --preset tinyllama-1.1b --n-layer 8 --vocab-from "$m" --type Q4_K_M --out "$big" -t 2 \
    > /dev/null 2>&1 || die "toy init of a TinyLlama-shaped model"
  toks=$(seq -s, 100 50 3300)
  /usr/bin/time -f "%M" "$toy" eval -m "$big" --tokens "$toks" --dump-logits "$tmp/b1.bin" -t 2 2> "$tmp/rss1" \
    || die "eval of the TinyLlama-shaped model"
  # each rank's figure to a file of its own (two ranks writing one stream interleave)
  timeout -k 5 300 mpirun --allow-run-as-root --oversubscribe -np 2 sh -c \
    'exec /usr/bin/time -f %M -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' "$tmp/rss2" "$toy" eval -m "$big" \
    --tokens "$toks" --dump-logits "$tmp/b2.bin" -t 1 > /dev/null 2> "$tmp/err" \
    || die "eval of the TinyLlama-shaped model, 2 ranks: $(grep toy "$tmp/err")"
  cmp -s "$tmp/b1.bin" "$tmp/b2.bin" || die "the TinyLlama-shaped model: other logits with 2 ranks"
  one=$(tail -1 "$tmp/rss1") ranks="$(tail -1 "$tmp/rss2.0") $(tail -1 "$tmp/rss2.1")"
  for r in $ranks; do
    [ $((r * 100)) -le $((one * 60)) ] || die "a rank's peak RSS $r KB is over 60 % of one process's $one KB"
  done
  echo "TinyLlama-shaped Q4_K_M, 8 layers: one process $one KB peak RSS; 2 ranks: $ranks KB"
fi
finish
