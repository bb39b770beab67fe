"""Shared helpers of the Python tests and of the command tests' Python snippets: reading
and writing GGUF files (independently of toy's C reader and writer), llama.cpp's reference files, perplexity
outputs and training logs; comparing figures within a tolerance; a toy serve on a free
port. Imported by the tests (sys.path gets tests/), or run from a shell test:

    python3 "$py" close A B TOL [LABEL]    exit 0 when |A / B - 1| < TOL
    python3 "$py" ratio A B                A / B
    python3 "$py" ppl FILE                 the final PPL of toy's or llama.cpp's perplexity output
    python3 "$py" first-last CSV           "FIRST LAST": the first and last loss of a training log
    python3 "$py" loss-fell CSV MARGIN     the same; exit 0 when LAST < FIRST - MARGIN
    python3 "$py" ref-json REF.gguf        llama.cpp's reference (prompt, tokens, offsets) as JSON
    python3 "$py" ref-tokens REF.gguf      its tokens, comma-separated
    python3 "$py" json FILE KEY            a field of a JSON file (a list comma-separated)
    python3 "$py" matrix-types             the types of the matrices of `toy info --json` (stdin)
    python3 "$py" free-port                a TCP port free on 127.0.0.1
"""
import csv
import http.client
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

# ---------------------------------------------------------------- GGUF


_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class GGUF:
    """A GGUF file: the metadata as Python values (strings as bytes), and each tensor's
    dimensions, type and absolute byte offset in the file (GGUF's ne order:
    fastest-varying first)."""

    def __init__(self, path):
        self.path = path
        self.data = data = open(path, "rb").read()
        if data[:4] != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        self.pos = 4
        self.version = self._take("I")
        n_tensors, n_kv = self._take("Q"), self._take("Q")
        self.kv = {}
        for _ in range(n_kv):
            key = self._string().decode()
            self.kv[key] = self._value(self._take("I"))
        infos = []
        for _ in range(n_tensors):
            name = self._string().decode()
            ne = [self._take("Q") for _ in range(self._take("I"))]
            infos.append((name, ne, self._take("I"), self._take("Q")))
        align = self.kv.get("general.alignment", 32)
        start = (self.pos + align - 1) // align * align
        self.tensors = {name: (ne, typ, start + off) for name, ne, typ, off in infos}

    def array(self, name):
        """An F32 tensor as a numpy array (rows of ne[0])."""
        import numpy as np
        ne, typ, off = self.tensors[name]
        if typ != 0:
            raise ValueError(f"{self.path}: tensor {name} has type {typ}, not F32")
        return np.frombuffer(self.data, np.float32, int(np.prod(ne)), off).reshape(ne[::-1])

    def _take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return v[0]

    def _string(self):
        n = self._take("Q")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s

    def _value(self, t):
        if t == 8:
            return self._string()
        if t == 9:
            et, n = self._take("I"), self._take("Q")
            return [self._value(et) for _ in range(n)]
        return self._take(_SCALARS[t])


def write_gguf(path, kv, tensors):
    """A GGUF v3 file written independently of toy's writer: kv maps keys to str, int
    (written as u64), float (f32) or bool; tensors map names to (ne, F32 bytes), in order,
    each padded to 32 bytes."""
    def string(s):
        b = s.encode()
        return struct.pack("<Q", len(b)) + b
    out = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), len(kv))]
    for k, v in kv.items():
        out.append(string(k))
        if isinstance(v, bool):
            out.append(struct.pack("<I?", 7, v))
        elif isinstance(v, int):
            out.append(struct.pack("<IQ", 10, v))
        elif isinstance(v, float):
            out.append(struct.pack("<If", 6, v))
        else:
            out.append(struct.pack("<I", 8) + string(v))
    off = 0
    for name, (ne, data) in tensors.items():
        out.append(string(name) + struct.pack(f"<I{len(ne)}QIQ", len(ne), *ne, 0, off))
        off += (len(data) + 31) // 32 * 32
    head = b"".join(out)
    body = b"".join(data + bytes((32 - len(data) % 32) % 32) for _, data in tensors.values())
    with open(path, "wb") as f:
        f.write(head + bytes((32 - len(head) % 32) % 32) + body)


