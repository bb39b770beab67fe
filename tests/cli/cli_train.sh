#!/usr/bin/env bash
# toy train and toy finetune from the command line:
#  - a new model trained from scratch, and a full fine-tune of a fixture model on text and
#    on JSONL chat records, lower their loss; the fine-tune keeps the base's type;
#  - both checkpoints load in llama.cpp and give toy's numbers there (llama-perplexity
#    against toy perplexity on the same file, within 1e-3);
#  - the same losses and the same model bytes whatever the instruction set (TOY_ISA);
#  - Ctrl-C (SIGINT) writes a checkpoint and exits 130, and --resume then ends with the
#    model of an uninterrupted run, byte for byte;
#  - the CSV log and SVG curve are written; bad options and data are one-line errors.
# Without the fixtures: the bundled model's tokenizer, the source tree's text, and base
# models of toy init in place of the fixture models.
. "$(dirname "$0")/../lib.sh"
want_fixtures
llama_ppl="$llama_cpp/bin/llama-perplexity"
[ -x "$llama_ppl" ] || { echo "SKIP (llama.cpp checks only): $llama_ppl not found"; llama_ppl=; }

"$toy" train --help | grep -q -- "--vocab-from" || die "toy train --help lacks --vocab-from"
"$toy" finetune --help | grep -q -- "--out-type" || die "toy finetune --help lacks --out-type"

# text: the fixtures' README and tokenizer test strings (about 11,000 SPM tokens)
text="$tmp/text.txt"
if [ -n "$fixtures" ]; then
  cat "$fixtures/README.md" "$fixtures/vocab/ggml-vocab-llama-spm.gguf.inp" > "$text"
  vocab="$fixtures/models/llama-spm-f32.gguf"
  base="$fixtures/models/qwen2-f16.gguf"
  base_bf16="$fixtures/models/llama-spm-bf16.gguf"
  moe="$fixtures/models/mixtral-f16.gguf"
else
  bare_text "$text"
  vocab="$bundled"
  base="$tmp/qwen2-f16.gguf" base_bf16="$tmp/llama-bf16.gguf" moe="$tmp/mixtral.gguf"
  bare_model "$base" qwen2 64 2 4 2 128 --type F16 || fail=1
  bare_model "$base_bf16" llama 64 2 4 2 128 --type BF16 || fail=1
  bare_model "$moe" llama 64 1 4 2 64 --preset mixtral-tiny || fail=1
fi
new=(--vocab-from "$vocab" --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 128 --ctx 256
     --data "$text" --seq 64 --batch 4 --steps 24 --warmup 4 --lr 3e-3 -t 2)

# llama.cpp's perplexity of a model against toy's (both at their defaults)
same_ppl() {
  [ -n "$llama_ppl" ] || return 0
  "$toy" perplexity -m "$1" -f "$text" -c 128 -t 2 > "$tmp/p.toy" 2> "$tmp/p.err" \
    || { die "toy perplexity on $1: $(cat "$tmp/p.err")"; return; }
  "$llama_ppl" -m "$1" -f "$text" -c 128 -t 2 > "$tmp/p.llama" 2>&1 \
    || { die "llama.cpp does not load $1: $(grep -i error "$tmp/p.llama" | head -2)"; return; }
  python3 "$py" close "$(python3 "$py" ppl "$tmp/p.toy")" "$(python3 "$py" ppl "$tmp/p.llama")" 1e-3 \
    "$2: perplexity toy against llama.cpp" || die "$2: llama.cpp's perplexity differs from toy's"
}

# ---- from scratch
"$toy" train "${new[@]}" --out "$tmp/new.gguf" 2> "$tmp/err" || die "toy train: $(tail -1 "$tmp/err")"
for f in new.gguf new.optim.gguf new.csv new.svg; do [ -s "$tmp/$f" ] || die "toy train wrote no $f"; done
grep -q "</svg>" "$tmp/new.svg" || die "the loss curve is not a whole SVG"
fl=$(python3 "$py" loss-fell "$tmp/new.csv" 0.5) || die "training from scratch: loss $fl did not fall"
echo "from scratch: loss $fl"
same_ppl "$tmp/new.gguf" "from scratch"

# ---- the same bytes on every instruction set
for isa in scalar avx2; do
  TOY_ISA=$isa "$toy" train "${new[@]}" --out "$tmp/isa-$isa.gguf" 2> /dev/null || die "TOY_ISA=$isa failed"
  cmp -s "$tmp/new.gguf" "$tmp/isa-$isa.gguf" || die "TOY_ISA=$isa wrote a different model"
done

