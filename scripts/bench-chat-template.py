#!/usr/bin/env python3
"""The time to render a chat template: a conversation of 20 turns (a system message, ten
user and assistant exchanges, three of the answers calls of tools whose results follow;
call ids of 9 letters and digits, as Mistral's templates demand)
with 5 tools, on each real template of a folder, through libtoy's C API
(toy_chat_template_render: the Jinja engine over the messages' JSON; and
toy_chat_template_prompt: what toy serve renders per request, its message checks and
polyfills included), beside python3-jinja2 configured as transformers configures it.

The JSON texts are made once; each render is timed alone, `--runs` times after a warm-up,
and the median and 90th percentile are printed per template, the longest template first.

usage: bench-chat-template.py [--templates DIR] [--runs 300] [--library build/libtoy.so.N] [--json | --markdown]
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))


def tool(name, props):
    return {"type": "function", "function": {
        "name": name, "description": f"The {name.replace('_', ' ')} tool",
        "parameters": {"type": "object", "properties": {k: {"type": t, "description": f"The {k}"} for k, t in props},
                       "required": [props[0][0]]}}}


TOOLS = [tool("get_weather", [("city", "string"), ("days", "integer")]),
         tool("search_web", [("query", "string"), ("limit", "integer")]),
         tool("send_email", [("to", "string"), ("subject", "string"), ("body", "string")]),
         tool("get_time", [("zone", "string")]),
         tool("convert_units", [("value", "number"), ("from_unit", "string"), ("to_unit", "string")])]


def conversation():
    m = [{"role": "system", "content": "You are a helpful assistant. Answer briefly and use the tools when useful."}]
    for i in range(10):
        m.append({"role": "user", "content": f"Question {i}: what about the weather in city number {i} this week?"})
        if i % 3 == 1:
            args = {"city": f"City {i}", "days": 3}
            m.append({"role": "assistant", "content": "", "tool_calls": [{
                "id": f"call{i:05d}", "type": "function", "function": {"name": "get_weather", "arguments": args}}]})
            m.append({"role": "tool", "tool_call_id": f"call{i:05d}", "name": "get_weather",
                      "content": json.dumps({"sky": "clear", "celsius": 20 + i})})
        m.append({"role": "assistant", "content": f"In city {i} it will be clear, around {20 + i} degrees. " * 3})
    return m


def timed(fn, runs):
    for _ in range(max(3, runs // 20)):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return statistics.median(times), times[int(0.9 * (len(times) - 1))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--templates", default=os.path.join(ROOT, "..", "shared", "templates"))
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--library", help="libtoy to load (TOY_LIBRARY)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    ap.add_argument("--markdown", action="store_true", help="the table in Markdown")
    a = ap.parse_args()
    if a.library:
        os.environ["TOY_LIBRARY"] = a.library
    import toy  # noqa: E402
    from jinja_diff import ENV  # noqa: E402  python3-jinja2 as transformers configures it

    c = toy._c
    tokens = {}
    tsv = os.path.join(a.templates, "tokens.tsv")
    if os.path.exists(tsv):
        for line in open(tsv, encoding="utf-8").read().splitlines()[1:]:
            name, bos, eos = (line.split("\t") + ["", ""])[:3]
            tokens[name] = (bos, eos)
    messages = conversation()
    # the API's form: arguments as JSON text (the template gets an object)
    api_messages = json.loads(json.dumps(messages))
    for msg in api_messages:
        for call in msg.get("tool_calls") or []:
            call["function"]["arguments"] = json.dumps(call["function"]["arguments"])
    msgs_json, tools_json = json.dumps(api_messages).encode(), json.dumps(TOOLS).encode()
    files = sorted((f for f in os.listdir(a.templates) if f.endswith(".jinja")),
                   key=lambda f: -os.path.getsize(os.path.join(a.templates, f)))
    rows = []
    for f in files:
        name = f[:-len(".jinja")]
        text = open(os.path.join(a.templates, f), encoding="utf-8").read()
        bos, eos = tokens.get(name, ("", ""))
        t = toy.ChatTemplate(text, bos, eos)
        out = ctypes.c_void_p()

        def render():
            if c.toy_chat_template_render(t._t, msgs_json, tools_json, None, True, ctypes.byref(out)):
                raise RuntimeError(c.toy_last_error().decode())
            c.toy_free(out)

        def prompt():
            if c.toy_chat_template_prompt(t._t, msgs_json, tools_json, None, True, ctypes.byref(out)):
                raise RuntimeError(c.toy_last_error().decode())
            c.toy_free(out)

        jt = ENV.from_string(text)

        def reference():
            jt.render(messages=messages, tools=TOOLS, documents=None, add_generation_prompt=True, bos_token=bos,
                      eos_token=eos)

        row = {"template": name, "bytes": len(text.encode())}
        for what, fn in (("render", render), ("prompt", prompt), ("jinja2", reference)):
            try:
                row[what] = timed(fn, a.runs)
            except Exception as e:  # the template refuses this conversation (e.g. it takes no tool calls)
                row[what] = None
                row.setdefault("refused", f"{what}: {e}"[:100])
        t.close()
        rows.append(row)
    if a.json:
        print(json.dumps(rows))
        return
    if a.markdown:
        cell = lambda v: f"{v[0] * 1e3:.3f} / {v[1] * 1e3:.3f}" if v else "refused"
        print("| template | bytes | render ms (median / p90) | prompt ms | python3-jinja2 ms | jinja2 / render |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            ratio = f"{r['jinja2'][0] / r['render'][0]:.1f}x" if r["render"] and r["jinja2"] else "-"
            print(f"| {r['template']} | {r['bytes']} | {cell(r['render'])} | {cell(r['prompt'])} | "
                  f"{cell(r['jinja2'])} | {ratio} |")
        return
    ms = lambda v: f"{v[0] * 1e3:7.3f} {v[1] * 1e3:7.3f}" if v else "   refused    "
    print(f"{'template':46} {'bytes':>5}  {'render ms':>15}  {'prompt ms':>15}  {'jinja2 ms':>15}  jinja2/render")
    print(f"{'':46} {'':>5}  {'median':>7} {'p90':>7}  {'median':>7} {'p90':>7}  {'median':>7} {'p90':>7}")
    for r in rows:
        ratio = f"{r['jinja2'][0] / r['render'][0]:.1f}x" if r["render"] and r["jinja2"] else "-"
        print(f"{r['template']:46} {r['bytes']:5}  {ms(r['render'])}  {ms(r['prompt'])}  {ms(r['jinja2'])}  {ratio:>6}"
              + (f"   ({r['refused']})" if "refused" in r else ""))


if __name__ == "__main__":
    main()
