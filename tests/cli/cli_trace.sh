#!/usr/bin/env bash
# The forward pass's taps (toy_trace_fn; --trace [PATTERN], --trace-head, --trace-format,
# --trace-file): every tap of a dense layer in order, selected by globs, one head's
# columns of the per-head taps, JSON lines whose values agree with each other (ffn_gated
# = ffn_act * ffn_up bit for bit; RoPE leaves position 0 as it is, so q_pre's first row
# is q's; head 3 of attn is columns 3*hd..), on run, chat, eval, perplexity, serve and bench
# (--trace-file); the taps of a mixture of experts and of post-norm models (fixtures);
# and the errors of bad trace options (a bad format or head, a file without --trace, an
# unwritable file, a pattern too long).
. "$(dirname "$0")/../lib.sh"
want_fixtures "the MoE and post-norm taps are not checked"
m="$bundled"
[ -f "$m" ] || skip "$m not found"

# every tap of layer 0 of a dense llama, in order
"$toy" run -m "$m" -p "In the beginning" -n 1 --temp 0 -t 2 --trace > /dev/null 2> "$tmp/all"
want="embed L0.attn_norm L0.q_pre L0.k_pre L0.q L0.k L0.v L0.attn L0.attn_proj L0.attn_out L0.ffn_norm L0.ffn_gate L0.ffn_up L0.ffn_act L0.ffn_gated L0.ffn_down L0.ffn_out L0.out L1.attn_norm"
got=$(awk '/^trace / { print $2 }' "$tmp/all" | head -19 | tr '\n' ' ' | sed 's/ $//')
[ "$got" = "$want" ] || die "the taps of a dense layer: '$got', expected '$want'"
tail_taps=$(awk '/^trace / { print $2 }' "$tmp/all" | grep -v '^L' | sort -u | tr '\n' ' ')
[ "$tail_taps" = "embed final_norm logits " ] || die "the taps outside the layers: '$tail_taps'"

# globs, and one head
"$toy" run -m "$m" -p "In the beginning" -n 1 --temp 0 -t 2 --trace 'L2.*,final_norm' > /dev/null 2> "$tmp/sel"
! grep '^trace ' "$tmp/sel" | grep -v -E '^trace (L2\.|final_norm)' | grep -q . || die "--trace 'L2.*,final_norm' shows others"
grep -q '^trace L2.ffn_act ' "$tmp/sel" || die "--trace 'L2.*': no L2.ffn_act"
"$toy" run -m "$m" -p "In the beginning" -n 1 --temp 0 -t 2 --trace 'L0.q,L0.k,L0.attn_norm' --trace-head 3 > /dev/null 2> "$tmp/head"
grep -q '^trace L0.q.h3 *\[4 x 32\]' "$tmp/head" || die "--trace-head 3: L0.q is not 32 columns: $(grep L0.q "$tmp/head")"
grep -q '^trace L0.k.h3 *\[4 x 32\]' "$tmp/head" || die "--trace-head 3: L0.k is not 32 columns"
grep -q '^trace L0.attn_norm *\[4 x 256\]' "$tmp/head" || die "--trace-head 3 cut a tap that has no heads"

# JSON lines, and what their values must satisfy
"$toy" eval -m "$m" --tokens 1,40,60,80 --dump-logits "$tmp/l.bin" -t 2 --trace 'L1.*' --trace-format json \
  --trace-file "$tmp/t.jsonl" 2> "$tmp/err" || die "eval --trace: $(tail -1 "$tmp/err")"
"$toy" eval -m "$m" --tokens 1,40,60,80 --dump-logits "$tmp/l.bin" -t 2 --trace 'L1.attn' --trace-head 3 \
  --trace-format json --trace-file "$tmp/h.jsonl" 2> "$tmp/err" || die "eval --trace-head: $(tail -1 "$tmp/err")"
python3 - "$tmp/t.jsonl" "$tmp/h.jsonl" << 'PY' || die "the JSON trace"
import json, struct, sys
taps = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    assert r["layer"] == 1 and r["name"] == "L1." + r["tap"] and r["head"] is None, r["name"]
    assert len(r["values"]) == r["tokens"] == 4 and all(len(v) == r["n"] for v in r["values"]), r["name"]
    taps[r["tap"]] = r["values"]
f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
act, up, gated = taps["ffn_act"], taps["ffn_up"], taps["ffn_gated"]
# (%.9g round-trips a float: f32 of the printed value is the float)
assert all(f32(f32(a) * f32(u)) == f32(g) for ra, ru, rg in zip(act, up, gated) for a, u, g in zip(ra, ru, rg)), "gated != act * up"
assert taps["q_pre"][0] == taps["q"][0] and taps["q_pre"][1] != taps["q"][1], "RoPE at position 0 is not identity"
h = json.loads(open(sys.argv[2]).readline())
hd = h["n"]
assert h["head"] == 3 and [row for row in h["values"]] == [row[3 * hd:4 * hd] for row in taps["attn"]], "head 3"
print(f"JSON trace: {len(taps)} taps of layer 1; ffn_gated = ffn_act * ffn_up; head 3 = attn[:, {3 * hd}:{4 * hd}]")
PY