# ---- mixed precision: the products' operands rounded to BF16 / F16, F32 elsewhere; the
# curve stays within 3 % of F32's at the end (measured: about 1 %), and is the same
# whatever the instruction set. Where toy --version says "bf16 dot: vdpbf16ps", BF16
# products run vdpbf16ps instead (gemm.h's BF16 dot definition: other bits, the same 3 %);
# the rounding mode is then what TOY_ISA=avx2 runs.
dot=$("$toy" --version | sed -n 's/.*bf16 dot: \([^;]*\);.*/\1/p')
[ -n "$dot" ] || die "toy --version does not say how BF16 products run: $("$toy" --version)"
for c in bf16 f16; do
  "$toy" train "${new[@]}" --compute $c --out "$tmp/mp-$c.gguf" 2> "$tmp/err" || die "--compute $c: $(tail -1 "$tmp/err")"
  PYTHONPATH="$tests" python3 - "$tmp/new.csv" "$tmp/mp-$c.csv" $c <<'PY' || die "--compute $c: the loss strays from F32's"
import sys
from helpers import losses
f, m = ([float(x) for x in losses(p)] for p in sys.argv[1:3])
print(f"  --compute {sys.argv[3]}: final loss {m[-1]:.4f}, F32 {f[-1]:.4f} ({m[-1] / f[-1] - 1:+.2%})")
assert m != f, "rounding changed nothing"
sys.exit(0 if abs(m[-1] / f[-1] - 1) < 0.03 else 1)
PY
done
rounded="$tmp/mp-bf16.gguf"
if [ "$dot" = vdpbf16ps ]; then
  rounded="$tmp/mp-avx2.gguf"
  TOY_ISA=avx2 "$toy" train "${new[@]}" --compute bf16 --out "$rounded" 2> /dev/null || die "bf16, avx2 failed"
  cmp -s "$tmp/mp-bf16.gguf" "$rounded" && die "--compute bf16: vdpbf16ps wrote the rounding mode's model"
  echo "  --compute bf16 ran vdpbf16ps; the rounding mode checked under TOY_ISA=avx2"
fi
TOY_ISA=scalar "$toy" train "${new[@]}" --compute bf16 --out "$tmp/mp-scalar.gguf" 2> /dev/null || die "bf16, scalar failed"
cmp -s "$rounded" "$tmp/mp-scalar.gguf" || die "--compute bf16: TOY_ISA=scalar wrote a different model"
"$toy" train "${new[@]}" --compute q8_0 --out "$tmp/e.gguf" 2> "$tmp/err" && die "--compute q8_0 accepted"
grep -q "f32, bf16 or f16" "$tmp/err" || die "--compute q8_0: $(cat "$tmp/err")"
"$toy" train --bench -m "$tmp/new.gguf" --batch 1 --seq 8 --steps 1 --compute q8_0 2> "$tmp/err" &&
  die "--bench --compute q8_0 accepted"
