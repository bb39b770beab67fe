#!/usr/bin/env python3
"""A load for an OpenAI-compatible server (toy serve, llama-server): N concurrent streaming
clients, each asking for M tokens (ignore_eos), then one lone short request.

Prints the aggregate generation speed (tokens streamed to all clients per second of the
whole run), the per-client speed, and the time to the first token of a lone request.

usage: bench-serve.py --port P [--clients 8] [--tokens 128] [--rounds 3] [--json]
"""
import argparse
import http.client
import json
import statistics
import threading
import time

PROMPTS = ["And it came to pass in those days", "The LORD is my shepherd", "In the beginning God created",
           "Blessed are the meek", "Then said Jesus unto his disciples", "And Moses went up", "Hear, O Israel",
           "Let there be light", "And the earth was without form", "Now the serpent was more subtil"]


def stream(port, prompt, n, out):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = {"prompt": prompt, "max_tokens": n, "stream": True, "ignore_eos": True, "temperature": 0.8, "seed": 1}
    t0 = time.time()
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    first, tokens, buf = None, 0, b""
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
            if d.get("choices") and d["choices"][0].get("text"):
                tokens += 1
                if first is None:
                    first = time.time() - t0
    out.append((tokens, first, time.time() - t0))
    c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    aggregate, per_client, ttft = [], [], []
    for _ in range(a.rounds):
        res, th = [], []
        t0 = time.time()
        for i in range(a.clients):
            th.append(threading.Thread(target=stream, args=(a.port, PROMPTS[i % len(PROMPTS)], a.tokens, res)))
            th[-1].start()
        for t in th:
            t.join()
        wall = time.time() - t0
        aggregate.append(sum(r[0] for r in res) / wall)
        per_client.append(statistics.median(r[0] / r[2] for r in res))
        lone = []
        stream(a.port, "And God said", 8, lone)
        ttft.append(lone[0][1])
    r = {"clients": a.clients, "tokens": a.tokens, "aggregate_tokens_per_s": statistics.median(aggregate),
         "per_client_tokens_per_s": statistics.median(per_client), "ttft_ms": 1e3 * statistics.median(ttft),
         "rounds": a.rounds}
    if a.json:
        print(json.dumps(r))
    else:
        print(f"{a.clients} clients x {a.tokens} tokens: {r['aggregate_tokens_per_s']:.1f} tokens/s in all, "
              f"{r['per_client_tokens_per_s']:.1f} per client; first token of a lone request {r['ttft_ms']:.0f} ms "
              f"(medians of {a.rounds})")


if __name__ == "__main__":
    main()
