#!/usr/bin/env bash
# toy convert --layout per-head|ggml: llama.cpp's layout to the per-head layout of toy's
# design (blk.N.attn_q.head_H.weight and .bias) and back. The per-head file has one
# tensor per head and no toy.ggml_native; both give the original's logits bit for bit; the
# round trip gives back every tensor byte for byte (and the key, the design's mark of the
# ggml layout), which llama.cpp reads as the original. Errors: a file already in the
# layout, a head missing, a bad --layout. F32, F16 with Q/K/V biases (qwen2) and Q4_K_M.
# A per-head file trains (fully or with LoRA) as its ggml twin does, to the bit.
. "$(dirname "$0")/../lib.sh"
want_fixtures
if [ -n "$fixtures" ]; then
  models="$fixtures/models/llama-spm-f32.gguf $fixtures/models/qwen2-f16.gguf $fixtures/models/llama-spm-q4_k_m.gguf"
else
  bare_model "$tmp/llama-f32.gguf" llama 64 2 4 2 128 || fail=1
  bare_model "$tmp/qwen2-f16.gguf" qwen2 64 2 4 2 128 --type F16 || fail=1
  bare_model "$tmp/llama-q4_k_m.gguf" llama 256 2 4 2 512 --type Q4_K_M || fail=1
  models="$tmp/llama-f32.gguf $tmp/qwen2-f16.gguf $tmp/llama-q4_k_m.gguf"
fi
toks="1,20,30,40,50,60,70"
text="$tmp/text.txt"
bare_text "$text"
llama_ppl="$llama_cpp/bin/llama-perplexity"
[ -x "$llama_ppl" ] || llama_ppl=

for m in $models; do
  name=$(basename "$m" .gguf)
  ph="$tmp/$name-ph.gguf" back="$tmp/$name-back.gguf"
  "$toy" convert "$m" "$ph" --layout per-head 2> "$tmp/err" || { die "$name: to per-head: $(tail -1 "$tmp/err")"; continue; }
  "$toy" convert "$ph" "$back" --layout ggml 2> "$tmp/err" || { die "$name: back: $(tail -1 "$tmp/err")"; continue; }
  for f in "$m" "$ph" "$back"; do
    "$toy" eval -m "$f" --tokens "$toks" --dump-logits "$f.bin" -t 2 2> "$tmp/err" || die "$name: eval $f: $(tail -1 "$tmp/err")"
  done
  cmp -s "$m.bin" "$ph.bin" || die "$name: the per-head file gives other logits"
  cmp -s "$m.bin" "$back.bin" || die "$name: the round trip gives other logits"
  python3 - "$m" "$ph" "$back" << 'PY' || die "$name: the files"
import os, sys
sys.path.insert(0, os.environ["TOY_SOURCE_DIR"] + "/tests")
from helpers import GGUF
a, p, b = (GGUF(x) for x in sys.argv[1:4])
order = list(a.tensors)
ends = {}
def nbytes(g, name):  # up to the next tensor's offset (or the end of the file)
    offs = sorted(off for _, _, off in g.tensors.values())
    off = g.tensors[name][2]
    nxt = [o for o in offs if o > off]
    return (nxt[0] if nxt else len(g.data)) - off
assert list(b.tensors) == order, "the round trip changed the tensors' order"
for n in order:
    ne, typ, off = a.tensors[n]
    assert b.tensors[n][:2] == (ne, typ), n
    k = min(nbytes(a, n), nbytes(b, n))
    assert a.data[off:off + k] == b.data[b.tensors[n][2]:b.tensors[n][2] + k], f"{n}: other bytes"
heads = [n for n in p.tensors if ".head_" in n]
assert "blk.0.attn_q.head_0.weight" in p.tensors and "blk.0.attn_q.weight" not in p.tensors, sorted(p.tensors)[:8]
assert "toy.ggml_native" not in p.kv and b.kv.get("toy.ggml_native") is True, (p.kv.get("toy.ggml_native"), b.kv.get("toy.ggml_native"))
if "blk.0.attn_q.bias" in a.tensors:
    assert "blk.0.attn_q.head_1.bias" in p.tensors
print(f"{os.path.basename(sys.argv[1])}: {len(heads)} per-head tensors; the round trip gives every tensor back byte for byte")
PY
  if [ -n "$llama_ppl" ]; then
    for f in "$m" "$back"; do
      "$llama_ppl" -m "$f" -f "$text" -c 128 --chunks 2 -t 2 > "$f.ppl" 2>&1 || die "$name: llama.cpp does not load $f"
    done
    [ "$(python3 "$py" ppl "$m.ppl")" = "$(python3 "$py" ppl "$back.ppl")" ] || die "$name: llama.cpp's perplexity of the round trip differs"
  fi
