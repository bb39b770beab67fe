#!/usr/bin/env python3
"""toy serve against hostile clients, with the standard library only.

usage: serve_hostile.py TOY MODEL

Every case attacks a running `toy serve` (raw sockets and hand-written HTTP/1.1 wherever
http.client would tidy the bytes up) and compares what came back with the server's contract;
after every case a normal completion must still be answered 200 and the process must still be
alive. What the cases check:

- the order of the checks made when a request's headers arrive, before any body is read:
  shutting down 503, over --max-connections 503 with Retry-After, a bad Host 403, a
  disallowed Origin 403, OPTIONS 204, no or a wrong API key 401, an unknown path 404, a
  wrong method 405 with Allow, a Content-Type that is not application/json 415, a
  Content-Length over --max-body 413 (answered without the client sending the body);
- the fields of /v1/completions, /v1/chat/completions, /tokenize and /detokenize: types,
  ranges, unknown and unsupported fields, each a 400 whose OpenAI error object names the
  field in error.param; max_tokens 0, null fields and harmless extras are answered 200;
- invalid UTF-8, lone surrogates and overlong encodings in JSON strings (400), and odd but
  valid Unicode (200);
- deep nesting under and over --max-body, bodies of exactly and one over --max-body,
  chunked bodies over it, absurd and malformed Content-Lengths;
- truncated, stalled and garbage requests, a 100 KB request line, 1,000 headers; a stalled
  connection never holds up the others (a normal request is answered while it is held) and
  is closed after --timeout, not before;
- clients that leave a streaming or a non-streaming request: the request is ended (the
  server generates fewer tokens than it asked for), the slots are free and the queue empty;
- 1,000 connections at once against --max-connections 8: each answered 200, 503 with
  Retry-After, or closed; none left hanging;
- methods and paths (405 with Allow, path traversal, long paths, query strings, pipelining,
  HTTP/1.0 without Host, Expect: 100-continue);
- the browser guards: Content-Type, Host (DNS rebinding) with --host-alias, Origin with
  --cors-origin and the CORS preflight;
- the API key (--api-key): 401 before the body is read, /health and preflights without it;
- shutdown: during --shutdown-grace new requests get 503, requests cut by the grace end with
  an SSE error event and [DONE] or a 503 error object, the process exits 0 once the grace is
  over (not before: a request whose body never comes is in flight) though that request never
  ends; SIGINT on an idle server exits 0 without waiting for its grace;
- no sanitizer report in the servers' logs (under TOY_SANITIZED=1).

No check depends on how fast the machine is (tests/helpers.py, "waiting"): the test waits
for events (an answer, a close, a log line, a /metrics value) with a generous deadline, and
the only time limits are the server's own (--timeout, --shutdown-grace), as lower bounds or
as a window the server holds open on any machine.

It prints one line per case, the count of failures at the end, and exits 1 if any failed.
"""
import atexit
import errno
import json
import os
import re
import resource
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from helpers import nap, poll_until  # noqa: E402

TOY, MODEL = sys.argv[1], sys.argv[2]
# every wait on the server (a socket's timeout, a poll, a process's exit): a hang is a FAIL
# ("timeout"), a sanitized build on a loaded machine still passes
DEADLINE = 120
N_CTX, N_VOCAB, MAX_BODY, IDLE_TIMEOUT, GRACE = 512, 4096, 65536, 5, 2
SIGINT_GRACE = 60  # the idle server stopped by SIGINT: exiting before this shows it did not wait
APP_ORIGIN, ALIAS = "http://app.example", "toy.internal"

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if hard == resource.RLIM_INFINITY or hard > soft:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

# ---------------------------------------------------------------- the servers

BASE_FLAGS = ["--parallel", "2", "--max-body", str(MAX_BODY), "--timeout", str(IDLE_TIMEOUT),
              "--cors-origin", APP_ORIGIN, "--host-alias", ALIAS, "--shutdown-grace", str(GRACE),
              "--max-connections", "2000"]


STARTED = []  # every toy serve this test started: killed at exit if still running


@atexit.register
def _kill_left():
    for p in STARTED:
        if p.poll() is None:
            p.kill()


class Server:
    def __init__(self, name, extra=(), key=None):
        self.name, self.extra, self.key = name, list(extra), key
        self.logs = []  # every run's stderr, restarts included
        self.drains = []  # the threads reading it: joined (the log complete) once the process has ended
        self.start()

    def start(self):
        args = [TOY, "serve", "-m", MODEL, "--port", "0", "-t", "2", *BASE_FLAGS, *self.extra]
        if self.key:
            args += ["--api-key", self.key]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     errors="replace")
        STARTED.append(self.proc)
        self.log = []
        self.logs.append(self.log)
        while True:
            line = self.proc.stderr.readline()
            if not line:
                raise SystemExit(f"toy serve ({self.name}) did not start: {' '.join(args)}\n{''.join(self.log)}")
            self.log.append(line)
            m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
            if m:
                break
        self.port = int(m.group(1))
        th = threading.Thread(target=self._drain, args=(self.proc, self.log), daemon=True)
        th.start()
        self.drains.append(th)

    @staticmethod
    def _drain(proc, log):
        for line in proc.stderr:
            log.append(line)

    def alive(self):
        return self.proc.poll() is None

    def host(self):
        return f"127.0.0.1:{self.port}"

    def restart(self):
        if self.alive():
            self.proc.kill()
        self.proc.wait()
        self.start()

    def logged(self, pattern, since=0):
        """Whether a line of the current run's log from line `since` on matches pattern."""
        return any(re.search(pattern, line) for line in self.log[since:])

    def stop(self, sig=signal.SIGTERM, limit=DEADLINE):
        """(exit status, seconds) after sig; None for the status if it did not exit in limit."""
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            rc = None
        el = time.monotonic() - t0
        if rc is None:
            self.proc.kill()
            self.proc.wait()
        return rc, el


# ---------------------------------------------------------------- raw HTTP

class Resp:
    def __init__(self, status, headers, body, interim):
        self.status, self.headers, self.body, self.interim = status, headers, body, interim

    def header(self, name):
        return self.headers.get(name.lower())

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def error(self):
        """The OpenAI error object, or None if the body is not one."""
        j = self.json()
        if isinstance(j, dict) and isinstance(j.get("error"), dict) and \
                {"message", "type", "param", "code"} <= set(j["error"]):
            return j["error"]
        return None

    def text(self):
        return self.body.decode("utf-8", "replace")


def parse_response(buf, eof, head=False):
    """(Resp or a string saying how it ended, the bytes left), or None when more is needed."""
    interim = []
    while True:
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if eof:
                return ("closed" if not buf else f"closed mid-headers after {buf[:40]!r}"), b""
            return None
        lines = buf[:end].decode("latin-1").split("\r\n")
        m = re.match(r"HTTP/\d\.\d (\d{3})", lines[0])
        if not m:
            return f"not HTTP: {buf[:40]!r}", b""
        status = int(m.group(1))
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            k, v = k.strip().lower(), v.strip()
            headers[k] = headers[k] + ", " + v if k in headers else v
        rest = buf[end + 4:]
        if 100 <= status < 200:
            interim.append(status)
            buf = rest
            continue
        break
    if head or status in (204, 304):
        return Resp(status, headers, b"", interim), rest
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body, pos = b"", 0
        while True:
            nl = rest.find(b"\r\n", pos)
            if nl < 0:
                return (f"{status}, closed mid-body", b"") if eof else None
            try:
                size = int(rest[pos:nl].split(b";")[0], 16)
            except ValueError:
                return f"{status}, a bad chunk size {rest[pos:nl][:20]!r}", b""
            if size == 0:
                t = rest.find(b"\r\n", nl + 2) if rest[nl + 2:nl + 4] != b"\r\n" else nl + 2
                if t < 0:
                    return (f"{status}, closed mid-trailer", b"") if eof else None
                if rest[nl + 2:nl + 4] != b"\r\n":
                    t = rest.find(b"\r\n\r\n", nl + 2)
                    if t < 0:
                        return (f"{status}, closed mid-trailer", b"") if eof else None
                    return Resp(status, headers, body, interim), rest[t + 4:]
                return Resp(status, headers, body, interim), rest[nl + 4:]
            if len(rest) < nl + 2 + size + 2:
                return (f"{status}, closed mid-body", b"") if eof else None
            body += rest[nl + 2:nl + 2 + size]
            pos = nl + 2 + size + 2
    if "content-length" in headers:
        try:
            n = int(headers["content-length"])
        except ValueError:
            return f"{status}, a bad Content-Length {headers['content-length']!r}", b""
        if len(rest) < n:
            return (f"{status}, closed mid-body ({len(rest)} of {n} bytes)", b"") if eof else None
        return Resp(status, headers, rest[:n], interim), rest[n:]
    if not eof:
        return None
    return Resp(status, headers, rest, interim), b""


