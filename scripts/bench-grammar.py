#!/usr/bin/env python3
"""The cost of constrained decoding in an OpenAI-compatible server (toy serve,
llama-server): the time per generated token with no constraint, with a JSON schema
(response_format json_schema, or llama-server's json_schema field) and with a GBNF
grammar, at temperature 1.

Each request streams its answer. Requests alternate between the kinds, `--runs` of each
with seeds 0..; in each run the time per token of every kind is taken over the same
stretch of positions (from its second token to the m-th, m the shortest answer of the run),
so the prompt, the first step and the growth of the context weigh the same on all. The
script prints the median time per token of each kind and its ratio to the unconstrained
one.

The default schema is an object holding an array of bounded strings (the commonest shape
of structured output, and the costliest for a grammar: every position in a bounded string
is a state of its own); --schema FILE gives another.

With the server's default top-k (40) only the best tokens are asked of the grammar; with
--top-k 0 every step needs the mask over the whole vocabulary.

usage: bench-grammar.py --port P [--runs 7] [--max-tokens 400] [--top-k K] [--schema FILE] [--json]
"""
import argparse
import http.client
import json
import statistics
import time

SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 40},
        "items": {"type": "array", "items": {"type": "string", "minLength": 20, "maxLength": 60}, "minItems": 8,
                  "maxItems": 16},
        "count": {"type": "integer", "minimum": 0, "maximum": 1000},
    },
    "required": ["title", "items", "count"],
    "additionalProperties": False,
}
GRAMMAR = 'root ::= "[" item ("," " "? item){7,15} "]"\nitem ::= [a-z ]{20,60}\n'


def token_times(port, body):
    """Streams a completion: the time each token arrived."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", json.dumps(dict(body, stream=True)), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise SystemExit(f"status {r.status}: {r.read()[:300]!r}")
    times = []
    for line in r:
        line = line.strip()
        if line.startswith(b"data: {"):
            event = json.loads(line[6:])
            if event.get("choices"):
                times.append(time.perf_counter())
    c.close()
    if len(times) < 4:
        raise SystemExit(f"only {len(times)} tokens were streamed: raise --max-tokens or change the prompt")
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--max-tokens", type=int, default=400)
    ap.add_argument("--top-k", type=int, help="top_k of every request (default: the server's)")
    ap.add_argument("--schema", help="a JSON Schema file (default: an object of bounded strings)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    a = ap.parse_args()
    schema = json.load(open(a.schema)) if a.schema else SCHEMA
    kinds = {"none": {}, "json_schema": {"json_schema": schema}, "grammar": {"grammar": GRAMMAR}}
    results = {k: [] for k in kinds}
    counts = {k: [] for k in kinds}
    for run in range(a.runs):
        times = {}
        for kind, extra in kinds.items():
            body = dict({"prompt": "Here is the list:", "temperature": 1, "max_tokens": a.max_tokens, "seed": run}, **extra)
            if a.top_k is not None:
                body["top_k"] = a.top_k
            times[kind] = token_times(a.port, body)
        m = min(len(t) for t in times.values())
        for kind, t in times.items():
            results[kind].append((t[m - 1] - t[1]) / (m - 2))
            counts[kind].append(len(t))
    base = statistics.median(results["none"])
    out = {k: {"ms_per_token": statistics.median(v) * 1e3, "ratio": statistics.median(v) / base,
               "tokens": statistics.median(counts[k])} for k, v in results.items()}
    if a.json:
        print(json.dumps(out))
        return
    print(f"{'constraint':12} {'ms/token':>9} {'ratio':>6} {'tokens':>7}   (medians of {a.runs} runs)")
    for k, v in out.items():
        print(f"{k:12} {v['ms_per_token']:9.2f} {v['ratio']:6.3f} {v['tokens']:7.0f}")


if __name__ == "__main__":
    main()
