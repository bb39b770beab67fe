#!/usr/bin/env python3
"""toy's Jinja engine against python3-jinja2 configured as transformers configures it.

usage: jinja_diff.py TEMPLATES_DIR [--seed N] [--conversations N] [--expressions N]
       (TEMPLATES_DIR: ../shared/templates, the real templates and tokens.tsv; VERBOSE=1
       prints every case)

- every template of TEMPLATES_DIR renders the acceptance conversations (one user turn; a
  system message and three turns; no system message; content as a list of text parts;
  tools with an assistant tool call and a tool result; enable_thinking false) with
  add_generation_prompt true and false, then N generated conversations (roles, Unicode,
  empty and long contents, many turns, tools): toy's prompt must be python3-jinja2's byte
  for byte, or both must refuse the conversation (the same raise_exception message);
- N generated templates (expressions, filters, tests, methods, statements, whitespace
  control) over generated variables: the same output, or an error from both.

The reference is python3-jinja2's ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks and loopcontrols, transformers' tojson, raise_exception and strftime_now,
rendered with messages, tools (None without), documents (None), add_generation_prompt,
bos_token, eos_token and the chat_template_kwargs; toy's is toy.ChatTemplate (libtoy).
"""
import argparse
import json
import os
import random
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

sys.path.insert(0, os.path.join(os.environ.get("TOY_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                                "python"))
import toy  # noqa: E402

# ---------------------------------------------------------------- the reference


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
ENV.filters["tojson"] = tojson
ENV.globals["raise_exception"] = raise_exception
ENV.globals["strftime_now"] = strftime_now


def reference(text, messages, tools, agp, bos, eos, kwargs):
    """python3-jinja2's prompt, or ("error", message)."""
    try:
        t = ENV.from_string(text)
        return t.render(messages=messages, tools=tools, documents=None, add_generation_prompt=agp,
                        **{"bos_token": bos, "eos_token": eos, **kwargs})
    except jinja2.exceptions.TemplateError as e:
        return ("error", type(e).__name__, str(e))
    except Exception as e:  # TypeError, ZeroDivisionError, ...: the template failed
        return ("error", type(e).__name__, str(e))


def toy_render(text, messages, tools, agp, bos, eos, kwargs):
    try:
        t = toy.ChatTemplate(text, bos, eos)
    except toy.ToyError as e:
        return ("error", "syntax", str(e))
    try:
        return t.render(messages, tools=tools, add_generation_prompt=agp, **kwargs)
    except toy.ToyError as e:
        return ("error", "render", str(e))
    finally:
        t.close()


failures = []
n_cases = [0]


def compare(what, ref, got):
    n_cases[0] += 1
    if isinstance(ref, str) and (" at 0x" in ref or "<bound method" in ref):
        return  # CPython printed an object's address or a method: nothing to compare
    same = ref == got
    if isinstance(ref, tuple) and isinstance(got, tuple):
        # both refused; a template's own raise_exception must say the same
        same = ref[1] != "TemplateError" or ref[2] in got[2]
    if not same:
        failures.append(what)
        print(f"DIFF {what}\n  python3-jinja2: {ref!r:.600}\n  toy:            {got!r:.600}")
    elif os.environ.get("VERBOSE"):
        print(f"same {what}: {str(ref)[:120]!r}")


# ---------------------------------------------------------------- conversations

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string", "description": "The city"},
                                          "days": {"type": "integer", "minimum": 1}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "description": "Search the web",
                                      "parameters": {"type": "object", "properties": {
                                          "query": {"type": "string"},
                                          "filters": {"type": "array", "items": {"type": "string"}}},
                                          "required": ["query"]}}},
]


def acceptance():
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}
    return {
        "one user turn": ([{"role": "user", "content": "Hello!"}], None, {}),
        "a system message and three turns": ([
            {"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "How are you?"},
            {"role": "assistant", "content": "Fine."}, {"role": "user", "content": "Bye ünïcödé 東京 🙂"}], None, {}),
        "no system message": ([
            {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "How are you?"}], None, {}),
        "content as text parts": ([{"role": "user", "content": [
            {"type": "text", "text": "Part one."}, {"type": "text", "text": "Part two."}]}], None, {}),
        "tools, a call and its result": ([
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 20}"},
            {"role": "user", "content": "Thanks"}], TOOLS, {}),
        "enable_thinking false": ([{"role": "user", "content": "Hello!"}], None, {"enable_thinking": False}),
    }


