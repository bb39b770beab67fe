#!/usr/bin/env bash
# toy init writes a model of the preset's shape with the vocabulary's tokenizer, the same
# bytes for the same seed whatever the threads; toy run loads it; toy bench reports the
# fields its --json promises; scripts/bench-vs-llama.sh -l prints its long-prompt table.
# The tokenizer is the fixtures' GPT-2 vocabulary, or without them the bundled model's.
. "$(dirname "$0")/../lib.sh"
want_fixtures
# the tokenizer, its size, and the parameters smollm2-135m has with it (millions)
if [ -n "$fixtures" ]; then
  vocab="$fixtures/vocab/ggml-vocab-gpt-2.gguf" n_vocab=50257 params="134 136"
else
  vocab="$bundled" n_vocab=4096 params="107 110"
fi

"$toy" init --arch llama --preset smollm2-135m --vocab-from "$vocab" --out "$tmp/a.gguf" \
  --type Q4_0 --seed 7 -t 1 2> "$tmp/err" || die "toy init failed: $(tail -1 "$tmp/err")"
"$toy" init --arch llama --preset smollm2-135m --vocab-from "$vocab" --out "$tmp/b.gguf" \
  --type Q4_0 --seed 7 -t 2 2> /dev/null || die "toy init -t 2 failed"
cmp -s "$tmp/a.gguf" "$tmp/b.gguf" || die "toy init: the same seed gave different files with 1 and 2 threads"

"$toy" info --json "$tmp/a.gguf" > "$tmp/info.json" || die "toy info on the initialised model failed"
python3 - "$tmp/info.json" $n_vocab $params <<'PY' || die "the initialised model does not have smollm2-135m's shape"
import json, sys
d = json.load(open(sys.argv[1]))
n_vocab, lo, hi = int(sys.argv[2]), float(sys.argv[3]) * 1e6, float(sys.argv[4]) * 1e6
h = d["hyperparameters"]
ok = (d["architecture"] == "llama" and h["block_count"] == 30 and h["embedding_length"] == 576
      and h["attention.head_count"] == 9 and h["attention.head_count_kv"] == 3
      and h["feed_forward_length"] == 1536 and d["tokenizer"]["vocab_size"] == n_vocab
      and d["n_tensors"] == 1 + 1 + 30 * 9 and lo < d["n_params"] < hi)
sys.exit(0 if ok else 1)
PY

"$toy" run -m "$tmp/a.gguf" -p "Hello" -n 2 --temp 0 -c 64 > /dev/null 2> "$tmp/err" \
  || die "toy run on the initialised model failed: $(tail -1 "$tmp/err")"

# -t 2: the default is the CPUs this process may use, one under taskset -c 0
"$toy" bench -m "$tmp/a.gguf" -p 8 -n 4 -r 1 -t 2 --json > "$tmp/bench.json" 2> "$tmp/err" \
  || die "toy bench failed: $(tail -1 "$tmp/err")"
python3 - "$tmp/bench.json" <<'PY' || die "toy bench --json lacks a field or has a bad value"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("prompt_tokens_per_s", "gen_tokens_per_s", "weight_bytes_per_token",
          "bandwidth_gb_per_s", "roofline_fraction", "threads", "model_type"):
    assert k in d, k
assert d["prompt_tokens_per_s"] > 0 and d["gen_tokens_per_s"] > 0 and d["bandwidth_gb_per_s"] > 0
assert 60e6 < d["weight_bytes_per_token"] < 100e6, d["weight_bytes_per_token"]
assert d["threads"] == 2 and "smollm2-135m" in d["model_type"]
assert d["isa"] in ("amx", "avx512", "avxvnni", "avx2", "scalar"), d.get("isa")
# the last-level cache is the largest-level data or unified cache of CPU 0 in sysfs
import glob, os
want, level = 0, 0
for idx in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
    rd = lambda f: open(os.path.join(idx, f)).read().strip()
    size = rd("size")
    n = int(size.rstrip("KM")) << (10 if size.endswith("K") else 20 if size.endswith("M") else 0)
    if rd("type") != "Instruction" and int(rd("level")) >= level and n:
        want, level = n, int(rd("level"))
assert d["last_level_cache_bytes"] == want, (d["last_level_cache_bytes"], want)
PY

# scripts/bench-vs-llama.sh against a stand-in llama-bench whose prompt speed is 1000 / n
# tokens/s (no llama.cpp needed): the long-prompt table's rows, shares and ratios
script="$src/scripts/bench-vs-llama.sh"
mkdir -p "$tmp/llama/bin"
cat > "$tmp/llama/bin/llama-bench" <<'SH'
#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = -p ] && p=$2; shift; done
echo "[{\"n_prompt\": $p, \"n_gen\": 0, \"avg_ts\": $((1000 / p))}]"
SH
chmod +x "$tmp/llama/bin/llama-bench"
TOY="$toy" LLAMA_CPP="$tmp/llama" "$script" -l 8,40 -r 1 "$tmp/a.gguf" > "$tmp/long.txt" 2> "$tmp/err" \
  || die "bench-vs-llama.sh -l failed: $(tail -1 "$tmp/err")"
python3 - "$tmp/long.txt" <<'PY' || die "bench-vs-llama.sh -l printed a wrong table: $(cat "$tmp/long.txt")"
import sys
rows = [l.split("|")[1:-1] for l in open(sys.argv[1]) if l.startswith("| a.gguf")]
assert [r[1].strip() for r in rows] == ["8", "40"], rows
toy = [float(r[2]) for r in rows]
pct = lambda s: float(s.strip().rstrip(" %"))
# the share comes from the unrounded speeds: within what their printed 0.1 allows, and
# its own rounding to a whole percent (a slow first run makes toy[0] small and that wide)
lo, hi = 100 * (toy[1] - 0.05) / (toy[0] + 0.05) - 0.5, 100 * (toy[1] + 0.05) / (toy[0] - 0.05) + 0.5
assert pct(rows[0][3]) == 100 and lo <= pct(rows[1][3]) <= hi, (rows, lo, hi)
assert [float(r[4]) for r in rows] == [125.0, 25.0] and pct(rows[1][5]) == 20, rows
assert all(abs(float(r[6].strip().rstrip("x")) - t / l) <= 0.01 for r, t, l in zip(rows, toy, (125.0, 25.0))), rows
PY
"$script" -l 8,x "$tmp/a.gguf" > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] && grep -q "not '8,x'" "$tmp/err" || die "bench-vs-llama.sh -l 8,x: $(cat "$tmp/err")"
"$script" -l 0,8 "$tmp/a.gguf" > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] && grep -q "not '0,8'" "$tmp/err" || die "bench-vs-llama.sh -l 0,8: $(cat "$tmp/err")"

"$toy" init --arch qwen2 --preset smollm2-135m --vocab-from "$vocab" --out "$tmp/c.gguf" 2> "$tmp/err" \
  && die "a preset with the wrong --arch was accepted"
grep -q "architecture llama" "$tmp/err" || die "the arch mismatch error does not say which: $(cat "$tmp/err")"
"$toy" init --arch llama --preset nope --vocab-from "$vocab" --out "$tmp/c.gguf" 2> "$tmp/err" \
  && die "an unknown preset was accepted"
grep -q "tinyllama-1.1b" "$tmp/err" || die "the unknown-preset error does not list the presets"

finish
