#!/usr/bin/env bash
# toy's design's LoRA-Q (toy finetune --lora-targets q --lora-per-head --lora-init-scale,
# --lora-from):
#  - the adapter is written as the design names it: one pair per query head,
#    blk.N.attn_q.head_H.lora_a.weight [n_embd, r] and lora_b.weight [r, head_dim], each
#    with its AdamW moments (.m, .v) beside it and toy.lora.adam_step; A starts with the
#    standard deviation asked for (0.01 within 3 %: thousands of draws); the loss falls;
#  - --lora-from continues it with its moments: 2 steps, then 2 more from the adapter,
#    give the adapter of 4 steps in one run bit for bit (one window of data, a constant
#    learning rate: the steps see the same batch and rate, so only the moments and their
#    step could differ);
#  - a file written from the design's naming rules alone (no general.type, adapter.type or
#    alpha; moments named "...lora_a.m"; a base tensor beside them) gives the same
#    perplexity as toy's own file, and trains on with its moments, which change the result;
#  - it applies at inference as the merged model computes (perplexity within 1e-3: F32,
#    associated differently), and on the base in the per-head layout as on the ggml one
#    (bit for bit: the same numbers), and trains there to the same bytes;
#  - bad combinations are one-line errors.
# Without the fixtures: an F32 copy of the bundled model.
. "$(dirname "$0")/../lib.sh"
want_fixtures

text="$tmp/text.txt"
if [ -n "$fixtures" ]; then
  cat "$fixtures/README.md" > "$text"
  base="$fixtures/models/llama-spm-f32.gguf" phi3="$fixtures/models/phi3-f16.gguf"
else
  bare_text "$text"
  base="$tmp/base.gguf" phi3=
  "$toy" quantize "$bundled" "$base" F32 > /dev/null 2>&1 || die "toy quantize to F32 failed"
fi
ph=(--lora-rank 4 --lora-targets q --lora-per-head --lora-init-scale 0.01 -t 2)

# the design's file
"$toy" finetune -m "$base" --data "$text" --seq 64 --batch 4 --steps 20 --warmup 2 --lr 1e-2 "${ph[@]}" \
  --out "$tmp/ph.gguf" 2> "$tmp/err" || die "per-head finetune: $(tail -1 "$tmp/err")"
fl=$(python3 "$py" loss-fell "$tmp/ph.csv" 0.1) || die "per-head LoRA loss $fl did not fall"
python3 - "$tmp/ph.gguf" "$base" <<EOF || die "the per-head adapter is not in the design's form"
import sys
sys.path.insert(0, "$src/tests")
from helpers import GGUF
a, b = GGUF(sys.argv[1]), GGUF(sys.argv[2])
arch = b.kv["general.architecture"].decode()
n_head, n_layer = b.kv[f"{arch}.attention.head_count"], b.kv[f"{arch}.block_count"]
n_embd = b.kv[f"{arch}.embedding_length"]
hd = n_embd // n_head
assert a.kv["toy.lora.adam_step"] == 20, a.kv.get("toy.lora.adam_step")
want = set()
for il in range(n_layer):
    for h in range(n_head):
        for ab, ne in (("a", [n_embd, 4]), ("b", [4, hd])):
            name = f"blk.{il}.attn_q.head_{h}.lora_{ab}.weight"
            for n in (name, name + ".m", name + ".v"):
                assert a.tensors[n][0] == ne, (n, a.tensors[n][0], ne)
                want.add(n)
assert set(a.tensors) == want, sorted(set(a.tensors) ^ want)[:4]
print(f"{len(want)} tensors: {n_layer} layers x {n_head} heads x (A, B) with .m and .v")
EOF
echo "per-head LoRA loss $fl"

# A's start: 1 step at a learning rate too small to move it
"$toy" finetune -m "$base" --data "$text" --seq 64 --batch 1 --steps 1 --lr 1e-9 --min-lr 1e-9 "${ph[@]}" \
  --out "$tmp/init.gguf" 2> "$tmp/err" || die "per-head finetune, 1 step: $(tail -1 "$tmp/err")"
