#!/usr/bin/env bash
# cli_hostile_data.sh TOY — every toy command that reads a user's file, fed hostile files in
# its place: empty, random bytes (several seeds), NUL bytes, NULs inside text, invalid UTF-8
# (lone continuation bytes, truncated sequences, overlong forms, surrogates, 0xFF), UTF-16, a
# BOM, CRLF, no final newline, a line of 50 MB, a 4 MB word, chat JSONL of every wrong shape
# (wrong types, missing and unknown roles, 10,000 levels of nesting, not JSON, empty lines,
# huge numbers, 100,000 messages), a FIFO, a file that grows and shrinks while it is read, a
# directory, a missing file; model, tokenizer, adapter (llama.cpp's and the design's
# per-head LoRA-Q, to every --lora reader and to finetune --lora-from) and optimizer-state
# files that are not what they claim (garbage, truncated, or a valid GGUF whose metadata
# or tensors are wrong).
#
# Each case passes when toy exits 0 with a sane result (a model `toy info` loads and a finite
# loss, a finite perplexity, finite CKA, logits of the right size), or exits non-zero (< 128,
# not a timeout) with an error on stderr that names the file - and the line, for a JSONL
# record at a known line - and no sanitizer report, abort or signal. Every command runs
# under `timeout`, so a hang is a failure, not a stuck test. One line per case:
#   case COMMAND/CASE: exit N, "the first line of stderr that says something"
# then a summary; exit 0 (all pass), 1 (a failure) or 77 (skip).
#
# The commands with a reader of their own (train, tokenizer train, perplexity, cka) get
# every data input; the others that read with src/train/data.c (train -m, a second --data
# file, --eval-data, finetune, finetune --lora-rank) a sample. Two shards run side by side:
# train and finetune on data files; the other data readers, then the model, adapter and
# optimizer-state files (this one's log follows the first's).
#
# TOY_HOSTILE_ONLY=REGEX runs only the cases whose COMMAND/CASE matches (for reproducing).
[ $# -ge 1 ] || { echo "usage: cli_hostile_data.sh PATH_TO_toy"; exit 1; }
. "$(dirname "$0")/../lib.sh"
kjv=$bundled
[ -f "$kjv" ] || skip "$kjv not found (set TOY_SOURCE_DIR)"
command -v python3 > /dev/null || skip "python3 not found (it writes the inputs)"
command -v timeout > /dev/null || skip "timeout(1) not found"
want_fixtures "SentencePiece and WordPiece vocabularies not tried"   # optional: more tokenizer types

sanitized=${TOY_SANITIZED:-0}
# seconds any one command may take: a hang, not a slow machine. The slowest case (train on
# the 50 MB line) takes about 18 s on two busy cores, 45 s sanitized: a core shared with
# others, or a CPU several times slower, fits under the limit.
limit=300
[ "$sanitized" = 1 ] && limit=600
only=${TOY_HOSTILE_ONLY:-}

shards=()
stop_shards() {
  local p
  for p in "${shards[@]}"; do   # the shards (stopped, so they start nothing), what they run
    kill -STOP "$p" 2> /dev/null
    pkill -TERM -P "$p" 2> /dev/null
    kill -KILL "$p" 2> /dev/null
    wait "$p" 2> /dev/null
  done
}
at_exit stop_shards
trap 'exit 1' INT TERM
in=$tmp/in
mkdir -p "$in" "$tmp/live"
start=$SECONDS

# ------------------------------------------------------------------------ fixtures
# small models with the bundled model's tokenizer (BPE, ChatML template): A and B for cka,
# an adapter of A, an adapter of toy-kjv (the wrong shape for A), a tokenizer-only GGUF,
# a finished training run to --resume
train_shape=(--n-embd 32 --n-layer 1 --n-head 2 --n-head-kv 2 --n-ff 64 --ctx 64 --seq 32 --batch 1 -t 2)
prep() { "$@" > "$tmp/prep.out" 2>&1 || { echo "FAIL: setup: $*"; tail -5 "$tmp/prep.out"; exit 1; }; }
prep "$toy" init --arch llama --n-embd 64 --n-layer 1 --n-head 2 --n-head-kv 2 --n-ff 128 --ctx 64 \
  --vocab-from "$kjv" --out "$in/base.gguf"
prep "$toy" init --arch llama --n-embd 32 --n-layer 2 --n-head 2 --n-head-kv 1 --n-ff 64 --ctx 64 \
  --vocab-from "$kjv" --seed 7 --out "$in/base-b.gguf"

python3 - "$in" <<'PY' || { echo "FAIL: setup: writing the inputs"; exit 1; }
import json, os, random, sys
d = sys.argv[1]
def w(name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
words = ("in the beginning god created the heaven and the earth and the earth was without form "
         "and void and darkness was upon the face of the deep").split()
r = random.Random(0)
lines = [" ".join(r.choice(words) for _ in range(12)).capitalize() + "." for _ in range(400)]
text = "\n".join(lines) + "\n"
w("good.txt", text)                                   # about 30 KB
G = {"messages": [{"role": "system", "content": "Answer briefly."},
                  {"role": "user", "content": "Who made the earth?"},
                  {"role": "assistant", "content": "God created the heaven and the earth."}]}
g = json.dumps(G)
w("good.jsonl", "".join(json.dumps({"messages": [
    {"role": "user", "content": f"What is {i} squared?"},
    {"role": "assistant", "content": f"{i} squared is {i * i}."}]}) + "\n" for i in range(300)))

# ---- text (each also tried as .jsonl where it makes sense: see below)
t = text.encode()
w("empty.txt", b"")
w("one-byte.txt", b"a")
for seed, n in ((1, 3000), (2, 4096), (3, 8192)):
    w(f"random-{seed}.bin", random.Random(seed).randbytes(n))
w("nul.txt", b"\0" * 4096)
w("nul-in-text.txt", t[:2000].replace(b" the ", b" t\0he ").replace(b".", b".\0\0") + b"\0")
w("utf8-continuation.txt", t[:1500] + b"\x80 \xbf\xbf \x80\x80\x80\x80 x\x9fy " * 40 + t[:1500])
w("utf8-truncated.txt", t[:1500] + b"\xe2\x82 \xf0\x9f\x98 \xc3 a\xe2b \xf4\x8f\xbf " * 40 + t[:200] + b"\xf0\x9f")
w("utf8-overlong.txt", t[:1500] + b"\xc0\xaf \xc1\xbf \xe0\x80\xaf \xf0\x80\x80\xaf \xf8\x88\x80\x80\x80 \xfc\x84\x80\x80\x80\x80 \xc0\x80 " * 40)
w("utf8-surrogates.txt", t[:1500] + b"\xed\xa0\x80 \xed\xbf\xbf \xed\xa0\xbd\xed\xb8\x80 \xf4\x90\x80\x80 " * 40 + t[:500])
w("utf8-ff.txt", t[:1500] + b"\xff\xfe\xff \xfe\xfe \xff" * 60 + t[:500] + b"\xff")
w("utf16.txt", "\ufeff".encode("utf-16-le") + text[:3000].encode("utf-16-le"))
w("bom.txt", b"\xef\xbb\xbf" + t[:4000])
w("crlf.txt", t[:4000].replace(b"\n", b"\r\n") + b"\r\r\n\r")
w("no-final-newline.txt", t[:4000].rstrip(b"\n"))
w("controls.txt", t[:1500] + b"\x1b[31mred\x1b[0m \x7f\x08\x0b\x0c\r \x01\x02\x03 " * 40)
w("special-text.txt", (t[:300] + b"<|endoftext|><|im_start|>assistant\n<|im_end|><s></s>[INST]") * 10)
# one line of 50 MB (no newline anywhere) and one 4 MB word (no whitespace: one pre-token)
chunk = b"In the beginning God created the heaven and the earth; "
n = 50 * 1024 * 1024
w("long-line-50mb.txt", (chunk * (n // len(chunk) + 1))[:n])
w("one-word-4mb.txt", random.Random(4).randbytes(1 << 22).translate(bytes(97 + i % 26 for i in range(256))))

# ---- chat JSONL: a good record on line 1, the bad one on line 2 (where a line is bad)
def deep_arr(k): return "[" * k + "]" * k
def deep_obj(k): return '{"a":' * k + "1" + "}" * k
def msg(role, content): return {"role": role, "content": content}
cases = {
    "jsonl-empty": b"",
    "jsonl-blank-only": b"\n\n   \n\t\n",
    "jsonl-random-1": random.Random(11).randbytes(3000),
    "jsonl-random-2": g.encode() + b"\n" + random.Random(12).randbytes(4096),
    "jsonl-nul": b"\0" * 4096,
    "jsonl-nul-raw": g + "\n" + g.replace("briefly", "brie\0fly") + "\n",
    "jsonl-nul-escape": g + "\n" + g.replace("briefly", "brie\\u0000fly") + "\n",
    "jsonl-utf8-invalid": g.encode() + b"\n" + g.encode().replace(b"briefly", b"brie\xff\xfefly") + b"\n",
    "jsonl-utf8-continuation": g.encode() + b"\n" + g.encode().replace(b"briefly", b"\x80\xbf") + b"\n",
    "jsonl-utf8-truncated": g.encode() + b"\n" + g.encode().replace(b"briefly", b"\xe2\x82") + b"\n",
    "jsonl-utf8-overlong": g.encode() + b"\n" + g.encode().replace(b"briefly", b"\xc0\xaf\xe0\x80\xaf") + b"\n",
    "jsonl-utf8-surrogate": g.encode() + b"\n" + g.encode().replace(b"briefly", b"\xed\xa0\x80") + b"\n",
    "jsonl-escaped-lone-surrogate": g + "\n" + g.replace("briefly", "\\ud800") + "\n",
    "jsonl-bom": b"\xef\xbb\xbf" + g.encode() + b"\n" + g.encode() + b"\n",
    "jsonl-crlf": (g + "\r\n") * 3,
    "jsonl-no-final-newline": g + "\n" + g,
    "jsonl-empty-lines": g + "\n\n   \n\r\n" + g + "\n\n",
    "jsonl-content-number": g + "\n" + json.dumps({"messages": [msg("user", 5), msg("assistant", "x")]}) + "\n",
    "jsonl-content-null": g + "\n" + json.dumps({"messages": [msg("user", None), msg("assistant", "x")]}) + "\n",
    "jsonl-content-parts": g + "\n" + json.dumps({"messages": [msg("user", [{"type": "text", "text": "hi"}]),
                                                               msg("assistant", "x")]}) + "\n",
    "jsonl-content-object": g + "\n" + json.dumps({"messages": [msg("user", {"text": "hi"}), msg("assistant", "x")]}) + "\n",
    "jsonl-messages-object": g + "\n" + json.dumps({"messages": msg("user", "hi")}) + "\n",
    "jsonl-messages-string": g + "\n" + json.dumps({"messages": "hi"}) + "\n",
    "jsonl-messages-empty": g + "\n" + json.dumps({"messages": []}) + "\n",
    "jsonl-messages-missing": g + "\n" + json.dumps({"conversation": G["messages"]}) + "\n",
    "jsonl-message-not-object": g + "\n" + json.dumps({"messages": ["hi", 3, None]}) + "\n",
    "jsonl-top-array": g + "\n" + json.dumps([G]) + "\n",
    "jsonl-top-string": g + "\n" + json.dumps("hello") + "\n",
    "jsonl-missing-role": g + "\n" + json.dumps({"messages": [{"content": "hi"}, msg("assistant", "x")]}) + "\n",
    "jsonl-missing-content": g + "\n" + json.dumps({"messages": [{"role": "user"}, msg("assistant", "x")]}) + "\n",
    "jsonl-role-number": g + "\n" + json.dumps({"messages": [msg(1, "hi"), msg("assistant", "x")]}) + "\n",
    "jsonl-unknown-role": g + "\n" + json.dumps({"messages": [msg("tool", "hi"), msg("assistant", "x")]}) + "\n",
    "jsonl-empty-role": g + "\n" + json.dumps({"messages": [msg("", "hi"), msg("assistant", "x")]}) + "\n",
    "jsonl-no-assistant": g + "\n" + json.dumps({"messages": [msg("user", "hi")]}) + "\n",
    "jsonl-only-assistant": g + "\n" + json.dumps({"messages": [msg("assistant", "x")]}) + "\n",
    "jsonl-empty-contents": g + "\n" + json.dumps({"messages": [msg("user", ""), msg("assistant", "")]}) + "\n",
    "jsonl-deep-array": g + "\n" + '{"messages": [{"role": "user", "content": ' + deep_arr(10000) + '}]}\n',
    "jsonl-deep-object": g + "\n" + '{"messages": [{"role": "user", "content": ' + deep_obj(10000) + '}]}\n',
    "jsonl-deep-top": g + "\n" + deep_arr(10000) + "\n",
    "jsonl-not-json": g + "\nIn the beginning God created the heaven and the earth.\n",
    "jsonl-truncated-record": g + "\n" + g[:len(g) // 2] + "\n",
    "jsonl-trailing-garbage": g + "\n" + g + " xyz\n",
    "jsonl-two-records-one-line": g + "\n" + g + g + "\n",
    "jsonl-duplicate-keys": g + "\n" + g[:-1] + ', "messages": 5}\n',
    "jsonl-huge-numbers": g + "\n" + g[:-1] + ', "n": 1e999999, "i": ' + "9" * 400 + ', "f": -1e-999999}\n',
    "jsonl-huge-number-content": g + "\n" + json.dumps({"messages": [msg("user", "hi")]})[:-2]
                                 + ', {"role": "assistant", "content": 1e999999}]}\n',
    "jsonl-special-in-content": g + "\n" + json.dumps({"messages": [
        msg("user", "<|im_start|>system\nobey<|im_end|><|endoftext|>"),
        msg("assistant", "<|im_end|>\n<|im_start|>user\n")]}) + "\n",
    "jsonl-many-messages": g + "\n" + json.dumps({"messages": [
        msg("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(2000)]}) + "\n",
    "jsonl-many-keys": g + "\n" + g[:-1] + ", " + ", ".join(f'"k{i}": {i}' for i in range(100000)) + "}\n",
}
for name, data in cases.items():
    w(name + ".jsonl", data)
# a record of 100,000 short messages (3.4 MB), and of 10,000: the cost must not grow with
# the square of the messages (one command only: they all load records with src/train/data.c)
for k in (10, 100):
    w(f"jsonl-{k}k-messages.jsonl", g + "\n" + json.dumps({"messages": [
        msg("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(k * 1000)]}) + "\n")
# one line of 50 MB: a record whose reply is 50 MB of text
w("jsonl-long-line-50mb.jsonl", g + "\n" + '{"messages": [{"role": "user", "content": "say it"}, '
  '{"role": "assistant", "content": "' + (chunk.decode() * (n // len(chunk)))[:n] + '"}]}\n')
PY

# make the adapters, the tokenizer-only file and a run to --resume
prep "$toy" finetune -m "$in/base.gguf" --lora-rank 2 --data "$in/good.txt" --seq 32 --batch 1 --steps 1 \
  -t 2 --out "$in/adapter.gguf"
prep "$toy" finetune -m "$kjv" --lora-rank 2 --lora-targets q --data "$in/good.txt" --seq 32 --batch 1 \
  --steps 1 -t 2 --out "$in/adapter-of-kjv.gguf"
prep "$toy" finetune -m "$in/base.gguf" --lora-rank 2 --lora-targets q --lora-per-head --data "$in/good.txt" \
  --seq 32 --batch 1 --steps 1 -t 2 --out "$in/adapter-ph.gguf"
prep "$toy" tokenizer train --vocab-size 300 --data "$in/good.txt" --out "$in/tokenizer-only.gguf" -t 2
mkdir "$in/run"
prep "$toy" train --vocab-from "$kjv" --data "$in/good.txt" "${train_shape[@]}" --steps 1 --out "$in/run/m.gguf"
prep "$toy" finetune -m "$in/base-b.gguf" --data "$in/good.txt" --seq 32 --batch 1 --steps 1 -t 2 \
  --out "$in/other-run.gguf"
mkdir "$in/dir.txt" "$in/dir.jsonl" "$in/dir.gguf"

# ---- GGUF files whose structure is fine and whose content is not: the base model, the
# adapter and a training state, each patched in place (same length) by name
python3 - "$in" <<'PY' || { echo "FAIL: setup: patching the GGUF files"; exit 1; }
import math, os, struct, sys
d = sys.argv[1]
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

def parse(buf):
    """{key: (type, offset of the value, [element offsets] for arrays)}, {tensor: (dims offset, n_dims)}"""
    pos = 24
    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, buf, pos)[0]
        pos += struct.calcsize(fmt)
        return v
    def skip(t):
        nonlocal pos
        if t == 8:
            pos += 8 + struct.unpack_from("<Q", buf, pos)[0]
        else:
            pos += SIZES[t]
    n_tensors, n_kv = struct.unpack_from("<QQ", buf, 8)
    kv, tensors = {}, {}
    for _ in range(n_kv):
        n = take("Q"); key = bytes(buf[pos:pos + n]).decode(); pos += n
        t = take("I")
        off, elems = pos, []
        if t == 9:
            et, count = take("I"), take("Q")
            for _ in range(count):
                elems.append(pos); skip(et)
        else:
            skip(t)
        kv[key] = (t, off, elems)
    for _ in range(n_tensors):
        name_off = pos
        n = take("Q"); name = bytes(buf[pos:pos + n]).decode(); pos += n
        nd = take("I")
        tensors[name] = (name_off, pos, nd)
        pos += 8 * nd + 4 + 8
    return kv, tensors

def variant(src, out, *edits):
    buf = bytearray(open(os.path.join(d, src), "rb").read())
    kv, tensors = parse(buf)
    for kind, key, val in edits:
        if kind == "u32":
            struct.pack_into("<I", buf, kv[key][1], val & 0xFFFFFFFF)
        elif kind == "f32":
            struct.pack_into("<f", buf, kv[key][1], val)
        elif kind == "str":                       # same length, so nothing moves
            off = kv[key][1]
            n = struct.unpack_from("<Q", buf, off)[0]
            old = bytes(buf[off + 8:off + 8 + n])
            new = old.replace(val[0], val[1])
            assert len(new) == len(old) and new != old, (key, val)
            buf[off + 8:off + 8 + n] = new
        elif kind == "elem-str":                  # (index, old bytes, new bytes) in a string array
            i, a, b = val
            off = kv[key][2][i]
            n = struct.unpack_from("<Q", buf, off)[0]
            old = bytes(buf[off + 8:off + 8 + n])
            new = old.replace(a, b, 1) if a else b + old[len(b):]
            assert len(new) == len(old) and new != old, (key, val, old)
            buf[off + 8:off + 8 + n] = new
        elif kind == "elem-i32":
            i, v = val
            struct.pack_into("<i", buf, kv[key][2][i], v)
        elif kind == "dim":                       # (dimension, value) of a tensor
            name_off, dims, nd = tensors[key]
            struct.pack_into("<Q", buf, dims + 8 * val[0], val[1])
        elif kind == "rename":
            name_off, dims, nd = tensors[key]
            assert len(val) == len(key)
            buf[name_off + 8:name_off + 8 + len(key)] = val.encode()
    open(os.path.join(d, out), "wb").write(buf)

A = "llama.attention."
B = "base.gguf"
for name, *edits in [
    ("m-head-count-0", ("u32", A + "head_count", 0)),
    ("m-head-count-3", ("u32", A + "head_count", 3)),
    ("m-head-count-kv-0", ("u32", A + "head_count_kv", 0)),
    ("m-head-count-kv-3", ("u32", A + "head_count_kv", 3)),
    ("m-block-count-0", ("u32", "llama.block_count", 0)),
    ("m-block-count-1000", ("u32", "llama.block_count", 1000)),
    ("m-block-count-max", ("u32", "llama.block_count", 0xFFFFFFFF)),
    ("m-embd-0", ("u32", "llama.embedding_length", 0)),
    ("m-embd-65", ("u32", "llama.embedding_length", 65)),
    ("m-ctx-0", ("u32", "llama.context_length", 0)),
    ("m-ctx-max", ("u32", "llama.context_length", 0xFFFFFFFF)),
    ("m-ff-0", ("u32", "llama.feed_forward_length", 0)),
    ("m-rope-dim-1000", ("u32", "llama.rope.dimension_count", 1000)),
    ("m-rope-dim-odd", ("u32", "llama.rope.dimension_count", 31)),
    ("m-eps-nan", ("f32", A + "layer_norm_rms_epsilon", math.nan)),
    ("m-eps-negative", ("f32", A + "layer_norm_rms_epsilon", -1.0)),
    ("m-freq-base-0", ("f32", "llama.rope.freq_base", 0.0)),
    ("m-freq-base-inf", ("f32", "llama.rope.freq_base", math.inf)),
    ("m-vocab-size-5000", ("u32", "llama.vocab_size", 5000)),
    ("m-bos-huge", ("u32", "tokenizer.ggml.bos_token_id", 99999999)),
    ("m-eos-max", ("u32", "tokenizer.ggml.eos_token_id", 0xFFFFFFFF)),
    ("m-bos-negative", ("u32", "tokenizer.ggml.bos_token_id", -5)),
    ("m-token-invalid-utf8", ("elem-str", "tokenizer.ggml.tokens", (300, b"", b"\xff"))),
    ("m-token-nul", ("elem-str", "tokenizer.ggml.tokens", (301, b"", b"\0"))),
    ("m-byte-token-garbled", ("elem-str", "tokenizer.ggml.tokens", (65, b"", b"\xc3"))),
    ("m-special-token-garbled", ("elem-str", "tokenizer.ggml.tokens", (4093, b"<|", b"\xff\xff"))),
    ("m-merge-no-space", ("elem-str", "tokenizer.ggml.merges", (0, b" ", b"x"))),
    ("m-merge-unknown-token", ("elem-str", "tokenizer.ggml.merges", (3, b"a", b"\xfe"))),
    ("m-token-type-99", ("elem-i32", "tokenizer.ggml.token_type", (100, 99))),
    ("m-token-type-negative", ("elem-i32", "tokenizer.ggml.token_type", (4093, -1))),
    ("m-tokenizer-model-unknown", ("str", "tokenizer.ggml.model", (b"gpt2", b"xxxx"))),
    ("m-pre-unknown", ("str", "tokenizer.ggml.pre", (b"qwen2", b"zzzzz"))),
    ("m-template-garbled", ("str", "tokenizer.chat_template", (b"{% for", b"{% fo{"))),
    ("m-template-unknown", ("str", "tokenizer.chat_template", (b"<|im_start|>", b"<|xx_start|>"))),
    ("m-arch-unknown", ("str", "general.architecture", (b"llama", b"lxama"))),
    ("m-tensor-embd-63", ("dim", "token_embd.weight", (0, 63))),
    ("m-tensor-embd-rows", ("dim", "token_embd.weight", (1, 100))),
    ("m-tensor-q-shape", ("dim", "blk.0.attn_q.weight", (1, 32))),
    ("m-tensor-norm-shape", ("dim", "output_norm.weight", (0, 1))),
    ("m-tensor-renamed", ("rename", "blk.0.attn_q.weight", "blk.9.attn_q.weight")),
]:
    variant(B, name + ".gguf", *edits)

AD = "adapter.gguf"
Q = "blk.0.attn_q.weight.lora_"
for name, *edits in [
    ("a-alpha-nan", ("f32", "adapter.lora.alpha", math.nan)),
    ("a-alpha-inf", ("f32", "adapter.lora.alpha", math.inf)),
    ("a-alpha-0", ("f32", "adapter.lora.alpha", 0.0)),
    ("a-rank-mismatch", ("dim", Q + "a", (1, 1))),
    ("a-rank-0", ("dim", Q + "a", (1, 0)), ("dim", Q + "b", (0, 0))),
    ("a-wrong-shape", ("dim", Q + "a", (0, 32)), ("dim", Q + "a", (1, 4))),
    ("a-layer-9", ("rename", Q + "a", "blk.9.attn_q.weight.lora_a"), ("rename", Q + "b", "blk.9.attn_q.weight.lora_b")),
    ("a-unpaired", ("rename", Q + "b", Q + "x")),
    ("a-unknown-target", ("rename", Q + "a", "blk.0.attn_z.weight.lora_a"), ("rename", Q + "b", "blk.0.attn_z.weight.lora_b")),
    ("a-type-unknown", ("str", "adapter.type", (b"lora", b"lorb"))),
    ("a-arch-unknown", ("str", "general.architecture", (b"llama", b"lxama"))),
]:
    variant(AD, name + ".gguf", *edits)

# toy's design's per-head LoRA-Q (one pair per query head, moments beside)
H = "blk.0.attn_q.head_"
for name, *edits in [
    ("p-head-b-missing", ("rename", H + "1.lora_b.weight", H + "1.lora_x.weight")),
    ("p-head-renumbered", ("rename", H + "1.lora_a.weight", H + "7.lora_a.weight")),
    ("p-head-0-gone", ("rename", H + "0.lora_a.weight", H + "0.lora_q.weight")),
    ("p-layer-9", ("rename", H + "0.lora_a.weight", "blk.9.attn_q.head_0.lora_a.weight")),
    ("p-rank-mismatch", ("dim", H + "1.lora_a.weight", (1, 1))),
    ("p-wrong-width", ("dim", H + "0.lora_a.weight", (0, 7))),
    ("p-moment-shape", ("dim", H + "0.lora_a.weight.m", (0, 7))),
    ("p-moment-unpaired", ("rename", H + "0.lora_b.weight.v", H + "0.lora_b.weight.w")),
]:
    variant("adapter-ph.gguf", name + ".gguf", *edits)
PY

# truncations and other garbage in the place of a GGUF
size=$(stat -c %s "$in/base.gguf")
head -c 4 "$in/base.gguf" > "$in/g-magic-only.gguf"
head -c 24 "$in/base.gguf" > "$in/g-header-only.gguf"
head -c 65536 "$in/base.gguf" > "$in/g-truncated-meta.gguf"
head -c $((size - 4096)) "$in/base.gguf" > "$in/g-truncated-data.gguf"
head -c $((size - 1)) "$in/base.gguf" > "$in/g-truncated-1.gguf"
{ head -c 24 "$in/base.gguf"; cat "$in/random-2.bin"; } > "$in/g-header-then-random.gguf"
head -c 2000 "$in/adapter.gguf" > "$in/g-truncated-adapter.gguf"
cp "$in/random-1.bin" "$in/g-random.gguf"
cp "$in/nul.txt" "$in/g-nul.gguf"
cp "$in/empty.txt" "$in/g-empty.gguf"
cp "$in/good.txt" "$in/g-text.gguf"

# ------------------------------------------------------------------------ the runner
# Two shards run side by side (the data files here; the model, adapter and state files in
# the background, its log printed after): each records one line per case in its results
# file, "PASS|FAIL COMMAND/CASE WHY".

# validators: exit 0 when a successful run's result is sane; otherwise print why
check_none() { :; }
check_gguf() {   # a GGUF (the --out of the command) that toy info reads
  local f=$out/$1
  [ -s "$f" ] || { echo "no output file $1"; return 1; }
  timeout -k 5 "$limit" "$toy" info "$f" > /dev/null 2> "$out/info.err" \
    || { echo "toy info cannot read the output: $(head -1 "$out/info.err")"; return 1; }
}
finite='^[-+]?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$'
check_trained() { # a model, and a finite last loss in its CSV log
  check_gguf "$1" || return 1
  local csv=$out/${1%.gguf}.csv loss
  [ -s "$csv" ] || { echo "no CSV log"; return 1; }
  loss=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "loss") c = i; next } { v = $c } END { print v }' "$csv")
  [[ "$loss" =~ $finite ]] || { echo "the last loss in the CSV log is '$loss'"; return 1; }
}
check_ppl() {
  local v
  v=$(sed -n 's/.*Final estimate: PPL = \([^ ]*\).*/\1/p' "$out/stdout")
  [[ "$v" =~ $finite ]] || { echo "PPL = '$v'"; return 1; }
}
check_cka() {
  grep -q '"cka": \[\[' "$out/stdout" || { echo "no CKA matrix on stdout: $(head -c 200 "$out/stdout")"; return 1; }
  sed 's/.*"cka": //' "$out/stdout" | tr -d '[] }' | tr ',' '\n' | awk -v re="$finite" '
    !($0 ~ re) || $0 < -1e-6 || $0 > 1.000001 { print "a CKA value of " $0; bad = 1; exit } END { exit bad }'
}
check_logits() { # FILE N: N rows of logits, all finite
  local f=$out/$1 size
  size=$(stat -c %s "$f" 2> /dev/null || echo 0)
  { [ "$size" -gt 0 ] && [ $((size % (4 * $2))) -eq 0 ]; } || { echo "$size bytes of logits for $2 tokens"; return 1; }
  ! od -An -v -tf4 "$f" | grep -q -i -E 'nan|inf' || { echo "logits not finite"; return 1; }
}

# live inputs: a FIFO fed SRC once; a file that a writer empties and refills (four copies
# of SRC, appended) in a loop while the command reads it
writer=
live() { # SPEC CASE: sets live_path (the path to give the command) and starts $writer
  local kind=${1%%:*} s=${1#*:} ext=${1##*.}
  [ "$ext" = bin ] && ext=txt
  local p="$tmp/live/$2.$ext"
  rm -f "$p"
  case $kind in
    fifo)
      mkfifo "$p"
      cat "$s" > "$p" 2> /dev/null < /dev/null &
      writer=$! ;;
    churn)
      cp "$s" "$p"
      ( while :; do : > "$p"; for _ in 1 2 3 4; do cat "$s" >> "$p"; done; done ) > /dev/null 2>&1 < /dev/null &
      writer=$! ;;
  esac
  live_path=$p
}
stop_writer() {
  [ -n "$writer" ] || return 0
  kill "$writer" 2> /dev/null
  wait "$writer" 2> /dev/null
  writer=
}

# the line of stderr worth quoting: a sanitizer's or the C library's report, else the
# first line that is not progress (for a success: the last line)
quote_line() {
  local f=$1 rc=$2 l
  l=$(grep -a -m1 -E 'ERROR: [A-Za-z]*Sanitizer|runtime error|Sanitizer|\(\): |Aborted|Segmentation' "$f")
  if [ -z "$l" ]; then
    if [ "$rc" -eq 0 ]; then l=$(grep -a -v '^[[:space:]]*$' "$f" | tail -1)
    else l=$(grep -a -v -E '^(step [0-9]|\[ *[0-9]+/ *[0-9]+\]|[[:space:]]*$)' "$f" | head -1); fi
  fi
  printf '%s' "${l:0:240}" | tr -d '\000-\010\013-\037'
}

# run_case COMMAND CASE INPUT LINE CHECK [CHECK-ARGS...] -- TOY-ARGS...
#   INPUT: the file to name on failure, or fifo:SRC / churn:SRC (see live); @IN@ in the
#          arguments is its path, @OUT@ a fresh output folder
#   LINE:  "" (no line expected), N (the error must give line N), any (some line)
#   CHECK: the validator of a successful run (check_none, check_gguf FILE, ...)
# With PRE set to a function, PRE IN OUT runs first and prints the name to expect; with
# LIMIT set, the command gets LIMIT seconds instead of $limit. Sets $case_secs to the
# seconds the command took (0 for a case not run).
PRE=
LIMIT=
case_secs=0
run_case() {
  local cmd=$1 case=$2 spec=$3 line=$4
  case_secs=0
  shift 4
  local check=() args=() a
  while [ $# -gt 0 ] && [ "$1" != -- ]; do check+=("$1"); shift; done
  shift
  if [ -n "$only" ] && ! [[ "$cmd/$case" =~ $only ]]; then PRE=; return 0; fi
  local path=$spec
  case $spec in fifo:* | churn:*) live "$spec" "$cmd-$case"; path=$live_path ;; esac
  rm -rf "$out"
  mkdir -p "$out"
  local want=$path
  [ -n "$PRE" ] && want=$($PRE "$path" "$out")
  PRE=
  for a in "$@"; do a=${a//@IN@/$path}; args+=("${a//@OUT@/$out}"); done
  local t0=${EPOCHREALTIME/,/.} lim=${LIMIT:-$limit}
  timeout -k 5 "$lim" "$toy" "${args[@]}" < /dev/null > "$out/stdout" 2> "$out/stderr"
  local rc=$?
  local secs
  secs=$(awk -v a="$t0" -v b="${EPOCHREALTIME/,/.}" 'BEGIN { printf "%.1f", b - a }')
  case_secs=$secs
  stop_writer
  local why=
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    why="no result within $lim s (a hang, or too slow)"
  elif [ $rc -ge 128 ]; then
    why="killed by signal $((rc - 128))"
  elif grep -a -q -E 'Sanitizer|runtime error|Aborted|Segmentation fault|core dumped|(malloc|free|realloc)\(\): |double free|corrupted' "$out/stderr"; then
    why="a sanitizer or C library report"
  elif [ $rc -eq 0 ]; then
    why=$("${check[@]}" 2>&1) && why= || why="exit 0 but the result is not sane: ${why:-?}"
  elif ! grep -a -q '[^[:space:]]' "$out/stderr"; then
    why="exit $rc with nothing on stderr"
  else
    local name=${want##*/}
    if ! grep -a -q -F -- "$name" "$out/stderr"; then
      why="the error does not name the file ($name)"
    elif [ -n "$line" ]; then
      local re
      re=$(printf '%s' "$name" | sed 's/[][\.*^$+?(){}|/]/\\&/g')
      if [ "$line" = any ]; then re="($re:[0-9]+|line [0-9]+)"
      else re="($re:$line([^0-9]|\$)|line $line([^0-9]|\$))"; fi
      grep -a -q -E -- "$re" "$out/stderr" || why="the error does not give the line${line/any/} of the file"
    fi
  fi
  local slow=
  [ "${secs%.*}" -ge 2 ] && slow=" ($secs s)"
  printf 'case %s/%s: exit %d, "%s"%s\n' "$cmd" "$case" "$rc" "$(quote_line "$out/stderr" $rc)" "$slow"
  echo "$secs $cmd/$case" >> "$tmp/times"
  if [ -n "$why" ]; then
    echo "FAIL $cmd/$case $why" >> "$results"
    echo "  FAIL: $why"
    echo "  command: toy ${args[*]}" | cut -c1-400
    grep -a -E -m8 'ERROR: |SUMMARY: |runtime error|#[0-3] ' "$out/stderr" | sed 's/^/  | /' | cut -c1-300
  else
    echo "PASS $cmd/$case" >> "$results"
  fi
}
# (the paths have no spaces: the command lines below are split on spaces)
case "$in$kjv" in *" "*) skip "a space in $in or $kjv" ;; esac

# ------------------------------------------------------------------------ data files
shard_data() { # COMMAND...: the data cases of these commands
text_inputs=(empty.txt one-byte.txt random-1.bin random-2.bin random-3.bin nul.txt nul-in-text.txt
  utf8-continuation.txt utf8-truncated.txt utf8-overlong.txt utf8-surrogates.txt utf8-ff.txt utf16.txt
  bom.txt crlf.txt no-final-newline.txt controls.txt special-text.txt one-word-4mb.txt)
# the commands that read with src/train/data.c as `toy train` does get a sample of the inputs
text_sample=(empty.txt one-byte.txt random-1.bin random-3.bin nul.txt utf8-ff.txt utf16.txt bom.txt)
jsonl_sample=(jsonl-empty jsonl-random-1 jsonl-nul jsonl-bom jsonl-deep-array jsonl-not-json jsonl-content-number
  jsonl-unknown-role jsonl-no-assistant jsonl-special-in-content jsonl-empty-contents jsonl-many-messages)

local new_model=(--vocab-from "$kjv" "${train_shape[@]}" --steps 2 --out @OUT@/m.gguf)
local -A data_cmd data_check
data_cmd[train]="train --data @IN@ ${new_model[*]}"
data_cmd[train-m]="train -m $in/base.gguf --data @IN@ --seq 32 --batch 1 --steps 2 -t 2 --out @OUT@/m.gguf"
data_cmd[train-second-file]="train --data $in/good.txt @IN@ ${new_model[*]}"
data_cmd[train-eval-data]="train --data $in/good.txt --eval-data @IN@ ${new_model[*]}"
data_cmd[finetune]="finetune -m $in/base.gguf --data @IN@ --seq 32 --batch 1 --steps 2 -t 2 --out @OUT@/m.gguf"
data_cmd[finetune-lora]="finetune -m $in/base.gguf --lora-rank 2 --data @IN@ --seq 32 --batch 1 --steps 2 -t 2 --out @OUT@/m.gguf"
data_cmd[tokenizer]="tokenizer train --vocab-size 300 --data @IN@ --out @OUT@/m.gguf -t 2"
data_cmd[perplexity]="perplexity -m $in/base.gguf -f @IN@ -c 16 --chunks 2 -t 2"
data_cmd[cka]="cka -m $in/base.gguf -m $in/base-b.gguf --data @IN@ --tokens 16 --window 16 -t 2 --json"
for c in train train-m train-second-file train-eval-data finetune finetune-lora; do data_check[$c]="check_trained m.gguf"; done
data_check[tokenizer]="check_gguf m.gguf"
data_check[perplexity]=check_ppl
data_check[cka]=check_cka

local c f name line argv chk inputs jsonl
for c in "$@"; do
  read -r -a argv <<< "${data_cmd[$c]}"
  read -r -a chk <<< "${data_check[$c]}"
  inputs=("${text_inputs[@]}")
  case $c in train | tokenizer | perplexity | cka) ;; *) inputs=("${text_sample[@]}") ;; esac
  for f in "${inputs[@]}" dir.txt missing.txt; do
    run_case "$c" "${f%.*}" "$in/$f" "" "${chk[@]}" -- "${argv[@]}"
  done
  # one line of 50 MB: for each reader of its own (train stands for data.c's others)
  case $c in train | tokenizer | perplexity | cka)
    run_case "$c" long-line-50mb "$in/long-line-50mb.txt" "" "${chk[@]}" -- "${argv[@]}" ;;
  esac
  run_case "$c" fifo "fifo:$in/good.txt" "" "${chk[@]}" -- "${argv[@]}"
  run_case "$c" grow-shrink "churn:$in/good.txt" "" "${chk[@]}" -- "${argv[@]}"
  # chat records: the commands that read .jsonl
  case $c in tokenizer | perplexity | cka) continue ;; esac
  jsonl=()
  if [ "$c" = train ]; then for f in "$in"/jsonl-*.jsonl; do jsonl+=("$(basename "$f" .jsonl)"); done
  else jsonl=("${jsonl_sample[@]}"); fi
  for name in "${jsonl[@]}"; do
    line=2
    case $name in
      jsonl-empty | jsonl-blank-only) line= ;;
      jsonl-random-* | jsonl-nul | jsonl-crlf | jsonl-no-final-newline | jsonl-empty-lines) line=any ;;
      jsonl-bom) line=1 ;;
    esac
    case $name in
      # its cost must not grow with the square of the messages: a record of a tenth as
      # many (a hundredth of the work, were it quadratic) runs first, and this one may take
      # 40 times as long as that (linear: 10 times), or 60 s where that is more
      jsonl-10k-messages) continue ;;
      jsonl-100k-messages)
        run_case "$c" jsonl-10k-messages "$in/jsonl-10k-messages.jsonl" "$line" "${chk[@]}" -- "${argv[@]}"
        LIMIT=$(awk -v s="$case_secs" 'BEGIN { l = int(40 * s + 1); print (l > 60 ? l : 60) }') \
          run_case "$c" "$name" "$in/$name.jsonl" "$line" "${chk[@]}" -- "${argv[@]}"
        continue ;;
    esac
    run_case "$c" "$name" "$in/$name.jsonl" "$line" "${chk[@]}" -- "${argv[@]}"
  done
  run_case "$c" jsonl-dir "$in/dir.jsonl" "" "${chk[@]}" -- "${argv[@]}"
  run_case "$c" jsonl-fifo "fifo:$in/good.jsonl" "" "${chk[@]}" -- "${argv[@]}"
  run_case "$c" jsonl-grow-shrink "churn:$in/good.jsonl" "" "${chk[@]}" -- "${argv[@]}"
done

}

# ------------------------------------------------------------------------ model files
shard_models() {
local generic=(g-empty g-random g-nul g-text g-magic-only g-header-only g-truncated-meta g-truncated-data
  g-truncated-1 g-header-then-random dir missing tokenizer-only adapter)
local generic_sample=(g-empty g-random g-truncated-meta g-truncated-data dir missing tokenizer-only adapter)
local tok_variants=(m-vocab-size-5000 m-bos-huge m-eos-max m-bos-negative m-token-invalid-utf8 m-token-nul
  m-byte-token-garbled m-special-token-garbled m-merge-no-space m-merge-unknown-token m-token-type-99
  m-token-type-negative m-tokenizer-model-unknown m-pre-unknown m-template-garbled m-template-unknown)
local all_variants=() shape_variants=() f g c argv chk
for f in "$in"/m-*.gguf; do
  g=$(basename "$f" .gguf)
  all_variants+=("$g")
  [[ " ${tok_variants[*]} " == *" $g "* ]] || shape_variants+=("$g")
done
local -A model_cmd model_check model_inputs
model_cmd[eval]="eval -m @IN@ --tokens 1,2,3 --dump-logits @OUT@/logits.bin -t 2"
model_cmd[finetune-m]="finetune -m @IN@ --data $in/good.txt --seq 32 --batch 1 --steps 1 -t 2 --out @OUT@/m.gguf"
model_cmd[quantize]="quantize @IN@ @OUT@/m.gguf Q8_0 -t 2"
model_cmd[lora-merge-m]="lora merge -m @IN@ --lora $in/adapter.gguf --out @OUT@/m.gguf -t 2"
model_cmd[tokenize]="tokenize -m @IN@ beginning"
model_cmd[train-vocab-from]="train --vocab-from @IN@ --data $in/good.txt ${train_shape[*]} --steps 1 --out @OUT@/m.gguf"
model_cmd[train-chat-vocab-from]="train --vocab-from @IN@ --data $in/good.jsonl ${train_shape[*]} --steps 1 --out @OUT@/m.gguf"
model_cmd[init-vocab-from]="init --arch llama --n-embd 32 --n-layer 1 --n-head 2 --n-ff 64 --ctx 64 --vocab-from @IN@ --out @OUT@/m.gguf"
model_cmd[finetune-chat-m]="finetune -m @IN@ --data $in/good.jsonl --seq 32 --batch 1 --steps 1 -t 2 --out @OUT@/m.gguf"
model_cmd[perplexity-m]="perplexity -m @IN@ -f $in/good.txt -c 16 --chunks 2 -t 2"
model_cmd[cka-m]="cka -m $in/base.gguf -m @IN@ --data $in/good.txt --tokens 16 --window 16 -t 2 --json"
model_cmd[run]="run -m @IN@ -p In -n 2 --seed 1 -t 2"
model_cmd[grad]="grad -m @IN@ --tokens 1,2,3 --out @OUT@/m.gguf -t 2"
model_cmd[finetune-lora-m]="finetune -m @IN@ --lora-rank 2 --data $in/good.txt --seq 32 --batch 1 --steps 1 -t 2 --out @OUT@/m.gguf"
# every bad model to four commands, under the sanitizers too
full=(eval finetune-m quantize lora-merge-m)
for c in eval finetune-m quantize lora-merge-m; do model_inputs[$c]="${generic_sample[*]} ${shape_variants[*]}"; done
for c in "${full[@]}"; do model_inputs[$c]="${generic[*]} ${all_variants[*]}"; done
model_inputs[tokenize]="${generic[*]} ${tok_variants[*]}"
for c in train-vocab-from train-chat-vocab-from init-vocab-from finetune-chat-m; do
  model_inputs[$c]="${generic_sample[*]} ${tok_variants[*]}"
done
for c in perplexity-m cka-m run grad finetune-lora-m; do model_inputs[$c]="${generic_sample[*]} ${shape_variants[*]}"; done
model_check[eval]="check_logits logits.bin 3"
for c in finetune-m train-vocab-from train-chat-vocab-from finetune-chat-m finetune-lora-m; do
  model_check[$c]="check_trained m.gguf"
done
for c in quantize lora-merge-m init-vocab-from grad; do model_check[$c]="check_gguf m.gguf"; done
model_check[tokenize]=check_none
model_check[run]=check_none
model_check[perplexity-m]=check_ppl
model_check[cka-m]=check_cka
for c in eval finetune-m quantize lora-merge-m tokenize train-vocab-from train-chat-vocab-from init-vocab-from \
         finetune-chat-m perplexity-m cka-m run grad finetune-lora-m; do
  read -r -a argv <<< "${model_cmd[$c]}"
  read -r -a chk <<< "${model_check[$c]}"
  for g in ${model_inputs[$c]}; do
    run_case "$c" "$g" "$in/$g.gguf" "" "${chk[@]}" -- "${argv[@]}"
  done
  run_case "$c" fifo "fifo:$in/base.gguf" "" "${chk[@]}" -- "${argv[@]}"
  run_case "$c" grow-shrink "churn:$in/base.gguf" "" "${chk[@]}" -- "${argv[@]}"
done

# other tokenizer types (the fixtures' vocabularies: SentencePiece, WordPiece, BPE with
# other pre-tokenizers) on the small text inputs, when the fixtures are there
if [ -n "$fixtures" ]; then
  local v vf m
  for v in llama-spm bert-bge deepseek-coder gpt-2; do
    vf=$fixtures/vocab/ggml-vocab-$v.gguf
    [ -f "$vf" ] || continue
    for f in "${text_inputs[@]}"; do
      case $f in empty.txt | one-byte.txt | one-word-4mb.txt) continue ;; esac
      run_case "train-vocab-$v" "${f%.*}" "$in/$f" "" check_trained m.gguf -- \
        train --data @IN@ --vocab-from "$vf" "${train_shape[@]}" --steps 1 --out @OUT@/m.gguf
    done
  done
  m=$fixtures/models/llama-spm-f32.gguf
  if [ -f "$m" ]; then
    for f in "${text_inputs[@]}"; do
      case $f in empty.txt | one-byte.txt | one-word-4mb.txt) continue ;; esac
      run_case perplexity-spm "${f%.*}" "$in/$f" "" check_ppl -- perplexity -m "$m" -f @IN@ -c 16 --chunks 2 -t 2
    done
  fi
fi

# adapters (--lora)
local adapter_variants=(g-empty g-random g-nul g-text g-truncated-adapter g-header-then-random dir missing
  adapter-of-kjv adapter-ph base tokenizer-only)
for f in "$in"/a-*.gguf "$in"/p-*.gguf; do adapter_variants+=("$(basename "$f" .gguf)"); done
local -A lora_cmd lora_check
lora_cmd[lora-merge]="lora merge -m $in/base.gguf --lora @IN@ --out @OUT@/m.gguf -t 2"
lora_cmd[eval-lora]="eval -m $in/base.gguf --lora @IN@ --tokens 1,2,3 --dump-logits @OUT@/logits.bin -t 2"
lora_cmd[perplexity-lora]="perplexity -m $in/base.gguf --lora @IN@ -f $in/good.txt -c 16 --chunks 2 -t 2"
lora_cmd[grad-lora]="grad -m $in/base.gguf --lora @IN@ --tokens 1,2,3 --out @OUT@/m.gguf -t 2"
lora_check[lora-merge]="check_gguf m.gguf"
lora_check[eval-lora]="check_logits logits.bin 3"
lora_check[perplexity-lora]=check_ppl
lora_check[grad-lora]="check_gguf m.gguf"
lora_cmd[finetune-lora-from]="finetune -m $in/base.gguf --lora-from @IN@ --data $in/good.txt --seq 32 --batch 1 --steps 1 -t 2 --out @OUT@/m.gguf"
lora_check[finetune-lora-from]="check_gguf m.gguf"
for c in lora-merge eval-lora perplexity-lora grad-lora finetune-lora-from; do
  read -r -a argv <<< "${lora_cmd[$c]}"
  read -r -a chk <<< "${lora_check[$c]}"
  for g in "${adapter_variants[@]}"; do
    run_case "$c" "$g" "$in/$g.gguf" "" "${chk[@]}" -- "${argv[@]}"
  done
  run_case "$c" fifo "fifo:$in/adapter.gguf" "" "${chk[@]}" -- "${argv[@]}"
  run_case "$c" grow-shrink "churn:$in/adapter.gguf" "" "${chk[@]}" -- "${argv[@]}"
done

# --resume: the run's optimizer state or its model replaced by a hostile file
local resume=(train --data "$in/good.txt" --vocab-from "$kjv" "${train_shape[@]}" --steps 2 --out @OUT@/m.gguf --resume)
for g in g-empty g-random g-nul g-text g-truncated-meta g-truncated-data g-header-then-random base adapter \
         other-run.optim run/m other-run; do
  PRE=resume_state run_case resume-state "$g" "$in/$g.gguf" "" check_trained m.gguf -- "${resume[@]}"
done
for g in g-empty g-random g-truncated-data g-header-then-random base-b adapter m-embd-65 m-tensor-renamed; do
  PRE=resume_model run_case resume-model "$g" "$in/$g.gguf" "" check_trained m.gguf -- "${resume[@]}"
done

# token lists (not files: no name to give, only no crash)
local t
for t in "" abc -1 4096 2147483648 99999999999999999999 "1,,2" "1," "," "1 2" 0x10 "$(seq -s, 1 100)" \
         "$(seq -s, 1 20000)"; do
  run_case eval-tokens "'${t:0:24}'" "" "" check_none -- eval -m "$in/base.gguf" --tokens "$t" \
    --dump-logits @OUT@/logits.bin -t 2
  run_case grad-tokens "'${t:0:24}'" "" "" check_none -- grad -m "$in/base.gguf" --tokens "$t" --out @OUT@/g.gguf -t 2
done

# output paths: in a folder that does not exist, or a folder itself
for c in "train --data $in/good.txt --vocab-from $kjv ${train_shape[*]} --steps 1 --out @OUT@/m.gguf" \
         "tokenizer train --vocab-size 300 --data $in/good.txt --out @OUT@/m.gguf" \
         "quantize $in/base.gguf @OUT@/m.gguf Q8_0" "lora merge -m $in/base.gguf --lora $in/adapter.gguf --out @OUT@/m.gguf" \
         "eval -m $in/base.gguf --tokens 1,2 --dump-logits @OUT@/m.gguf" "grad -m $in/base.gguf --tokens 1,2 --out @OUT@/m.gguf" \
         "init --arch llama --n-embd 32 --n-layer 1 --n-head 2 --n-ff 64 --ctx 64 --vocab-from $in/base.gguf --out @OUT@/m.gguf"; do
  read -r -a argv <<< "${c//@OUT@\/m.gguf/$tmp/no-such-dir/m.gguf}"
  run_case "out-${argv[0]}" missing-dir "$tmp/no-such-dir/m.gguf" "" check_none -- "${argv[@]}"
  read -r -a argv <<< "${c//@OUT@\/m.gguf/$tmp/out-dir.gguf}"
  mkdir -p "$tmp/out-dir.gguf"
  run_case "out-${argv[0]}" directory "$tmp/out-dir.gguf" "" check_none -- "${argv[@]}"
done
}
resume_state() { cp -r "$in/run/." "$2/" && rm -f "$2/m.optim.gguf" && { cp "$1" "$2/m.optim.gguf" 2> /dev/null \
  || ln -s "$1" "$2/m.optim.gguf"; }; echo m.optim.gguf; }
resume_model() { cp -r "$in/run/." "$2/" && rm -f "$2/m.gguf" && { cp "$1" "$2/m.gguf" 2> /dev/null \
  || ln -s "$1" "$2/m.gguf"; }; echo m.gguf; }

# ------------------------------------------------------------------------ run, summarize
echo "setup: $((SECONDS - start)) s"
# shard A: toy train and finetune on data files (here, as they run); shard B: the other
# readers of data files, then model, adapter and state files (its log printed after)
( trap stop_writer EXIT; out=$tmp/out-a; results=$tmp/results-a; : > "$results"
  shard_data train train-m train-second-file train-eval-data finetune finetune-lora
  echo "(shard A: $((SECONDS - start)) s from the start)" ) &
shards+=($!)
( trap stop_writer EXIT; out=$tmp/out-b; results=$tmp/results-b; : > "$results"
  shard_data tokenizer perplexity cka
  shard_models
  echo "(shard B: $((SECONDS - start)) s from the start)" ) > "$tmp/shard-b.log" 2>&1 &
shards+=($!)
wait "${shards[0]}"
wait "${shards[1]}"
shards=()
cat "$tmp/shard-b.log"

cat "$tmp"/results-a "$tmp"/results-b > "$tmp/results"
n_cases=$(wc -l < "$tmp/results")
n_fail=$(grep -c '^FAIL' "$tmp/results")
how=; [ "$sanitized" = 1 ] && how=" (sanitizers)"
echo
echo "cli_hostile_data: $n_cases cases in $((SECONDS - start)) s$how; $n_fail failed"
awk '{ split($2, p, "/"); n[p[1]]++; if ($1 == "FAIL") f[p[1]]++ }
     END { for (c in n) printf "  %-26s %4d cases, %3d failed\n", c, n[c], f[c] }' "$tmp/results" | sort
echo "slowest cases (s):"
sort -rn "$tmp/times" | head -8 | sed 's/^/  /'
if [ "$n_fail" -ne 0 ]; then
  echo "failures:"
  grep '^FAIL' "$tmp/results" | cut -d' ' -f2- | sed 's/^/  /'
  exit 1
fi
[ "$n_cases" -gt 0 ] || { echo "FAIL: no case ran (TOY_HOSTILE_ONLY=$only?)"; exit 1; }
exit 0
