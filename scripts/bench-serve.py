#!/usr/bin/env python3
"""A load for an OpenAI-compatible server (toy serve, llama-server): N concurrent streaming
clients, each asking for M tokens (ignore_eos), then one lone short request.

Prints the aggregate generation speed (tokens streamed to all clients per second of the
whole run), the per-client speed, and the time to the first token of a lone request.

usage: bench-serve.py --port P [--clients 8] [--tokens 128] [--rounds 3] [--json]
       bench-serve.py --port P --soak SECONDS [--clients 64] [--pid SERVER_PID]

--soak: every client streams requests one after another for that long, each request one
of 16 (prompt, seed, length) settings whose lone answer was fetched first; a stream that
fails, is cut short or differs from its lone answer is counted; with --pid the server's
resident memory is read before and after.
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


def stream(port, prompt, n, out, seed=1, texts=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = {"prompt": prompt, "max_tokens": n, "stream": True, "ignore_eos": True, "temperature": 0.8, "seed": seed}
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
                if texts is not None:
                    texts.append(d["choices"][0]["text"])
                if first is None:
                    first = time.time() - t0
    out.append((tokens, first, time.time() - t0))
    c.close()


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def soak(a):
    settings = [(PROMPTS[i % len(PROMPTS)], 100 + i, 16 + 8 * (i % 6)) for i in range(16)]
    lone = {}
    for p, seed, n in settings:
        c = http.client.HTTPConnection("127.0.0.1", a.port, timeout=600)
        c.request("POST", "/v1/completions", json.dumps({"prompt": p, "max_tokens": n, "ignore_eos": True,
                                                          "temperature": 0.8, "seed": seed}))
        lone[(p, seed, n)] = json.loads(c.getresponse().read())["choices"][0]["text"]
        c.close()
    rss0 = rss_kb(a.pid) if a.pid else 0
    stats = {"streams": 0, "bad": 0, "tokens": 0}
    lock = threading.Lock()
    end = time.time() + a.soak

    def client(i):
        k = i
        while time.time() < end:
            p, seed, n = settings[k % len(settings)]
            k += 7
            res, texts = [], []
            try:
                stream(a.port, p, n, res, seed, texts)
                good = res[0][0] == n and "".join(texts) == lone[(p, seed, n)]
            except Exception:
                good = False
            with lock:
                stats["streams"] += 1
                stats["bad"] += not good
                stats["tokens"] += res[0][0] if res else 0

    th = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
    t0 = time.time()
    [t.start() for t in th]
    samples = []
    while a.pid and any(t.is_alive() for t in th):
        time.sleep(min(10, max(0.1, end - time.time())))
        samples.append(rss_kb(a.pid) / 1024)
    [t.join() for t in th]
    wall = time.time() - t0
    rss1 = rss_kb(a.pid) if a.pid else 0
    print(f"{a.clients} clients for {wall:.0f} s: {stats['streams']} streams, {stats['bad']} failed, cut short or "
          f"mixed up; {stats['tokens'] / wall:.1f} tokens/s" +
          (f"; server RSS {rss0 / 1024:.1f} MB before, every 10 s: " + " ".join(f"{x:.1f}" for x in samples) +
           f" MB, {rss1 / 1024:.1f} MB after" if a.pid else ""))
    return stats["bad"] == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--soak", type=float, default=0)
    ap.add_argument("--pid", type=int, default=0)
    a = ap.parse_args()
    if a.soak:
        raise SystemExit(0 if soak(a) else 1)
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