grep -q "compute must be f32, bf16 or f16" "$tmp/err" || die "--bench --compute q8_0: $(cat "$tmp/err")"
# --bench takes --compute too (bench-train-vs-torch.sh sets it beside PyTorch's autocast):
# the step's loss moves with the rounding, and stays the same bits whatever the threads
for c in f32:1 f32:2 bf16:2; do
  "$toy" train --bench -m "$tmp/new.gguf" --batch 2 --seq 16 --steps 1 --compute ${c%:*} -t ${c#*:} --json \
    > "$tmp/bench-${c/:/-}.json" 2> "$tmp/err" || die "train --bench --compute ${c%:*}: $(tail -1 "$tmp/err")"
done
python3 - "$tmp"/bench-f32-1.json "$tmp"/bench-f32-2.json "$tmp"/bench-bf16-2.json <<'PY' || die "train --bench --compute"
import json, sys
f1, f2, b = (json.load(open(p)) for p in sys.argv[1:4])
assert (f1["compute"], f2["compute"], b["compute"]) == ("f32", "f32", "bf16"), (f1, b)
assert f1["loss"] == f2["loss"], ("threads changed the loss", f1["loss"], f2["loss"])
assert b["loss"] != f1["loss"], "--compute bf16 changed nothing in --bench"
assert abs(b["loss"] / f1["loss"] - 1) < 0.01, (b["loss"], f1["loss"])
PY

# ---- Ctrl-C and --resume: 150 steps, the interrupt landing at the first step's line; 40
# under the sanitizers
long_steps=150
[ "${TOY_SANITIZED:-0}" = 1 ] && long_steps=40
check_resume model $long_steps "$toy" train "${new[@]}"

# ---- full fine-tune of a qwen2 model on text: the base's type (F16) is kept
"$toy" finetune -m "$base" --data "$text" --seq 128 --batch 2 --steps 12 --warmup 2 --lr 3e-3 -t 2 \
  --out "$tmp/ft.gguf" 2> "$tmp/err" || die "toy finetune: $(tail -1 "$tmp/err")"
fl=$(python3 "$py" loss-fell "$tmp/ft.csv" 0.5) || die "fine-tune: loss $fl did not fall"
echo "fine-tune (text): loss $fl"
[ "$("$toy" info --json "$tmp/ft.gguf" | python3 "$py" matrix-types)" = F16 ] || die "the fine-tuned model's matrices are not F16"
same_ppl "$tmp/ft.gguf" "fine-tuned"
# a BF16 base stays BF16
"$toy" finetune -m "$base_bf16" --data "$text" --seq 64 --batch 2 --steps 2 \
  --warmup 1 -t 2 --out "$tmp/bf16.gguf" 2> "$tmp/err" || die "BF16 fine-tune: $(tail -1 "$tmp/err")"
[ "$("$toy" info --json "$tmp/bf16.gguf" | python3 "$py" matrix-types)" = BF16 ] \
  || die "the fine-tuned BF16 model's matrices are not BF16"

# ---- fine-tune on chat records: loss on the assistant's tokens only
chat="$tmp/chat.jsonl"
python3 - "$chat" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(60):
        f.write(json.dumps({"messages": [
            {"role": "system", "content": "You answer with the number's square."},
            {"role": "user", "content": f"What is {i} squared?"},
            {"role": "assistant", "content": f"{i} squared is {i * i}."}]}) + "\n")
PY
"$toy" finetune -m "$base" --data "$chat" --seq 64 --batch 2 --steps 16 --warmup 2 --lr 3e-4 -t 2 \
  --out "$tmp/chat.gguf" 2> "$tmp/err" || die "toy finetune on chat records: $(tail -1 "$tmp/err")"
fl=$(python3 "$py" loss-fell "$tmp/chat.csv" 0.5) || die "chat fine-tune: loss $fl did not fall"
echo "fine-tune (chat): loss $fl"

# ---- random bytes as training data: every invalid UTF-8 byte is three byte tokens (more
# tokens than bytes), which once overran the loader's buffer (realloc(): invalid next size)
head -c 3000 /dev/urandom > "$tmp/random.dat"
"$toy" train --vocab-from "$bundled" --data "$tmp/random.dat" --out "$tmp/random.gguf" \
  --steps 2 --n-embd 64 --n-layer 1 --n-head 2 --n-head-kv 2 --n-ff 128 --ctx 64 --seq 32 --batch 1 -t 2 \
  2> "$tmp/err" || die "training on random bytes: exit $?: $(tail -2 "$tmp/err")"
grep -q "training tokens" "$tmp/err" || die "training on random bytes: $(tail -1 "$tmp/err")"

# ---- errors
"$toy" train --out "$tmp/x.gguf" 2> "$tmp/err"; [ $? -eq 2 ] || die "no --data: not a usage error"
grep -q "needs --data and --out" "$tmp/err" || die "no --data: $(cat "$tmp/err")"
"$toy" train "${new[@]}" --lr abc --out "$tmp/x.gguf" 2> "$tmp/err" && die "--lr abc accepted"
grep -q -- "--lr must be a number, got 'abc'" "$tmp/err" || die "--lr abc: $(cat "$tmp/err")"
"$toy" finetune --data "$text" --out "$tmp/x.gguf" 2> "$tmp/err" && die "finetune without -m accepted"
grep -q "needs -m BASE" "$tmp/err" || die "finetune without -m: $(cat "$tmp/err")"
echo '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant"}]}' > "$tmp/bad.jsonl"
"$toy" finetune -m "$base" --data "$tmp/bad.jsonl" --out "$tmp/x.gguf" 2> "$tmp/err" && die "bad JSONL accepted"
grep -q "bad.jsonl:1: message 2 needs string fields" "$tmp/err" || die "bad JSONL: $(cat "$tmp/err")"
"$toy" finetune -m "$moe" --data "$text" --out "$tmp/x.gguf" 2> "$tmp/err" \
  && die "MoE fine-tune accepted"
grep -q "training not supported for llama (mixture of experts)" "$tmp/err" || die "MoE: $(cat "$tmp/err")"
"$toy" train "${new[@]}" --out "$tmp/none.gguf" --resume 2> "$tmp/err" && die "--resume without a run accepted"
grep -q "from an earlier run" "$tmp/err" || die "--resume without a run: $(cat "$tmp/err")"
exit $fail