WORDS = ["hello", "the", "Paris", "naïve", "東京", "🙂", "\"quoted\"", "it's", "a\nb", "  spaced  ", "<tag>",
         "{{ x }}", "{% if %}", "tab\there", "\\backslash", "ünïcödé", "Ελλάδα", "x" * 50]


def text(rng):
    k = rng.choice([0, 1, 2, 5, 12, 60])
    return " ".join(rng.choice(WORDS) for _ in range(k))


def conversation(rng):
    """Roles that alternate (most templates refuse others), sometimes a system message
    first, sometimes tools, calls and results."""
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": text(rng)})
    tools = TOOLS if rng.random() < 0.4 else None
    for turn in range(rng.randint(1, 8)):
        content = text(rng)
        if rng.random() < 0.15:
            content = [{"type": "text", "text": text(rng)} for _ in range(rng.randint(1, 3))]
        msgs.append({"role": "user", "content": content})
        if turn == 0 and rng.random() < 0.1:
            break
        if tools and rng.random() < 0.5:
            cid = f"call_{turn}"
            args = {"city": rng.choice(WORDS)} if rng.random() < 0.5 else {"query": text(rng), "filters": ["a", "b"]}
            name = "get_weather" if "city" in args else "search"
            msgs.append({"role": "assistant", "content": "" if rng.random() < 0.5 else None,
                         "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": args}}]})
            msgs.append({"role": "tool", "tool_call_id": cid, "name": name, "content": json.dumps({"r": text(rng)})})
        msgs.append({"role": "assistant", "content": text(rng)})
    if rng.random() < 0.6:
        msgs.pop()  # end on the user's turn, as a prompt does
    kwargs = {"enable_thinking": rng.random() < 0.5} if rng.random() < 0.3 else {}
    return msgs, tools, kwargs


def run_templates(folder, rng, n_random):
    tokens = {}
    for line in open(os.path.join(folder, "tokens.tsv")).read().splitlines()[1:]:
        parts = (line.split("\t") + ["", ""])[:3]
        tokens[parts[0]] = (parts[1], parts[2])
    names = sorted(f[:-6] for f in os.listdir(folder) if f.endswith(".jinja"))
    for name in names:
        text_ = open(os.path.join(folder, name + ".jinja")).read()
        bos, eos = tokens.get(name, ("", ""))
        cases = list(acceptance().items())
        cases += [(f"generated #{i}", conversation(rng)) for i in range(n_random)]
        for what, (msgs, tools, kwargs) in cases:
            for agp in (True, False):
                ref = reference(text_, json.loads(json.dumps(msgs)), tools, agp, bos, eos, kwargs)
                got = toy_render(text_, msgs, tools, agp, bos, eos, kwargs)
                compare(f"{name}: {what}, add_generation_prompt={agp}", ref, got)
    return len(names)


# ---------------------------------------------------------------- generated templates

VARS = {"s": "Hello World", "e": "", "u": "ünï 東京 ß", "n": 7, "z": 0, "neg": -3, "f": 2.5, "big": 1e15,
        "t": True, "no": False, "none": None, "l": [3, 1, 2], "ls": ["b", "A", "c"], "el": [],
        "d": {"b": 2, "a": 1}, "ed": {}, "nested": {"x": [1, {"y": "z"}], "w": None},
        "msgs": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
                 {"role": "assistant", "content": None, "tool_calls": [
                     {"id": "c1", "function": {"name": "f", "arguments": {"x": 1, "s": "é"}}}]},
                 {"role": "tool", "content": "42"}]}

ATOMS = ["s", "e", "u", "n", "z", "neg", "f", "big", "t", "no", "none", "l", "ls", "el", "d", "ed", "nested",
         "msgs", "undefined_name", "1", "0", "-2", "3.5", "1e3", "0.1", "'a'", "'It''s'", '"q\\"x"', "'\\n\\t'",
         "'é😀'", "''", "true", "false", "none", "[]", "[1, 'x', none]", "(1, 2)", "('a',)", "{'k': 1, 2: 'v'}",
         "{}", "range(4)", "msgs[0]", "msgs[2].tool_calls[0].function.arguments", "d.a", "d['b']", "nested.x[1].y",
         "l[1:]", "s[::-1]", "u[1:4]", "l[-1]", "s[0]", "msgs|length", "loop_var", "'\\u00e9\\x41\\101'",
         "'a' 'b'", "1_000", "2.5e-3", "[l, d]", "(s, n)", "l[::2]", "u[-2:]", "s[1:-1]",
         "{'nested': {'k': [1, (2, 3)]}}", "namespace(a=1).a", "dict(x=1, y=[2])", "range(2, 9, 3)",
         "'%s-%d' % ('a', 3)", "'{}:{}'.format(s, n)", "s ~ n ~ none", "msgs[2]['tool_calls'][0]['id']"]
