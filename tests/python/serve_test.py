#!/usr/bin/env python3
"""toy serve, driven over HTTP with the standard library only.

usage: serve_test.py TOY MODEL

- greedy and seeded completions equal `toy run`'s output for the same prompt and settings;
- many concurrent streaming clients each get exactly their lone answer, with requests
  that fail and clients that leave beside them;
- chat completions, n > 1, stop strings, logprobs, usage counts;
- the prompt cache: a second turn's cached_tokens, the same answer with cache_prompt false;
- a corpus of bad requests gets the promised statuses, and the server goes on answering;
- a client that leaves mid-stream frees its slot at once;
- SIGTERM lets the request in flight finish, then the server exits 0.

No check depends on how fast the machine is: the timeouts only catch a hang, and what the
one-slot section needs to still be running is a stream of LONG tokens (see there).
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/, helpers.py
from helpers import nap, serve_start  # noqa: E402

TOY, MODEL = sys.argv[1], sys.argv[2]
failures = []
# How long any one request may take before the test calls it a hang: a sanitized build on
# a loaded machine is many times slower than a plain one, and no check rests on this.
HANG_S = 300


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


class Server:
    def __init__(self, *args):
        self.proc, self.port = serve_start(TOY, MODEL, *args)

    def request(self, method, path, body=None, headers=None, raw=None, timeout=HANG_S):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        c.request(method, path, body=data, headers=headers or {})
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        c.close()
        return r.status, text, r

    def post(self, path, body, **kw):
        status, text, r = self.request("POST", path, body, **kw)
        try:
            return status, json.loads(text), r
        except ValueError:
            return status, text, r

    def stream(self, path, body):
        """The events of a streaming request, as parsed JSON (and the last "[DONE]")."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=HANG_S)
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        events, buf = [], b""
        while True:
            chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                ev, buf = buf.split(b"\n\n", 1)
                if ev.startswith(b"data: "):
                    d = ev[6:].decode()
                    events.append(d if d == "[DONE]" else json.loads(d))
        c.close()
        return r.status, events

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=HANG_S)

    def metric(self, name, headers=None):
        """A figure of /metrics."""
        st, text, _ = self.request("GET", "/metrics", headers=headers)
        m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M) if st == 200 else None
        if not m:
            raise SystemExit(f"/metrics: no {name} (status {st}): {text[:300]}")
        return float(m.group(1))


