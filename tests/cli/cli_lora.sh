#!/usr/bin/env bash
# LoRA from the command line (toy finetune --lora-rank, --lora on the runners, toy lora
# merge):
#  - a LoRA fine-tune of quantized fixture models (Q4_K_M, Q8_0), of an F32 one and of
#    phi3 (fused attn_qkv and ffn_up: one adapter pair each, its B split between the
#    parts) lowers the loss; its first step's loss is the base model's (B starts at zero);
#  - the adapter loads in llama.cpp: llama-perplexity --lora gives toy perplexity
#    --lora's number (F32 and F16 bases: within 1e-3, as for full models; quantized bases: each
#    engine's ratio adapted / base within 1e-2, since the two engines round a quantized
#    base's activations differently);
#  - toy serve --lora answers as toy run --lora does;
#  - toy lora merge gives a model with the adapted numbers (perplexity within 1e-3 on the
#    F32 base, 2e-2 on the quantized one, whose merged matrices are F32);
#  - the same adapter bytes with 1 and 2 threads and on every instruction set, with
#    dropout; Ctrl-C and --resume end with the adapter of an uninterrupted run;
#  - bad options are one-line errors.
# Without the fixtures: the bundled model (Q8_0) and its F32 and Q4_K_M copies (toy
# quantize), on the source tree's text (a LoRA on a random-weight model that small barely
# lowers the loss); phi3's fused matrices need the fixtures.
. "$(dirname "$0")/../lib.sh"
want_fixtures
llama_ppl="$llama_cpp/bin/llama-perplexity"
[ -x "$llama_ppl" ] || { echo "SKIP (llama.cpp checks only): $llama_ppl not found"; llama_ppl=; }

text="$tmp/text.txt"
if [ -n "$fixtures" ]; then
  cat "$fixtures/README.md" "$fixtures/vocab/ggml-vocab-llama-spm.gguf.inp" > "$text"
  models="$fixtures/models" f32=llama-spm-f32 q4=llama-spm-q4_k_m q8=llama-spm-q8_0 phi3=phi3-f16
else
  bare_text "$text"
  models="$tmp" f32=toy-kjv-f32 q4=toy-kjv-q4_k_m q8=toy-kjv phi3=
  ln -s "$bundled" "$models/$q8.gguf"
  "$toy" quantize "$bundled" "$models/$f32.gguf" F32 > /dev/null 2>&1 || die "toy quantize to F32 failed"
  "$toy" quantize "$models/$f32.gguf" "$models/$q4.gguf" Q4_K_M > /dev/null 2>&1 || die "toy quantize to Q4_K_M failed"
fi
lora=(--data "$text" --seq 64 --batch 4 --steps 20 --warmup 2 --lr 1e-2 --lora-rank 8 -t 2)

toy_ppl() { "$toy" perplexity -m "$1" -f "$text" -c 128 -t 2 "${@:2}" > "$tmp/p.out" 2> "$tmp/p.err" \
  && python3 "$py" ppl "$tmp/p.out" || { die "toy perplexity $*: $(tail -1 "$tmp/p.err")"; echo 0; }; }
llama_ppl_of() { "$llama_ppl" -m "$1" -f "$text" -c 128 -t 2 "${@:2}" > "$tmp/p.out" 2>&1 \
  && python3 "$py" ppl "$tmp/p.out" || { die "llama-perplexity $*: $(grep -i error "$tmp/p.out" | head -2)"; echo 0; }; }
close() { python3 "$py" close "$@"; }

# every base under the sanitizers too (five times slower: about 10 s more for F32 and Q8_0)
bases="$f32 $q4 $q8 $phi3" served=$q8
for name in $bases; do
  base="$models/$name.gguf"
  out="$tmp/$name.lora.gguf"
  "$toy" finetune -m "$base" "${lora[@]}" --out "$out" 2> "$tmp/err" || { die "$name: $(tail -1 "$tmp/err")"; continue; }
  for f in "$name.lora.gguf" "$name.lora.optim.gguf" "$name.lora.csv" "$name.lora.svg"; do
    [ -s "$tmp/$f" ] || die "$name: toy finetune --lora-rank wrote no $f"
  done
  fl=$(python3 "$py" loss-fell "$tmp/$name.lora.csv" 0.5) || die "$name: LoRA loss $fl did not fall"
  # the first step's loss is computed with B = 0: the base's loss on the same batch
  "$toy" finetune -m "$base" "${lora[@]/--lora-rank/--lr}" --out "$tmp/full.gguf" --steps 1 2> /dev/null
  full=$(python3 "$py" first-last "$tmp/full.csv" | cut -d' ' -f1)
  [ "$full" = "${fl%% *}" ] || die "$name: LoRA's first loss ${fl%% *}, the base's $full"
  echo "$name: LoRA loss $fl (the base's first: $full)"

  [ -n "$llama_ppl" ] || continue
  tb=$(toy_ppl "$base"); ta=$(toy_ppl "$base" --lora "$out")
  lb=$(llama_ppl_of "$base"); la=$(llama_ppl_of "$base" --lora "$out")
  "$toy" lora merge -m "$base" --lora "$out" --out "$tmp/merged.gguf" 2> "$tmp/err" || die "$name: merge: $(tail -1 "$tmp/err")"
  tm=$(toy_ppl "$tmp/merged.gguf")
  echo "  perplexity: toy $tb -> $ta with the adapter, llama.cpp $lb -> $la; merged: toy $tm"
  if [ "$name" = $f32 ] || [ "$name" = "$phi3" ]; then
    close "$ta" "$la" 1e-3 || die "$name: with the adapter, toy $ta and llama.cpp $la"
    close "$tm" "$ta" 1e-3 || die "$name: merged $tm, applied $ta"
  else
    close "$(python3 "$py" ratio "$ta" "$tb")" "$(python3 "$py" ratio "$la" "$lb")" 1e-2 \
      || die "$name: the adapter's effect: toy $tb -> $ta, llama.cpp $lb -> $la"
    close "$tm" "$ta" 2e-2 || die "$name: merged $tm, applied $ta"
  fi
