#!/usr/bin/env bash
# GPT-2 (the gpt2 architecture as llama.cpp defines it: LayerNorm with biases, learned
# position embeddings, a fused QKV with biases, a GELU MLP, a tied output): toy init
# --arch gpt2 writes a model that llama.cpp loads; in F32 and in the weight types toy
# quantize writes, toy's perplexity is llama.cpp's within 1e-3 and its greedy text is
# llama.cpp's; toy quantize writes the bytes llama-quantize writes; positions past the
# learned ones, a missing bias and a wrong position table are errors that name them.
# The GPT-2 vocabulary of the fixtures where they are, else the bundled model's.
. "$(dirname "$0")/../lib.sh"
want_fixtures "the bundled model's tokenizer"
vocab="$bundled"
[ -n "$fixtures" ] && [ -f "$fixtures/vocab/ggml-vocab-gpt-2.gguf" ] && vocab="$fixtures/vocab/ggml-vocab-gpt-2.gguf"
llama_bin="$llama_cpp/bin"
[ -x "$llama_bin/llama-perplexity" ] || { echo "SKIP (the llama.cpp checks): $llama_bin not found"; llama_bin=; }
text="$tmp/text.txt"
bare_text "$text"

m="$tmp/gpt2-F32.gguf"
"$toy" init --arch gpt2 --n-embd 128 --n-layer 2 --n-head 4 --n-ff 512 --ctx 256 --vocab-from "$vocab" \
  --seed 3 --out "$m" -t 2 > /dev/null 2> "$tmp/err" || { die "toy init --arch gpt2: $(tail -1 "$tmp/err")"; finish; }
# its vectors random and its matrices larger, so that a misplaced bias shows (helpers.py)
python3 "$py" stir "$m" || die "stirring the model"
"$toy" info --json "$m" > "$tmp/info.json" 2> "$tmp/err" || die "toy info: $(tail -1 "$tmp/err")"
python3 - "$tmp/info.json" << 'PY' || die "toy info: not the GPT-2 layout"
import json, sys
info = json.load(open(sys.argv[1]))
names = {t["name"] for t in info["tensors"]}
want = {"token_embd.weight", "position_embd.weight", "output_norm.weight", "output_norm.bias",
        "blk.0.attn_norm.bias", "blk.0.attn_qkv.weight", "blk.0.attn_qkv.bias", "blk.0.attn_output.bias",
        "blk.1.ffn_norm.bias", "blk.1.ffn_up.bias", "blk.1.ffn_down.bias"}
assert want <= names, sorted(want - names)
assert "output.weight" not in names and "blk.0.ffn_gate.weight" not in names, names
PY

# the preset: GPT-2 small's shape (124M parameters with GPT-2's vocabulary)
"$toy" init --arch gpt2 --preset gpt2-124m --vocab-from "$vocab" --n-layer 1 --type Q8_0 --out "$tmp/preset.gguf" \
  -t 2 > /dev/null 2> "$tmp/err" || die "toy init --preset gpt2-124m: $(tail -1 "$tmp/err")"
"$toy" info --json "$tmp/preset.gguf" 2> /dev/null | python3 -c '
import json, sys
kv = {k: v["value"] for k, v in json.load(sys.stdin)["metadata"].items()}
assert (kv["gpt2.embedding_length"], kv["gpt2.feed_forward_length"], kv["gpt2.attention.head_count"],
        kv["gpt2.context_length"]) == (768, 3072, 12, 1024), kv' || die "the gpt2-124m preset's shape"
"$toy" init --arch gpt2 --n-embd 64 --n-layer 1 --n-head 4 --n-head-kv 2 --n-ff 128 --vocab-from "$vocab" \
  --out "$tmp/x.gguf" 2> "$tmp/err" && die "gpt2 with n_head_kv 2 accepted"
grep -q "no grouped-query attention" "$tmp/err" || die "gpt2 n_head_kv: $(cat "$tmp/err")"

