#!/usr/bin/env python3
"""toy serve's tool calling over HTTP, on random-weight fixture models, one per syntax.

usage: serve_tools.py TOY FIXTURES_DIR ["MODEL:FAMILY ..."]

For each template family (chatml: Hermes, llama3, mistral-v3, phi3: the generic form):
- a conversation with tools, an assistant's tool call and its result is accepted;
- a streamed answer (tool_choice auto) reassembles to the whole answer of the same seed;
- tool_choice "required" and a named function at temperature 1: every choice ends with
  finish_reason "tool_calls", calls of declared functions (the named one), and arguments
  that validate against the function's parameters (python3-jsonschema); with
  parallel_tool_calls false, exactly one call;
- the same forced request streamed gives the same calls as delta.tool_calls;
- bad tools, tool_choice and tool messages are 400 naming the field.
"""
import json
import os
import re
import sys

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/, helpers.py
from helpers import Server  # noqa: E402

TOY, FIXTURES = sys.argv[1], sys.argv[2]
failures = []
skipped = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


WEATHER = {"type": "object",
           "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Tokyo"]},
                          "days": {"type": "integer", "minimum": 1, "maximum": 7},
                          "metric": {"type": "boolean"}},
           "required": ["city", "days"], "additionalProperties": False}
TIME = {"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
        "required": ["zone"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather of a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "The time in a zone",
                                           "parameters": TIME}}]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
CONVERSATION = [
    {"role": "system", "content": "You answer briefly."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_abc", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 1}"}}]},
    {"role": "tool", "tool_call_id": "call_abc", "content": "{\"sky\": \"clear\", \"c\": 21}"},
]


def reassemble(events):
    """The choices of a stream: content, calls ({index: [name, arguments]}), finish_reason."""
    out = {}
    for e in events:
        for c in e["choices"]:
            o = out.setdefault(c["index"], {"content": "", "calls": {}, "finish": None, "ids": {}})
            d = c["delta"]
            o["content"] += d.get("content") or ""
            for tc in d.get("tool_calls") or []:
                call = o["calls"].setdefault(tc["index"], ["", ""])
                if tc.get("id"):
                    o["ids"][tc["index"]] = tc["id"]
                fn = tc.get("function") or {}
                call[0] += fn.get("name") or ""
                call[1] += fn.get("arguments") or ""
            o["finish"] = c["finish_reason"] or o["finish"]
    return out


def calls_of(message):
    return [[t["function"]["name"], t["function"]["arguments"]] for t in message.get("tool_calls") or []]


def check_forced(family, what, choice, calls, parallel, only=None):
    check(choice["finish_reason"] == "tool_calls",
          f"{family} {what}: finish_reason {choice['finish_reason']}, content {choice['message'].get('content')!r}")
    msg = choice["message"]
    check(msg.get("content") is None, f"{family} {what}: content {msg.get('content')!r} beside the calls")
    check(len(calls) >= 1 and (parallel or len(calls) == 1), f"{family} {what}: {len(calls)} calls")
    # ids: call_ and 24 letters and digits; Mistral's models write their own, 9 long, which
    # their templates require back
    id_form = r"[A-Za-z0-9]{9}" if family.startswith("mistral") else r"call_[A-Za-z0-9]{24}"
    for t in msg.get("tool_calls") or []:
        check(t["type"] == "function" and re.fullmatch(id_form, t["id"]), f"{family} {what}: call {t}")
    for name, args in calls:
        check(name in SCHEMAS and (only is None or name == only), f"{family} {what}: called {name}")
        try:
            jsonschema.validate(json.loads(args), SCHEMAS.get(name, {}))
        except (ValueError, jsonschema.ValidationError) as e:
            check(False, f"{family} {what}: arguments {args!r} of {name}: {e}")