# perplexity, chat and serve trace too
printf 'In the beginning God created the heaven and the earth. And the earth was without form.\n%.0s' 1 2 3 4 > "$tmp/text.txt"
"$toy" perplexity -m "$m" -f "$tmp/text.txt" -c 16 --chunks 1 -t 2 --trace final_norm > /dev/null 2> "$tmp/p" \
  || die "perplexity --trace: $(tail -1 "$tmp/p")"
grep -q '^trace final_norm ' "$tmp/p" || die "perplexity --trace: no final_norm"
echo "Who made the earth?" | "$toy" chat -m "$m" -n 2 --temp 0 -t 2 --trace logits > /dev/null 2> "$tmp/c" \
  || die "chat --trace: $(tail -1 "$tmp/c")"
grep -q '^trace logits ' "$tmp/c" || die "chat --trace: no logits"
serve_start -m "$m" --trace 'L0.out' --trace-format json --trace-file "$tmp/serve.jsonl"
if [ -n "$port" ]; then
  python3 - "$port" << 'PY' || die "toy serve --trace"
import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=300)  # a hang, not a slow machine
c.request("POST", "/v1/completions", json.dumps({"prompt": "In the beginning", "max_tokens": 3, "temperature": 0}),
          {"Content-Type": "application/json"})
assert c.getresponse().status == 200
PY
  serve_stop
  [ "$(grep -c '"name": "L0.out"' "$tmp/serve.jsonl")" -ge 3 ] || die "toy serve --trace-file: $(wc -l < "$tmp/serve.jsonl") lines"
fi

# bench: off unless asked for; with --trace, every forward of its runs is traced
"$toy" bench -m "$m" -p 8 -n 4 -r 1 -t 2 --json > "$tmp/b.json" 2> "$tmp/b.err" || die "bench: $(tail -1 "$tmp/b.err")"
[ -s "$tmp/b.err" ] && die "bench without --trace wrote: $(head -2 "$tmp/b.err")"
"$toy" bench -m "$m" -p 8 -n 4 -r 1 -t 2 --json --trace 'L0.out' --trace-file "$tmp/bench.trace" > /dev/null \
  2> "$tmp/b.err" || die "bench --trace: $(tail -1 "$tmp/b.err")"
# the warm-up (a prompt, a token) and one run (a prompt, 4 tokens): 7 forwards
[ "$(grep -c '^trace L0.out ' "$tmp/bench.trace")" = 7 ] || die "bench --trace: $(grep -c . "$tmp/bench.trace") lines"

# a mixture of experts and a post-norm model (fixtures)
if [ -n "$fixtures" ]; then
  "$toy" eval -m "$fixtures/models/mixtral-f16.gguf" --tokens 1,2,3 --dump-logits "$tmp/l.bin" -t 2 --trace 'L0.*' \
    2> "$tmp/moe" > /dev/null || die "mixtral --trace: $(tail -1 "$tmp/moe")"
  n_exp=$("$toy" info --json "$fixtures/models/mixtral-f16.gguf" | python3 -c 'import json, sys; print(json.load(sys.stdin)["hyperparameters"]["expert_count"])')
  grep -q "^trace L0.moe_router *\[3 x $n_exp\]" "$tmp/moe" || die "mixtral: no moe_router of $n_exp experts: $(grep moe "$tmp/moe")"
  grep -q '^trace L0.moe_experts ' "$tmp/moe" || die "mixtral: no moe_experts"
  "$toy" eval -m "$fixtures/models/gemma2-f32.gguf" --tokens 1,2,3 --dump-logits "$tmp/l.bin" -t 2 --trace 'L0.*post_norm' \
    2> "$tmp/gemma" > /dev/null || die "gemma2 --trace: $(tail -1 "$tmp/gemma")"
  [ "$(awk '/^trace / { print $2 }' "$tmp/gemma" | tr '\n' ' ')" = "L0.attn_post_norm L0.ffn_post_norm " ] \
    || die "gemma2: the post-norm taps: $(cat "$tmp/gemma")"
fi

# bad options
for bad in "--trace-format xml" "--trace-head -1" "--trace L0.q --trace-head 8" "--trace-file $tmp/x.jsonl" \
           "--trace L0.q --trace-file $tmp/no/such/dir/t.jsonl"; do
  "$toy" run -m "$m" -p x -n 1 $bad > /dev/null 2> "$tmp/err" && die "run $bad accepted"
  grep -q "trace" "$tmp/err" || die "run $bad: $(tail -1 "$tmp/err")"
done
grep -q "the model has 8 heads" <("$toy" run -m "$m" -p x -n 1 --trace L0.q --trace-head 8 2>&1) \
  || die "--trace-head 8 of 8 heads: not named"
long=$(printf 'L0.q,%.0s' $(seq 1 120))
"$toy" eval -m "$m" --tokens 1,2 --dump-logits "$tmp/l.bin" --trace "$long" 2> "$tmp/err" && die "a 600-byte --trace pattern accepted"
grep -q -- "--trace: a pattern of 600 characters, more than 511" "$tmp/err" || die "a long pattern: $(cat "$tmp/err")"
"$toy" serve -m "$m" --port 0 --trace-file "$tmp/s.jsonl" 2> "$tmp/err" && die "serve --trace-file without --trace accepted"
grep -q "need --trace" "$tmp/err" || die "serve --trace-file without --trace: $(cat "$tmp/err")"
finish
