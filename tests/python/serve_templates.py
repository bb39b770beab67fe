#!/usr/bin/env python3
"""toy serve with models that carry real chat templates: every template of ../shared/templates
set as tokenizer.chat_template on a copy of a random-weight fixture model, the server
started on it with no template option (the model's own template is the default).

usage: serve_templates.py TOY FIXTURES_DIR TEMPLATES_DIR TMP_DIR

For each template:
- POST /apply-template gives python3-jinja2's prompt byte for byte (configured as
  transformers configures it, with the model's bos and eos text), with and without the
  generation prompt, for the acceptance conversations; with tools and a call and its result
  where the template reads tools (the arguments given to it as an object, or as text where
  it takes only text), with chat_template_kwargs {"enable_thinking": false} where it reads
  that; where the template has no system role, the system text begins the first user
  message; firefunction's `functions` and `datetime` are given as llama.cpp gives them;
- a BOS the template writes is not added again: the prompt's tokens are /tokenize's of the
  prompt without special tokens added, and one more (the BOS) where the template wrote none
  and the vocabulary adds one;
- the fields the OpenAI SDKs put on messages they hand back are accepted;
- a reply in the model's thinking syntax (forced with a grammar on the random weights) gives
  reasoning_content and content apart, whole and streamed, and reasoning_format "none"
  keeps it in content;
- a reply that calls a tool in the model's own syntax gives tool_calls in auto mode (whole
  and streamed as delta.tool_calls), and forced calls (tool_choice required) validate
  against the function's parameters (python3-jsonschema).
Then hostile templates (endless loops, deep recursion, huge strings, attribute escapes)
as the server's: each request is an error naming the limit, and the server goes on.
"""
import collections
import json
import os
import sys

import jinja2
import jinja2.meta
import jsonschema

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/
from helpers import GGUF, Server, with_strings  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jinja_diff import ENV, acceptance  # noqa: E402  the reference renderer

TOY, FIXTURES, TEMPLATES, TMP = sys.argv[1:5]
failures = []
done = collections.Counter()  # the checks made, by kind, for the summary


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)
    return cond


# ---------------------------------------------------------------- what each model writes

ARGS = {"city": "Paris", "days": 2}
ARGS_JSON = json.dumps(ARGS)
WEATHER = {"type": "object",
           "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Tokyo"], "description": "The city"},
                          "days": {"type": "integer", "minimum": 1, "maximum": 7, "description": "How many days"}},
           "required": ["city", "days"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather of a city",
                                           "parameters": WEATHER}}]

HERMES = f'<tool_call>\n{{"name": "get_weather", "arguments": {ARGS_JSON}}}\n</tool_call>'
LLAMA3 = f'{{"name": "get_weather", "parameters": {ARGS_JSON}}}'
R1 = ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
      f"{ARGS_JSON}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>")
GENERIC = f'{{"tool_call": {{"name": "get_weather", "arguments": {ARGS_JSON}}}}}'
# a call as each template's model writes it, and its thinking markers
SYNTAX = {
    "ByteDance-Seed-OSS": ("<seed:tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                           "<parameter=days>\n2\n</parameter>\n</function>\n</seed:tool_call>",
                           ("<seed:think>", "</seed:think>")),
    "CohereForAI-c4ai-command-r-plus-tool_use": (
        f'Action: ```json\n[{{"tool_name": "get_weather", "parameters": {ARGS_JSON}}}]\n```', None),
    "Mistral-Small-3.2-24B-Instruct-2506": (f"[TOOL_CALLS]get_weather[ARGS]{ARGS_JSON}", None),
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use": (HERMES, None),
    "Qwen-QwQ-32B": (HERMES, ("<think>", "</think>")),
    "Qwen-Qwen2.5-7B-Instruct": (HERMES, None),
    "Qwen-Qwen3-0.6B": (HERMES, ("<think>", "</think>")),
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": (GENERIC, ("<think>", "</think>")),  # reads no tools
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": (GENERIC, ("<think>", "</think>")),
    "fireworks-ai-llama-3-firefunction-v2": (f' functools[{{"name": "get_weather", "arguments": {ARGS_JSON}}}]', None),
    "google-gemma-2-2b-it": (GENERIC, None),
    "llama-cpp-deepseek-r1": (R1, ("<think>", "</think>")),
    "llama-cpp-rwkv-world": (GENERIC, None),
    "meetkai-functionary-medium-v3.1": (f"<function=get_weather>{ARGS_JSON}</function>", None),
    "meta-llama-Llama-3.1-8B-Instruct": (LLAMA3, None),
    "meta-llama-Llama-3.2-3B-Instruct": (LLAMA3, None),
    "microsoft-Phi-3.5-mini-instruct": (GENERIC, None),
    "mistralai-Mistral-Nemo-Instruct-2407": (
        f'[TOOL_CALLS][{{"name": "get_weather", "arguments": {ARGS_JSON}, "id": "abcDEF123"}}]', None),
}


CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def model_for(bos):
    """A fixture whose vocabulary has the template's BOS where it can: BOS-once is then the
    real case (a Llama 3 vocabulary adds <|begin_of_text|>, an SPM one <s>)."""
    return {"<|begin_of_text|>": "llama3-bpe-f16", "<s>": "llama-spm-f32"}.get(bos, "qwen2-f16")


def gbnf_literal(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render(text, messages, tools, agp, bos, eos, kwargs):
    return ENV.from_string(text).render(messages=messages, tools=tools, documents=None, add_generation_prompt=agp,
                                        bos_token=bos, eos_token=eos, **kwargs)


def has_system_role(text, bos, eos, kwargs):
    try:
        return "toy-probe" in render(text, [{"role": "system", "content": "toy-probe"}, {"role": "user", "content": "x"}],
                                     None, True, bos, eos, kwargs)
    except Exception:
        return False


def expected_prompt(text, messages, tools, agp, bos, eos, kwargs, system_role):
    """What a chat's prompt must be: the template's rendering, after the polyfills of
    docs/chat-templates.md."""
    messages = json.loads(json.dumps(messages))
    if not system_role and messages and messages[0]["role"] == "system":
        sys_text = messages.pop(0)["content"]
        users = [m for m in messages if m["role"] == "user"]
        if users:
            users[0]["content"] = sys_text + ("\n\n" if sys_text and users[0]["content"] else "") + users[0]["content"]
        else:
            messages.insert(0, {"role": "user", "content": sys_text})
    if "functions" in kwargs:  # firefunction
        kwargs = dict(kwargs, functions=json.dumps(tools, indent=2, ensure_ascii=False) if tools else "")
    try:
        return render(text, messages, tools, agp, bos, eos, kwargs)
    except Exception:
        if not any(m.get("tool_calls") for m in messages):
            raise
    for m in messages:  # a template that takes a call's arguments only as text
        for c in m.get("tool_calls") or []:
            c["function"]["arguments"] = json.dumps(c["function"]["arguments"])
    return render(text, messages, tools, agp, bos, eos, kwargs)


def reassemble(events):
    out = {"content": "", "reasoning": "", "calls": {}, "finish": None}
    for e in events:
        for c in e["choices"]:
            d = c["delta"]
            out["content"] += d.get("content") or ""
            out["reasoning"] += d.get("reasoning_content") or ""
            for tc in d.get("tool_calls") or []:
                call = out["calls"].setdefault(tc["index"], ["", ""])
                call[0] += (tc.get("function") or {}).get("name") or ""
                call[1] += (tc.get("function") or {}).get("arguments") or ""
            out["finish"] = c["finish_reason"] or out["finish"]
    return out


# ---------------------------------------------------------------- one template


def run(name, text):
    try:
        reads = jinja2.meta.find_undeclared_variables(ENV.parse(text))
    except jinja2.exceptions.TemplateSyntaxError as e:  # e.g. transformers' {% generation %}, not the reference's
        print(f"SKIP {name}: python3-jinja2 cannot parse it: {e}")
        return
    if name.endswith("-tool_use"):  # the default template (ChatML) answers requests without tools
        reads |= {"tools"}
    tokens = {}
    for line in open(os.path.join(TEMPLATES, "tokens.tsv"), encoding="utf-8").read().splitlines()[1:]:
        t, b, e = (line.split("\t") + ["", ""])[:3]
        tokens[t] = (b, e)
    fixture = model_for(tokens.get(name, ("", ""))[0])
    src = f"{FIXTURES}/models/{fixture}.gguf"
    model = os.path.join(TMP, f"{name}.gguf")
    # a model's tool-use template is its variant tokenizer.chat_template.tool_use, used for
    # requests with tools; its default here is plain ChatML
    tool_use = name.endswith("-tool_use")
    default = CHATML if tool_use else text
    with_strings(src, model, {"tokenizer.chat_template": default, **({"tokenizer.chat_template.tool_use": text}
                                                                     if tool_use else {})})
    g = GGUF(src)
    vocab = [t.decode("utf-8", "replace") for t in g.kv["tokenizer.ggml.tokens"]]
    bos_id, eos_id = g.kv.get("tokenizer.ggml.bos_token_id"), g.kv.get("tokenizer.ggml.eos_token_id")
    bos = vocab[bos_id] if bos_id is not None else ""
    eos = vocab[eos_id] if eos_id is not None else ""
    add_bos = g.kv.get("tokenizer.ggml.add_bos_token", False)
    what = f"{name} (on {fixture})"

    fire = "firefunction" in name
    system_role = has_system_role(text, bos, eos, {"functions": "", "datetime": "now"} if fire else {})
    # firefunction's prompt holds the time to the second: fixed, so that a request and the
    # same request streamed see the same prompt
    fixed = ["--chat-template-kwargs", json.dumps({"datetime": "Dec 07 2026 12:00:00 GMT"})] if fire else []
    srv = Server(TOY, model, "--parallel", "2", "-c", "2048", *fixed)
    try:
        # ---- the prompt, byte for byte
        for conv_name, (messages, tools, kwargs) in acceptance().items():
            if conv_name == "content as text parts":
                continue  # the template's own rendering of parts: jinja_diff.py (toy's render)
            if tools and "tools" not in reads:
                continue  # toy's generic form for templates that write no tools (docs/chat-templates.md)
            if kwargs and not set(kwargs) & reads:
                continue
            if fire:
                kwargs = dict(kwargs, datetime="Dec 07 2026 12:00:00 GMT", functions=None)
            sent = json.loads(json.dumps(messages))
            for m in sent:  # the API's form: arguments as JSON text
                for c in m.get("tool_calls") or []:
                    c["function"]["arguments"] = json.dumps(c["function"]["arguments"])
            for agp in (True, False):
                body = {"messages": sent, "add_generation_prompt": agp}
                if tools:
                    body["tools"] = tools
                if kwargs:
                    body["chat_template_kwargs"] = {k: v for k, v in kwargs.items() if k != "functions"}
                st, r = srv.post(body, "/apply-template")
                used = text if tools or not tool_use else default
                try:
                    ref = expected_prompt(used, messages, tools, agp, bos, eos, kwargs,
                                          system_role if used == text else True)
                except Exception as e:  # the template refuses the conversation: so must toy
                    check(st == 400 and "chat template" in r["error"]["message"],
                          f"{what} {conv_name} agp={agp}: jinja2 refused ({e}), toy answered {st} {r}")
                    continue
                done["prompts"] += 1
                check(st == 200 and r.get("prompt") == ref,
                      f"{what} {conv_name} agp={agp}: {st}\n  jinja2: {ref!r:.400}\n  toy:    {r!r:.400}")

        # ---- BOS once
        user = [{"role": "user", "content": "Hello!"}]
        st, r = srv.post({"messages": user}, "/apply-template")
        prompt = r.get("prompt", "") if st == 200 else ""
        st2, t = srv.post({"content": prompt, "add_special": False, "parse_special": True}, "/tokenize")
        st3, c = srv.post({"messages": user, "max_tokens": 1})
        if check(st == st2 == st3 == 200, f"{what}: BOS check requests: {st} {st2} {st3}"):
            wrote_bos = bool(bos) and prompt.startswith(bos)
            n = len(t["tokens"]) + (0 if wrote_bos or not add_bos else 1)
            check(c["usage"]["prompt_tokens"] == n,
                  f"{what}: prompt tokens {c['usage']['prompt_tokens']}, expected {n} (template wrote BOS: "
                  f"{wrote_bos}, vocabulary adds one: {add_bos})")
            if wrote_bos:
                check(t["tokens"][:1] == [bos_id] and t["tokens"][1:2] != [bos_id], f"{what}: BOS tokens {t['tokens'][:3]}")

        # ---- the SDKs' fields on a message handed back
        echoed = user + [{"role": "assistant", "content": "Hi.", "refusal": None, "parsed": None, "annotations": [],
                          "audio": None}, {"role": "user", "content": "And?"}]
        st, r = srv.post({"messages": echoed, "max_tokens": 1})
        check(st == 200, f"{what}: a message with the SDK's fields: {st} {r}")

        call_text, think = SYNTAX.get(name, (None, None))
        st, r = srv.post({"messages": user}, "/apply-template")
        prompt = r.get("prompt", "")
        opens = bool(think) and prompt.rstrip().endswith(think[0])

        # ---- reasoning
        if think:
            done["reasoning"] += 1
            reply = ("" if opens else think[0] + "\n") + "Let me think.\n" + think[1] + "\n\nThe answer."
            body = {"messages": user, "grammar": "root ::= " + gbnf_literal(reply), "max_tokens": 200}
            st, r = srv.post(body)
            m = r["choices"][0]["message"] if st == 200 else {}
            check(m.get("reasoning_content") == "Let me think." and m.get("content") == "The answer.",
                  f"{what}: reasoning: {st} {m}")
            st, events = srv.stream(body)
            s = reassemble(events)
            check(st == 200 and s["reasoning"] == "Let me think." and s["content"] == "The answer.",
                  f"{what}: reasoning streamed: {st} {s}")
            st, r = srv.post(dict(body, reasoning_format="none"))
            m = r["choices"][0]["message"] if st == 200 else {}
            check("reasoning_content" not in m and m.get("content") == reply.strip(),
                  f"{what}: reasoning_format none: {st} {m}")
            if "enable_thinking" in reads:
                body = {"messages": user, "chat_template_kwargs": {"enable_thinking": False},
                        "grammar": 'root ::= "The answer."', "max_tokens": 50}
                st, r = srv.post({"messages": user, "chat_template_kwargs": {"enable_thinking": False}},
                                 "/apply-template")
                check(st == 200 and r["prompt"].endswith(think[0] + "\n\n" + think[1] + "\n\n"),
                      f"{what}: enable_thinking false: {r}")
                st, r = srv.post(body)
                m = r["choices"][0]["message"] if st == 200 else {}
                check("reasoning_content" not in m and m.get("content") == "The answer.",
                      f"{what}: enable_thinking false: {st} {m}")

        # ---- calls in the model's own syntax, tool_choice auto (where the template takes
        # tools at all: llama.cpp's own DeepSeek R1 template passes a generator to tojson,
        # which python3-jinja2 refuses, and so does toy)
        try:
            expected_prompt(text, user, TOOLS, True, bos, eos, {"datetime": "now", "functions": None} if fire else {},
                            system_role)
        except Exception as e:
            st, r = srv.post({"messages": user, "tools": TOOLS, "max_tokens": 1})
            check(st == 400 and "chat template" in r["error"]["message"], f"{what}: jinja2 refused tools ({e}): {st} {r}")
            call_text = None
        if call_text:
            done["calls in the model's syntax"] += 1
            lead = "Hmm.\n" + think[1] + "\n\n" if opens else ""
            body = {"messages": user, "tools": TOOLS, "grammar": "root ::= " + gbnf_literal(lead + call_text),
                    "max_tokens": 300}
            st, r = srv.post(body)
            c = r["choices"][0] if st == 200 else {"message": {}}
            calls = [[t["function"]["name"], json.loads(t["function"]["arguments"])]
                     for t in c["message"].get("tool_calls") or []]
            check(calls == [["get_weather", ARGS]] and c.get("finish_reason") == "tool_calls"
                  and c["message"].get("content") is None, f"{what}: auto call: {st} {c}")
            st, events = srv.stream(body)
            s = reassemble(events)
            check(st == 200 and [[n, json.loads(a)] for n, a in s["calls"].values()] == [["get_weather", ARGS]]
                  and s["finish"] == "tool_calls", f"{what}: auto call streamed: {st} {s}")

            # ---- forced calls: the grammar of the model's syntax and the schema. The grammar
            # lets a thinking model think first, which random weights do until max_tokens:
            # where the template can turn thinking off, it is off (the prompt closes the
            # block, and the calls come at once); elsewhere a reply may be all reasoning.
            kwargs = {"enable_thinking": False} if think and "enable_thinking" in reads else {}
            rambles = bool(think) and not kwargs
            for seed in range(2):
                body = {"messages": user, "tools": TOOLS, "tool_choice": "required", "temperature": 1,
                        "seed": seed, "max_tokens": 600, **({"chat_template_kwargs": kwargs} if kwargs else {})}
                st, r = srv.post(body)
                c = r["choices"][0] if st == 200 else {"message": {}}
                tcs = c["message"].get("tool_calls") or []
                if rambles and st == 200 and c["finish_reason"] == "length" and not c["message"].get("content"):
                    done["forced, still thinking at max_tokens"] += 1
                    continue
                if not check(st == 200 and c["finish_reason"] == "tool_calls" and tcs,
                             f"{what}: forced seed {seed}: {st} {c}"):
                    continue
                done["forced calls"] += 1
                for tc in tcs:
                    try:
                        check(tc["function"]["name"] == "get_weather", f"{what}: forced called {tc}")
                        jsonschema.validate(json.loads(tc["function"]["arguments"]), WEATHER)
                    except (ValueError, jsonschema.ValidationError) as e:
                        check(False, f"{what}: forced seed {seed}: arguments {tc['function']['arguments']!r}: {e}")
                st, events = srv.stream(body)
                s = reassemble(events)
                check([[n, a] for n, a in s["calls"].values()]
                      == [[t["function"]["name"], t["function"]["arguments"]] for t in tcs],
                      f"{what}: forced seed {seed} streamed: {s['calls']} != {tcs}")
    finally:
        check(srv.stop() == 0, f"{what}: toy serve did not exit 0")


# ---------------------------------------------------------------- hostile templates

HOSTILE = [  # a template that would run away, and what its error names
    # (each inner range is a list in the render's memory: its limit may come first)
    ("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", "steps|MiB"),
    ("{% for a in range(100000) %}{% for b in range(1000) %}{{ b }}{% endfor %}{% endfor %}", "bytes|MiB"),
    ("{% for i in range(1000000000) %}{% endfor %}", "Range too big"),  # jinja2's sandbox
    ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "levels deep"),
    ("{{ 'x' * 1000000000 }}", "MiB of memory"),
    ("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "MiB"),
    ("{{ messages.__class__.__mro__[1].__subclasses__() }}", "unsafe"),
    ("{{ ''.__class__.__base__ }}", "unsafe"),
    ("[{{ ''.__class__ }}{{ raise_exception('escaped') if ''.__class__ is defined }}]", None),  # undefined: nothing
]


def hostile(model):
    """Each hostile template as the server's: its requests end with an error naming the
    limit, never a hang or a crash, and the server goes on answering."""
    for text, names in HOSTILE:
        path = os.path.join(TMP, "hostile.jinja")
        open(path, "w").write(text)
        srv = Server(TOY, model, "--chat-template-file", path)
        try:
            st, r = srv.post({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1})
            if names is None:  # a private attribute is undefined: nothing escapes, the render goes on
                check(st == 200, f"hostile {text!r}: {st} {r}")
            else:
                check(st == 400 and any(n in r["error"]["message"] for n in names.split("|")),
                      f"hostile {text!r}: {st} {r}")
            st, r = srv.post({"content": "still here"}, "/tokenize")
            check(st == 200 and r["tokens"], f"hostile {text!r}: the server after it: {st} {r}")
            done["hostile templates"] += 1
        finally:
            check(srv.stop() == 0, f"hostile {text!r}: toy serve did not exit 0")


names = sorted(f[:-len(".jinja")] for f in os.listdir(TEMPLATES) if f.endswith(".jinja"))
for n in names:
    run(n, open(os.path.join(TEMPLATES, n + ".jinja"), encoding="utf-8").read())
hostile(f"{FIXTURES}/models/qwen2-f16.gguf")
print(f"{len(names)} templates: " + ", ".join(f"{v} {k}" for k, v in done.items()))
print(f"{len(failures)} failures" if failures else "serve_templates: all passed")
sys.exit(1 if failures else 0)