def with_strings(src, dst, strings):
    """A copy of the GGUF file src at dst with the string metadata `strings` ({key: text})
    set, replacing a key that is there, the rest of the file as it was: the metadata's
    bytes copied as read, the tensor data moved whole to the new alignment (its offsets
    are relative to its start, so they hold)."""
    g = GGUF(src)
    data, pos = g.data, 4 + 4 + 16

    def skip_value(p, t):
        if t == 8:
            return p + 8 + struct.unpack_from("<Q", data, p)[0]
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, p)
            p += 12
            if et not in (8, 9):
                return p + n * struct.calcsize("<" + _SCALARS[et])
            for _ in range(n):
                p = skip_value(p, et)
            return p
        return p + struct.calcsize("<" + _SCALARS[t])

    kept = []
    for _ in range(len(g.kv)):
        start = pos
        n = struct.unpack_from("<Q", data, pos)[0]
        key = data[pos + 8:pos + 8 + n].decode()
        pos = skip_value(pos + 8 + n + 4, struct.unpack_from("<I", data, pos + 8 + n)[0])
        if key not in strings:
            kept.append(data[start:pos])
    infos_start = pos
    for _ in range(len(g.tensors)):
        n = struct.unpack_from("<Q", data, pos)[0]
        pos += 8 + n
        n_dims = struct.unpack_from("<I", data, pos)[0]
        pos += 4 + 8 * n_dims + 4 + 8
    infos = data[infos_start:pos]
    align = g.kv.get("general.alignment", 32)
    body = data[(pos + align - 1) // align * align:]
    for key, text in strings.items():
        k, v = key.encode(), text.encode()
        kept.append(struct.pack("<Q", len(k)) + k + struct.pack("<IQ", 8, len(v)) + v)
    head = b"GGUF" + struct.pack("<IQQ", g.version, len(g.tensors), len(kept)) + b"".join(kept) + infos
    with open(dst, "wb") as f:
        f.write(head + bytes((align - len(head) % align) % align) + body)


def ref_tokens(g):
    """The tokens of a fixture's .ref.gguf (a GGUF): llama.cpp's reference run."""
    ne, typ, off = g.tensors["ref.tokens"]
    return list(struct.unpack_from("<%di" % ne[0], g.data, off))


def ref_info(path):
    """A fixture's .ref.gguf (llama.cpp's reference run): the prompt, its tokens, how many
    of them are the prompt, the vocabulary size and the offsets of the logits tensors."""
    g = GGUF(path)
    kv, t = g.kv, {name: (ne, off) for name, (ne, typ, off) in g.tensors.items()}
    tokens = ref_tokens(g)
    return {"prompt": kv["ref.prompt"].decode("utf-8"), "n_prompt": kv["ref.n_prompt"], "tokens": tokens,
            "logits_off": t["ref.logits"][1], "seq_off": t["ref.logits_seq"][1],
            "margin_off": t["ref.margin"][1], "n_vocab": t["ref.logits"][0][0]}


# ---------------------------------------------------------------- outputs and logs


class Perplexity:
    """toy perplexity's or llama-perplexity's output: the running figures ("[i]x,") and
    the final estimate ("Final estimate: PPL = x +/- y")."""

    def __init__(self, text):
        self.running = [float(x) for x in re.findall(r"\[\d+\](\d+\.\d+),", text)]
        m = re.search(r"Final estimate: PPL = (\S+) \+/- (\S+)", text)
        if not m:
            raise ValueError(f"no final estimate in {text[-300:]!r}")
        self.ppl, self.err = float(m.group(1)), float(m.group(2))
        self.ppl_text = m.group(1)


def perplexity(path):
    return Perplexity(open(path, errors="replace").read())


def losses(path):
    """The loss column of a training log (toy train's CSV), as printed."""
    return [r["loss"] for r in csv.DictReader(open(path))]


def close(a, b, tol):
    """a and b agree to a relative tolerance (|a / b - 1| < tol)."""
    return abs(a / b - 1) < tol


# ---------------------------------------------------------------- waiting
# No check may depend on how fast the machine is (tests/lib.sh says the same for the shell
# tests): a test waits for an event by polling it with a generous deadline, never by
# sleeping a fixed time and assuming the work is done, or not yet done. Every pause is a
# nap, which TOY_TEST_SLEEP_SCALE=10 makes ten times as long (a fast machine, relatively).

SLEEP_SCALE = float(os.environ.get("TOY_TEST_SLEEP_SCALE", "1"))


def nap(seconds):
    """time.sleep(seconds times TOY_TEST_SLEEP_SCALE)."""
    time.sleep(seconds * SLEEP_SCALE)


def poll_until(fn, deadline=120, every=0.05):
    """fn()'s first true value, called every `every` s (a nap) until `deadline` s of wall
    time have passed (then its last value). The deadline does not grow with the naps."""
    t0 = time.monotonic()
    while True:
        v = fn()
        if v or time.monotonic() - t0 >= deadline:
            return v
        nap(every)


# ---------------------------------------------------------------- toy serve


def served_port(proc, deadline=300):
    """The port a starting toy serve logs, reading its stderr up to that line (notes, such as
    a chat template's fallback, may come first): (port, the lines read). A server that says
    nothing for `deadline` s is killed (a hang, not a slow machine); one that ends first
    gives (None, its lines)."""
    watchdog = threading.Timer(deadline, proc.kill)
    watchdog.start()
    lines = []
    try:
        for line in proc.stderr:
            lines.append(line)
            m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
            if m:
                return int(m.group(1)), lines
        return None, lines
    finally:
        watchdog.cancel()


def serve_start(toy, model, *args, deadline=300):
    """toy serve on a free port, its log read away in the background: (process, port)."""
    proc = subprocess.Popen([toy, "serve", "-m", model, "--port", "0", "-t", "2", *args],
                            stderr=subprocess.PIPE, text=True)
    port, lines = served_port(proc, deadline)
    if port is None:
        raise SystemExit(f"toy serve did not start: {''.join(lines)}")
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc, port


class Server:
    """A toy serve process: started on a free port, requests whole or streamed, stopped
    with SIGTERM."""

    def __init__(self, toy, model, *args):
        self.proc, self.port = serve_start(toy, model, *args)

    def post(self, body, path="/v1/chat/completions"):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        text = r.read().decode()
        c.close()
        return r.status, json.loads(text)

    def stream(self, body, path="/v1/chat/completions"):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        c.request("POST", path, body=json.dumps(dict(body, stream=True)), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read().decode()
        c.close()
        events = [json.loads(e[6:]) for e in data.split("\n\n") if e.startswith("data: {")]
        return r.status, events

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=300)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def stir(path, seed=5):
    """A model of toy init (every tensor F32) made harder to match by chance, in place:
    norms of 1 and biases of 0 would hide a bias added in the wrong place, and small
    matrices give nearly uniform logits. Every vector gets random values (norm weights
    around 1, biases around 0) and every matrix twice its weights."""
    import array
    import random
    g, r = GGUF(path), random.Random(seed)
    with open(path, "r+b") as f:
        for name, (ne, typ, off) in g.tensors.items():
            if typ != 0:
                raise SystemExit(f"{path}: tensor {name} is not F32")
            n = 1
            for d in ne:
                n *= d
            f.seek(off)
            if len(ne) == 1:
                base, spread = (1.0, 0.3) if name.endswith("norm.weight") else (0.0, 0.2)
                f.write(struct.pack(f"<{n}f", *(base + r.gauss(0, spread) for _ in range(n))))
            else:
                a = array.array("f", f.read(4 * n))
                f.seek(off)
                f.write(array.array("f", (2 * x for x in a)).tobytes())


# ---------------------------------------------------------------- command line


def _main(argv):
    cmd, args = argv[0], argv[1:]
    if cmd == "close":
        a, b, tol = map(float, args[:3])
        if len(args) > 3:
            print(f"  {args[3]}: {a:.4f} against {b:.4f}, ratio - 1 = {a / b - 1:+.2e} (tolerance {tol:g})")
        return 0 if close(a, b, tol) else 1
    if cmd == "ratio":
        print(float(args[0]) / float(args[1]))
    elif cmd == "ppl":
        print(perplexity(args[0]).ppl_text)
    elif cmd in ("first-last", "loss-fell"):
        loss = losses(args[0])
        print(loss[0], loss[-1])
        if cmd == "loss-fell":
            return 0 if float(loss[-1]) < float(loss[0]) - float(args[1]) else 1
    elif cmd == "ref-json":
        json.dump(ref_info(args[0]), sys.stdout)
    elif cmd == "ref-tokens":
        print(",".join(map(str, ref_tokens(GGUF(args[0])))))
    elif cmd == "json":
        v = json.load(open(args[0]))[args[1]]
        print(",".join(map(str, v)) if isinstance(v, list) else v)
    elif cmd == "matrix-types":
        print(" ".join(sorted({t["type"] for t in json.load(sys.stdin)["tensors"] if len(t["shape"]) == 2})))
    elif cmd == "stir":
        stir(args[0])
    elif cmd == "with-template":  # SRC DST TEMPLATE_FILE [NAME]: tokenizer.chat_template[.NAME] set
        key = "tokenizer.chat_template" + (f".{args[3]}" if len(args) > 3 else "")
        with_strings(args[0], args[1], {key: open(args[2], encoding="utf-8").read()})
    elif cmd == "free-port":
        print(free_port())
    else:
        print(f"helpers.py: unknown command {cmd}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
