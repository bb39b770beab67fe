#!/usr/bin/env bash
# toy tokenizer train on a text built from README.md and the fixtures' tokenizer test
# strings: the file has the promised layout, is the same bytes whatever -t, never learns
# special-token text, and llama.cpp's llama-tokenize gives exactly toy's ids with it on
# varied text (Unicode, digits, whitespace runs, punctuation, invalid UTF-8, the .inp
# strings), under several pre-tokenizers; toy init takes it; errors name what is wrong.
# Without the fixtures the text is README.md and docs/*.md, and llama.cpp's ids are
# compared on the test's own strings.
. "$(dirname "$0")/../lib.sh"
want_fixtures
llama_tokenize="$llama_cpp/bin/llama-tokenize"

for args in "tokenizer --help" "tokenizer train --help"; do
  "$toy" $args > "$tmp/help" 2>&1 || die "toy $args exits non-zero"
  grep -q "usage: toy tokenizer train" "$tmp/help" || die "toy $args prints no usage"
done

# the training text: README.md, every .inp test string, and chat turns whose special
# tokens must be cut out, not learned
corpus="$tmp/corpus.txt"
{
  cat "$src/README.md"
  if [ -n "$fixtures" ]; then cat "$fixtures"/vocab/*.inp; else cat "$src"/docs/*.md; fi
  for i in $(seq 1 40); do
    printf '<|im_start|>user\nWhat is %d + %d?<|im_end|>\n<|im_start|>assistant\n%d<|im_end|><|endoftext|>\n' \
      $i $((i * 7)) $((i * 8))
  done
} > "$corpus"

vocab_size=1024
"$toy" tokenizer train --vocab-size $vocab_size --data "$corpus" --out "$tmp/tok.gguf" -t 2 \
  2> "$tmp/err" || die "toy tokenizer train failed: $(tail -1 "$tmp/err")"
grep -q "wrote $tmp/tok.gguf: $vocab_size tokens (256 bytes, $((vocab_size - 259)) merges, 3 special)" "$tmp/err" \
  || die "the report does not give the token counts: $(cat "$tmp/err")"
"$toy" tokenizer train --vocab-size $vocab_size --data "$corpus" --out "$tmp/tok1.gguf" -t 1 \
  2> /dev/null || die "toy tokenizer train -t 1 failed"
cmp -s "$tmp/tok.gguf" "$tmp/tok1.gguf" || die "the same data gave different files with -t 1 and -t 2"

# the layout, read with an independent GGUF reader
PYTHONPATH="$tests" python3 - "$tmp/tok.gguf" $vocab_size <<'PY' || die "the tokenizer file does not have the promised layout"
import sys
from helpers import GGUF
g = GGUF(sys.argv[1])
kv, n_tensors = g.kv, len(g.tensors)
n = int(sys.argv[2])
# GPT-2's byte-to-unicode table
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs = bs[:]
for b in range(256):
    if b not in bs: bs.append(b); cs.append(256 + len(cs) - 188)
byte_char = {b: chr(c) for b, c in zip(bs, cs)}
tokens = [t.decode() for t in kv["tokenizer.ggml.tokens"]]
types, merges = kv["tokenizer.ggml.token_type"], [m.decode() for m in kv["tokenizer.ggml.merges"]]
specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
def check(cond, what):
    if not cond: print("layout:", what); sys.exit(1)
check(n_tensors == 0, "tensors in a vocabulary file")
check(kv["general.architecture"] == b"llama" and kv["tokenizer.ggml.model"] == b"gpt2", "arch/model")
check(kv["tokenizer.ggml.pre"] == b"qwen2", "default pre-tokenizer")
check(len(tokens) == n and len(types) == n and len(merges) == n - 259, "counts")
check(tokens[:256] == [byte_char[b] for b in range(256)], "ids 0..255 are the bytes")
check(tokens[n - 3:] == specials and types[n - 3:] == [3, 3, 3], "special tokens last, CONTROL")
check(all(t == 1 for t in types[:n - 3]), "learned tokens NORMAL")
check(len(set(tokens)) == n, "a token text twice")
for k, m in enumerate(merges):
    left, right = m.split(" ")
    check(left in tokens[:256 + k] and right in tokens[:256 + k] and tokens[256 + k] == left + right,
          "merge %d '%s' does not make token %d" % (k, m, 256 + k))
check(not any("im_start" in t or "im_end" in t or "endoftext" in t for t in tokens[:n - 3]),
      "special-token text was learned")
check(kv["tokenizer.ggml.bos_token_id"] == n - 3 and kv["tokenizer.ggml.eos_token_id"] == n - 3, "bos/eos")
check(kv["tokenizer.ggml.add_bos_token"] is True and kv["tokenizer.ggml.add_eos_token"] is False, "add_bos/eos")
check(b"<|im_start|>" in kv["tokenizer.chat_template"] and b"add_generation_prompt" in kv["tokenizer.chat_template"],
      "ChatML template")
PY
"$toy" info "$tmp/tok.gguf" > "$tmp/info" 2>&1 || die "toy info on the tokenizer failed"
grep -q "chat template  present" "$tmp/info" || die "toy info sees no chat template"

# llama.cpp tokenizes as toy does: every string alone (no BOS, no special parsing), and
# all of them joined by special tokens (BOS, special parsing on)
if [ -x "$llama_tokenize" ]; then
  for pre in qwen2 gpt-2 smollm smaug-bpe; do
    vocab="$tmp/tok-$pre.gguf"
    "$toy" tokenizer train --vocab-size 700 --pre $pre --data "$corpus" --out "$vocab" 2> "$tmp/err" \
      || { die "toy tokenizer train --pre $pre failed: $(tail -1 "$tmp/err")"; continue; }
    python3 - "$toy" "$llama_tokenize" "$vocab" "$fixtures" "$tmp" <<'PY' > "$tmp/cmp" 2>&1 \
      || die "--pre $pre: llama.cpp and toy differ: $(head -5 "$tmp/cmp")"
import glob, json, subprocess, sys
toy, llama, vocab, fixtures, tmp = sys.argv[1:]
cases = []
for f in sorted(glob.glob(fixtures + "/vocab/*.inp")):
    for s in open(f, "rb").read().split(b"\n__ggml_vocab_test__\n")[:-1]:
        if s not in cases: cases.append(s)
cases += [s.encode() if isinstance(s, str) else s for s in [
    "Hello world", " leading space", "trailing space ", "  two leading", "\t\ttabs\t",
    "\n\n\nnewlines", "a\r\nb\r\n", "   \n  \n ", "multiple     spaces    here\n\n\n   x",
    "1234567890", "3.14159 2,718 1e-10 0x1F 1,000,000.00", "年份2024年", "١٢٣ ٤٥٦", "Ⅻ ½ ²³",
    "Hello!!! What?! ... --- ((()))", "\"quoted\" 'single' `back`", "don't can't I'M WE'VE they'll",
    "email@example.com https://x.org/a?b=c#d", "café naïve résumé Ñandú", "Привет, мир!",
    "日本語のテキスト", "한국어 텍스트", "emoji 🦙🔥👍🏽 family 👨\u200d👩\u200d👧",
    "ελληνικά עברית العربية", "combining e\u0301 a\u0308", "zero\u200bwidth", "nbsp\u00a0here",
    "\u3000ideographic\u3000space", "def f(x):\n    return x**2  # square\n",
    "if (a && b) { c->d[i] += 1; }", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    b"bad \xff\xfe bytes \xc3( end", "a" * 300, " " * 50 + "x", "9" * 40, "In the beginning",
]]
def run(cmd):
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode: raise SystemExit("%s failed: %s" % (cmd[0], r.stderr.decode(errors="replace")[-300:]))
    return json.loads(r.stdout)
n = 0
def compare(text, special):
    global n
    with open(tmp + "/prompt.txt", "wb") as f: f.write(text)
    flags = [] if special else ["--no-bos", "--no-parse-special"]
    want = run([llama, "-m", vocab, "-f", tmp + "/prompt.txt", "--ids", "--no-escape", "--log-disable"] + flags)
    got = run([toy, "tokenize", "-m", vocab, "--json"] + (["--parse-special"] if special else ["--no-special"]) + [text])
    if got != want:
        print("differ on %r:\n  llama.cpp %s\n  toy       %s" % (text[:80], want[:30], got[:30])); sys.exit(1)
    n += 1
for s in cases:
    if s and not s.startswith(b"-"): compare(s, False)
compare(b"<|endoftext|>".join(cases), True)
print("compared %d texts" % n)
PY
    echo "--pre $pre: $(tail -1 "$tmp/cmp") with llama.cpp, identical"
  done
else
  echo "note: $llama_tokenize not found: the comparison with llama.cpp is skipped"
fi

# toy init takes it as a model's vocabulary
"$toy" init --arch llama --preset smollm2-135m --vocab-from "$tmp/tok.gguf" --out "$tmp/model.gguf" \
  --type Q4_0 -t 2 > /dev/null 2> "$tmp/err" || die "toy init --vocab-from the tokenizer failed: $(tail -1 "$tmp/err")"
"$toy" info --json "$tmp/model.gguf" > "$tmp/info.json" 2>&1 || die "toy info on the initialised model failed"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["tokenizer"]["vocab_size"] == int(sys.argv[2]) else 1)' \
  "$tmp/info.json" $vocab_size || die "the initialised model's vocabulary is not the tokenizer's"
"$toy" run -m "$tmp/model.gguf" -p "Hello" -n 1 --temp 0 -c 32 > /dev/null 2> "$tmp/err" \
  || die "toy run on a model with the trained tokenizer failed: $(tail -1 "$tmp/err")"

# errors: one line naming the file, flag or value
expect_error() { # WANT-IN-MESSAGE ARGS...
  local want="$1"; shift
  "$toy" tokenizer train "$@" > /dev/null 2> "$tmp/err" && { die "accepted: $*"; return; }
  [ "$(wc -l < "$tmp/err")" -eq 1 ] || die "not one line for '$*': $(cat "$tmp/err")"
  grep -qF -- "$want" "$tmp/err" || die "the error for '$*' does not say '$want': $(cat "$tmp/err")"
}
: > "$tmp/empty.txt"
printf '<|endoftext|><|im_end|>' > "$tmp/only-special.txt"
expect_error "$tmp/missing.txt" --vocab-size 300 --data "$tmp/missing.txt" --out "$tmp/x.gguf"
expect_error "$tmp" --vocab-size 300 --data "$tmp" --out "$tmp/x.gguf"
expect_error "$tmp/empty.txt: no training text" --vocab-size 300 --data "$tmp/empty.txt" --out "$tmp/x.gguf"
expect_error "$tmp/only-special.txt: no training text" --vocab-size 300 --data "$tmp/only-special.txt" --out "$tmp/x.gguf"
expect_error "--vocab-size 258" --vocab-size 258 --data "$corpus" --out "$tmp/x.gguf"
expect_error "--vocab-size 259 is below 260" --vocab-size 259 --special "<tool>" --data "$corpus" --out "$tmp/x.gguf"
expect_error "--vocab-size must be an integer" --vocab-size 12x --data "$corpus" --out "$tmp/x.gguf"
expect_error "unknown pre-tokenizer 'nope'" --vocab-size 300 --pre nope --data "$corpus" --out "$tmp/x.gguf"
expect_error "pre-tokenizer 'llama-bpe'" --vocab-size 300 --pre llama-bpe --data "$corpus" --out "$tmp/x.gguf"
expect_error "'<|im_end|>' is given twice" --vocab-size 300 --special "<|im_end|>" --data "$corpus" --out "$tmp/x.gguf"
expect_error "$tmp/no/such/dir/x.gguf" --vocab-size 300 --data "$corpus" --out "$tmp/no/such/dir/x.gguf"
[ -e "$tmp/x.gguf" ] && die "a failed run left its output file"

finish