# every type against llama.cpp: perplexity and greedy text
types="F32 F16 BF16 Q8_0 Q4_0 Q5_1 Q4_K_M Q6_K"
for t in $types; do
  f="$tmp/gpt2-$t.gguf"
  if [ "$t" != F32 ]; then
    "$toy" quantize "$m" "$f" "$t" -t 2 > /dev/null 2> "$tmp/err" || { die "toy quantize $t: $(tail -1 "$tmp/err")"; continue; }
  fi
  "$toy" perplexity -m "$f" -f "$text" -c 128 --chunks 4 -t 2 > "$tmp/p.toy" 2> "$tmp/err" \
    || { die "$t: toy perplexity: $(tail -1 "$tmp/err")"; continue; }
  "$toy" run -m "$f" -p "In the beginning" -n 12 --temp 0 -t 2 > "$tmp/run.toy" 2> "$tmp/err" \
    || { die "$t: toy run: $(tail -1 "$tmp/err")"; continue; }
  [ -n "$llama_bin" ] || continue
  "$llama_bin/llama-perplexity" -m "$f" -f "$text" -c 128 --chunks 4 -t 2 > "$tmp/p.llama" 2>&1 \
    || { die "$t: llama.cpp does not load it: $(grep -i error "$tmp/p.llama" | head -2)"; continue; }
  python3 "$py" close "$(python3 "$py" ppl "$tmp/p.toy")" "$(python3 "$py" ppl "$tmp/p.llama")" 1e-3 \
    "gpt2 $t: perplexity toy against llama.cpp" || die "$t: llama.cpp's perplexity differs from toy's"
  "$llama_bin/llama-cli" -m "$f" -p "In the beginning" -n 12 --temp 0 -t 2 -no-cnv --simple-io --no-warmup \
    > "$tmp/run.llama" 2> /dev/null < /dev/null || { die "$t: llama-cli failed"; continue; }
  python3 - "$tmp/run.toy" "$tmp/run.llama" "$t" << 'PY' || die "$t: greedy text differs from llama.cpp's"
import sys
toy, llama = (open(p, encoding="utf-8", errors="replace").read() for p in sys.argv[1:3])
toy = toy.removeprefix("In the beginning")
llama = llama.split("In the beginning", 1)[1] if "In the beginning" in llama else llama
llama = llama.split("\n> EOF", 1)[0].split("[end of text]", 1)[0]
assert len(toy) > 0, "toy generated nothing"
assert llama.startswith(toy) or toy.startswith(llama.rstrip("\n")), (toy, llama)
print(f"gpt2 {sys.argv[3]}: greedy text the same as llama.cpp's: {toy!r}")
PY
done

