#!/usr/bin/env bash
# toy info on every fixture model, reference and vocabulary file: exit 0, valid JSON,
# and the architecture, tensor count and parameter count that an independent reading
# of the file (a few lines of Python below) finds. Without the fixtures: the bundled
# model, models of toy init of each architecture and a few types, and a vocabulary file
# of toy tokenizer train.
. "$(dirname "$0")/../lib.sh"
want_fixtures

"$toy" --help | grep -q "info" || { echo "toy --help does not list info"; exit 1; }
"$toy" info --help | grep -q -- "--json" || { echo "toy info --help does not describe --json"; exit 1; }

n=0
if [ -n "$fixtures" ]; then
  files=("$fixtures"/models/*.gguf "$fixtures"/vocab/*.gguf)
else
  bare_text "$tmp/text.txt"
  bare_model "$tmp/llama-f32.gguf" llama 64 2 4 2 128 --untied || fail=1
  bare_model "$tmp/llama-q4_k_m.gguf" llama 256 2 4 2 512 --type Q4_K_M || fail=1
  bare_model "$tmp/qwen2-bf16.gguf" qwen2 64 2 4 2 128 --type BF16 || fail=1
  "$toy" tokenizer train --vocab-size 300 --data "$tmp/text.txt" --out "$tmp/vocab.gguf" 2> /dev/null \
    || die "toy tokenizer train"
  files=("$bundled" "$tmp"/*.gguf)
fi
for f in "${files[@]}"; do
  n=$((n + 1))
  if ! "$toy" info "$f" > "$tmp/info.txt" 2>&1; then
    echo "FAIL: toy info $f: $(cat "$tmp/info.txt")"; fail=1; continue
  fi
  if ! "$toy" info --json "$f" > "$tmp/info.json"; then
    echo "FAIL: toy info --json $f"; fail=1; continue
  fi
  python3 - "$f" "$tmp/info.json" "$tmp/info.txt" <<'PY' || fail=1
import json, struct, sys
path, json_path, text_path = sys.argv[1:4]
got = json.load(open(json_path))          # must be valid JSON

# An independent GGUF reading: only what is needed for the counts.
data = open(path, "rb").read()
pos = 0
def take(fmt):
    global pos
    v = struct.unpack_from("<" + fmt, data, pos); pos += struct.calcsize("<" + fmt)
    return v[0]
def string():
    global pos
    n = take("Q"); s = data[pos:pos + n]; pos += n; return s.decode("utf-8", "replace")
sizes = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
def value(t):
    if t == 8: return string()
    if t == 9:
        et, n = take("I"), take("Q")
        return [value(et) for _ in range(n)]
    return take(sizes[t])
assert data[:4] == b"GGUF"
pos = 4
version, n_tensors, n_kv = take("I"), take("Q"), take("Q")
kv = {}
for _ in range(n_kv):
    k = string(); kv[k] = value(take("I"))
n_params = 0
for _ in range(n_tensors):
    string(); nd = take("I"); ne = [take("q") for _ in range(nd)]; take("I"); take("Q")
    p = 1
    for x in ne: p *= x
    n_params += p

errors = []
if got["architecture"] != kv.get("general.architecture"):
    errors.append(f"architecture {got['architecture']} != {kv.get('general.architecture')}")
if got["n_tensors"] != n_tensors: errors.append(f"n_tensors {got['n_tensors']} != {n_tensors}")
if got["n_params"] != n_params: errors.append(f"n_params {got['n_params']} != {n_params}")
if len(got["tensors"]) != n_tensors: errors.append("tensor table length")
if "tokenizer.ggml.tokens" in kv and got["tokenizer"]["vocab_size"] != len(kv["tokenizer.ggml.tokens"]):
    errors.append("vocab size")
text = open(text_path).read()
if f"architecture:  {kv.get('general.architecture')}" not in text: errors.append("text: architecture")
if f"tensors:       {n_tensors}\n" not in text: errors.append("text: tensor count")
if f"parameters:    {n_params} " not in text: errors.append("text: parameter count")
if errors:
    print(f"FAIL: {path}: " + "; ".join(errors)); sys.exit(1)
PY
done

# The manifest's architectures and tensor counts, for the models it lists.
[ -n "$fixtures" ] && while IFS=$'\t' read -r name arch types rest; do
  case "$name" in \#*|"") continue ;; esac
  want=0
  for t in $types; do want=$((want + ${t#*:})); done
  got=$("$toy" info --json "$fixtures/models/$name.gguf" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["architecture"], d["n_tensors"])')
  [ "$got" = "$arch $want" ] || die "$name: manifest says '$arch $want', toy info says '$got'"
done < "$fixtures/models/manifest.tsv"

finish "$n files ok"
