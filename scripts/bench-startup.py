#!/usr/bin/env python3
"""Start-up against llama.cpp: the wall time of `toy run -n 1` and `llama-cli -n 1` (load,
one-token prompt, one token), and of `toy serve` and `llama-server` from launch to the
first `GET /health` that answers 200. Each pair runs alternately, toy first, `--rounds`
times per model; the table gives medians and the ratios toy / llama.cpp (below 1: toy
is ready sooner).

usage: bench-startup.py [-t THREADS] [-r ROUNDS] [--no-serve] MODEL.gguf...
(TOY=path/to/toy overrides build/toy; LLAMA_CPP=path/to/llama.cpp overrides
../shared/llama.cpp beside the repository.)
"""
import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


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


def serve_once(cmd, port, limit=120):
    """seconds from launch to the first /health 200, polled every millisecond"""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        while not healthy(port):
            if p.poll() is not None:
                sys.exit(f"{' '.join(cmd)} exited ({p.returncode}) before /health answered")
            if time.perf_counter() - t0 > limit:
                sys.exit(f"{' '.join(cmd)}: no /health 200 in {limit} s")
            time.sleep(0.001)
        return time.perf_counter() - t0
    finally:
        p.terminate()
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-r", "--rounds", type=int, default=5)
    ap.add_argument("--no-serve", action="store_true", help="only toy run against llama-cli")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    toy = os.environ.get("TOY", os.path.join(ROOT, "build", "toy"))
    llama = os.environ.get("LLAMA_CPP", os.path.join(ROOT, "..", "shared", "llama.cpp"))
    cli, server = os.path.join(llama, "bin", "llama-cli"), os.path.join(llama, "bin", "llama-server")
    for exe in [toy, cli] + ([] if a.no_serve else [server]):
        if not os.access(exe, os.X_OK):
            sys.exit(f"{exe} not found (make; or set TOY / LLAMA_CPP)")
    t = str(a.threads)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"CPU: {cpu}; {a.threads} threads; medians of {a.rounds} alternating runs (seconds)\n")
    head = "| model | toy run -n 1 | llama-cli -n 1 | ratio |"
    rule = "|---|---|---|---|"
    if not a.no_serve:
        head += " toy serve to /health | llama-server | ratio |"
        rule += "---|---|---|"
    print(head)
    print(rule)
    for m in a.models:
        times = {"toy": [], "cli": [], "serve": [], "server": []}
        for _ in range(a.rounds):
            times["toy"].append(run_once([toy, "run", "-m", m, "-p", "Hello", "-n", "1", "-t", t]))
            times["cli"].append(run_once([cli, "-m", m, "-p", "Hello", "-n", "1", "-t", t, "-no-cnv"]))
            if not a.no_serve:
                port = free_port()
                times["serve"].append(serve_once([toy, "serve", "-m", m, "-t", t, "--port", str(port)], port))
                port = free_port()
                times["server"].append(serve_once([server, "-m", m, "-t", t, "--port", str(port)], port))
        med = {k: statistics.median(v) for k, v in times.items() if v}
        row = f"| {os.path.basename(m)} | {med['toy']:.3f} | {med['cli']:.3f} | {med['toy'] / med['cli']:.2f} |"
        if not a.no_serve:
            row += f" {med['serve']:.3f} | {med['server']:.3f} | {med['serve'] / med['server']:.2f} |"
        print(row, flush=True)


if __name__ == "__main__":
    main()
