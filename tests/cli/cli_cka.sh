#!/usr/bin/env bash
# toy cka: a model against itself gives 1 on the diagonal (and a symmetric matrix);
# models of different width and depth compare (an n_layer_a x n_layer_b matrix in
# [0, 1]); a quantized model is close to its F32 original layer for layer; different
# tokenizers are an error that says so; --tap compares any per-layer tap, as numpy's CKA of
# the same taps traced by toy eval. Without the fixtures: a llama model of toy init
# with the bundled model's tokenizer, its Q8_0 copy, and one with a tokenizer of toy
# tokenizer train, on the source tree's text.
. "$(dirname "$0")/../lib.sh"
want_fixtures
if [ -n "$fixtures" ]; then
  f32="$fixtures/models/llama-spm-f32.gguf" q8="$fixtures/models/llama-spm-q8_0.gguf"
  other="$fixtures/models/llama3-bpe-f16.gguf"   # another tokenizer
  text="$fixtures/README.md"
else
  f32="$tmp/f32.gguf" q8="$tmp/q8_0.gguf" other="$tmp/other.gguf" text="$tmp/text.txt"
  bare_text "$text"
  bare_model "$f32" llama 64 2 4 2 128 || fail=1
  "$toy" quantize "$f32" "$q8" Q8_0 > /dev/null 2>&1 || die "toy quantize failed"
  "$toy" tokenizer train --vocab-size 300 --data "$text" --out "$tmp/tok.gguf" 2> /dev/null || die "toy tokenizer train failed"
  "$toy" init --arch llama --n-embd 64 --n-layer 2 --n-head 4 --n-ff 128 --ctx 512 --vocab-from "$tmp/tok.gguf" \
    --out "$other" > /dev/null 2>&1 || die "toy init --vocab-from the trained tokenizer failed"
fi

"$toy" cka -m "$f32" -m "$f32" --data "$text" --tokens 200 --json \
  > "$tmp/self.json" 2> "$tmp/err" || die "self: $(cat "$tmp/err")"
"$toy" init --arch llama --n-embd 96 --n-layer 3 --n-head 4 --n-head-kv 2 --n-ff 192 --ctx 512 \
  --vocab-from "$f32" --out "$tmp/narrow.gguf" > /dev/null 2>&1 || die "toy init failed"
"$toy" cka -m "$f32" -m "$tmp/narrow.gguf" --data "$text" --tokens 200 --json \
  > "$tmp/other.json" 2> "$tmp/err" || die "different widths: $(cat "$tmp/err")"
"$toy" cka -m "$f32" -m "$q8" --data "$text" --tokens 200 --json \
  > "$tmp/q8.json" 2> "$tmp/err" || die "Q8_0: $(cat "$tmp/err")"
python3 - "$tmp/self.json" "$tmp/other.json" "$tmp/q8.json" <<'PY' || die "CKA matrices"
import json, sys
s, o, q = (json.load(open(p)) for p in sys.argv[1:])
m = s["cka"]
assert s["layers_a"] == s["layers_b"] == len(m), s
for i in range(len(m)):
    assert abs(m[i][i] - 1) < 1e-6, ("diagonal", i, m[i][i])
    for j in range(len(m)):
        assert abs(m[i][j] - m[j][i]) < 1e-6, ("symmetry", i, j)
assert o["layers_b"] == 3 and len(o["cka"]) == o["layers_a"] and all(len(r) == 3 for r in o["cka"]), o
assert all(0 <= v <= 1 + 1e-9 for r in o["cka"] for v in r), o["cka"]
assert all(q["cka"][i][i] > 0.95 for i in range(q["layers_a"])), q["cka"]
print("self:", m, "\nQ8_0 diagonal:", [round(q["cka"][i][i], 4) for i in range(q["layers_a"])])
PY
# --tap: any per-layer tap. attn_norm and ffn_act of A against the narrow model, checked
# against linear CKA computed here from the same taps (toy eval --trace, JSON) in float64
toks=$("$toy" tokenize -m "$f32" --json "$(head -c 3000 "$text")" \
  | python3 -c 'import json, sys; print(",".join(map(str, json.load(sys.stdin)[:64])))')
for tap in attn_norm ffn_act resid; do
  "$toy" cka -m "$f32" -m "$tmp/narrow.gguf" --data "$text" --tokens 64 --tap $tap --json > "$tmp/tap.json" 2> "$tmp/err" \
    || { die "--tap $tap: $(cat "$tmp/err")"; continue; }
  name=$tap
  [ "$tap" = resid ] && name=out
  for m in "$f32" "$tmp/narrow.gguf"; do
    "$toy" eval -m "$m" --tokens "$toks" --dump-logits "$tmp/l.bin" -t 2 --trace "L*.$name" --trace-format json \
      --trace-file "$tmp/$(basename "$m").jsonl" 2> "$tmp/err" || die "eval --trace L*.$name: $(cat "$tmp/err")"
  done
  /usr/bin/python3 - "$tmp/tap.json" "$tmp/$(basename "$f32").jsonl" "$tmp/narrow.gguf.jsonl" "$tap" <<'PY' || die "--tap $tap: not the CKA of the taps"
import json, sys
import numpy as np
r = json.load(open(sys.argv[1]))
assert r["tap"] == sys.argv[4] and r["tokens"] == 64, (r["tap"], r["tokens"])
def taps(path):
    return [np.array(json.loads(line)["values"], dtype=np.float64) for line in open(path)]
def cka(x, y):
    x, y = x - x.mean(0), y - y.mean(0)
    gx, gy = x @ x.T, y @ y.T
    return (gx * gy).sum() / np.sqrt((gx * gx).sum() * (gy * gy).sum())
a, b = taps(sys.argv[2]), taps(sys.argv[3])
assert len(a) == r["layers_a"] and len(b) == r["layers_b"] == 3 and a[0].shape[0] == 64, (len(a), len(b), a[0].shape)
worst = max(abs(cka(x, y) - r["cka"][i][j]) for i, x in enumerate(a) for j, y in enumerate(b))
assert worst < 1e-5, worst
print(f"--tap {sys.argv[4]}: {len(a)} x {len(b)} CKA, within {worst:.1e} of numpy's on the traced values")
PY
done
"$toy" cka -m "$f32" -m "$f32" --data "$text" --tokens 64 --tap attn_post_norm 2> "$tmp/err" \
  && die "--tap attn_post_norm accepted on a llama"
grep -q "has no tap L0.attn_post_norm" "$tmp/err" || die "--tap attn_post_norm: $(cat "$tmp/err")"

"$toy" cka -m "$f32" -m "$other" --data "$text" 2> "$tmp/err" \
  && die "different tokenizers accepted"
grep -q "different tokenizers" "$tmp/err" || die "different tokenizers: $(cat "$tmp/err")"
"$toy" cka -m "$f32" --data "$text" 2> "$tmp/err" && die "one model accepted"
grep -q "needs -m A -m B" "$tmp/err" || die "one model: $(cat "$tmp/err")"
finish