def toy_run(prompt, n, *flags):
    out = subprocess.run([TOY, "run", "-m", MODEL, "-p", prompt, "-n", str(n), "-t", "2", *flags],
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith(prompt)
    return out[len(prompt):].rstrip("\n")


def stream_text(events, choice=0):
    text, finish, usage = "", None, None
    for e in events:
        if e == "[DONE]":
            continue
        if e.get("usage"):
            usage = e["usage"]
        for c in e["choices"]:
            if c["index"] != choice:
                continue
            text += c.get("text", "") if "text" in c else (c["delta"].get("content") or "")
            finish = c["finish_reason"] or finish
    return text, finish, usage


prompts = ["And God said", "In the beginning", "The LORD is my shepherd", "And it came to pass that",
           "Blessed are", "Then Jesus said unto them", "And Moses", "Let there be"]

# ---- start-up: from the "port N answers 503" line until the address line, /health says
# 503 "loading" and the API 503 with Retry-After; from the first 200 on, never 503 again.
# However fast packing is, every answer must match the state the log shows.
def loading_then_ready():
    p = subprocess.Popen([TOY, "serve", "-m", MODEL, "--port", "0", "-t", "2"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port, lines = None, []
        for line in p.stderr:
            lines.append(line)
            m = re.search(r"port (\d+) answers 503 until the weights are packed", line)
            if m:
                port = int(m.group(1))
                break
        check(port is not None, f"no 'answers 503' line before the address: {lines}")
        if port is None:
            return
        ready = threading.Event()
        threading.Thread(target=lambda: [ready.set() for l in p.stderr if "http://127.0.0.1:" in l], daemon=True).start()
        seen = []
        deadline = time.monotonic() + HANG_S  # a hang, not a slow machine
        while True:
            done = ready.is_set()  # read before asking: a 503 after this is wrong
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=HANG_S)
            c.request("GET", "/health")
            r = c.getresponse()
            body = json.loads(r.read())
            seen.append(r.status)
            if r.status == 503:
                check(body == {"status": "loading"} and not done, f"/health while loading: {r.status} {body}")
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=HANG_S)
                c.request("POST", "/v1/completions", json.dumps({"prompt": "And", "max_tokens": 1}),
                          {"Content-Type": "application/json"})
                a = c.getresponse()
                err = json.loads(a.read())
                check(a.status in (503, 200), f"a completion while loading: {a.status}")
                if a.status == 503:
                    check(a.getheader("Retry-After") == "1" and "loading" in err["error"]["message"],
                          f"a completion while loading: {a.getheader('Retry-After')} {err}")
            else:
                check(r.status == 200 and body == {"status": "ok"}, f"/health: {r.status} {body}")
                break
            if time.monotonic() > deadline:
                check(False, f"/health still said 503 'loading' after {HANG_S} s ({len(seen)} answers)")
                break
        print(f"serve_test: /health said 503 'loading' {len(seen) - 1} time(s), then 200")
    finally:
        p.terminate()
        p.wait(timeout=HANG_S)


loading_then_ready()

rates = []  # tokens per second of wall time of the seeded completions below (LONG is sized by them)
srv = Server("--parallel", "4")
try:
    # ---- the same tokens as toy run: greedy, and sampled with a seed
    for i, p in enumerate(prompts[:4]):
        st, r, _ = srv.post("/v1/completions", {"prompt": p, "max_tokens": 24, "temperature": 0})
        check(st == 200 and r["choices"][0]["text"] == toy_run(p, 24, "--temp", "0"),
              f"greedy completion of {p!r} differs from toy run")
        t0 = time.monotonic()
        st, r, _ = srv.post("/v1/completions", {"prompt": p, "max_tokens": 24, "temperature": 0.9, "seed": 100 + i})
        rates.append(24 / (time.monotonic() - t0))
        check(st == 200 and r["choices"][0]["text"] == toy_run(p, 24, "--temp", "0.9", "--seed", str(100 + i)),
              f"seeded completion of {p!r} differs from toy run")
        check(r["usage"]["completion_tokens"] == 24 and r["choices"][0]["finish_reason"] == "length",
              f"usage/finish of {p!r}: {r.get('usage')} {r['choices'][0].get('finish_reason')}")
        st, tok, _ = srv.post("/tokenize", {"content": p})
        check(r["usage"]["prompt_tokens"] == len(tok["tokens"]), f"prompt_tokens of {p!r}")

    # ---- many clients at once, each with its lone answer
    jobs = [(prompts[i % len(prompts)], 8 + 7 * i, 0.7, 1000 + i) for i in range(12)]
    lone = []
    for p, n, t, seed in jobs:
        st, r, _ = srv.post("/v1/completions", {"prompt": p, "max_tokens": n, "temperature": t, "seed": seed})
        lone.append(r["choices"][0]["text"])
    got = [None] * len(jobs)

    def client(i):
        p, n, t, seed = jobs[i]
        st, ev = srv.stream("/v1/completions", {"prompt": p, "max_tokens": n, "temperature": t, "seed": seed,
                                                "stream": True})
        got[i] = (st, ev)

    # beside them, requests that fail or are abandoned: none may change the streams' tokens
    hostile_statuses = []

    def hostile(k):
        for body in ['{"prompt": "x", "stop": ""}', '{"prompt": [999999]}', '{"prompt": "x", "max_tokens": 0}',
                     '{"prompt": "x", "n": 3, "frobnicate": 1}']:
            st, _, _ = srv.request("POST", "/v1/completions", raw=body)
            hostile_statuses.append(st)
        for stream_it in (True, False):  # a client that leaves mid-stream, and one that leaves a whole answer
            s = socket.create_connection(("127.0.0.1", srv.port))
            body = json.dumps({"prompt": prompts[k], "max_tokens": 200, "ignore_eos": True, "stream": stream_it,
                               "n": 2}).encode()
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body) + body)
            if stream_it:
                s.recv(4096)
            else:
                nap(0.02)  # leaves before or after the answer is whole: either is checked the same
            s.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(jobs))]
    threads += [threading.Thread(target=hostile, args=(k,)) for k in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for i, (st, ev) in enumerate(got):
        text, finish, _ = stream_text(ev)
        check(st == 200 and ev and ev[-1] == "[DONE]", f"stream {i} incomplete")
        check(text == lone[i], f"stream {i} ({jobs[i][0]!r}, {jobs[i][1]} tokens) differs from its lone answer")
    check(sorted(hostile_statuses) == [200] * 3 + [400] * 9, f"the requests beside the streams: {hostile_statuses}")

    # ---- chat, n > 1, stop, logprobs, usage
    msgs = [{"role": "user", "content": "Who made the heaven and the earth?"}]
    st, r, _ = srv.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 10, "temperature": 0.8, "seed": 5, "n": 3})
    check(st == 200 and [c["index"] for c in r["choices"]] == [0, 1, 2], "chat n=3: three choices")
    check(r["choices"][0]["message"]["role"] == "assistant", "chat: the assistant's role")
    total = sum(1 for _ in r["choices"])
    check(0 < r["usage"]["completion_tokens"] <= 30 and total == 3, f"chat n=3 usage {r['usage']}")
    st, ev = srv.stream("/v1/chat/completions", {"messages": msgs, "max_tokens": 10, "temperature": 0.8, "seed": 5,
                                                 "n": 3, "stream": True, "stream_options": {"include_usage": True}})
    for k in range(3):
        check(stream_text(ev, k)[0] == r["choices"][k]["message"]["content"], f"streamed chat choice {k} differs")
    su = stream_text(ev)[2]
    check({k: su[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")} ==
          {k: r["usage"][k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
          f"streamed usage {su} equals the non-streamed one {r['usage']}")
    # the same prompt again: all of it but the last token comes from the cache
    check(su["prompt_tokens_details"] == {"cached_tokens": su["prompt_tokens"] - 1},
          f"streamed usage of a prompt just read: {su}")

    # ---- the prompt cache: a second turn reuses the first's tokens, with the same answer
    # as read anew (cache_prompt false, nothing cached)
    turn1 = [{"role": "user", "content": "Tell me of the days of creation, and of the light."}]
    st, r1, _ = srv.post("/v1/chat/completions", {"messages": turn1, "max_tokens": 8, "temperature": 0})
    turn2 = turn1 + [r1["choices"][0]["message"], {"role": "user", "content": "And the waters?"}]
    st, r2, _ = srv.post("/v1/chat/completions", {"messages": turn2, "max_tokens": 8, "temperature": 0})
    u1, u2 = r1["usage"], r2["usage"]
    check(u1["prompt_tokens"] - 1 <= u2["prompt_tokens_details"]["cached_tokens"] < u2["prompt_tokens"],
          f"second turn: {u2} after a first turn of {u1}")
    st, r3, _ = srv.post("/v1/chat/completions", {"messages": turn2, "max_tokens": 8, "temperature": 0,
                                                  "cache_prompt": False})
    check(st == 200 and r3["usage"]["prompt_tokens_details"] == {"cached_tokens": 0},
          f"cache_prompt false: {r3.get('usage')}")
    check(r3["choices"][0]["message"] == r2["choices"][0]["message"], "cache_prompt false: the same answer")
    st, r4, _ = srv.post("/v1/completions", {"prompt": "And God said", "max_tokens": 2, "cache_prompt": False})
    check(st == 200 and r4["usage"]["prompt_tokens_details"] == {"cached_tokens": 0},
          f"completions with cache_prompt false: {r4.get('usage')}")
    st, r4, _ = srv.post("/v1/completions", {"prompt": "And God said", "max_tokens": 2})
    check(st == 200 and r4["usage"]["prompt_tokens_details"] == {"cached_tokens": r4["usage"]["prompt_tokens"] - 1},
          f"completions of a prompt just read: {r4.get('usage')}")
    full = toy_run("And God said", 40, "--temp", "0")
    stop_at = full[10:14]
    st, r, _ = srv.post("/v1/completions", {"prompt": "And God said", "max_tokens": 40, "temperature": 0, "stop": [stop_at]})
    check(r["choices"][0]["text"] == full[:full.index(stop_at)] and r["choices"][0]["finish_reason"] == "stop",
          f"stop {stop_at!r}: {r['choices'][0]}")
    st, r, _ = srv.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 4, "logprobs": True, "top_logprobs": 3,
                                                 "temperature": 0})
    lp = r["choices"][0]["logprobs"]["content"]
    check(len(lp) == 4 and all(len(e["top_logprobs"]) == 3 for e in lp), "chat logprobs: 4 tokens, 3 alternatives")
    check(all(e["logprob"] == e["top_logprobs"][0]["logprob"] for e in lp), "greedy: the token is the most likely")
    check(all(e["logprob"] <= 0 for e in lp), "log-probabilities are <= 0")
    st, r, _ = srv.post("/v1/completions", {"prompt": "And God", "max_tokens": 3, "logprobs": 2, "temperature": 0})
    check(len(r["choices"][0]["logprobs"]["tokens"]) == 3, "completion logprobs")

    # ---- bad requests: statuses and error objects, the server still answering
    bad = [
        ("POST", "/v1/completions", "{bad", 400, None),
        ("POST", "/v1/completions", "[1]", 400, None),
        ("POST", "/v1/completions", '{"prompt": 5}', 400, "prompt"),
        ("POST", "/v1/completions", '{"prompt": "x", "temperature": "hot"}', 400, "temperature"),
        ("POST", "/v1/completions", '{"prompt": "x", "temperature": 9}', 400, "temperature"),
        ("POST", "/v1/completions", '{"prompt": "x", "max_tokens": -1}', 400, "max_tokens"),
        ("POST", "/v1/completions", '{"prompt": "x", "n": 0}', 400, "n"),
        ("POST", "/v1/completions", '{"prompt": "x", "cache_prompt": 0}', 400, "cache_prompt"),
        ("POST", "/v1/completions", '{"prompt": "x", "stop": [1]}', 400, "stop"),
        ("POST", "/v1/completions", '{"prompt": [999999]}', 400, "prompt"),
        ("POST", "/v1/completions", '{"prompt": "x", "model": "gpt-4"}', 400, "model"),
        ("POST", "/v1/completions", '{"prompt": "x", "max_tokens": 1000000}', 400, "max_tokens"),
        ("POST", "/v1/chat/completions", '{"messages": []}', 400, "messages"),
        ("POST", "/v1/chat/completions", '{"messages": [{"role": "robot", "content": "x"}]}', 400, "messages"),
        ("POST", "/v1/chat/completions", '{"messages": [{"role": "user", "content": 3}]}', 400, "messages"),
        ("POST", "/v1/chat/completions", '{"messages": [{"role": "user", "content": "x"}], "logprobs": 1}', 400, "logprobs"),
        ("POST", "/tokenize", '{"content": 1}', 400, "content"),
        ("POST", "/detokenize", '{"tokens": [-1]}', 400, "tokens"),
        ("GET", "/v1/nothing", None, 404, None),
        ("GET", "/v1/completions", None, 405, None),
        ("POST", "/health", "{}", 405, None),
    ]
    for method, path, body, want, param in bad:
        st, text, _ = srv.request(method, path, raw=body)
        check(st == want, f"{method} {path} {body!r}: status {st}, expected {want}")
        try:
            e = json.loads(text)["error"]
            check(set(e) >= {"message", "type", "param", "code"} and e["param"] == param,
                  f"{method} {path} {body!r}: error object {e}")
        except (ValueError, KeyError, TypeError):
            check(False, f"{method} {path} {body!r}: no error object: {text[:200]}")
    # a body over --max-body is answered 413 when its headers arrive, before it is sent
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=HANG_S)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % (9 << 20))
    answer = s.recv(4096)
    s.close()
    check(answer.startswith(b"HTTP/1.1 413 "), f"a 9 MiB body: {answer[:40]!r}, expected 413 before the body")
    st, text, _ = srv.request("GET", "/health")
    check(st == 200, "the server answers after the bad requests")

    # ---- a second server on the same port is refused (it shared the port, SO_REUSEPORT, and
    # took half of the connections)
    second = subprocess.run([TOY, "serve", "-m", MODEL, "--port", str(srv.port), "-t", "1"], capture_output=True,
                            text=True, timeout=HANG_S)
    check(second.returncode == 1 and f"port {srv.port}: Address already in use" in second.stderr,
          f"a second server on port {srv.port}: exit {second.returncode}: {second.stderr[-200:]!r}")

    # ---- metrics
    st, text, _ = srv.request("GET", "/metrics")
    check(st == 200 and re.search(r'toy_requests_total\{status="400"\} [1-9]', text) and "toy_busy_slots" in text,
          "metrics count the requests")