done

# a per-head file trains as the same model in llama.cpp's layout does: a full fine-tune
# and a LoRA one give the same tensors, bit for bit (F32 llama, F16 qwen2 with biases)
same_tensors() { # A B WHAT: every tensor of A has B's bytes
  python3 - "$1" "$2" "$3" << 'PY'
import os, sys
sys.path.insert(0, os.environ["TOY_SOURCE_DIR"] + "/tests")
from helpers import GGUF
a, b = GGUF(sys.argv[1]), GGUF(sys.argv[2])
assert sorted(a.tensors) == sorted(b.tensors), (sorted(set(a.tensors) ^ set(b.tensors)))[:6]
def nbytes(g, name):
    offs = sorted(off for _, _, off in g.tensors.values())
    off = g.tensors[name][2]
    nxt = [o for o in offs if o > off]
    return (nxt[0] if nxt else len(g.data)) - off
for n, (ne, typ, off) in a.tensors.items():
    assert b.tensors[n][:2] == (ne, typ), n
    k = min(nbytes(a, n), nbytes(b, n))
    assert a.data[off:off + k] == b.data[b.tensors[n][2]:b.tensors[n][2] + k], f"{sys.argv[3]}: {n} differs"
print(f"{sys.argv[3]}: {len(a.tensors)} tensors, the same bits")
PY
}
for m in $models; do
  name=$(basename "$m" .gguf)
  case $name in *q4_k_m*) continue ;; esac
  ft=(--data "$text" --seq 32 --batch 2 --steps 3 --warmup 1 --lr 1e-3 -t 2)
  "$toy" finetune -m "$m" "${ft[@]}" --out "$tmp/$name-ft.gguf" 2> "$tmp/err" || { die "$name: finetune: $(tail -1 "$tmp/err")"; continue; }
  "$toy" finetune -m "$tmp/$name-ph.gguf" "${ft[@]}" --out "$tmp/$name-ph-ft.gguf" 2> "$tmp/err" \
    || { die "$name: finetune of the per-head file: $(tail -1 "$tmp/err")"; continue; }
  "$toy" convert "$tmp/$name-ph-ft.gguf" "$tmp/$name-ph-ft-back.gguf" --layout ggml 2> "$tmp/err" || die "$name: convert back"
  same_tensors "$tmp/$name-ft.gguf" "$tmp/$name-ph-ft-back.gguf" "$name: full fine-tune, per-head against ggml" \
    || die "$name: the per-head file trains otherwise"
  "$toy" finetune -m "$m" "${ft[@]}" --lora-rank 2 --out "$tmp/$name-a.gguf" 2> "$tmp/err" || die "$name: LoRA: $(tail -1 "$tmp/err")"
  "$toy" finetune -m "$tmp/$name-ph.gguf" "${ft[@]}" --lora-rank 2 --out "$tmp/$name-ph-a.gguf" 2> "$tmp/err" \
    || die "$name: LoRA of the per-head file: $(tail -1 "$tmp/err")"
  same_tensors "$tmp/$name-a.gguf" "$tmp/$name-ph-a.gguf" "$name: LoRA adapters, per-head base against ggml" \
    || die "$name: LoRA of the per-head file trains otherwise"
done

# errors
m=${models%% *}
name=$(basename "$m" .gguf)
"$toy" convert "$tmp/$name-ph.gguf" "$tmp/x.gguf" --layout per-head 2> "$tmp/err" && die "per-head to per-head accepted"
grep -q "already in the per-head layout" "$tmp/err" || die "already per-head: $(cat "$tmp/err")"
"$toy" convert "$m" "$tmp/x.gguf" --layout fused 2> "$tmp/err" && die "--layout fused accepted"
grep -q "must be per-head or ggml, got 'fused'" "$tmp/err" || die "--layout fused: $(cat "$tmp/err")"
python3 - "$tmp/$name-ph.gguf" "$tmp/gap.gguf" << 'PY' || die "writing a file without a head"
import sys
d = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(d.replace(b"blk.1.attn_k.head_1.weight", b"blk.1.attn_k.head_9.weight", 1))
PY
"$toy" convert "$tmp/gap.gguf" "$tmp/x.gguf" --layout ggml 2> "$tmp/err" && die "a missing head accepted"
grep -q "blk.1.attn_k.head_1.weight" "$tmp/err" || die "a missing head: $(cat "$tmp/err")"
[ ! -e "$tmp/x.gguf" ] || die "a failed convert left $tmp/x.gguf"
finish
