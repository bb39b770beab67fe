#!/usr/bin/env bash
# The inference commands on fixture models: toy eval (both modes) against llama.cpp's
# logits, toy tokenize against ref.tokens, toy run (greedy) reproducing the reference
# continuation, and the errors a user can provoke.
. "$(dirname "$0")/../lib.sh"
need_fixtures "llama.cpp's reference logits and tokens of the fixture models (*.ref.gguf)"

for cmd in run chat tokenize eval; do
  "$toy" $cmd --help > "$tmp/help" 2>&1 || die "toy $cmd --help exits non-zero"
  grep -q "usage: toy $cmd" "$tmp/help" || die "toy $cmd --help prints no usage"
done

# every model of the manifest (the same checks will be run on models not seen here)
models=$(grep -v '^#' "$fixtures/models/manifest.tsv" | cut -f1)
for name in $models; do
  model="$fixtures/models/$name.gguf"
  ref="$fixtures/models/$name.ref.gguf"
  [ -f "$model" ] || { die "$model missing"; continue; }
  # llama.cpp's run (prompt, tokens, n_prompt; read with the tests' own GGUF reader)
  python3 "$py" ref-json "$ref" > "$tmp/ref.json" || { die "cannot read $ref"; continue; }
  tokens=$(python3 "$py" json "$tmp/ref.json" tokens)

  # tokenize
  "$toy" tokenize -m "$model" --json "$(python3 "$py" json "$tmp/ref.json" prompt)" > "$tmp/tok.json" \
    || die "$name: toy tokenize failed"
  python3 - "$tmp/ref.json" "$tmp/tok.json" <<'PY' || die "$name: toy tokenize differs from ref.tokens"
import json, sys
ref = json.load(open(sys.argv[1])); got = json.load(open(sys.argv[2]))
sys.exit(0 if got == ref["tokens"][:ref["n_prompt"]] else 1)
PY

  # eval, both modes, against llama.cpp's logits
  for mode in batch seq; do
    "$toy" eval -m "$model" --tokens "$tokens" --dump-logits "$tmp/$mode.bin" --mode $mode -t 2 \
      || { die "$name: toy eval --mode $mode failed"; continue; }
    python3 - "$tmp/ref.json" "$ref" "$tmp/$mode.bin" $mode <<'PY' || die "$name: eval --mode $mode outside tolerance"
import json, math, struct, sys
ref = json.load(open(sys.argv[1])); data = open(sys.argv[2], "rb").read(); got = open(sys.argv[3], "rb").read()
n, nv = len(ref["tokens"]), ref["n_vocab"]
if len(got) != 4 * n * nv:
    print(f"  {len(got)} bytes, expected {4 * n * nv}"); sys.exit(1)
off = ref["logits_off"] if sys.argv[4] == "batch" else ref["seq_off"]
rels = []
for t in range(n):
    r = struct.unpack_from("<%df" % nv, data, off + 4 * t * nv); g = struct.unpack_from("<%df" % nv, got, 4 * t * nv)
    d2 = sum((a - b) ** 2 for a, b in zip(g, r)); r2 = sum(b * b for b in r)
    rels.append(math.sqrt(d2 / r2))
rels.sort(); med = rels[len(rels) // 2]
name = sys.argv[2].split("/")[-1]
limit = 0.03 if ("-q" in name or "-iq" in name) else 8e-3 if "bf16" in name else 3e-3
print(f"  {sys.argv[2].split('/')[-1]} {sys.argv[4]}: median relRMS {med:.2e}, max {rels[-1]:.2e}")
sys.exit(0 if med <= limit else 1)
PY
  done

  case "$name" in llama-spm-f32|llama-spm-q4_k_m|qwen2-f16|gemma2-f32) ;; *) continue ;; esac
  # toy run streams the prompt and a continuation, and reports speed
  prompt=$(python3 "$py" json "$tmp/ref.json" prompt)
  "$toy" run -m "$model" -p "$prompt" -n 4 --temp 0 -c 512 > "$tmp/run.txt" 2> "$tmp/run.err" \
    || { die "$name: toy run failed: $(cat "$tmp/run.err")"; continue; }
  grep -q "tok/s" "$tmp/run.err" || die "$name: toy run printed no speed to stderr"
  python3 -c 'import sys; sys.exit(0 if open(sys.argv[1], "rb").read().startswith(sys.argv[2].encode()) else 1)' \
    "$tmp/run.txt" "$prompt" || die "$name: toy run does not echo the prompt"
done

# phi3's sliding window (16) is off by default, as in llama.cpp; --sliding-window turns
# it on and changes what a prompt longer than the window generates
phi3="$fixtures/models/phi3-f16.gguf"
p="Hello world! The cafe fox ran 42 km, then slept. Then it woke and ran again, far away."
a=$("$toy" run -m "$phi3" -p "$p" -n 8 --temp 0 -c 128 2>/dev/null)
b=$("$toy" run -m "$phi3" -p "$p" -n 8 --temp 0 -c 128 --sliding-window 2>/dev/null)
[ -n "$a" ] && [ "$a" != "$b" ] || die "--sliding-window does not change phi3's output"

# errors a user can provoke: one line, non-zero exit
model="$fixtures/models/llama-spm-f32.gguf"
long=$(python3 -c 'print("hello " * 200)')
"$toy" run -m "$model" -p "$long" -c 64 -n 1 > /dev/null 2> "$tmp/err" && die "a prompt longer than the context was accepted"
grep -q "64" "$tmp/err" || die "the context error does not name the context length: $(cat "$tmp/err")"
"$toy" run -m /nonexistent.gguf -p hi > /dev/null 2> "$tmp/err" && die "a missing model was accepted"
grep -q "/nonexistent.gguf" "$tmp/err" || die "the missing-model error does not name the file"
"$toy" eval -m "$model" --tokens 1,x,3 --dump-logits "$tmp/x" 2> "$tmp/err" && die "a bad token list was accepted"
grep -q "'x'" "$tmp/err" || die "the token-list error does not name the bad item"
"$toy" eval -m "$model" --tokens 1,999999 --dump-logits "$tmp/x" 2> "$tmp/err" && die "an out-of-range token was accepted"
grep -q "999999" "$tmp/err" || die "the out-of-range error does not name the token"
"$toy" run -m "$fixtures/models/llama-spm-f32.ref.gguf" -p hi 2> "$tmp/err" && die "a reference file was accepted as a model"
grep -q "refdump" "$tmp/err" || die "the architecture error does not name it: $(cat "$tmp/err")"

finish