BINOPS = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "and", "or"]
FILTERS = ["length", "count", "upper", "lower", "title", "capitalize", "trim", "string", "list", "first", "last",
           "sort", "reverse|list", "unique|list", "tojson", "tojson(indent=2)", "tojson(separators=(',', ':'))",
           "tojson(sort_keys=true)", "join", "join(', ')", "default('D')", "default('D', true)", "int", "float",
           "abs", "round", "round(1)", "sum", "max", "min", "items|list", "dictsort", "batch(2)|list",
           "slice(2)|list", "replace('o', '0')", "indent(2)", "indent(2, true)", "center(12)", "truncate(8)",
           "wordcount", "striptags", "escape", "map('string')|list", "attr('role')", "map(attribute='role')|list",
           "selectattr('role', 'equalto', 'user')|list", "rejectattr('content')|list", "select('odd')|list",
           "reject('none')|list", "groupby('role')|list|length", "safe", "urlencode",
           "format(1)", "list|length", "string|length", "d|length"]
TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable", "sequence",
         "boolean", "true", "false", "odd", "even", "divisibleby(3)", "lower", "upper", "callable",
         "eq(1)", "equalto 'a'", "sameas none", "in [1, 2]", "gt 1", "lt 5", "sameas true", "in 'Hello'",
         "ge 0", "le 3", "ne 2", "filter", "test", "escaped"]
METHODS = ["strip()", "strip('H')", "lstrip()", "rstrip('d')", "split()", "split(' ', 1)", "split('o')",
           "rsplit(None, 1)", "startswith('He')", "endswith(('d', 'x'))", "upper()", "lower()", "title()",
           "capitalize()", "replace('l', 'L', 1)", "find('o')", "rfind('o')", "count('l')", "splitlines()",
           "isdigit()", "isalpha()", "isspace()", "format(1, 2)", "join(['a', 'b'])", "get('a')", "get('z', 9)",
           "items()|list", "keys()|list", "values()|list", "index(1)", "ljust(14, '*')", "zfill(3)",
           "removeprefix('He')"]


