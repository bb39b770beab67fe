#!/usr/bin/env python3
"""A load for an OpenAI-compatible server (toy serve, llama-server): N concurrent streaming
clients, each asking for M tokens (ignore_eos), then one lone short request.

Prints the aggregate generation speed (tokens streamed to all clients per second of the
whole run), the per-client speed, and the time to the first token of a lone request.

usage: bench-serve.py --port P [--clients 8] [--tokens 128] [--rounds 3] [--json]
       bench-serve.py --port P --soak SECONDS [--clients 64] [--pid SERVER_PID]

--soak: every client sends requests one after another for that long, a mix of
  - valid ones (6 in 10; streaming or not), each one of 16 (prompt, seed, length)
    settings whose lone answer was fetched first: one that fails, is cut short or differs
    from its lone answer is a valid-request error;
  - invalid ones (2 in 10: bad JSON, wrong types and ranges, an empty stop, unknown
    fields, a body over the limit, a wrong Content-Type): anything but a 4xx is an error;
  - abandoned ones (2 in 10): a stream closed after its first event, a whole answer
    closed while it is made, a body cut off half way.
Meanwhile a probe asks GET /health and a one-token completion every second: one that
takes over 5 s is a wedge. With --pid the server's resident memory is read before, every
10 s and after. Exit status 0 only with no valid-request error, no wrong status and no
wedge.
"""
import argparse
import http.client
import json
import random
import socket
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


INVALID = [
    b'{"prompt": "x", "stop": ""}', b'{bad json', b'[1, 2]', b'{"prompt": 5}', b'{"prompt": "x", "temperature": "hot"}',
    b'{"prompt": "x", "max_tokens": -1}', b'{"prompt": "x", "n": 99}', b'{"prompt": [999999]}',
    b'{"prompt": "x", "frobnicate": 1}', b'{"prompt": "x", "response_format": {"type": "json_object"}}',
    b'{"prompt": "x", "stop": [""]}', b'{"prompt": "x", "max_tokens": 100000000}', b'{"prompt": "\\ud800"}',
    b'{"prompt": "' + b'[' * 5000 + b'"}', b'[' * 100000,
]


def raw_request(port, body, content_type=b"application/json", timeout=60):
    """POST /v1/completions over a socket of its own: the status, or 0 when none came."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: " + content_type +
                  b"\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        head = b""
        while b"\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
        return int(head.split()[1]) if head.startswith(b"HTTP/1.1 ") else 0
    except OSError:
        return 0
    finally:
        s.close()


def whole(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, (json.loads(data) if r.status == 200 else None)


def abandon(port, rng):
    """A request its client leaves: mid-stream, while a whole answer is made, or mid-body."""
    kind = rng.randrange(3)
    body = json.dumps({"prompt": rng.choice(PROMPTS), "max_tokens": 200, "ignore_eos": True,
                       "stream": kind == 0}).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        head = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body))
        if kind == 2:
            s.sendall(head + body[:len(body) // 2])
        else:
            s.sendall(head + body)
            if kind == 0:
                s.recv(4096)
            else:
                time.sleep(0.05)
    except OSError:
        pass
    finally:
        s.close()


def soak(a):
    settings = [(PROMPTS[i % len(PROMPTS)], 100 + i, 16 + 8 * (i % 6)) for i in range(16)]
    lone = {}
    for p, seed, n in settings:
        st, r = whole(a.port, {"prompt": p, "max_tokens": n, "ignore_eos": True, "temperature": 0.8, "seed": seed})
        lone[(p, seed, n)] = r["choices"][0]["text"]
    rss0 = rss_kb(a.pid) if a.pid else 0
    stats = {"valid": 0, "valid_errors": 0, "invalid": 0, "invalid_wrong": 0, "abandoned": 0, "tokens": 0,
             "probes": 0, "wedges": 0}
    statuses = {}
    lock = threading.Lock()
    end = time.time() + a.soak

    def count(**kw):
        with lock:
            for k, v in kw.items():
                stats[k] += v

    def client(i):
        rng = random.Random(i)
        while time.time() < end:
            roll = rng.random()
            if roll < 0.6:
                p, seed, n = settings[rng.randrange(len(settings))]
                try:
                    if rng.random() < 0.5:
                        res, texts = [], []
                        stream(a.port, p, n, res, seed, texts)
                        got, text = res[0][0], "".join(texts)
                    else:
                        st, r = whole(a.port, {"prompt": p, "max_tokens": n, "ignore_eos": True, "temperature": 0.8,
                                               "seed": seed})
                        got = r["usage"]["completion_tokens"] if st == 200 else 0
                        text = r["choices"][0]["text"] if st == 200 else None
                    good = got == n and text == lone[(p, seed, n)]
                except Exception:
                    good, got = False, 0
                count(valid=1, valid_errors=not good, tokens=got)
            elif roll < 0.8:
                k = rng.randrange(len(INVALID) + 2)
                if k == len(INVALID):  # over --max-body (8 MiB): answered before the body is sent
                    st = over_limit(a.port)
                elif k == len(INVALID) + 1:
                    st = raw_request(a.port, b'{"prompt": "x"}', content_type=b"text/plain")
                else:
                    st = raw_request(a.port, INVALID[k])
                with lock:
                    statuses[st] = statuses.get(st, 0) + 1
                count(invalid=1, invalid_wrong=not 400 <= st < 500)
            else:
                abandon(a.port, rng)
                count(abandoned=1)

    def probe():
        while time.time() < end:
            t0 = time.time()
            try:
                c = http.client.HTTPConnection("127.0.0.1", a.port, timeout=5)
                c.request("GET", "/health")
                ok = c.getresponse().status == 200
                c.close()
                st, _ = whole(a.port, {"prompt": "And", "max_tokens": 1})
                ok = ok and st == 200 and time.time() - t0 < 5
            except Exception:
                ok = False
            count(probes=1, wedges=not ok)
            time.sleep(max(0.0, 1 - (time.time() - t0)))

    th = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)] + [threading.Thread(target=probe)]
    t0 = time.time()
    [t.start() for t in th]
    samples = []
    while a.pid and any(t.is_alive() for t in th):
        time.sleep(min(10, max(0.1, end - time.time())))
        samples.append(rss_kb(a.pid) / 1024)
    [t.join() for t in th]
    wall = time.time() - t0
    rss1 = rss_kb(a.pid) if a.pid else 0
    print(f"{a.clients} clients for {wall:.0f} s: {stats['valid']} valid requests, {stats['valid_errors']} failed, cut "
          f"short or mixed up; {stats['invalid']} invalid ones, {stats['invalid_wrong']} not answered 4xx (statuses "
          + ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items())) + f"); {stats['abandoned']} abandoned; "
          f"{stats['probes']} probes, {stats['wedges']} wedged; {stats['tokens'] / wall:.1f} tokens/s" +
          (f"; server RSS {rss0 / 1024:.1f} MB before, every 10 s: " + " ".join(f"{x:.1f}" for x in samples) +
           f" MB, {rss1 / 1024:.1f} MB after" if a.pid else ""))
    return stats["valid_errors"] == 0 and stats["invalid_wrong"] == 0 and stats["wedges"] == 0


def over_limit(port):
    """Headers announcing 9 MiB: 413 before a byte of the body is sent."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % (9 << 20))
        head = s.recv(4096)
        return int(head.split()[1]) if head.startswith(b"HTTP/1.1 ") else 0
    except OSError:
        return 0
    finally:
        s.close()


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