done

# ---- toy serve --lora answers as toy run --lora does (greedy), and differs from the base
PYTHONPATH="$tests" python3 - "$toy" "$models/$served.gguf" "$tmp/$served.lora.gguf" <<'PY' || die "toy serve --lora"
import subprocess, sys
from helpers import Server
toy, model, adapter = sys.argv[1:]
def run(*extra):
    out = subprocess.run([toy, "run", "-m", model, "-p", "The", "-n", "12", "--temp", "0", "-t", "2", *extra],
                         capture_output=True, check=True).stdout  # random weights: not always UTF-8
    return out[len("The"):].rstrip(b"\n").decode("utf-8", "replace")
srv = Server(toy, model, "--lora", adapter)
try:
    got = srv.post({"prompt": "The", "max_tokens": 12, "temperature": 0}, "/v1/completions")[1]["choices"][0]["text"]
finally:
    srv.stop()
want, base = run("--lora", adapter), run()
print(f"  toy serve --lora: {got!r} (toy run --lora: {want!r}, the base: {base!r})")
assert got == want and want != base
PY

# ---- the same bytes whatever the threads and instruction set, dropout included
base="$models/$q4.gguf"
drop=("${lora[@]}" --steps 6 --lora-dropout 0.1 --lora-targets q,v,down)
"$toy" finetune -m "$base" "${drop[@]}" --out "$tmp/d2.gguf" 2> /dev/null || die "dropout run failed"
"$toy" finetune -m "$base" "${drop[@]}" -t 1 --out "$tmp/d1.gguf" 2> /dev/null || die "dropout run, 1 thread, failed"
cmp -s "$tmp/d1.gguf" "$tmp/d2.gguf" || die "LoRA with dropout: 1 and 2 threads wrote different adapters"
for isa in scalar avx2; do
  TOY_ISA=$isa "$toy" finetune -m "$base" "${drop[@]}" --out "$tmp/d-$isa.gguf" 2> /dev/null || die "TOY_ISA=$isa failed"
  cmp -s "$tmp/d2.gguf" "$tmp/d-$isa.gguf" || die "LoRA: TOY_ISA=$isa wrote a different adapter"
done
PYTHONPATH="$tests" python3 - "$tmp/d2.gguf" <<'PY' || die "the adapter holds the wrong tensors"
import sys
from helpers import GGUF
g = GGUF(sys.argv[1])
meta, names = g.kv, sorted(g.tensors)
assert meta["general.type"] == b"adapter" and meta["adapter.type"] == b"lora", meta
assert meta["adapter.lora.alpha"] == 8.0, meta["adapter.lora.alpha"]
kinds = sorted({n.split(".")[2] for n in names})
assert kinds == ["attn_q", "attn_v", "ffn_down"], kinds
assert all(n.endswith((".weight.lora_a", ".weight.lora_b")) for n in names), names
a, b = g.tensors["blk.0.attn_q.weight.lora_a"][0], g.tensors["blk.0.attn_q.weight.lora_b"][0]
assert a[1] == 8 and b[0] == 8, (a, b)  # lora_a [n_in, rank], lora_b [rank, n_out]
PY

# ---- Ctrl-C and --resume: 120 steps, the interrupt landing at the first step's line;
# 30 under the sanitizers (the resume path is the same, 5x slower per step)
long_steps=120
[ "${TOY_SANITIZED:-0}" = 1 ] && long_steps=30
check_resume adapter $long_steps "$toy" finetune -m "$base" "${lora[@]}" --lora-dropout 0.05

# ---- errors
"$toy" finetune -m "$base" "${lora[@]}" --lora-targets q,x --out "$tmp/e.gguf" 2> "$tmp/err" && die "--lora-targets q,x accepted"
grep -q "'x' is not one of" "$tmp/err" || die "bad --lora-targets: $(cat "$tmp/err")"
[ -z "$phi3" ] || PYTHONPATH="$tests" python3 - "$tmp/$phi3.lora.gguf" <<'PY' || die "phi3's adapter: not one pair per fused matrix"
import sys
from helpers import GGUF
t = GGUF(sys.argv[1]).tensors
assert t["blk.0.attn_qkv.weight.lora_b"][0] == [8, 768] and t["blk.0.ffn_up.weight.lora_b"][0] == [8, 1024], t
assert not any(".attn_q.weight" in n or ".ffn_gate." in n for n in t), sorted(t)
PY
"$toy" run -m "$base" --lora "$base" -n 1 -p hi 2> "$tmp/err" && die "a model accepted as an adapter"
grep -q "not \"adapter\"" "$tmp/err" || die "--lora MODEL: $(cat "$tmp/err")"
"$toy" run -m "$base" --lora-scale 2 -n 1 -p hi 2> "$tmp/err" && die "--lora-scale without --lora accepted"
grep -q "before any --lora" "$tmp/err" || die "--lora-scale first: $(cat "$tmp/err")"

finish