finally:
    rc = srv.stop()
check(rc == 0, f"SIGTERM: exit code {rc}")

# ---- one slot: a client that leaves frees it; a full queue answers 503; SIGTERM finishes the stream.
# Where a check needs one request to still be running while others come and go, that request
# is a stream of LONG tokens, each a decode step after the last (ignore_eos: nothing ends it
# sooner), while the check waits for a few HTTP round trips: it rests on that ratio of work,
# not on a time. LONG is sized from this run's own rate (the fastest of the completions
# above): two seconds' worth of tokens, at most what a slot holds (CTX, on a fast machine)
# and at least 100 (on a slow one, where those round trips see a token or two made).
CTX = 4096
LONG = int(min(CTX - 16, max(100, 2 * max(rates))))
srv = Server("--parallel", "1", "--queue", "1", "--api-key", "sesame", "--shutdown-grace", str(2 * HANG_S),
             "-c", str(CTX))
auth = {"Authorization": "Bearer sesame", "Content-Type": "application/json"}


def send_stream(prompt, n_tokens):
    """A socket on which a streamed completion of n_tokens was asked for, its reply begun:
    (socket, the bytes read so far)."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=HANG_S)
    body = json.dumps({"prompt": prompt, "max_tokens": n_tokens, "stream": True, "ignore_eos": True}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sesame\r\n"
              b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    return s, s.recv(65536)


try:
    st, _, _ = srv.request("GET", "/v1/models")
    check(st == 401, f"no key: status {st}")
    st, _, _ = srv.request("GET", "/v1/models", headers={"Authorization": "Bearer wrong"})
    check(st == 401, f"a wrong key: status {st}")
    st, _, _ = srv.request("GET", "/health")
    check(st == 200, "/health needs no key")
    st, _, _ = srv.request("GET", "/v1/models", headers=auth)
    check(st == 200, "the right key")

    # two requests at once on an idle server: one takes the slot, the other waits in the
    # queue of one, even when the second arrives before the engine has moved the first
    # into its slot (a race that answered 503 under load)
    pair = []

    def one():
        st, _, _ = srv.post("/v1/completions", {"prompt": "In the beginning", "max_tokens": 4}, headers=auth)
        pair.append(st)

    both = [threading.Thread(target=one) for _ in range(2)]
    for th in both:
        th.start()
    for th in both:
        th.join()
    check(pair == [200, 200], f"two requests at once, one slot and a queue of one: statuses {pair}")

    # a client that leaves mid-stream frees its slot at once: the request it left is
    # cancelled, not run to its end. Told by tokens, not by time: the next request, which
    # waits for the slot, is answered when the one left has made fewer than its LONG tokens
    # (the server sees the closed socket at its next write)
    made = srv.metric("toy_generated_tokens_total", auth)
    s, _ = send_stream("And God said", LONG)
    s.close()  # gone mid-stream
    st, r, _ = srv.post("/v1/completions", {"prompt": "In the beginning", "max_tokens": 4}, headers=auth)
    left = srv.metric("toy_generated_tokens_total", auth) - made - (r["usage"]["completion_tokens"] if st == 200 else 0)
    check(st == 200 and left < LONG,
          f"the slot of a client that left is free again: the request it left made {left:.0f} of its {LONG} "
          f"tokens first (status {st}: {str(r)[:200]})")

    # a long stream holds the slot; of five requests at once, one waits in the queue and the
    # others are turned away with 503 (once the four answers are in, the fifth is the one
    # waiting: nothing else ends while the stream runs)
    s, received = send_stream("And", LONG)
    while b"data: " not in received:  # the stream has its first token: it holds the slot
        chunk = s.recv(65536)
        if not chunk:
            break
        received += chunk
    stream = [received]

    def read_stream():
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            stream.append(chunk)

    reader = threading.Thread(target=read_stream)
    reader.start()
    statuses, answered = [], threading.Condition()

    def short():
        st, _, resp = srv.request("POST", "/v1/completions", raw=json.dumps({"prompt": "Who", "max_tokens": 5}),
                                  headers=auth)
        with answered:
            statuses.append((st, resp.getheader("Retry-After")))
            answered.notify_all()

    shorts = [threading.Thread(target=short) for _ in range(5)]
    for th in shorts:
        th.start()
    with answered:
        answered.wait_for(lambda: len(statuses) >= 4, timeout=HANG_S)
        turned_away = list(statuses)
    # SIGTERM while the stream runs: it and the waiting request finish, then the server exits 0
    events_before = b"".join(stream).count(b"data: ")
    srv.proc.send_signal(signal.SIGTERM)
    reader.join()
    s.close()
    for th in shorts:
        th.join()
    rc = srv.proc.wait(timeout=HANG_S)
    check(rc == 0, f"SIGTERM with a stream in flight: exit code {rc}")
    check(len(turned_away) == 4 and all(st == 503 and ra for st, ra in turned_away),
          f"a full queue answers 503 with Retry-After: the first four answers of five {turned_away}")
    check(sorted(st for st, _ in statuses) == [200, 503, 503, 503, 503],
          f"the request that waited was answered: {statuses}")
    text = b"".join(stream).decode("utf-8", "replace")
    check(events_before < LONG + 2, f"the stream was still running at SIGTERM: {events_before} events of {LONG + 2}")
    check(text.count("data: ") == LONG + 2 and "data: [DONE]" in text,
          f"the stream in flight at SIGTERM was whole: {text.count('data: ')} events, expected {LONG + 2}")
except Exception:
    srv.proc.kill()
    raise

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("serve_test: ok")
