#!/usr/bin/env bash
# The programs in examples/, built against libtoy.so, on the bundled model: each must
# give what the toy command gives for the same request.
. "$(dirname "$0")/../lib.sh"
model=$bundled
ex=$build/examples
server=
at_exit 'kill $server 2>/dev/null'
prompt="And it came to pass"

# generate: the same text as toy run, greedy
"$ex/generate" "$model" "$prompt" 40 > "$tmp/gen.txt" 2> "$tmp/gen.err" || die "generate: $(cat "$tmp/gen.err")"
"$toy" run -m "$model" -p "$prompt" -n 40 --temp 0 > "$tmp/run.txt" 2>/dev/null
cmp -s "$tmp/gen.txt" "$tmp/run.txt" || { die "examples/generate and toy run differ:"; diff "$tmp/gen.txt" "$tmp/run.txt"; }
grep -q "generated at" "$tmp/gen.err" || die "generate reports no speed: $(cat "$tmp/gen.err")"
[ "$(wc -c < "$tmp/gen.txt")" -gt 60 ] || die "generate wrote only: $(cat "$tmp/gen.txt")"

# tokenize: the ids of toy tokenize, and the text back
"$ex/tokenize" "$model" "$prompt" > "$tmp/tok.txt" || die "tokenize"
want=$("$toy" tokenize -m "$model" "$prompt")
[ "$(head -1 "$tmp/tok.txt")" = "$want" ] || die "tokenize ids '$(head -1 "$tmp/tok.txt")', toy tokenize '$want'"
[ "$(tail -1 "$tmp/tok.txt")" = "$prompt" ] || die "tokenize decodes to '$(tail -1 "$tmp/tok.txt")'"
grep -q "^   296 -> 'And'$" "$tmp/tok.txt" || { die "tokenize pieces:"; cat "$tmp/tok.txt"; }
"$ex/tokenize" /nonexistent.gguf x 2> "$tmp/tok.err" && die "tokenize of a missing file succeeded"
grep -q "/nonexistent.gguf: cannot open" "$tmp/tok.err" || die "tokenize's error: $(cat "$tmp/tok.err")"

# serve_one: one streamed completion; the events' text is toy run's continuation
"$ex/serve_one" "$model" 0 > "$tmp/serve.out" 2> "$tmp/serve.err" &
server=$!
server_id=$(proc_ids $server)
started() { grep -q "^listening on " "$tmp/serve.out" || ended $server_id; }
poll_until 300 started   # (the model loads first: sanitized, on a loaded machine, slowly)
url=$(sed -n 's/^listening on //p' "$tmp/serve.out")
[ -n "$url" ] || { echo "FAIL: serve_one did not start: $(cat "$tmp/serve.err")"; exit 1; }
python3 - "$url" "$prompt" "$tmp/run40.txt" <<'PY' || fail=1
import json, sys, urllib.request
url, prompt, _ = sys.argv[1:4]
req = urllib.request.Request(url, data=prompt.encode(), method="POST")
with urllib.request.urlopen(req, timeout=300) as r:  # a hang, not a slow machine
    assert r.headers["Content-Type"] == "text/event-stream", r.headers["Content-Type"]
    events = [line[6:] for line in r.read().decode().split("\n") if line.startswith("data: ")]
assert events[-1] == "[DONE]", events[-1:]
text = "".join(json.loads(e)["text"] for e in events[:-1])
open(sys.argv[3] + ".got", "w").write(prompt + text + "\n")
print(f"serve_one: {len(events) - 1} events")
PY
# it exits after its one request
poll_until 300 ended $server_id || die "serve_one still runs 300 s after its one request"
wait $server || die "serve_one exited with an error: $(cat "$tmp/serve.err")"
server=
"$toy" run -m "$model" -p "$prompt" -n 40 --temp 0 > "$tmp/run40.txt" 2>/dev/null
cmp -s "$tmp/run40.txt.got" "$tmp/run40.txt" || { die "serve_one's events and toy run differ:"; diff "$tmp/run40.txt.got" "$tmp/run40.txt"; }

finish "generate, tokenize and serve_one agree with toy run and toy tokenize"
