#!/usr/bin/env python3
"""Start-up against llama.cpp: how long a user waits for the first token, with prompts of
realistic length.

- run: the wall time of `toy run -n 1` and `llama-cli -n 1` with the prompt (load, the
  prompt's forward pass, one token);
- serve: from launching `toy serve` or `llama-server` to the first `GET /health` that
  answers 200, and to the first streamed token of the first request sent then; then nine
  more requests one after another, each with a prompt of its own (no prompt cache help),
  and the first token of the tenth, from its sending.

Each pair runs alternately, toy first, `--rounds` times per model and prompt; the tables
give medians and the ratios toy / llama.cpp (below 1: toy answers sooner).

usage: bench-startup.py [-t THREADS] [-r ROUNDS] [--no-serve] [--prompts short,long] MODEL.gguf...
(TOY=path/to/toy overrides build/toy; LLAMA_CPP=path/to/llama.cpp overrides
../shared/llama.cpp beside the repository.)
"""
import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

STORY = "Story number {i}: Once upon a time in a land far away there lived a king who had three sons"
LONG_TAIL = (" The eldest was strong and proud, and he rode out every morning to hunt in the forests"
             " that covered the hills beyond the river. The second was clever and patient, and he spent"
             " his days in the library of the castle, reading the old books of law and of the stars."
             " The youngest was neither strong nor clever, people said, but he was kind to every creature"
             " he met, and the birds of the garden would sit on his shoulders while he worked. One winter"
             " the king fell ill, and no doctor in the kingdom could say what was wrong with him. He called"
             " his three sons to his bed and told them that far to the east, beyond seven mountains and"
             " seven seas, there grew a golden apple that could cure any sickness, and that whichever of"
             " them brought it back to him would be king after him. The three brothers set out the next")
PROMPTS = {"short": STORY, "long": STORY + LONG_TAIL}
SERVE_FLAGS = ["--parallel", "8", "-c", "4096"]  # eight slots, as a server for several users
LLAMA_SERVE_FLAGS = ["-np", "8", "-c", "4096"]


def run_once(cmd):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.decode(errors='replace')[-400:]}")
    return wall


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(port):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        c.request("GET", "/health")
        return c.getresponse().status == 200
    except OSError:
        return False


def first_token(port, prompt):
    """seconds from sending a streamed completion to its first chunk with text"""
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    body = {"prompt": prompt, "max_tokens": 2, "temperature": 0, "stream": True, "cache_prompt": False}
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        sys.exit(f"POST /v1/completions on port {port}: {r.status} {r.read()[:300]!r}")
    got = None
    while True:
        line = r.readline()
        if not line:
            break
        if got is None and line.startswith(b"data: {"):
            e = json.loads(line[6:])
            if any(ch.get("text") for ch in e.get("choices", [])):
                got = time.perf_counter() - t0
    c.close()
    if got is None:
        sys.exit(f"port {port}: a stream without text")
    return got


def serve_once(cmd, port, prompt, limit=300):
    """(launch to /health 200, launch to the first request's first token, the tenth request's)"""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        while not healthy(port):
            if p.poll() is not None:
                sys.exit(f"{' '.join(cmd)} exited ({p.returncode}) before /health answered")
            if time.perf_counter() - t0 > limit:
                sys.exit(f"{' '.join(cmd)}: no /health 200 in {limit} s")
            time.sleep(0.001)
        ready = time.perf_counter() - t0
        first = ready + first_token(port, prompt.format(i=0))
        tenth = None
        for i in range(1, 10):
            tenth = first_token(port, prompt.format(i=i))
        return ready, first, tenth
    finally:
        p.terminate()
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-r", "--rounds", type=int, default=5)
    ap.add_argument("--no-serve", action="store_true", help="only toy run against llama-cli")
    ap.add_argument("--prompts", default="short,long", help="which prompts: short (22 tokens), long (194)")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    toy = os.environ.get("TOY", os.path.join(ROOT, "build", "toy"))
    llama = os.environ.get("LLAMA_CPP", os.path.join(ROOT, "..", "shared", "llama.cpp"))
    cli, server = os.path.join(llama, "bin", "llama-cli"), os.path.join(llama, "bin", "llama-server")
    for exe in [toy, cli] + ([] if a.no_serve else [server]):
        if not os.access(exe, os.X_OK):
            sys.exit(f"{exe} not found (make; or set TOY / LLAMA_CPP)")
    prompts = a.prompts.split(",")
    for name in prompts:
        if name not in PROMPTS:
            sys.exit(f"--prompts: '{name}' is not short or long")
    t = str(a.threads)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    version = subprocess.run([toy, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"CPU: {cpu}; {a.threads} threads; {version}; medians of {a.rounds} alternating runs (seconds)")
    print("serve: --parallel 8 -c 4096 (llama-server: -np 8 -c 4096); a request: a streamed completion\n")
    rows_run, rows_serve = [], []
    for m in a.models:
        for name in prompts:
            prompt = PROMPTS[name]
            times = {k: [] for k in ("toy", "cli", "ready", "first", "tenth", "l_ready", "l_first", "l_tenth")}
            for _ in range(a.rounds):
                p0 = prompt.format(i=0)
                times["toy"].append(run_once([toy, "run", "-m", m, "-p", p0, "-n", "1", "-t", t]))
                times["cli"].append(run_once([cli, "-m", m, "-p", p0, "-n", "1", "-t", t, "-no-cnv"]))
                if a.no_serve:
                    continue
                port = free_port()
                r = serve_once([toy, "serve", "-m", m, "-t", t, "--port", str(port)] + SERVE_FLAGS, port, prompt)
                for k, v in zip(("ready", "first", "tenth"), r):
                    times[k].append(v)
                port = free_port()
                r = serve_once([server, "-m", m, "-t", t, "--port", str(port)] + LLAMA_SERVE_FLAGS, port, prompt)
                for k, v in zip(("l_ready", "l_first", "l_tenth"), r):
                    times[k].append(v)
            med = {k: statistics.median(v) for k, v in times.items() if v}
            label = f"{os.path.basename(m)} | {name}"
            rows_run.append(f"| {label} | {med['toy']:.3f} | {med['cli']:.3f} | {med['toy'] / med['cli']:.2f} |")
            if not a.no_serve:
                rows_serve.append(
                    f"| {label} | {med['ready']:.3f} | {med['first']:.3f} | {med['l_ready']:.3f} | "
                    f"{med['l_first']:.3f} | {med['first'] / med['l_first']:.2f} | "
                    f"{1000 * (med['first'] - med['ready']):.0f} ms | {1000 * med['tenth']:.0f} ms | "
                    f"{1000 * (med['l_first'] - med['l_ready']):.0f} ms | {1000 * med['l_tenth']:.0f} ms |")
            print(f"{label}: done", file=sys.stderr, flush=True)
    print("| model | prompt | toy run -n 1 | llama-cli -n 1 | ratio |")
    print("|---|---|---|---|---|")
    print("\n".join(rows_run))
    if rows_serve:
        print("\nlaunch to /health 200 and to the first request's first token; then each server's first and "
              "tenth request, from sending to the first token:\n")
        print("| model | prompt | toy serve: /health | first token | llama-server: /health | first token | ratio "
              "| toy: 1st request | 10th | llama-server: 1st | 10th |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        print("\n".join(rows_serve))


if __name__ == "__main__":
    main()
