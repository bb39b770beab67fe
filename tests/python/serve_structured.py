#!/usr/bin/env python3
"""toy serve's structured output over HTTP, on random-weight fixture models at temperature
1, where only the constraint can make an answer valid.

usage: serve_structured.py TOY FIXTURES_DIR ["MODEL ..."]

For models of each tokenizer kind (SentencePiece, byte-level BPE of several vocabularies):
- response_format json_schema (strict) with objects, arrays, enums, integer ranges,
  $ref/$defs, anyOf, patterns and formats: every choice finishes ("stop") and its text
  validates against the schema (python3-jsonschema, formats checked);
- llama-server's json_schema field on /v1/completions: the same;
- llama-server's grammar field: every answer is in the grammar's language;
- response_format json_object: a finished answer is a JSON object;
- logit_bias: a bias of +100 makes a token the greedy one, -100 (or false) bans it;
- a constrained answer is the same streamed, alone, and beside six other requests, and
  so is a forced tool call;
- errors: a bad grammar names line and column, an unsupported keyword under strict.
"""
import json
import os
import re
import sys
import threading

import jsonschema

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/, helpers.py
from helpers import Server  # noqa: E402

TOY, FIXTURES = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "email": {"type": "string", "pattern": "^[a-z]{1,8}@[a-z]{1,8}\\.(com|org)$"},
        "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 3},
        "active": {"type": "boolean"},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}
NESTED = {
    "$defs": {
        "point": {"type": "object", "properties": {"x": {"type": "integer", "minimum": -50, "maximum": 50},
                                                   "y": {"type": "number"}},
                  "required": ["x", "y"], "additionalProperties": False},
    },
    "type": "object",
    "properties": {
        "id": {"type": "string", "format": "uuid"},
        "when": {"type": "string", "format": "date"},
        "shape": {"anyOf": [{"$ref": "#/$defs/point"},
                            {"type": "array", "items": {"$ref": "#/$defs/point"}, "maxItems": 2},
                            {"type": "null"}]},
        "kind": {"const": "polygon"},
    },
    "required": ["id", "when", "shape", "kind"],
    "additionalProperties": False,
}
SCALARS = {"type": "array", "items": {"anyOf": [{"type": "integer", "minimum": 10, "maximum": 999},
                                                {"type": "string", "maxLength": 5}, {"type": "boolean"}]},
           "minItems": 2, "maxItems": 4}
SCHEMAS = [("person", PERSON), ("nested", NESTED), ("scalars", SCALARS)]

# a list of small numbers: [n, n, ...]
LIST_GBNF = 'root ::= "[" num ("," " "? num){0,4} "]"\nnum ::= "-"? [1-9] [0-9]{0,2}\n'
LIST_RE = re.compile(r"\[-?[1-9][0-9]{0,2}(, ?-?[1-9][0-9]{0,2}){0,4}\]")

FORMATS = jsonschema.FormatChecker()


def validates(text, schema):
    try:
        jsonschema.validate(json.loads(text), schema, format_checker=FORMATS)
        return True
    except (ValueError, jsonschema.ValidationError) as e:
        print(f"   not valid: {text!r}: {e}".splitlines()[0])
        return False


def chat(messages="Describe it.", **extra):
    return dict({"messages": [{"role": "user", "content": messages}], "temperature": 1, "max_tokens": 600}, **extra)


def response_format(name, schema, strict=True):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": strict}}


