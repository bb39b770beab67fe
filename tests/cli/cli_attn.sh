#!/usr/bin/env bash
# --attn plain (toy_attn's TOY_ATTN_PLAIN: the scores, their softmax and the product with V
# each materialised) on the bundled model: in its F32 conversion, logits within 1e-4 of the
# fused path's (the two differ only in rounding: the sums run in another order; with
# quantized weights the activations are quantized too, and such a difference can move one
# of them a step, up to 0.1 here), the same bits on 1 and 2 threads
# and batched or token by token; its trace has the scores and the softmax (each row of the
# softmax sums to 1: mean|x| over [tokens x heads*cells] is 1 / cells); toy serve answers
# with it as toy run does; a value toy does not know is an error. (test_inference_fixtures
# holds it to llama.cpp's logits of every fixture model.)
. "$(dirname "$0")/../lib.sh"
m="$bundled"
[ -f "$m" ] || skip "$m not found"
"$toy" quantize "$m" "$tmp/f32.gguf" F32 -t 2 > /dev/null 2>&1 || die "toy quantize $m F32"
m="$tmp/f32.gguf"
toks="1,40,60,80,100,120,140,160,180,200,220,240"
"$toy" eval -m "$m" --tokens "$toks" --dump-logits "$tmp/fused.bin" -t 2 2> "$tmp/err" || die "eval: $(tail -1 "$tmp/err")"
"$toy" eval -m "$m" --tokens "$toks" --dump-logits "$tmp/plain.bin" --attn plain -t 2 2> "$tmp/err" \
  || die "eval --attn plain: $(tail -1 "$tmp/err")"
"$toy" eval -m "$m" --tokens "$toks" --dump-logits "$tmp/plain1.bin" --attn plain -t 1 --mode seq 2> "$tmp/err" \
  || die "eval --attn plain -t 1 --mode seq: $(tail -1 "$tmp/err")"
cmp -s "$tmp/plain.bin" "$tmp/plain1.bin" || die "--attn plain: other bits on 1 thread, token by token"
python3 - "$tmp/fused.bin" "$tmp/plain.bin" << 'PY' || die "--attn plain: logits differ from the fused path's"
import array, sys
f, p = (array.array("f", open(x, "rb").read()) for x in sys.argv[1:3])
assert len(f) == len(p) > 0
d = max(abs(a - b) for a, b in zip(f, p))
assert d < 1e-4, d
print(f"--attn plain: logits within {d:.1e} of the fused path's")
PY

"$toy" run -m "$m" -p "In the beginning" -n 4 --temp 0 --attn plain --trace -t 2 > "$tmp/run.txt" 2> "$tmp/trace"
grep -q "^trace L0.kq " "$tmp/trace" || die "--attn plain --trace: no L0.kq"
grep -q "^trace L0.kq_soft " "$tmp/trace" || die "--attn plain --trace: no L0.kq_soft"
n_head=$("$toy" info --json "$m" | python3 -c 'import json, sys; print(json.load(sys.stdin)["hyperparameters"]["attention.head_count"])')
python3 - "$tmp/trace" "$n_head" << 'PY' || die "the softmax rows do not sum to 1"
import re, sys
n_head, seen = int(sys.argv[2]), 0
for line in open(sys.argv[1]):
    m = re.match(r"trace L\d+\.kq_soft +\[(\d+) x (\d+)\] min +(\S+) max +(\S+) mean\|x\| +(\S+)", line)
    if not m:
        continue
    n_kv, lo, hi, mean = int(m[2]) // n_head, float(m[3]), float(m[4]), float(m[5])
    # each head's n_kv probabilities sum to 1: their mean is 1 / n_kv
    assert lo >= 0 and hi <= 1 and abs(mean * n_kv - 1) < 1e-3, line
    seen += 1
assert seen >= 4, seen
print(f"kq_soft: {seen} traces, each head's row a distribution")
PY
"$toy" run -m "$m" -p "In the beginning" -n 4 --temp 0 -t 2 > "$tmp/fused.txt" 2> /dev/null
cmp -s "$tmp/run.txt" "$tmp/fused.txt" || die "--attn plain: other greedy text than fused"

serve_start -m "$m" --attn plain --parallel 2
if [ -n "$port" ]; then
  python3 - "$port" "$tmp/run.txt" << 'PY' || die "toy serve --attn plain"
import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=300)  # a hang, not a slow machine
c.request("POST", "/v1/completions", json.dumps({"prompt": "In the beginning", "max_tokens": 4, "temperature": 0}),
          {"Content-Type": "application/json"})
r = c.getresponse()
body = json.loads(r.read())
want = open(sys.argv[2], encoding="utf-8").read().removeprefix("In the beginning").removesuffix("\n")
assert r.status == 200 and body["choices"][0]["text"] == want, (r.status, body, want)
PY
  serve_stop
fi

for cmd in "run -p x -n 1" "eval --tokens 1,2 --dump-logits $tmp/x.bin" "perplexity -f $tmp/run.txt"; do
  "$toy" $cmd -m "$m" --attn bogus > /dev/null 2> "$tmp/err" && die "toy $cmd --attn bogus accepted"
  grep -q -- "--attn must be fused or plain, got 'bogus'" "$tmp/err" || die "toy $cmd --attn bogus: $(tail -1 "$tmp/err")"
done
finish