class Conn:
    def __init__(self, port, timeout=DEADLINE):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf, self.eof = b"", False

    def send(self, data):
        """Send, ignoring a server that has stopped reading and closed (its answer is read after)."""
        try:
            self.sock.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False

    def send_bg(self, data):
        """Send from a thread, so that a server answering before the body is read is heard."""
        th = threading.Thread(target=self._send_quiet, args=(data,), daemon=True)
        th.start()
        return th

    def _send_quiet(self, data):
        try:
            self.sock.sendall(data)
        except OSError:
            pass

    def fill(self):
        if self.eof:
            return False
        try:
            d = self.sock.recv(65536)
        except ConnectionResetError:
            d = b""
        if not d:
            self.eof = True
            return False
        self.buf += d
        return True

    def response(self, head=False, timeout=None):
        """The next response: a Resp, or "closed", "timeout", ..."""
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            while True:
                r = parse_response(self.buf, self.eof, head)
                if r is not None:
                    resp, self.buf = r
                    return resp
                self.fill()
        except (TimeoutError, socket.timeout):
            return "timeout"
        except OSError as e:
            return f"error {e.__class__.__name__}"

    def read_until(self, marker, timeout=None):
        """True once marker has arrived; False on close or timeout."""
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            while marker not in self.buf:
                if not self.fill():
                    return False
            return True
        except (TimeoutError, socket.timeout, OSError):
            return False

    def held(self):
        """Without waiting: "held" while the server has neither answered nor closed the
        connection, else what it did ("closed", "answered ...", "reset")."""
        if not select.select([self.sock], [], [], 0)[0]:
            return "held"
        try:
            d = self.sock.recv(64, socket.MSG_PEEK)
        except OSError:
            return "reset"
        return f"answered {d[:12]!r}" if d else "closed"

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def request_bytes(srv, method, path, body=None, *, ctype="application/json", host=True, key=True,
                  headers=(), version="HTTP/1.1", length=True):
    """Hand-written request bytes. body: dict/list (JSON), str or bytes; host: True for
    127.0.0.1:PORT, a string, or None for none; key: the server's API key when it has one."""
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode()
    h = []
    if host is True:
        h.append(("Host", srv.host()))
    elif host:
        h.append(("Host", host))
    if key is True and srv.key:
        h.append(("Authorization", f"Bearer {srv.key}"))
    if body is not None and ctype:
        h.append(("Content-Type", ctype))
    if body is not None and length:
        h.append(("Content-Length", str(len(body))))
    h += list(headers)
    head = f"{method} {path} {version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h) + "\r\n"
    return head.encode("latin-1") + (body or b"")


def http(srv, method, path, body=None, *, head=False, timeout=DEADLINE, **kw):
    """One request on a new connection: a Resp or a string ("closed", "timeout", "refused")."""
    try:
        c = Conn(srv.port, timeout)
    except OSError as e:
        return f"cannot connect: {e.__class__.__name__}"
    data = request_bytes(srv, method, path, body, **kw)
    if len(data) > 65536:
        c.send_bg(data)
    else:
        c.send(data)
    r = c.response(head=head)
    c.close()
    return r


def exchange(srv, data, timeout=DEADLINE, half_close=False):
    """Raw bytes on a new connection, the response read."""
    c = Conn(srv.port, timeout)
    if len(data) > 65536:
        c.send_bg(data)
    else:
        c.send(data)
    if half_close:
        try:
            c.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    r = c.response()
    c.close()
    return r


def S(r, obj=True):
    """A response as its status, with a note when an error status has no OpenAI error object."""
    if isinstance(r, str):
        return r
    s = str(r.status)
    if obj and r.status >= 400 and r.error() is None:
        s += f" (no error object: {r.body[:80]!r})"
    return s


def P(r):
    """A response as 'STATUS param=PARAM' for errors, the status alone otherwise."""
    if isinstance(r, str):
        return r
    if r.status < 400:
        return str(r.status)
    e = r.error()
    if e is None:
        return f"{r.status} (no error object: {r.body[:80]!r})"
    return f"{r.status} param={e['param']}"


