#!/usr/bin/env bash
# toy init writes a model of the preset's shape with the vocabulary's tokenizer, the same
# bytes for the same seed whatever the threads; toy run loads it; toy bench reports the
# fields its --json promises.
set -u
toy="$1"
. "$(dirname "$0")/fixtures.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
die() { echo "FAIL: $*"; fail=1; }
vocab="$fixtures/vocab/ggml-vocab-gpt-2.gguf"

"$toy" init --arch llama --preset smollm2-135m --vocab-from "$vocab" --out "$tmp/a.gguf" \
  --type Q4_0 --seed 7 -t 1 2> "$tmp/err" || die "toy init failed: $(tail -1 "$tmp/err")"
"$toy" init --arch llama --preset smollm2-135m --vocab-from "$vocab" --out "$tmp/b.gguf" \
  --type Q4_0 --seed 7 -t 2 2> /dev/null || die "toy init -t 2 failed"
cmp -s "$tmp/a.gguf" "$tmp/b.gguf" || die "toy init: the same seed gave different files with 1 and 2 threads"

"$toy" info --json "$tmp/a.gguf" > "$tmp/info.json" || die "toy info on the initialised model failed"
python3 - "$tmp/info.json" <<'PY' || die "the initialised model does not have smollm2-135m's shape"
import json, sys
d = json.load(open(sys.argv[1]))
h = d["hyperparameters"]
ok = (d["architecture"] == "llama" and h["block_count"] == 30 and h["embedding_length"] == 576
      and h["attention.head_count"] == 9 and h["attention.head_count_kv"] == 3
      and h["feed_forward_length"] == 1536 and d["tokenizer"]["vocab_size"] == 50257
      and d["n_tensors"] == 1 + 1 + 30 * 9 and 134e6 < d["n_params"] < 136e6)
sys.exit(0 if ok else 1)
PY

"$toy" run -m "$tmp/a.gguf" -p "Hello" -n 2 --temp 0 -c 64 > /dev/null 2> "$tmp/err" \
  || die "toy run on the initialised model failed: $(tail -1 "$tmp/err")"

"$toy" bench -m "$tmp/a.gguf" -p 8 -n 4 -r 1 --json > "$tmp/bench.json" 2> "$tmp/err" \
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

"$toy" init --arch qwen2 --preset smollm2-135m --vocab-from "$vocab" --out "$tmp/c.gguf" 2> "$tmp/err" \
  && die "a preset with the wrong --arch was accepted"
grep -q "architecture llama" "$tmp/err" || die "the arch mismatch error does not say which: $(cat "$tmp/err")"
"$toy" init --arch llama --preset nope --vocab-from "$vocab" --out "$tmp/c.gguf" 2> "$tmp/err" \
  && die "an unknown preset was accepted"
grep -q "tinyllama-1.1b" "$tmp/err" || die "the unknown-preset error does not list the presets"

[ $fail -eq 0 ] && echo "cli_init_bench: ok"
exit $fail