/usr/bin/python3 - "$tmp/init.gguf" <<EOF || die "A does not start at the standard deviation 0.01"
import sys
sys.path.insert(0, "$src/tests")
import numpy as np
from helpers import GGUF
g = GGUF(sys.argv[1])
a = np.concatenate([g.array(n).ravel() for n in g.tensors if n.endswith("lora_a.weight")])
sd = float(a.std())
print(f"A's standard deviation {sd:.5f} over {a.size} values")
assert abs(sd - 0.01) < 3e-4, sd
EOF

# --lora-from with the moments: 2 + 2 steps = 4 steps, on one window at a constant rate
head -c 300 "$text" > "$tmp/one.txt"
n_tok=$("$toy" tokenize -m "$base" --json "$(cat "$tmp/one.txt")" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
one=(--data "$tmp/one.txt" --seq $((n_tok - 1)) --batch 1 --lr 1e-2 --min-lr 1e-2 --warmup 0)
"$toy" finetune -m "$base" "${one[@]}" --steps 4 "${ph[@]}" --out "$tmp/four.gguf" 2> "$tmp/err" \
  || die "4 steps: $(tail -1 "$tmp/err")"
"$toy" finetune -m "$base" "${one[@]}" --steps 2 "${ph[@]}" --out "$tmp/two.gguf" 2> "$tmp/err" \
  || die "2 steps: $(tail -1 "$tmp/err")"
"$toy" finetune -m "$base" "${one[@]}" --steps 2 --lora-from "$tmp/two.gguf" -t 2 --out "$tmp/two-two.gguf" \
  2> "$tmp/err" || die "--lora-from: $(tail -1 "$tmp/err")"
/usr/bin/python3 - "$tmp/four.gguf" "$tmp/two-two.gguf" "$tmp/two.gguf" <<EOF || die "--lora-from does not continue the run"
import sys
sys.path.insert(0, "$src/tests")
import numpy as np
from helpers import GGUF
four, cont, two = (GGUF(p) for p in sys.argv[1:])
assert cont.kv["toy.lora.adam_step"] == 4, cont.kv["toy.lora.adam_step"]
for n in four.tensors:
    assert np.array_equal(four.array(n), cont.array(n)), n
moved = sum(not np.array_equal(two.array(n), cont.array(n)) for n in two.tensors)
assert moved == len(two.tensors), moved
print(f"2 steps + 2 from the adapter = 4 steps: {len(four.tensors)} tensors the same bits")
EOF

# a file as the design wrote it, from its naming rules alone (tests/helpers.py's writer):
# no general.type, adapter.type or alpha, the moments as "...lora_a.m", a base tensor beside
python3 - "$tmp/two.gguf" "$base" "$tmp/design.gguf" "$tmp/design-bare.gguf" <<EOF || die "writing the design's file"
import sys
sys.path.insert(0, "$src/tests")
from helpers import GGUF, write_gguf
a, b = GGUF(sys.argv[1]), GGUF(sys.argv[2])
def raw(g, name):
    ne, typ, off = g.tensors[name]
    n = 4
    for d in ne:
        n *= d
    return ne, g.data[off:off + n]
pairs = {n: raw(a, n) for n in a.tensors if n.endswith(".weight")}
moments = {n[:-len(".weight.m")] + n[-2:]: raw(a, n) for n in a.tensors if not n.endswith(".weight")}
kv = {"general.architecture": b.kv["general.architecture"].decode()}
write_gguf(sys.argv[3], kv, {"output_norm.weight": raw(b, "output_norm.weight"), **pairs, **moments})
write_gguf(sys.argv[4], kv, pairs)
print(f"the design's file: {len(pairs)} per-head tensors, {len(moments)} moments, a base tensor")
EOF
ppl_of() { "$toy" perplexity -m "$base" -f "$text" -c 128 --chunks 3 -t 2 --lora "$1" > "$tmp/p.out" 2> "$tmp/p.err" \
  && python3 "$py" ppl "$tmp/p.out" || die "perplexity --lora $1: $(tail -1 "$tmp/p.err")"; }
p_two=$(ppl_of "$tmp/two.gguf") p_design=$(ppl_of "$tmp/design.gguf")
[ -n "$p_two" ] && [ "$p_design" = "$p_two" ] || die "the design's file gives perplexity $p_design, toy's $p_two"
for f in design design-bare; do
  "$toy" finetune -m "$base" "${one[@]}" --steps 2 --lora-from "$tmp/$f.gguf" -t 2 --out "$tmp/$f-more.gguf" \
    2> "$tmp/err" || die "--lora-from the design's file ($f): $(tail -1 "$tmp/err")"
done
cmp -s "$tmp/design-more.gguf" "$tmp/design-bare-more.gguf" && die "--lora-from: the design's moments change nothing"
echo "the design's file: perplexity $p_design as toy's own; trains on with its moments (and without)"

# inference: as merged, and on the per-head layout of the same base
ppl() { "$toy" perplexity -m "$1" -f "$text" -c 128 --chunks 3 -t 2 "${@:2}" > "$tmp/p.out" 2> "$tmp/p.err" \
  && python3 "$py" ppl "$tmp/p.out" || { die "toy perplexity $*: $(tail -1 "$tmp/p.err")"; echo 0; }; }
"$toy" lora merge -m "$base" --lora "$tmp/ph.gguf" --out "$tmp/merged.gguf" 2> "$tmp/err" \
  || die "lora merge: $(tail -1 "$tmp/err")"
p_base=$(ppl "$base") p_lora=$(ppl "$base" --lora "$tmp/ph.gguf") p_merged=$(ppl "$tmp/merged.gguf")
python3 "$py" close "$p_lora" "$p_merged" 1e-3 || die "perplexity with the adapter $p_lora, merged $p_merged"
[ "$p_lora" != "$p_base" ] || die "the adapter changes nothing ($p_base)"
echo "perplexity: base $p_base, --lora (per head) $p_lora, merged $p_merged"
"$toy" convert "$base" "$tmp/base-ph.gguf" --layout per-head 2> "$tmp/err" || die "convert: $(tail -1 "$tmp/err")"
p_ph=$(ppl "$tmp/base-ph.gguf" --lora "$tmp/ph.gguf")
[ "$p_ph" = "$p_lora" ] || die "on the per-head base $p_ph, on the ggml one $p_lora"
"$toy" finetune -m "$tmp/base-ph.gguf" "${one[@]}" --steps 2 "${ph[@]}" --out "$tmp/two-ph.gguf" 2> "$tmp/err" \
  || die "per-head LoRA of a per-head base: $(tail -1 "$tmp/err")"
cmp -s "$tmp/two.gguf" "$tmp/two-ph.gguf" || die "per-head LoRA: the per-head base trains other bytes"

# bad combinations
bad() { # the message wanted, then the options
  "$toy" finetune -m "$base" --data "$text" --out "$tmp/x.gguf" "${@:2}" 2> "$tmp/err" && die "accepted: ${*:2}"
  grep -qF -- "$1" "$tmp/err" || die "${*:2}: $(cat "$tmp/err")"
}
bad "adapts the query only: add --lora-targets q" --lora-rank 4 --lora-per-head
bad "--lora-per-head needs --lora-rank R (a LoRA run)" --lora-targets q --lora-per-head
bad "--lora-targets shapes a new adapter; --lora-from's adapter has its own" --lora-from "$tmp/ph.gguf" --lora-targets q
bad "an adapter of rank 4, and the run asks for rank 8" --lora-from "$tmp/ph.gguf" --lora-rank 8
bad "LoRA init scale -1 must be" --lora-rank 4 --lora-init-scale -1
[ -n "$phi3" ] && bad "per-head LoRA needs a query matrix of its own" -m "$phi3" --lora-rank 4 --lora-targets q \
  --lora-per-head
finish
