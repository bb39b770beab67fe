#!/usr/bin/env python3
"""No two files call into each other: every dependency between the source files of src/
and tools/ runs one way.

Two graphs are checked, each for cycles (strongly connected groups of more than one file):
  - calls: file A depends on file B when A's object file uses a symbol (function or data)
    that B's object file defines (from `nm` over the objects of a build);
  - includes: A depends on B when A.c or A.h includes B.h (a file and its header count
    as one unit, so x.c including x.h is no edge).

    scripts/check-cycles.py BUILD_DIR

Prints each cycle with the edges that make it and exits 1, or prints a summary and exits 0.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_DIRS = ("src", "tools")


def unit(path):
    """src/kernels/packed.c and src/kernels/packed.h are the unit src/kernels/packed."""
    return os.path.splitext(os.path.relpath(path, ROOT))[0]


def sources():
    for top in SOURCE_DIRS:
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".c", ".h")):
                    yield os.path.join(d, f)


def include_graph():
    by_name = {}
    for p in sources():
        if p.endswith(".h"):
            by_name.setdefault(os.path.basename(p), []).append(p)
    edges = {}
    for p in sources():
        with open(p, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                name = os.path.basename(m.group(1))
                # the header beside the file first, as the compiler looks
                here = os.path.join(os.path.dirname(p), m.group(1))
                targets = [here] if os.path.exists(here) else by_name.get(name, [])
                for t in targets:
                    a, b = unit(p), unit(t)
                    if a != b:
                        edges.setdefault(a, {}).setdefault(b, set()).add(m.group(1))
    return edges


def call_graph(build):
    objects = {}
    for d, _, files in os.walk(build):
        for f in files:
            if not f.endswith(".c.o"):
                continue
            o = os.path.join(d, f)
            # CMake keeps the source's path below the target's folder: .../src/x/y.c.o
            rel = o.split(".dir" + os.sep, 1)[-1][: -len(".o")]
            if rel.startswith(SOURCE_DIRS) and os.path.exists(os.path.join(ROOT, rel)):
                objects[unit(os.path.join(ROOT, rel))] = o
    if not objects:
        sys.exit(f"check-cycles: no object files of src/ or tools/ under {build} (build it first)")
    defined, used = {}, {}
    for u, o in objects.items():
        out = subprocess.run(["nm", "--format=posix", o], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue
            sym, kind = parts[0], parts[1]
            if kind == "U":
                used.setdefault(u, set()).add(sym)
            elif kind in "TDRBCV":
                defined.setdefault(sym, u)
    edges = {}
    for u, syms in used.items():
        for s in syms:
            d = defined.get(s)
            if d and d != u:
                edges.setdefault(u, {}).setdefault(d, set()).add(s)
    return edges, len(objects)


def cycles(edges):
    """Tarjan's strongly connected components with more than one member."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    nodes = set(edges) | {b for a in edges for b in edges[a]}

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def report(kind, edges, comps):
    for comp in comps:
        print(f"check-cycles: a cycle of {kind} between {', '.join(comp)}:")
        for a in comp:
            for b in comp:
                if b in edges.get(a, {}):
                    what = sorted(edges[a][b])
                    more = f" (+{len(what) - 3} more)" if len(what) > 3 else ""
                    print(f"  {a} -> {b}: {', '.join(what[:3])}{more}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/check-cycles.py BUILD_DIR")
    calls, n_objects = call_graph(sys.argv[1])
    includes = include_graph()
    call_cycles, include_cycles = cycles(calls), cycles(includes)
    report("calls", calls, call_cycles)
    report("includes", includes, include_cycles)
    if call_cycles or include_cycles:
        return 1
    n_calls = sum(len(v) for v in calls.values())
    n_includes = sum(len(v) for v in includes.values())
    print(f"check-cycles: {n_objects} object files, {n_calls} call edges and {n_includes} include edges "
          "between files, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