# the same bits batched and token by token, on 1 and 2 threads, under every instruction set
toks="1,818,262,3726,373,262,1573,11,290,262,1573,373,351,1793,13"
for t in F32 Q4_K_M; do
  f="$tmp/gpt2-$t.gguf"
  "$toy" eval -m "$f" --tokens "$toks" --dump-logits "$tmp/ref.bin" -t 2 2> "$tmp/err" \
    || { die "$t: toy eval: $(tail -1 "$tmp/err")"; continue; }
  for v in "--mode seq -t 2" "-t 1" "TOY_ISA=scalar -t 2"; do
    env_isa=
    case $v in TOY_ISA=*) env_isa=${v%% *}; v=${v#* } ;; esac
    env $env_isa "$toy" eval -m "$f" --tokens "$toks" --dump-logits "$tmp/l.bin" $v 2> "$tmp/err" \
      || { die "$t $env_isa $v: toy eval: $(tail -1 "$tmp/err")"; continue; }
    cmp -s "$tmp/ref.bin" "$tmp/l.bin" || die "$t: $env_isa $v gives other logits than batched on 2 threads"
  done
done

# toy quantize against llama-quantize: the same bytes
if [ -n "$llama_bin" ] && [ -x "$llama_bin/llama-quantize" ]; then
  for t in Q8_0 Q4_K_M; do
    "$llama_bin/llama-quantize" "$m" "$tmp/lq-$t.gguf" "$t" 2 > /dev/null 2>&1 || { die "llama-quantize $t failed"; continue; }
    cmp -s "$tmp/gpt2-$t.gguf" "$tmp/lq-$t.gguf" || die "$t: toy quantize and llama-quantize differ"
  done
fi

# training from scratch: the loss falls, and llama.cpp reads the result as toy does
tr="$tmp/trained.gguf"
if "$toy" train --arch gpt2 --vocab-from "$vocab" --n-embd 64 --n-layer 2 --n-head 4 --n-ff 256 --ctx 64 \
     --data "$text" --seq 64 --batch 4 --steps 30 --lr 3e-3 -t 2 --out "$tr" > /dev/null 2> "$tmp/err"; then
  python3 "$py" loss-fell "$tmp/trained.csv" 1.0 > /dev/null || die "gpt2 training: the loss did not fall by 1"
  "$toy" perplexity -m "$tr" -f "$text" -c 64 --chunks 8 -t 2 > "$tmp/p.toy" 2> /dev/null || die "toy perplexity of $tr"
  if [ -n "$llama_bin" ]; then
    "$llama_bin/llama-perplexity" -m "$tr" -f "$text" -c 64 --chunks 8 -t 2 > "$tmp/p.llama" 2>&1 || die "llama.cpp does not load $tr"
    python3 "$py" close "$(python3 "$py" ppl "$tmp/p.toy")" "$(python3 "$py" ppl "$tmp/p.llama")" 1e-3 \
      "trained gpt2: perplexity toy against llama.cpp" || die "trained gpt2: llama.cpp's perplexity differs"
  fi
else
  die "toy train --arch gpt2: $(tail -1 "$tmp/err")"
fi
"$toy" train --arch gpt2 --vocab-from "$vocab" --n-embd 64 --n-layer 1 --n-head 4 --n-ff 128 --ctx 32 \
  --data "$text" --seq 64 --batch 1 --steps 1 --out "$tmp/x.gguf" 2> "$tmp/err" && die "sequences past 32 positions accepted"
grep -q "past the model's 32 learned positions" "$tmp/err" || die "--seq 64 of --ctx 32: $(tail -1 "$tmp/err")"
"$toy" finetune -m "$m" --lora-rank 2 --lora-targets gate --data "$text" --seq 32 --batch 1 --steps 1 \
  --out "$tmp/x.gguf" 2> "$tmp/err" && die "a LoRA of gpt2's gate (which it has not) accepted"
grep -q "no gate matrix" "$tmp/err" || die "--lora-targets gate on gpt2: $(tail -1 "$tmp/err")"

# toy serve: a greedy completion is toy run's text; a prompt past the context (the learned
# positions), an error for that request only
if [ -s "$tr" ]; then
  "$toy" run -m "$tr" -p "The model" -n 8 --temp 0 -t 2 > "$tmp/run.txt" 2> /dev/null || die "toy run $tr"
  serve_start -m "$tr" --parallel 2
  if [ -n "$port" ]; then
    python3 - "$port" "$tmp/run.txt" << 'PY' || die "toy serve with gpt2"
import http.client, json, sys
port, want = int(sys.argv[1]), open(sys.argv[2], encoding="utf-8").read().removeprefix("The model")
def post(body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)  # a hang, not a slow machine
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, json.loads(r.read())
st, r = post({"prompt": "The model", "max_tokens": 8, "temperature": 0})
assert st == 200, (st, r)
got = r["choices"][0]["text"]
assert want.startswith(got) and got, (got, want)
st, r = post({"prompt": "The model " * 40, "max_tokens": 8, "temperature": 0})
assert st == 400 and "over the context of 64" in r["error"]["message"], (st, r)
st, r = post({"prompt": "The model", "max_tokens": 8, "temperature": 0})
assert st == 200 and r["choices"][0]["text"] == got, (st, r)
print(f"toy serve, gpt2: {got!r}; a prompt past the 64 positions: 400, for it alone")
PY
    serve_stop
  fi
fi

# bad input: positions past the learned ones, a missing bias
"$toy" run -m "$m" -p "In the beginning" -n 400 -c 512 --temp 0 -t 2 > /dev/null 2> "$tmp/err" \
  && die "a context past 256 learned positions accepted"
grep -q "a context of 512 tokens: the model has 256 learned positions" "$tmp/err" \
  || die "past the positions: $(tail -1 "$tmp/err")"
python3 - "$m" "$tmp/nobias.gguf" << 'PY' || die "writing a model without a bias"
import sys
data = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(data.replace(b"blk.1.ffn_up.bias", b"blk.1.ffn_up.bia_", 1))
PY
"$toy" eval -m "$tmp/nobias.gguf" --tokens 1,2,3 --dump-logits "$tmp/l.bin" 2> "$tmp/err" > /dev/null && die "a gpt2 model without ffn_up.bias loaded"
grep -q "blk.1.ffn_up.bias is missing" "$tmp/err" || die "missing bias: $(tail -1 "$tmp/err")"
finish