def test_model(model):
    srv = Server(TOY, f"{FIXTURES}/models/{model}.gguf", "--parallel", "4")
    try:
        for name, schema in SCHEMAS:
            for seed in range(3):
                st, r = srv.post(chat(seed=seed, n=2, response_format=response_format(name, schema)))
                check(st == 200, f"{model} {name} seed {seed}: {st} {r}")
                for c in r.get("choices", []):
                    text = c["message"]["content"]
                    check(c["finish_reason"] == "stop", f"{model} {name} seed {seed}: finish {c['finish_reason']}: {text!r}")
                    check(validates(text, schema), f"{model} {name} seed {seed}: {text!r}")
        # llama-server's json_schema on the legacy completions
        st, r = srv.post({"prompt": "JSON:", "temperature": 1, "max_tokens": 600, "seed": 5, "json_schema": PERSON},
                         "/v1/completions")
        check(st == 200 and r["choices"][0]["finish_reason"] == "stop" and validates(r["choices"][0]["text"], PERSON),
              f"{model} completions json_schema: {st} {r}")
        # a GBNF grammar
        for seed in range(4):
            st, r = srv.post({"prompt": "Numbers:", "temperature": 1, "max_tokens": 200, "seed": seed,
                              "grammar": LIST_GBNF}, "/v1/completions")
            text = r["choices"][0]["text"] if st == 200 else None
            check(st == 200 and r["choices"][0]["finish_reason"] == "stop" and LIST_RE.fullmatch(text or ""),
                  f"{model} grammar seed {seed}: {st} {text!r}")
        # a grammar whose text is complete ends the answer even with ignore_eos
        st, r = srv.post({"prompt": "x", "grammar": 'root ::= "ab" | "abc"', "ignore_eos": True, "max_tokens": 10,
                          "temperature": 1, "seed": 2}, "/v1/completions")
        check(st == 200 and r["choices"][0]["text"] in ("ab", "abc") and r["choices"][0]["finish_reason"] == "stop",
              f"{model} ignore_eos with a complete grammar: {st} {r}")
        # any JSON object: finished answers parse as objects
        st, r = srv.post(chat(seed=1, max_tokens=300, response_format={"type": "json_object"}))
        c = r["choices"][0] if st == 200 else {}
        text = (c.get("message") or {}).get("content") or ""
        if c.get("finish_reason") == "stop":
            check(isinstance(json.loads(text), dict), f"{model} json_object: {text!r}")
        else:
            check(c.get("finish_reason") == "length" and text.lstrip().startswith("{"), f"{model} json_object: {st} {r}")
        # logit_bias: two tokens promoted by +100, one wins; banned by -100 the other does
        base = {"prompt": "The", "temperature": 0, "max_tokens": 1}
        t, u = 300, 301
        st, r = srv.post(dict(base, logit_bias={str(t): 100, str(u): 100}), "/v1/completions")
        pieces = srv.post({"tokens": [t]}, "/detokenize"), srv.post({"tokens": [u]}, "/detokenize")
        # (/detokenize drops SentencePiece's leading space of a text's first token)
        won, texts = r["choices"][0]["text"].strip(), [p[1]["content"].strip() for p in pieces]
        check(won in texts and texts[0] != texts[1], f"{model} logit_bias +100: {r} vs {texts}")
        loser = u if won == texts[0] else t
        st, r = srv.post(dict(base, logit_bias=[[t, 100], [u, 100], [t if loser == u else u, False]]), "/v1/completions")
        check(r["choices"][0]["text"].strip() == texts[1 if loser == u else 0],
              f"{model} logit_bias false bans: {r} vs {texts}")
        # the same constrained answer (and forced tool call) streamed, alone and under load
        body = chat(seed=11, response_format=response_format("person", PERSON))
        st, alone = srv.post(body)
        want = alone["choices"][0]["message"]["content"]
        tool_body = chat(seed=12, tool_choice="required", tools=[
            {"type": "function", "function": {"name": "add", "parameters": {
                "type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                                                 "b": {"type": "integer", "minimum": 0, "maximum": 99}},
                "required": ["a", "b"], "additionalProperties": False}}}])
        st, tool_alone = srv.post(tool_body)
        want_calls = [(t["function"]["name"], t["function"]["arguments"])
                      for t in tool_alone["choices"][0]["message"].get("tool_calls") or []]
        check(st == 200 and want_calls and tool_alone["choices"][0]["finish_reason"] == "tool_calls",
              f"{model}: forced call alone: {st} {tool_alone}")
        st, events = srv.stream(body)
        streamed = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
        check(streamed == want, f"{model}: streamed {streamed!r} != {want!r}")
        results = {}

        def run(i, b):
            results[i] = srv.post(b)

        others = [chat(seed=20 + i, max_tokens=80) if i % 2 else chat(seed=20 + i, response_format=response_format(
            "nested", NESTED)) for i in range(6)]
        threads = [threading.Thread(target=run, args=(i, b)) for i, b in enumerate([body, tool_body] + others)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        got = results[0][1]["choices"][0]["message"]["content"] if results[0][0] == 200 else None
        check(got == want, f"{model}: under load {got!r} != alone {want!r}")
        got_calls = [(t["function"]["name"], t["function"]["arguments"])
                     for t in results[1][1]["choices"][0]["message"].get("tool_calls") or []] if results[1][0] == 200 else None
        check(got_calls == want_calls, f"{model}: forced call under load {got_calls} != alone {want_calls}")
        # errors
        st, r = srv.post(chat(grammar='root ::= "a"\nx ::= [b-'))
        check(st == 400 and r["error"]["param"] == "grammar" and "line 2, column 7" in r["error"]["message"],
              f"{model} bad grammar: {st} {r}")
        st, r = srv.post(chat(response_format=response_format("s", {"type": "string", "contentMediaType": "x/y"})))
        check(st == 400 and "contentMediaType" in r["error"]["message"], f"{model} strict: {st} {r}")
    finally:
        check(srv.stop() == 0, f"{model}: toy serve did not exit 0")


# the fixture models, or those named by a third argument (a bare clone's models of toy init)
MODELS = sys.argv[3].split() if len(sys.argv) > 3 else [
    "llama-spm-q8_0", "llama3-bpe-f16", "qwen2-f16", "phi3-f16", "gemma2-f32", "smollm2-f16"]
for model in MODELS:
    if not os.path.exists(f"{FIXTURES}/models/{model}.gguf"):
        print(f"{model}: not among the fixtures, skipped")
        continue
    test_model(model)
    print(f"{model}: done")

print(f"serve_structured: {len(failures)} failure(s)" if failures else "serve_structured: all passed")
sys.exit(1 if failures else 0)