def expr(rng, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.3:
        return rng.choice(ATOMS)
    if r < 0.5:
        return f"({expr(rng, depth + 1)} {rng.choice(BINOPS)} {expr(rng, depth + 1)})"
    if r < 0.65:
        return f"{expr(rng, depth + 1)}|{rng.choice(FILTERS)}"
    if r < 0.75:
        return f"({expr(rng, depth + 1)} is {rng.choice(['', 'not '])}{rng.choice(TESTS)})"
    if r < 0.85:
        return f"{rng.choice(['s', 'u', 'e', 'd', 'l', 'msgs[1].content', 'nested'])}.{rng.choice(METHODS)}"
    if r < 0.92:
        return f"({expr(rng, depth + 1)} if {expr(rng, depth + 1)} else {expr(rng, depth + 1)})"
    if r < 0.96:
        return f"(not {expr(rng, depth + 1)})"
    return f"[{expr(rng, depth + 1)}, {expr(rng, depth + 1)}]"


def ws(rng, open_):
    return open_ + rng.choice(["", "", "-", "+"] if open_ == "{%" else ["", "", "-"])


def close(rng, close_):
    return rng.choice(["", "", "-"]) + close_


def statement(rng, depth=0):
    r = rng.random()
    pad = rng.choice(["", " ", "\n", "  \n", "\n  ", "x"])
    if depth > 2 or r < 0.35:
        return f"{pad}{ws(rng, '{{')} {expr(rng)} {close(rng, '}}')}{pad}"
    if r < 0.5:
        return (f"{ws(rng, '{%')} if {expr(rng)} {close(rng, '%}')}{statement(rng, depth + 1)}"
                f"{ws(rng, '{%')} else {close(rng, '%}')}{statement(rng, depth + 1)}{ws(rng, '{%')} endif %}}{pad}")
    if r < 0.65:
        it = rng.choice(["l", "ls", "msgs", "d", "s", "range(3)", "el", "d.items()", "none", "undefined_name"])
        var = "k, v" if it == "d.items()" else "loop_var"
        body = rng.choice(["{{ loop.index }}", "{{ loop.first }}{{ loop.last }}", "{{ loop.revindex0 }}",
                           "{{ loop.cycle('a', 'b') }}", "{{ loop.length }}", "{% if loop.index > 1 %}{% break %}{% endif %}",
                           "{% continue %}", "{{ loop.previtem }}"])
        filt = rng.choice(["", "", f" if {expr(rng)}"])
        return (f"{pad}{ws(rng, '{%')} for {var} in {it}{filt} {close(rng, '%}')}{body}{statement(rng, depth + 1)}"
                f"{rng.choice(['', '{% else %}empty'])}{ws(rng, '{%')} endfor {close(rng, '%}')}{pad}")
    if r < 0.75:
        return f"{ws(rng, '{%')} set v{depth} = {expr(rng)} %}}{{{{ v{depth} }}}}{pad}"
    if r < 0.82:
        return ("{% set ns = namespace(acc=0) %}{% for i in range(4) %}{% set ns.acc = ns.acc + i %}{% endfor %}"
                f"{{{{ ns.acc }}}}{pad}")
    if r < 0.88:
        return (f"{{% macro mac(a, b={expr(rng)}) %}}[{{{{ a }}}}|{{{{ b }}}}]{{% endmacro %}}"
                f"{{{{ mac({expr(rng)}) }}}}{{{{ mac(1, b=2) }}}}{pad}")
    if r < 0.93:
        return f"{{% filter {rng.choice(['upper', 'trim', 'title', 'indent(2)'])} %}}{statement(rng, depth + 1)}{{% endfilter %}}"
    if r < 0.95:
        return f"{{% set blk %}}{statement(rng, depth + 1)}{{% endset %}}{{{{ blk|length }}}}{pad}"
    if r < 0.96:
        return f"{{% with w = {expr(rng)} %}}{{{{ w }}}}{statement(rng, depth + 1)}{{% endwith %}}{pad}"
    if r < 0.97:
        return ("{% macro wrap(t) %}<{{ caller(t) }}>{% endmacro %}"
                f"{{% call(v) wrap({expr(rng)}) %}}[{{{{ v }}}}]{{% endcall %}}{pad}")
    if r < 0.98:
        return ("{% for it in [{'n': 'a', 'c': [{'n': 'b', 'c': []}]}, {'n': 'c', 'c': []}] recursive %}"
                "{{ it.n }}{{ loop.depth }}{{ loop.nextitem is defined }}({{ loop(it.c) }}){% endfor %}" + pad)
    if r < 0.99:
        return ("{% set cy = cycler('x', 'y') %}{% set jn = joiner('|') %}{% for i in l %}{{ jn() }}{{ cy.next() }}"
                f"{{{{ loop.changed(i > 1) }}}}{{% endfor %}}{{{{ cy.current }}}}{pad}")
    return "{# a comment #}" + pad + "{% raw %}{{ raw }}{% endraw %}"


def run_expressions(rng, n):
    for i in range(n):
        text_ = "".join(statement(rng) for _ in range(rng.randint(1, 4)))
        fresh = json.loads(json.dumps(VARS))  # jinja2's indent extends a list given to it in place
        ref = reference(text_, fresh["msgs"], None, False, "<s>", "</s>", fresh)
        got = toy_render(text_, VARS["msgs"], None, False, "<s>", "</s>", VARS)
        if isinstance(ref, tuple) and ref[1] == "TemplateSyntaxError":
            # jinja2 refused the text: toy must refuse it too (either stage)
            compare(f"generated template #{i}: {text_!r:.2000}", ref[0], got[0] if isinstance(got, tuple) else got)
        else:
            compare(f"generated template #{i}: {text_!r:.2000}", ref, got)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("templates")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--conversations", type=int, default=20)
    ap.add_argument("--expressions", type=int, default=2000)
    a = ap.parse_args()
    n_templates = run_templates(a.templates, random.Random(a.seed), a.conversations)
    run_expressions(random.Random(a.seed + 1000003), a.expressions)
    print(f"jinja_diff: {n_cases[0]} cases ({n_templates} templates x {6 + a.conversations} conversations x 2, "
          f"{a.expressions} generated templates), {len(failures)} differ from python3-jinja2 {jinja2.__version__}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