def run(model, family):
    srv = Server(TOY, f"{FIXTURES}/models/{model}.gguf", "--parallel", "2", "--chat-template", family)
    try:
        # ---- a conversation with a call and its result
        body = {"messages": CONVERSATION, "tools": TOOLS, "max_tokens": 16, "seed": 3, "temperature": 1}
        st, r = srv.post(body)
        check(st == 200, f"{family}: the conversation with tool messages: {st} {r}")
        whole = r["choices"][0] if st == 200 else None
        check(whole is None or whole["finish_reason"] in ("stop", "length", "tool_calls"), f"{family}: {whole}")
        # streamed, the same answer
        st, events = srv.stream(body)
        s = reassemble(events).get(0) if st == 200 else None
        check(st == 200 and s is not None, f"{family}: stream {st}")
        if whole and s:
            check(s["content"] == (whole["message"]["content"] or ""),
                  f"{family}: streamed content {s['content']!r} != {whole['message']['content']!r}")
            check(s["finish"] == whole["finish_reason"], f"{family}: streamed finish {s['finish']}")
            check([s["calls"][k] for k in sorted(s["calls"])] == calls_of(whole["message"]),
                  f"{family}: streamed calls {s['calls']} != {calls_of(whole['message'])}")

        # ---- forced calls at temperature 1
        for what, extra, only in [("required", {"tool_choice": "required"}, None),
                                  ("named", {"tool_choice": {"type": "function", "function": {"name": "get_time"}}},
                                   "get_time"),
                                  ("required, one call", {"tool_choice": "required", "parallel_tool_calls": False},
                                   None)]:
            for seed in range(4):
                body = dict({"messages": CONVERSATION[:2], "tools": TOOLS, "max_tokens": 800, "temperature": 1,
                             "seed": seed, "n": 2}, **extra)
                st, r = srv.post(body)
                if st == 400 and "needs grammars" in r["error"]["message"]:
                    skipped.append(f"{family} {what}")  # a build without grammars on the sampler
                    break
                check(st == 200, f"{family} {what} seed {seed}: {st} {r}")
                if st != 200:
                    break
                for c in r["choices"]:
                    check_forced(family, f"{what} seed {seed}", c, calls_of(c["message"]),
                                 extra.get("parallel_tool_calls", True), only)
                # the same request streamed: the same calls as delta.tool_calls
                st, events = srv.stream(body)
                got = reassemble(events) if st == 200 else {}
                for i, c in enumerate(r["choices"]):
                    sc = got.get(i, {"calls": {}, "finish": None, "content": "", "ids": {}})
                    check([sc["calls"][k] for k in sorted(sc["calls"])] == calls_of(c["message"]),
                          f"{family} {what} seed {seed}: streamed calls {sc['calls']} != {calls_of(c['message'])}")
                    check(sc["finish"] == "tool_calls" and sc["content"] == "" and len(sc["ids"]) == len(sc["calls"]),
                          f"{family} {what} seed {seed}: streamed {sc}")

        # ---- bad requests
        base = {"messages": CONVERSATION[:2], "tools": TOOLS}
        for patch, message in [
            ({"tools": [{"type": "function", "function": {"name": "no spaces"}}]}, "tools[0].function.name"),
            ({"tools": [{"type": "retrieval"}]}, "tools[0].type must be \"function\""),
            ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "'nope', which tools does not"),
            ({"tool_choice": "sometimes"}, "tool_choice must be"),
            ({"messages": CONVERSATION[:3] + [{"role": "tool", "content": "x"}]}, "needs a tool_call_id"),
            ({"messages": [{"role": "user", "content": "x", "tool_calls": []}, {"role": "assistant", "content": None}]},
             "messages[1].content must be"),
            ({"messages": [{"role": "assistant", "content": None, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]},
             "messages[0].tool_calls[0].function.arguments must be the text of a JSON object"),
            ({"stream": True, "logprobs": True}, "logprobs cannot be streamed with tools"),
        ]:
            st, r = srv.post(dict(base, **patch))
            check(st == 400 and message in r["error"]["message"], f"{family}: {patch}: {st} {r}")
    finally:
        check(srv.stop() == 0, f"{family}: toy serve did not exit 0")


# the fixture models, or those named by a third argument as "MODEL:FAMILY ..." (a bare
# clone's models of toy init)
RUNS = [tuple(r.split(":")) for r in sys.argv[3].split()] if len(sys.argv) > 3 else [
    ("qwen2-f16", "chatml"), ("llama3-bpe-f16", "llama3"), ("mixtral-f16", "mistral-v3"), ("phi3-f16", "phi3")]
for model, family in RUNS:
    run(model, family)
if skipped:
    print(f"SKIP: forced calls ({', '.join(skipped)}): this toy serve cannot put a grammar on the sampler")
print(f"{len(failures)} failures" if failures else "serve_tools: all passed" + (" but the skipped" if skipped else ""))
sys.exit(1 if failures else 77 if skipped else 0)