def raw_body(buf):
    """(status, body, whole) of a raw response that may have been cut short: the body
    de-chunked as far as it goes; whole once the last chunk (or Content-Length) arrived."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None, b"", False
    head = buf[:end].decode("latin-1")
    m = re.match(r"HTTP/\d\.\d (\d{3})", head)
    status = int(m.group(1)) if m else None
    rest = buf[end + 4:]
    if not re.search(r"^transfer-encoding:.*chunked", head, re.I | re.M):
        m = re.search(r"^content-length:\s*(\d+)", head, re.I | re.M)
        return status, rest, bool(m) and len(rest) >= int(m.group(1))
    body, pos = b"", 0
    while True:
        nl = rest.find(b"\r\n", pos)
        if nl < 0:
            return status, body, False
        try:
            size = int(rest[pos:nl].split(b";")[0], 16)
        except ValueError:
            return status, body, False
        if size == 0:
            return status, body, True
        chunk = rest[nl + 2:nl + 2 + size]
        body += chunk
        if len(chunk) < size:
            return status, body, False
        pos = nl + 2 + size + 2


def sse_events(body):
    """[(event name or None, data)] of a server-sent event stream."""
    out = []
    for block in body.decode("utf-8", "replace").replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        out.append((name, "\n".join(data)))
    return out


def metrics(srv):
    """/metrics as {name: value} (the labelled toy_requests_total left out), or None when it
    was not answered 200."""
    r = http(srv, "GET", "/metrics")
    if isinstance(r, str) or r.status != 200:
        return None
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(toy_\w+) (\S+)$", r.text(), re.M)}


def load(srv):
    """(busy slots, queue depth), or None."""
    m = metrics(srv)
    return None if m is None else (int(m.get("toy_busy_slots", -1)), int(m.get("toy_queue_depth", -1)))


def generated(srv):
    """toy_generated_tokens_total, or None."""
    m = metrics(srv)
    return None if m is None else int(m.get("toy_generated_tokens_total", -1))


NORMAL = {"prompt": "And", "max_tokens": 4}


def normal_request(srv):
    """(status or what happened, ms) of the normal request, on a new connection."""
    t0 = time.monotonic()
    r = http(srv, "POST", "/v1/completions", NORMAL)
    ms = (time.monotonic() - t0) * 1000
    return (r if isinstance(r, str) else r.status), ms


# ---------------------------------------------------------------- the cases
# each: (name, fn(srv) -> got or (got, ok), expected: a string, a tuple of strings, or a
# description when fn decides ok itself)

cases_main = []   # the main server
cases_auth = []   # the server with --api-key sesame --max-connections 8


def case(table, name, expect):
    def deco(fn):
        table.append((name, fn, expect))
        return fn
    return deco


def field_case(name, extra, expect, chat=False, path=None, base=None):
    if base is None:
        base = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4} if chat else dict(NORMAL)
    body = dict(base)
    body.update(extra)
    path = path or ("/v1/chat/completions" if chat else "/v1/completions")
    cases_main.append((name, lambda srv: P(http(srv, "POST", path, body)), expect))


def bad(param):
    return f"400 param={param}"


# ---- 1. the fields of /v1/completions
field_case("stop_empty_string", {"stop": ""}, bad("stop"))
field_case("stop_list_empty_string", {"stop": [""]}, bad("stop"))
field_case("stop_17_strings", {"stop": [f"s{i}" for i in range(17)]}, bad("stop"))
field_case("stop_16_strings", {"stop": [f"zq{i}" for i in range(16)]}, "200")
field_case("stop_2000_bytes", {"stop": ["x" * 2000]}, bad("stop"))
field_case("stop_2000_bytes_string", {"stop": "x" * 2000}, bad("stop"))
# \u0000 is refused by the JSON parser itself (Jansson, without JSON_ALLOW_NUL): 400, no param
field_case("stop_nul", {"stop": "\u0000"}, bad(None))
field_case("stop_not_string", {"stop": [1]}, bad("stop"))
field_case("temperature_string", {"temperature": "hot"}, bad("temperature"))
field_case("temperature_bool", {"temperature": True}, bad("temperature"))
field_case("temperature_-1", {"temperature": -1}, bad("temperature"))
field_case("temperature_3", {"temperature": 3}, bad("temperature"))
field_case("max_tokens_-1", {"max_tokens": -1}, bad("max_tokens"))
field_case("max_tokens_1.5", {"max_tokens": 1.5}, bad("max_tokens"))
field_case("max_tokens_string", {"max_tokens": "8"}, bad("max_tokens"))
field_case("max_tokens_true", {"max_tokens": True}, bad("max_tokens"))
field_case("max_tokens_2^31", {"max_tokens": 2147483648}, bad("max_tokens"))
field_case("max_tokens_600_over_ctx", {"max_tokens": 600}, bad("max_tokens"))
field_case("n_0", {"n": 0}, bad("n"))
field_case("n_17", {"n": 17}, bad("n"))
field_case("n_16", {"n": 16}, "200")
field_case("top_k_-1", {"top_k": -1}, bad("top_k"))
field_case("top_k_1.5", {"top_k": 1.5}, bad("top_k"))
field_case("top_p_2", {"top_p": 2}, bad("top_p"))
field_case("min_p_-0.1", {"min_p": -0.1}, bad("min_p"))
field_case("presence_penalty_3", {"presence_penalty": 3}, bad("presence_penalty"))
field_case("frequency_penalty_string", {"frequency_penalty": "x"}, bad("frequency_penalty"))
field_case("repeat_penalty_0", {"repeat_penalty": 0}, bad("repeat_penalty"))
field_case("seed_-1", {"seed": -1}, bad("seed"))
field_case("seed_1.5", {"seed": 1.5}, bad("seed"))
field_case("stream_string", {"stream": "yes"}, bad("stream"))
field_case("stream_options_5", {"stream": True, "stream_options": 5}, bad("stream_options"))
field_case("stream_options_include_usage_string", {"stream": True, "stream_options": {"include_usage": "x"}},
           (bad("stream_options"), bad("stream_options.include_usage"), bad("include_usage")))
field_case("logprobs_21", {"logprobs": 21}, bad("logprobs"))
field_case("logprobs_20", {"logprobs": 20}, "200")
field_case("prompt_5", {"prompt": 5}, bad("prompt"))
field_case("prompt_missing", {"prompt": None}, bad("prompt"))
field_case("prompt_empty_array", {"prompt": []}, bad("prompt"))
field_case("prompt_nested_array", {"prompt": [[1, 2]]}, bad("prompt"))
field_case("prompt_token_-1", {"prompt": [-1]}, bad("prompt"))
field_case("prompt_token_4096", {"prompt": [N_VOCAB]}, bad("prompt"))
field_case("prompt_token_1.5", {"prompt": [1.5]}, bad("prompt"))
field_case("prompt_two_strings", {"prompt": ["a", "b"]}, bad("prompt"))
field_case("prompt_600_tokens", {"prompt": [1] * 600, "max_tokens": None}, bad("prompt"))
field_case("model_5", {"model": 5}, bad("model"))
field_case("model_gpt-4", {"model": "gpt-4"}, bad("model"))
field_case("unknown_field_foo", {"foo": 1}, bad("foo"))
field_case("response_format_json_object", {"response_format": {"type": "json_object"}}, "200")
field_case("response_format_xml", {"response_format": {"type": "xml"}}, bad("response_format"))
field_case("response_format_string", {"response_format": "json"}, bad("response_format"))
field_case("response_format_extra_key", {"response_format": {"type": "text", "x": 1}}, bad("response_format"))
field_case("response_format_schema_not_object", {"response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": 5}}},
           bad("response_format"))
field_case("json_schema_ref_cycle", {"json_schema": {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}},
           bad("json_schema"))
field_case("json_schema_400_deep", {"json_schema": json.loads('{"type":"array","items":' * 400 + '{}' + '}' * 400)},
           (bad("json_schema"), bad(None), "200"))
field_case("grammar_bad", {"grammar": "root ::= ("}, bad("grammar"))
field_case("grammar_not_string", {"grammar": ["root"]}, bad("grammar"))
field_case("grammar_deep_groups", {"grammar": "root ::= " + "(" * 5000 + "\"a\"" + ")" * 5000}, bad("grammar"))
field_case("grammar_left_recursive", {"grammar": "root ::= root \"a\" | \"b\""}, bad("grammar"))
field_case("grammar_huge_repeat", {"grammar": "root ::= (\"a\"{10000}){10000}"}, "200")  # 20,000 elements
field_case("grammar_too_large", {"grammar": "root ::= \"" + "ab" * 1000 + "\"{3000}"}, bad("grammar"))
field_case("grammar_ambiguous", {"grammar": "root ::= (\"a\" | \"a\" | \"a\" | \"a\")* x\nx ::= [a-z]{0,50} \"!\""},
           ("200", "400 param=None"))
field_case("grammar_byte_tokens", {"grammar": "root ::= [\\U0010FFFF]"}, "200")  # four byte tokens
field_case("grammar_two_constraints", {"grammar": "root ::= \"a\"", "json_schema": {}}, bad("json_schema"))
field_case("logit_bias", {"logit_bias": {"1": 5}}, "200")
field_case("logit_bias_bad_id", {"logit_bias": {"x1": 5}}, bad("logit_bias"))
field_case("logit_bias_out_of_range", {"logit_bias": {str(N_VOCAB): 5}}, bad("logit_bias"))
field_case("logit_bias_nan_like", {"logit_bias": {"1": "5"}}, bad("logit_bias"))
field_case("logit_bias_pairs", {"logit_bias": [[1, False], [2, 3.5]]}, "200")
field_case("temperature_null", {"temperature": None}, "200")
field_case("user_field", {"user": "x"}, "200")


@case(cases_main, "max_tokens_0", "200 text='' finish=length completion_tokens=0")
def _(srv):
    r = http(srv, "POST", "/v1/completions", {"prompt": "And", "max_tokens": 0})
    if isinstance(r, str) or r.status != 200:
        return P(r)
    try:
        c = r.json()["choices"][0]
        return f"200 text={c['text']!r} finish={c['finish_reason']} completion_tokens={r.json()['usage']['completion_tokens']}"
    except (TypeError, KeyError, IndexError):
        return f"200 but {r.body[:120]!r}"


@case(cases_main, "max_tokens_0_stream", "200 text='' finish=length, then data: [DONE]")
def _(srv):
    r = http(srv, "POST", "/v1/completions", {"prompt": "And", "max_tokens": 0, "stream": True})
    if isinstance(r, str) or r.status != 200:
        return P(r)
    ev = sse_events(r.body)
    text, finish = "", None
    try:
        for _, d in ev:
            if d == "[DONE]":
                continue
            for c in json.loads(d)["choices"]:
                text += c.get("text") or ""
                finish = c.get("finish_reason") or finish
    except (ValueError, KeyError, TypeError):
        return f"200 but events {r.body[:160]!r}"
    tail = "then data: [DONE]" if ev and ev[-1][1] == "[DONE]" else f"last event {ev[-1] if ev else None}"
    return f"200 text={text!r} finish={finish}, {tail}"


# other bodies
for name, raw in [("body_invalid_json", "{bad"), ("body_array", "[1]"), ("body_null", "null"),
                  ("body_empty", ""), ("body_trailing_garbage", '{"prompt": "And", "max_tokens": 4} x'),
                  ("temperature_1e999", '{"prompt": "And", "max_tokens": 4, "temperature": 1e999}'),
                  ("temperature_NaN", '{"prompt": "And", "max_tokens": 4, "temperature": NaN}'),
                  ("seed_2^64", '{"prompt": "And", "max_tokens": 4, "seed": 18446744073709551616}')]:
    cases_main.append((name, (lambda raw: lambda srv: S(http(srv, "POST", "/v1/completions", raw)))(raw), "400"))

# ---- 2. chat
field_case("chat_messages_string", {"messages": "x"}, bad("messages"), chat=True)
field_case("chat_messages_missing", {"messages": None}, bad("messages"), chat=True)
field_case("chat_messages_empty", {"messages": []}, bad("messages"), chat=True)
field_case("chat_messages_number", {"messages": [5]}, bad("messages"), chat=True)
field_case("chat_message_empty_object", {"messages": [{}]}, bad("messages"), chat=True)
field_case("chat_role_robot", {"messages": [{"role": "robot", "content": "x"}]}, bad("messages"), chat=True)
field_case("chat_content_3", {"messages": [{"role": "user", "content": 3}]}, bad("messages"), chat=True)
field_case("chat_content_nul", {"messages": [{"role": "user", "content": "a\u0000b"}]}, bad(None), chat=True)
field_case("chat_content_image_part", {"messages": [{"role": "user", "content": [
    {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]}, bad("messages"), chat=True)
field_case("chat_content_text_parts", {"messages": [{"role": "user", "content": [
    {"type": "text", "text": "Hi"}, {"type": "text", "text": " there"}]}]}, "200", chat=True)
field_case("chat_logprobs_1", {"logprobs": 1}, bad("logprobs"), chat=True)
field_case("chat_top_logprobs_21", {"logprobs": True, "top_logprobs": 21}, bad("top_logprobs"), chat=True)
field_case("chat_top_logprobs_without_logprobs", {"top_logprobs": 2}, bad("top_logprobs"), chat=True)
field_case("chat_top_logprobs_20", {"logprobs": True, "top_logprobs": 20}, "200", chat=True)
field_case("chat_tools", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
           "200", chat=True)
field_case("chat_tools_129", {"tools": [{"type": "function", "function": {"name": f"f{i}"}} for i in range(129)]},
           bad("tools"), chat=True)
field_case("chat_tools_name_65", {"tools": [{"type": "function", "function": {"name": "f" * 65}}]}, bad("tools"),
           chat=True)
field_case("chat_tools_name_newline", {"tools": [{"type": "function", "function": {"name": "f\nx"}}]}, bad("tools"),
           chat=True)
field_case("chat_tool_choice_undeclared", {"tools": [{"type": "function", "function": {"name": "f"}}],
                                           "tool_choice": {"type": "function", "function": {"name": "g"}}},
           bad("tool_choice"), chat=True)
field_case("chat_tool_choice_required_no_tools", {"tool_choice": "required"}, bad("tool_choice"), chat=True)
field_case("chat_tool_message_no_id", {"messages": [{"role": "tool", "content": "x"}]}, bad("messages"), chat=True)
field_case("chat_tool_call_arguments_array", {"messages": [{"role": "assistant", "content": None, "tool_calls": [
    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[" * 5000}}]}]}, bad("messages"), chat=True)
field_case("chat_tool_calls_200", {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": None,
    "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                   for i in range(200)]}]}, ("200", bad("messages")), chat=True)
field_case("chat_response_format", {"response_format": {"type": "json_object"}}, "200", chat=True)
field_case("chat_1000_messages", {"messages": [{"role": "user", "content": "x"}] * 1000, "max_tokens": None},
           (bad("messages"), "200"), chat=True)
field_case("chat_emoji", {"messages": [{"role": "user", "content": "Hi \U0001F600\U0001F468\u200d\U0001F469\u200d\U0001F467"}]},
           "200", chat=True)

# ---- 3. Unicode
field_case("unicode_emoji", {"prompt": "And \U0001F600 \U0001F468\u200d\U0001F469\u200d\U0001F467 \U0001F389"}, "200")
field_case("unicode_U+FFFF", {"prompt": "And \uffff"}, "200")
field_case("unicode_rtl", {"prompt": "And \u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627 \u202e"}, "200")
field_case("unicode_300_combining", {"prompt": "e" + "\u0301" * 300},
           ("200", bad("prompt"), bad("max_tokens")))
field_case("unicode_nul_in_prompt", {"prompt": "And\u0000God"}, bad(None))
for name, raw in [("unicode_lone_surrogate", b'{"prompt": "A\\ud800B", "max_tokens": 4}'),
                  ("unicode_lone_low_surrogate", b'{"prompt": "A\\udc00B", "max_tokens": 4}'),
                  ("unicode_invalid_utf8", b'{"prompt": "A\xff\xfeB", "max_tokens": 4}'),
                  ("unicode_overlong", b'{"prompt": "A\xc0\xafB", "max_tokens": 4}'),
                  ("unicode_raw_surrogate_utf8", b'{"prompt": "A\xed\xa0\x80B", "max_tokens": 4}'),
                  ("unicode_truncated_utf8", b'{"prompt": "A\xe2\x82", "max_tokens": 4}'),
                  ("unicode_invalid_utf8_in_key", b'{"prompt": "A", "\xff": 1}')]:
    cases_main.append((name, (lambda raw: lambda srv: S(http(srv, "POST", "/v1/completions", raw)))(raw), "400"))

# ---- 4. nesting
for name, raw, want in [("nesting_60000_brackets", b"[" * 60000, "400"),
                        ("nesting_12000_objects_60KB", b'{"a":' * 12000, "400"),
                        ("nesting_deep_in_field", b'{"prompt": "And", "max_tokens": 4, "user": ' + b"[" * 30000
                         + b"]" * 30000 + b"}", "400"),
                        ("nesting_100000_brackets", b"[" * 100000, "413"),
                        ("nesting_100000_objects", b'{"a":' * 100000, "413")]:
    cases_main.append((name, (lambda raw: lambda srv: S(http(srv, "POST", "/v1/completions", raw)))(raw), want))


# ---- 5. sizes
def padded(n):
    b = json.dumps(NORMAL).encode()
    return b + b" " * (n - len(b))


cases_main.append(("body_exactly_max_body", lambda srv: S(http(srv, "POST", "/v1/completions", padded(MAX_BODY))),
                   ("200", "400")))
cases_main.append(("body_max_body_plus_1", lambda srv: S(http(srv, "POST", "/v1/completions", padded(MAX_BODY + 1))),
                   "413"))


def headers_only(srv, path, length, obj=True, **kw):
    """Headers with a Content-Length and no body sent: the answer. The body never comes, so
    any answer but a close or a 408 (--timeout) was given without reading it."""
    c = Conn(srv.port)
    data = request_bytes(srv, "POST", path, b"", length=False, **kw)
    # a Content-Length with no body: written by hand
    data = data[:-2] + f"Content-Length: {length}\r\n\r\n".encode()
    c.send(data)
    r = c.response()
    c.close()
    return S(r, obj)


cases_main.append(("content_length_1e6_no_body", lambda srv: headers_only(srv, "/v1/completions", 1000000), "413"))
cases_main.append(("content_length_huge", lambda srv: headers_only(srv, "/v1/completions", "99999999999999999999",
                                                                   obj=False), ("413", "400")))
cases_main.append(("content_length_abc", lambda srv: headers_only(srv, "/v1/completions", "abc", obj=False),
                   ("400", "closed")))
cases_main.append(("content_length_negative", lambda srv: headers_only(srv, "/v1/completions", "-1", obj=False),
                   ("400", "closed", "413")))


def chunked(srv, body, chunk=4096):
    data = request_bytes(srv, "POST", "/v1/completions", None, headers=[("Transfer-Encoding", "chunked"),
                                                                        ("Content-Type", "application/json")])
    for i in range(0, len(body), chunk):
        part = body[i:i + chunk]
        data += b"%x\r\n" % len(part) + part + b"\r\n"
    return data + b"0\r\n\r\n"


cases_main.append(("chunked_100KB", lambda srv: S(exchange(srv, chunked(srv, b" " * 102400))), "413"))
cases_main.append(("chunked_small_valid", lambda srv: S(exchange(srv, chunked(srv, json.dumps(NORMAL).encode(), 7))),
                   ("200", "411")))
cases_main.append(("content_length_and_chunked", lambda srv: S(exchange(
    srv, chunked(srv, json.dumps(NORMAL).encode(), 7).replace(
        b"Transfer-Encoding: chunked\r\n", b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", 1)),
    obj=False), ("200", "400", "411", "closed")))

cases_main.append(("tokenize_60000_bytes", lambda srv: P(http(srv, "POST", "/tokenize", {"content": "x " * 30000})),
                   (bad("content"), "200")))
cases_main.append(("tokenize_content_1", lambda srv: P(http(srv, "POST", "/tokenize", {"content": 1})), bad("content")))
cases_main.append(("tokenize_add_special_string", lambda srv: P(http(srv, "POST", "/tokenize",
                                                                    {"content": "x", "add_special": "x"})),
                   bad("add_special")))
cases_main.append(("tokenize_ok", lambda srv: P(http(srv, "POST", "/tokenize", {"content": "And God"})), "200"))
for name, toks, want in [("detokenize_-1", [-1], bad("tokens")), ("detokenize_4096", [N_VOCAB], bad("tokens")),
                         ("detokenize_string", "x", bad("tokens")), ("detokenize_1.5", [1.5], bad("tokens")),
                         ("detokenize_missing", None, bad("tokens")),
                         ("detokenize_1_2_3", [1, 2, 3], "200"), ("detokenize_15000_tokens", [5] * 15000, "200")]:
    cases_main.append((name, (lambda toks: lambda srv: P(http(srv, "POST", "/detokenize", {"tokens": toks})))(toks),
                       want))


# ---- 6. truncated and stalled
def _truncated_close(srv):
    c = Conn(srv.port)
    body = json.dumps(NORMAL).encode().ljust(100)
    head = request_bytes(srv, "POST", "/v1/completions", body)
    c.send(head[:len(head) - 50])
    c.sock.shutdown(socket.SHUT_WR)
    r = c.response()
    c.close()
    return S(r, obj=False)


cases_main.append(("truncated_body_then_close", _truncated_close, ("closed", "400")))


def stall(srv, data, wait_close=False):
    """Send data and hold the connection: a normal request meanwhile must be answered while
    the stalled one is still held (a server stuck on it would answer only once --timeout
    had closed it). wait_close: then the server must close the stalled one (or answer 408
    or 400), not before --timeout."""
    c = Conn(srv.port)
    c.send(data)
    t_sent = time.monotonic()
    # for the server to take the bytes in first: shorter only makes the case easier, and
    # ten times as long is still far under --timeout
    nap(0.1)
    st, ms = normal_request(srv)
    held = c.held()
    ok = st == 200 and held == "held"
    got = f"normal {st} in {ms:.0f} ms, the stalled connection then {held}"
    if held != "held":
        got += f" ({time.monotonic() - t_sent:.1f} s after its last byte)"
    if wait_close:
        r = c.response()
        el = time.monotonic() - t_sent
        end = S(r, obj=False)
        # (less 0.1 s: the server may read a coarse monotonic clock)
        ok = ok and end in ("closed", "408", "400") and el >= IDLE_TIMEOUT - 0.1
        got += f"; then {end} {el:.1f} s after its last byte (--timeout {IDLE_TIMEOUT})"
    c.close()
    return got, ok


def half_body(srv):
    body = json.dumps(NORMAL).encode().ljust(100)
    return request_bytes(srv, "POST", "/v1/completions", body)[:-50]


cases_main.append(("stall_half_body", lambda srv: stall(srv, half_body(srv)),
                   "normal 200 while the stalled connection is held"))
cases_main.append(("stall_headers_no_body", lambda srv: stall(srv, request_bytes(srv, "POST", "/v1/completions", " " * 100)
                                                              [:-100]),
                   "normal 200 while the stalled connection is held"))
cases_main.append(("stall_half_request_line", lambda srv: stall(srv, b"POST /v1/compl", wait_close=True),
                   f"normal 200 while it is held; then the server closes it (or 408), not before --timeout "
                   f"{IDLE_TIMEOUT} s"))
cases_main.append(("garbage", lambda srv: S(exchange(srv, b"\x00\x01GARBAGE\r\n\r\n"), obj=False), ("400", "closed")))
cases_main.append(("request_line_100KB", lambda srv: S(exchange(
    srv, b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\nHost: " + srv.host().encode() + b"\r\n\r\n"), obj=False),
    ("414", "431", "400", "closed")))
cases_main.append(("header_64KB", lambda srv: S(exchange(srv, request_bytes(
    srv, "POST", "/v1/completions", NORMAL, headers=[("X-Big", "y" * 65536)])), obj=False), ("431", "400", "closed")))
cases_main.append(("headers_1000", lambda srv: S(exchange(srv, request_bytes(
    srv, "POST", "/v1/completions", NORMAL, headers=[(f"X-H{i}", "v") for i in range(1000)])), obj=False),
    ("431", "400", "200")))


# ---- 7. clients that leave
# The most one request can ask for: a client that leaves it has left nearly all of it, on
# any machine, so a server that noticed generates only a small part of it.
HEAVY = {"prompt": "And", "n": 16, "max_tokens": 496, "ignore_eos": True}
HEAVY_TOKENS = HEAVY["n"] * HEAVY["max_tokens"]


def after_leaving(srv, before, mark):
    """(got, ok) once a client has left a HEAVY request: the server ends it (its completion
    logged, from log line mark on, with "(connection closed)"), every slot is free and the
    queue empty, and fewer tokens were generated than the request asked for (before: the
    count of generated tokens when it was sent)."""
    t0 = time.monotonic()
    ended = poll_until(lambda: srv.logged(r"\(connection closed\)", mark) and load(srv) == (0, 0), DEADLINE)
    el = time.monotonic() - t0
    now = generated(srv)
    n = None if now is None or before is None else now - before
    if not ended:
        return f"not ended after {el:.0f} s: busy_slots, queue {load(srv)}; {n} tokens generated", False
    return f"ended, busy_slots 0, queue 0 after {el * 1000:.0f} ms; {n} of {HEAVY_TOKENS} tokens generated", \
        n is not None and 0 <= n < HEAVY_TOKENS


def _leave_stream_after_first(srv):
    before, mark = generated(srv), len(srv.log)
    c = Conn(srv.port)
    c.send(request_bytes(srv, "POST", "/v1/completions", dict(HEAVY, stream=True)))
    got_event = c.read_until(b"data: ")
    c.close()
    got, ok = after_leaving(srv, before, mark)
    return ("after the first event: " if got_event else "no event came: ") + got, ok and got_event


def _leave_stream_at_once(srv):
    before, mark = generated(srv), len(srv.log)
    c = Conn(srv.port)
    c.send(request_bytes(srv, "POST", "/v1/completions", dict(HEAVY, stream=True)))
    c.close()
    got, ok = after_leaving(srv, before, mark)
    # and still idle a while after: the request is not started late (a longer pause only
    # gives a late start more time to show)
    nap(0.3)
    again, now = load(srv), generated(srv)
    more = None if now is None or before is None else now - before
    return f"{got}; then still busy_slots, queue {again}, {more} tokens", ok and again == (0, 0) and \
        more is not None and more < HEAVY_TOKENS


def _leave_nonstream(srv):
    before, mark = generated(srv), len(srv.log)
    c = Conn(srv.port)
    c.send(request_bytes(srv, "POST", "/v1/completions", HEAVY))
    # running (a slot busy) before the client leaves; an answer first would show as all
    # its tokens generated
    poll_until(lambda: c.held() != "held" or (load(srv) or (0, 0))[0] > 0, DEADLINE, 0.01)
    seen = load(srv)
    c.close()
    got, ok = after_leaving(srv, before, mark)
    return f"busy_slots, queue {seen} when it left; {got}", ok


LEFT = f"ended, busy_slots 0, queue 0, fewer than {HEAVY_TOKENS} tokens generated"
cases_main.append(("leave_stream_after_first_event", _leave_stream_after_first, LEFT))
cases_main.append(("leave_stream_before_reading", _leave_stream_at_once, LEFT + ", and still so after"))
cases_main.append(("leave_nonstream_while_running", _leave_nonstream, LEFT))


# ---- 9. methods and paths
def _put(srv):
    r = http(srv, "PUT", "/v1/completions", NORMAL)
    if isinstance(r, str):
        return r, False
    return f"{S(r)} Allow={r.header('allow')}", r.status == 405 and "POST" in (r.header("allow") or "") \
        and r.error() is not None


cases_main.append(("method_PUT_completions", _put, "405 with an Allow naming POST"))


def _delete_health(srv):
    r = http(srv, "DELETE", "/health")
    if isinstance(r, str):
        return r, False
    return f"{S(r)} Allow={r.header('allow')}", r.status == 405 and "GET" in (r.header("allow") or "")


cases_main.append(("method_DELETE_health", _delete_health, "405 with an Allow naming GET"))
cases_main.append(("method_BREW", lambda srv: S(http(srv, "BREW", "/"), obj=False), ("405", "400", "501")))
cases_main.append(("method_HEAD_health", lambda srv: S(http(srv, "HEAD", "/health", head=True)), "200"))
cases_main.append(("path_traversal", lambda srv: S(http(srv, "GET", "/../../etc/passwd"), obj=False), ("404", "400")))
cases_main.append(("path_traversal_encoded", lambda srv: S(http(srv, "GET", "/%2e%2e/%2e%2e/etc/passwd"), obj=False),
                   ("404", "400")))
cases_main.append(("path_10KB", lambda srv: S(http(srv, "GET", "/" + "a" * 10240), obj=False), ("404", "414")))
cases_main.append(("path_with_query", lambda srv: S(http(srv, "POST", "/v1/completions?x=1", NORMAL)), "200"))
cases_main.append(("path_nul_encoded", lambda srv: S(http(srv, "GET", "/health%00x"), obj=False), ("404", "400")))


def _pipelined(srv):
    c = Conn(srv.port)
    one = request_bytes(srv, "POST", "/v1/completions", NORMAL)
    c.send(one + one)
    a = c.response()
    b = c.response() if not isinstance(a, str) else "not read"
    c.close()
    return f"{S(a)} {S(b)}"


cases_main.append(("pipelined_two", _pipelined, "200 200"))


def _keepalive(srv):
    c = Conn(srv.port)
    got = []
    for _ in range(50):
        c.send(request_bytes(srv, "GET", "/health"))
        r = c.response()
        got.append(S(r))
        if isinstance(r, str):
            break
    c.close()
    return " ".join(sorted(set(got))) + f" x{len(got)}"


cases_main.append(("keepalive_50_requests", _keepalive, "200 x50"))
cases_main.append(("http10_no_host", lambda srv: S(http(srv, "POST", "/v1/completions", NORMAL, host=None,
                                                        version="HTTP/1.0")), "200"))


def _expect_continue(srv, body, want_body):
    c = Conn(srv.port)
    body = json.dumps(body).encode() if isinstance(body, dict) else body
    data = request_bytes(srv, "POST", "/v1/completions", body, headers=[("Expect", "100-continue")])
    c.send(data[:len(data) - len(body)])
    # the server's first word: 100 Continue, or the final answer (a 413 without the body);
    # one that says nothing gets the body after the deadline, as RFC 9110 lets a client do
    try:
        c.fill()
    except (TimeoutError, socket.timeout):
        pass
    interim = c.buf.startswith(b"HTTP/1.1 100")
    if want_body and (interim or not c.buf):
        c.send(body)
    r = c.response()
    c.close()
    return S(r) + (" after 100 Continue" if interim else "")


cases_main.append(("expect_100_continue", lambda srv: _expect_continue(srv, NORMAL, True),
                   ("200 after 100 Continue", "200")))
cases_main.append(("expect_100_continue_over_max_body", lambda srv: _expect_continue(srv, b" " * 1000000, False),
                   "413"))


# ---- 10. browser guards
def ct_case(name, ctype, want):
    cases_main.append((name, lambda srv: S(http(srv, "POST", "/v1/completions", NORMAL, ctype=ctype)), want))


ct_case("content_type_text_plain", "text/plain", "415")
ct_case("content_type_form", "application/x-www-form-urlencoded", "415")
ct_case("content_type_multipart", "multipart/form-data; boundary=x", "415")
ct_case("content_type_jsonx", "application/jsonx", "415")
ct_case("content_type_json_charset", "application/json; charset=utf-8", "200")
ct_case("content_type_json_upper", "Application/JSON", "200")
ct_case("content_type_none", None, "200")
cases_main.append(("content_type_text_plain_tokenize", lambda srv: S(http(srv, "POST", "/tokenize", {"content": "x"},
                                                                          ctype="text/plain")), "415"))


def host_case(name, host, want):
    cases_main.append((name, lambda srv: S(http(srv, "POST", "/v1/completions", NORMAL,
                                                host=host.replace("PORT", str(srv.port)))), want))


host_case("host_evil", "evil.example", "403")
host_case("host_evil_port", "evil.example:PORT", "403")
host_case("host_evil_suffix", "127.0.0.1.evil.example:PORT", "403")
host_case("host_localhost_port", "localhost:PORT", "200")
host_case("host_ipv6_loopback", "[::1]:PORT", "200")
host_case("host_alias", ALIAS, "200")
host_case("host_alias_port", f"{ALIAS}:PORT", "200")


def origin_case(name, origin, want, method="POST", path="/v1/completions"):
    def fn(srv):
        o = origin.replace("PORT", str(srv.port))
        r = http(srv, method, path, NORMAL if method == "POST" else None, headers=[("Origin", o)])
        if isinstance(r, str) or r.status != 200 or o != APP_ORIGIN:
            return S(r)
        return f"200 Access-Control-Allow-Origin={r.header('access-control-allow-origin')}"
    cases_main.append((name, fn, want))


origin_case("origin_evil", "http://evil.example", "403")
origin_case("origin_evil_get_models", "http://evil.example", "403", "GET", "/v1/models")
origin_case("origin_same", "http://127.0.0.1:PORT", "200")
origin_case("origin_app", APP_ORIGIN, f"200 Access-Control-Allow-Origin={APP_ORIGIN}")
origin_case("origin_app_lookalike", APP_ORIGIN + ".evil.example", "403")


def preflight(srv, origin, key=True):
    return http(srv, "OPTIONS", "/v1/chat/completions", key=key, headers=[
        ("Origin", origin), ("Access-Control-Request-Method", "POST"),
        ("Access-Control-Request-Headers", "authorization, content-type")])


def _preflight_ok(r):
    if isinstance(r, str):
        return r, False
    ao, am, ah = (r.header("access-control-allow-origin"), r.header("access-control-allow-methods"),
                  r.header("access-control-allow-headers"))
    ok = r.status == 204 and ao == APP_ORIGIN and "POST" in (am or "").upper() and \
        "authorization" in (ah or "").lower() and "content-type" in (ah or "").lower()
    return f"{r.status} Allow-Origin={ao} Allow-Methods={am} Allow-Headers={ah}", ok


cases_main.append(("preflight_app", lambda srv: _preflight_ok(preflight(srv, APP_ORIGIN)),
                   "204 with Allow-Origin app, -Methods POST, -Headers authorization, content-type"))
cases_main.append(("preflight_evil", lambda srv: S(preflight(srv, "http://evil.example")), "403"))

# the order of the checks
cases_main.append(("order_host_before_404", lambda srv: S(http(srv, "GET", "/nothing", host="evil.example")), "403"))
cases_main.append(("order_origin_before_404", lambda srv: S(http(srv, "GET", "/nothing",
                                                                 headers=[("Origin", "http://evil.example")])), "403"))
cases_main.append(("order_404_before_413", lambda srv: headers_only(srv, "/nothing", 1000000), "404"))
cases_main.append(("order_405_before_415", lambda srv: S(http(srv, "PUT", "/v1/completions", "x", ctype="text/plain")),
                   "405"))
cases_main.append(("order_415_before_413", lambda srv: headers_only(srv, "/v1/completions", 1000000,
                                                                    ctype="text/plain"), "415"))
cases_main.append(("not_found", lambda srv: S(http(srv, "GET", "/v1/nothing")), "404"))


# ---- 11. the API key (and 8: --max-connections), on the second server
def no_key(srv, method, path, body=None, **kw):
    return S(http(srv, method, path, body, key=False, **kw))


cases_auth.append(("auth_no_key", lambda srv: no_key(srv, "POST", "/v1/completions", NORMAL), "401"))
cases_auth.append(("auth_wrong_key", lambda srv: no_key(srv, "POST", "/v1/completions", NORMAL,
                                                        headers=[("Authorization", "Bearer wrong")]), "401"))
cases_auth.append(("auth_key_prefix", lambda srv: no_key(srv, "POST", "/v1/completions", NORMAL,
                                                         headers=[("Authorization", "Bearer sesam")]), "401"))
cases_auth.append(("auth_key_longer", lambda srv: no_key(srv, "POST", "/v1/completions", NORMAL,
                                                         headers=[("Authorization", "Bearer sesame2")]), "401"))
cases_auth.append(("auth_empty_bearer", lambda srv: no_key(srv, "POST", "/v1/completions", NORMAL,
                                                           headers=[("Authorization", "Bearer ")]), "401"))
cases_auth.append(("auth_right_key", lambda srv: S(http(srv, "POST", "/v1/completions", NORMAL)), "200"))
cases_auth.append(("auth_before_body", lambda srv: headers_only(srv, "/v1/completions", 1000000, key=False), "401"))
cases_auth.append(("auth_before_404", lambda srv: no_key(srv, "GET", "/nothing"), "401"))
cases_auth.append(("auth_before_405", lambda srv: no_key(srv, "PUT", "/v1/completions", NORMAL), "401"))
cases_auth.append(("auth_before_415", lambda srv: no_key(srv, "POST", "/v1/completions", NORMAL, ctype="text/plain"),
                   "401"))
cases_auth.append(("auth_health_no_key", lambda srv: no_key(srv, "GET", "/health"), "200"))
cases_auth.append(("auth_preflight_no_key", lambda srv: _preflight_ok(preflight(srv, APP_ORIGIN, key=False)),
                   "204 with Allow-Origin app, -Methods POST, -Headers authorization, content-type"))


def healthy(srv):
    """Whether /health is answered 200."""
    r = http(srv, "GET", "/health")
    return not isinstance(r, str) and r.status == 200


def _flood(srv, n=1000, all_served=False):
    """n connections opened at once, GET /health on each. all_served: every one must be
    answered 200 (a server whose --max-connections is above n); else each 200, 503 with
    Retry-After or closed, and at least one 503."""
    addr = ("127.0.0.1", srv.port)
    req = b"GET /health HTTP/1.1\r\nHost: " + srv.host().encode() + b"\r\n\r\n"
    sel = selectors.DefaultSelector()
    socks, results = [], {}
    t0 = time.monotonic()
    for i in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        err = s.connect_ex(addr)
        socks.append(s)
        if err not in (0, errno.EINPROGRESS):
            results[i] = "closed"
            continue
        sel.register(s, selectors.EVENT_WRITE, [i, b""])
    deadline = time.monotonic() + DEADLINE
    while len(results) < n and time.monotonic() < deadline:
        for key, ev in sel.select(timeout=0.2):
            i, buf = key.data
            s = key.fileobj
            if ev & selectors.EVENT_WRITE:
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    results[i] = "closed"
                    sel.unregister(s)
                    continue
                try:
                    s.send(req)
                    sel.modify(s, selectors.EVENT_READ, [i, b""])
                except OSError:
                    results[i] = "closed"
                    sel.unregister(s)
                continue
            try:
                d = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                d = b""
            key.data[1] = buf = buf + d
            r = parse_response(buf, not d)
            if r is None:
                continue
            r = r[0]
            results[i] = r if isinstance(r, str) else (r.status, r.header("retry-after"))
            sel.unregister(s)
    el = time.monotonic() - t0
    hung = n - len(results)
    for s in socks:
        s.close()
    sel.close()
    vals = list(results.values())
    n200 = sum(1 for v in vals if isinstance(v, tuple) and v[0] == 200)
    n503 = sum(1 for v in vals if isinstance(v, tuple) and v[0] == 503)
    n503ra = sum(1 for v in vals if isinstance(v, tuple) and v[0] == 503 and v[1])
    nclosed = sum(1 for v in vals if v == "closed")
    other = [v for v in vals if not (v == "closed" or (isinstance(v, tuple) and v[0] in (200, 503)))]
    got = (f"200 x{n200}, 503 x{n503} ({n503ra} with Retry-After), closed x{nclosed}, other x{len(other)}"
           f"{' ' + repr(other[:3]) if other else ''}, hung x{hung}, in {el:.1f} s")
    ok = hung == 0 and not other and (n200 == n if all_served else n503 >= 1 and n503ra == n503)
    # the connections are closed: the server has noticed (its count of connections is below
    # --max-connections again) before the normal request
    poll_until(lambda: healthy(srv), DEADLINE, 0.1)
    return got, ok


cases_auth.append(("connections_1000_at_once", _flood,
                   "each 200, 503 with Retry-After, or closed; none hung; at least one 503"))
# past select()'s 1,024 descriptors: the server polls with poll()
cases_main.append(("connections_1100_past_fd_setsize", lambda srv: _flood(srv, 1100, all_served=True),
                   "200 x1100 (descriptors past 1,024 work)"))


# ---------------------------------------------------------------- running them

failures = []
n_cases = [0]


def run_cases(srv, table):
    for name, fn, expect in table:
        t0 = time.monotonic()
        try:
            got = fn(srv)
        except (TimeoutError, socket.timeout):
            got = "timeout"
        except Exception as e:  # a harness or connection error shows as the case's result
            got = f"exception {e.__class__.__name__}: {e}"
        if isinstance(got, tuple):
            got, ok = got
            shown = expect
        else:
            alts = expect if isinstance(expect, tuple) else (expect,)
            ok = got in alts
            shown = " or ".join(alts)
        case_s = time.monotonic() - t0
        st, ms = normal_request(srv)
        alive = srv.alive()
        normal_ok = st == 200 and alive
        line = f"case {name}: got {got} (expected {shown}) {'ok' if ok else 'FAIL'}; " \
               f"then a normal request: {st} in {ms:.0f} ms"
        if not alive:
            line += f" FAIL: the server died (exit status {srv.proc.returncode})"
        elif not normal_ok:
            line += " FAIL"
        if case_s > 15:
            line += f" [the case took {case_s:.1f} s]"
        print(line, flush=True)
        n_cases[0] += 1
        if not ok or not normal_ok:
            failures.append(line)
        if not normal_ok:
            tail = "".join(srv.log[-5:])
            print(f"  (restarting the {srv.name} server; its last log lines:\n{tail}  )", flush=True)
            srv.restart()


def simple(name, got, expect, ok=None):
    if ok is None:
        ok = got in (expect if isinstance(expect, tuple) else (expect,))
        expect = " or ".join(expect) if isinstance(expect, tuple) else expect
    line = f"case {name}: got {got} (expected {expect}) {'ok' if ok else 'FAIL'}"
    print(line, flush=True)
    n_cases[0] += 1
    if not ok:
        failures.append(line)


def shutdown_cases():
    """SIGTERM with requests in flight: a stream and a whole request (HEAVY: cut by the grace,
    or finished whole on a machine fast enough), and one whose body never comes, which keeps
    the grace open for its whole length on any machine and never ends by itself (--timeout
    3600), so the server must end it."""
    srv = Server("shutdown", ["--timeout", "3600"])
    a = Conn(srv.port)
    a.send(request_bytes(srv, "POST", "/v1/completions", dict(HEAVY, stream=True)))
    first = a.read_until(b"data: ")
    out = {}

    def read_a():
        try:
            while a.fill():
                pass
            out["a"] = "eof"
        except (TimeoutError, socket.timeout):
            out["a"] = "timeout"
        except OSError as e:
            out["a"] = f"error {e.__class__.__name__}"

    def read_b():
        out["b"] = b.response()

    ta, tb = threading.Thread(target=read_a), threading.Thread(target=read_b)
    ta.start()
    b = Conn(srv.port)
    b.send(request_bytes(srv, "POST", "/v1/completions", HEAVY))
    # b's choices queued beside a's before SIGTERM (sent after, it would be refused with a
    # 503, which proves less); a already done, or b answered, also ends the wait
    poll_until(lambda: b"data: [DONE]" in a.buf or b.held() != "held" or
               sum(load(srv) or (0, 0)) > HEAVY["n"], DEADLINE)
    tb.start()
    c = Conn(srv.port)
    c.send(request_bytes(srv, "POST", "/v1/completions", b"", length=False,
                         headers=[("Content-Length", "100"), ("Expect", "100-continue")]))
    # its 100 Continue: the server has taken its headers, so it is in flight
    held = c.read_until(b"HTTP/1.1 100")
    mark = len(srv.log)
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    stopping = poll_until(lambda: srv.logged(r"toy serve: stopping:", mark), DEADLINE, 0.01)
    health = http(srv, "GET", "/health")
    comp = http(srv, "POST", "/v1/completions", NORMAL)
    during = time.monotonic() - t0
    try:
        rc = srv.proc.wait(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
        srv.proc.wait()
        rc = None
    el = time.monotonic() - t0
    ta.join(DEADLINE)
    tb.join(DEADLINE)
    a.close()
    b.close()
    c.close()
    m = re.search(r"toy serve: stopping: (\d+) request", "".join(srv.log[mark:]))
    in_flight = m.group(1) if m else None
    after = f" ({during:.1f} s after SIGTERM{'' if stopping else ', no stopping line logged'})"
    # /health answers {"status": ...} rather than an error object: only its status is checked
    got = S(health, obj=False)
    simple("shutdown_health_during_grace", got if got == "503" else got + after, "503")
    got = S(comp)
    simple("shutdown_completion_during_grace", got if got == "503" else got + after, "503")
    simple("shutdown_exit", f"exit status {rc} {el:.1f} s after SIGTERM ({in_flight} request(s) in flight, the one "
                            f"without a body {'held' if held else 'NOT held: no 100 Continue'})"
           + ("" if rc is not None else f" (killed: still running {DEADLINE} s after SIGTERM)"),
           f"exit status 0, not before the grace of {GRACE} s", rc == 0 and held and el >= GRACE)
    # the stream: cut by the grace (an error event, then [DONE]) or finished whole
    status, body, whole = raw_body(a.buf)
    ev = sse_events(body)
    datas = [d for _, d in ev]
    if not first or status != 200:
        got = f"no first event before SIGTERM: {a.buf[:120]!r}"
    elif not whole and datas and datas[-1] == "[DONE]":
        got = f"[DONE], but the chunked body was not ended with its last chunk (ended: {out.get('a')})"
    elif len(ev) >= 2 and ev[-2][0] == "error" and datas[-1] == "[DONE]":
        try:
            e = json.loads(ev[-2][1])["error"]
            got = "an error event then [DONE]" if {"message", "type", "param", "code"} <= set(e) \
                else f"a bad error event {ev[-2]}"
        except (ValueError, KeyError, TypeError):
            got = f"a bad error event {ev[-2]}"
    elif datas and datas[-1] == "[DONE]" and not any(n == "error" for n, _ in ev):
        finished = 0
        for d in datas[:-1]:
            try:
                finished += sum(1 for c in json.loads(d).get("choices", []) if c.get("finish_reason"))
            except ValueError:
                pass
        got = "finished whole" if finished == HEAVY["n"] else f"[DONE] after {finished} of {HEAVY['n']} choices"
    else:
        got = f"ended ({out.get('a')}) after {len(ev)} events, the last {ev[-2:] if ev else None}"
    simple("shutdown_stream_cut", got, ("an error event then [DONE]", "finished whole"))
    r = out.get("b", "not read")
    if isinstance(r, str):
        got = r
    elif r.status == 503:
        got = "503 error object" if r.error() else S(r)
    elif r.status == 200:
        j = r.json() or {}
        ch = j.get("choices", [])
        got = "200 finished whole" if len(ch) == HEAVY["n"] and all(c.get("finish_reason") == "length" for c in ch) \
            else f"200 with {len(ch)} choices"
    else:
        got = S(r)
    simple("shutdown_nonstream_cut", got, ("503 error object", "200 finished whole"))
    return srv


def sigint_case():
    """SIGINT on an idle server: it exits 0 without waiting for its --shutdown-grace."""
    srv = Server("sigint", ["--shutdown-grace", str(SIGINT_GRACE)])
    r = http(srv, "GET", "/health")
    rc, el = srv.stop(signal.SIGINT)
    simple("sigint_idle", f"health {S(r)}; exit status {rc} {el:.2f} s after SIGINT",
           f"exit status 0 before the grace of {SIGINT_GRACE} s", rc == 0 and el < SIGINT_GRACE)
    return srv


def refused(args):
    """(exit status, stderr) of toy serve -m MODEL args; None for the status when it started
    instead (it logged the address it listens on, and was stopped)."""
    p = subprocess.Popen([TOY, "serve", "-m", MODEL, "--port", "0", *args], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
    STARTED.append(p)
    hang = threading.Timer(DEADLINE, p.kill)  # neither exits nor listens: a hang
    hang.start()
    err, started = [], False
    for line in p.stderr:
        err.append(line)
        if re.search(r"http://127\.0\.0\.1:\d+/", line):
            started = True
            p.kill()
            break
    rc = p.wait()
    hang.cancel()
    return (None if started else rc), "".join(err)


def flag_cases():
    """Options toy serve cannot take are refused before it starts: exit 2 naming them."""
    for args, names in [(["--cors-origin", "https://app.example/"], "--cors-origin 'https://app.example/'"),
                        (["--cors-origin", "app.example"], "--cors-origin 'app.example'"),
                        (["--host-alias", "toy.internal:8080"], "--host-alias 'toy.internal:8080'"),
                        (["--max-connections", "0"], "--max-connections"),
                        (["--shutdown-grace", "-1"], "--shutdown-grace"),
                        (["--watchdog", "x"], "--watchdog"),
                        (["--pooling", "xyz"], "--pooling 'xyz'"),
                        (["--chat-template", "nosuch-family"], "--chat-template 'nosuch-family'")]:
        rc, err = refused(args)
        if rc is None:
            got, ok = "it started and served", False
        else:
            got, ok = f"exit {rc}: {err.strip()[:120]}", rc == 2 and names in err
        simple(f"flag {' '.join(args)}", got, f"exit 2 naming {names}", ok)


def main():
    t_start = time.monotonic()
    print(f"toy serve: {TOY}; flags of every server: {' '.join(BASE_FLAGS)}", flush=True)
    servers = []
    main_srv = Server("main")
    servers.append(main_srv)
    try:
        run_cases(main_srv, cases_main)
    finally:
        if main_srv.alive():
            rc, el = main_srv.stop()
            simple("main_server_sigterm_idle", f"exit status {rc} after {el:.1f} s", "exit status 0",
                   rc == 0)
        else:
            main_srv.proc.wait()
    auth_srv = Server("auth", ["--max-connections", "8"], key="sesame")
    servers.append(auth_srv)
    try:
        run_cases(auth_srv, cases_auth)
    finally:
        if auth_srv.alive():
            rc, el = auth_srv.stop()
            simple("auth_server_sigterm_idle", f"exit status {rc} after {el:.1f} s", "exit status 0", rc == 0)
        else:
            auth_srv.proc.wait()
    servers.append(shutdown_cases())
    servers.append(sigint_case())
    flag_cases()
    for th in (th for s in servers for th in s.drains):
        th.join(DEADLINE)  # every process has ended: its log is read to the end
    reports = [f"{s.name}: {line.strip()}" for s in servers for log in s.logs for line in log
               if re.search(r"ERROR: (Address|Leak|Thread)Sanitizer|runtime error:|SUMMARY: \w+Sanitizer", line)]
    simple("no_sanitizer_reports", f"{len(reports)} report line(s)" + (f": {reports[:6]}" if reports else ""),
           "0 report line(s)")
    print(f"serve_hostile: {len(failures)} of {n_cases[0]} case(s) failed, in {time.monotonic() - t_start:.1f} s")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
