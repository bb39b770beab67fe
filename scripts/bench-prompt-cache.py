#!/usr/bin/env python3
"""The prompt cache of an OpenAI-compatible server (toy serve, llama-server): the time to
the first token of a chat's second turn, whose prompt begins with the whole first turn,
read with the cache (the default) and anew (cache_prompt false).

Each run is a new conversation (its long system message starts with the run's number,
so no earlier run's cells fit it): the first turn is answered whole, then the second turn
(the first, its reply and a new question) is streamed twice, cached first, then with
cache_prompt false. Prints the medians of the two times to first token, their ratio and
the prompt and cached tokens the server reported (usage.prompt_tokens_details).

usage: bench-prompt-cache.py --port P [--prefix-tokens 1500] [--reply-tokens 32]
                             [--runs 5] [--json]
"""
import argparse
import http.client
import json
import random
import statistics
import time

WORDS = ("and the LORD said unto Moses behold I will send an angel before thee to keep thee in the way "
         "to bring thee into the place which I have prepared beware of him and obey his voice provoke "
         "him not for he will not pardon your transgressions for my name is in him").split()


def post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", path, json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status != 200:
        raise SystemExit(f"{path}: status {r.status}: {data[:300]!r}")
    return json.loads(data)


def long_text(port, tokens, seed):
    """Sentences of KJV words, one more at a time, until the text has `tokens` tokens."""
    rng = random.Random(seed)
    sentences, n = [], 0
    while n < tokens:
        for _ in range(max(1, (tokens - n) // 12)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(6, 14))]
            sentences.append(" ".join(words).capitalize() + ".")
        n = len(post(port, "/tokenize", {"content": " ".join(sentences)})["tokens"])
    return " ".join(sentences)


def first_token(port, messages, cache_prompt):
    """Streams a reply: (seconds to the first token, usage)."""
    body = {"messages": messages, "max_tokens": 4, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}, "cache_prompt": cache_prompt}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.time()
    c.request("POST", "/v1/chat/completions", json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise SystemExit(f"chat: status {r.status}: {r.read()[:300]!r}")
    first, usage, buf = None, None, b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            if not ev.startswith(b"data: ") or ev == b"data: [DONE]":
                continue
            d = json.loads(ev[6:])
            if d.get("usage"):
                usage = d["usage"]
            if first is None and d.get("choices") and d["choices"][0]["delta"].get("content") is not None:
                first = time.time() - t0
    c.close()
    return first, usage or {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--prefix-tokens", type=int, default=1500, help="tokens of the first turn's system message")
    ap.add_argument("--reply-tokens", type=int, default=32, help="tokens of the first turn's answer")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    text = long_text(a.port, a.prefix_tokens, 1)
    cached_s, cold_s, prompt, cached = [], [], [], []
    for run in range(a.runs):
        turn1 = [{"role": "system", "content": f"Conversation {run} of {time.time():.6f}. {text}"},
                 {"role": "user", "content": "What did the LORD say unto Moses?"}]
        r1 = post(a.port, "/v1/chat/completions", {"messages": turn1, "max_tokens": a.reply_tokens,
                                                   "temperature": 0, "ignore_eos": True})
        turn2 = turn1 + [{"role": "assistant", "content": r1["choices"][0]["message"]["content"]},
                         {"role": "user", "content": "And what of the angel?"}]
        t, u = first_token(a.port, turn2, True)
        cached_s.append(t)
        prompt.append(u.get("prompt_tokens"))
        cached.append((u.get("prompt_tokens_details") or {}).get("cached_tokens"))
        t, u = first_token(a.port, turn2, False)
        cold_s.append(t)
    r = {"runs": a.runs, "prompt_tokens": prompt[-1], "cached_tokens": cached[-1],
         "ttft_cached_ms": 1e3 * statistics.median(cached_s), "ttft_cold_ms": 1e3 * statistics.median(cold_s)}
    r["ratio"] = r["ttft_cached_ms"] / r["ttft_cold_ms"]
    if a.json:
        print(json.dumps(r))
    else:
        print(f"second turn of {r['prompt_tokens']} tokens, {r['cached_tokens']} cached: first token after "
              f"{r['ttft_cached_ms']:.1f} ms cached, {r['ttft_cold_ms']:.1f} ms with cache_prompt false, "
              f"ratio {r['ratio']:.3f} (medians of {a.runs})")


if __name__ == "__main__":
    main()
