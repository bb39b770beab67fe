#!/usr/bin/env python3
"""JSON Schema -> GBNF (src/grammar/json_schema.c) against python3-jsonschema.

For each schema below, toy's grammar (printed by `test_json_schema --gbnf`) is checked
three ways:
  - sound: texts drawn at random from the grammar parse as JSON and jsonschema says they
    are valid (what a sampler following the grammar writes is always valid);
  - complete: instances made at random from the schema, and hand-listed ones, written as
    compact JSON and with spaces, are in the grammar;
  - refusing: hand-listed invalid instances (jsonschema agrees they are) are not.
Membership is decided by a small GBNF recognizer here (memoized, every end position) and,
when the test binary has toy's grammar engine (`--accepts`), by toy too: both must agree
on every text.

usage: json_schema_check.py TEST_JSON_SCHEMA_BINARY [--count N] [--seed S]
"""
import argparse
import json
import random
import subprocess
import sys

import jsonschema

sys.setrecursionlimit(20000)

# ---------------------------------------------------------------- GBNF


class Grammar:
    """llama.cpp's GBNF: rules, literals, classes, groups, |, * + ? {m} {m,} {m,n}."""

    def __init__(self, text):
        self.s = text
        self.i = 0
        self.rules = {}
        self.order = []
        while True:
            self.skip(True)
            if self.i >= len(self.s):
                break
            name = self.name()
            self.skip(False)
            if not self.s.startswith("::=", self.i):
                raise ValueError("expected ::= after %s at %d" % (name, self.i))
            self.i += 3
            if name in self.rules:
                raise ValueError("rule %s defined twice" % name)
            self.rules[name] = self.alternatives(0)
            self.order.append(name)
        for name, e in self.rules.items():
            for ref in self.refs(e):
                if ref not in self.rules:
                    raise ValueError("rule %s refers to undefined %s" % (name, ref))
        self.minlen = self.min_lengths()

    def skip(self, newlines):
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "#":
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
            elif c in " \t" or (newlines and c in "\r\n"):
                self.i += 1
            else:
                break

    def name(self):
        j = self.i
        while self.i < len(self.s) and (self.s[self.i].isalnum() or self.s[self.i] == "-") and self.s[self.i].isascii():
            self.i += 1
        if j == self.i:
            raise ValueError("expected a rule name at %d: %r" % (j, self.s[j:j + 20]))
        return self.s[j:self.i]

    def char(self):
        c = self.s[self.i]
        self.i += 1
        if c != "\\":
            return c
        e = self.s[self.i]
        self.i += 1
        hexlen = {"x": 2, "u": 4, "U": 8}.get(e)
        if hexlen:
            v = int(self.s[self.i:self.i + hexlen], 16)
            self.i += hexlen
            return chr(v)
        m = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]"}
        if e not in m:
            raise ValueError("unknown escape \\%s at %d" % (e, self.i))
        return m[e]

    def alternatives(self, depth):
        alts = [self.sequence(depth)]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            alts.append(self.sequence(depth))
        return alts[0] if len(alts) == 1 else ("alt", alts)

    def sequence(self, depth):
        items = []
        while True:
            self.skip(depth > 0)
            if self.i >= len(self.s) or self.s[self.i] in "|)\n\r":
                break
            c = self.s[self.i]
            if c == '"':
                self.i += 1
                lit = ""
                while self.s[self.i] != '"':
                    lit += self.char()
                self.i += 1
                atom = ("lit", lit)
            elif c == "[":
                self.i += 1
                neg = self.s[self.i] == "^"
                if neg:
                    self.i += 1
                ranges = []
                while self.s[self.i] != "]":
                    lo = self.char()
                    hi = lo
                    if self.s[self.i] == "-" and self.s[self.i + 1] != "]":
                        self.i += 1
                        hi = self.char()
                    ranges.append((ord(lo), ord(hi)))
                self.i += 1
                atom = ("cls", neg, ranges)
            elif c == "(":
                self.i += 1
                atom = self.alternatives(depth + 1)
                self.skip(True)
                if self.s[self.i] != ")":
                    raise ValueError("expected ) at %d" % self.i)
                self.i += 1
            else:
                atom = ("ref", self.name())
            while self.i < len(self.s) and self.s[self.i] in "*+?{":
                q = self.s[self.i]
                self.i += 1
                if q == "*":
                    atom = ("rep", atom, 0, None)
                elif q == "+":
                    atom = ("rep", atom, 1, None)
                elif q == "?":
                    atom = ("rep", atom, 0, 1)
                else:
                    j = self.s.index("}", self.i)
                    body = self.s[self.i:j]
                    self.i = j + 1
                    if "," in body:
                        a, b = body.split(",")
                        atom = ("rep", atom, int(a), int(b) if b.strip() else None)
                    else:
                        atom = ("rep", atom, int(body), int(body))
            items.append(atom)
        return ("seq", items)

    def refs(self, e):
        k = e[0]
        if k == "ref":
            yield e[1]
        elif k in ("seq", "alt"):
            for x in e[1]:
                yield from self.refs(x)
        elif k == "rep":
            yield from self.refs(e[1])

    # -- membership: the set of positions where e can end when it starts at i
    def accepts(self, text, start="root"):
        self.text = text
        self.memo = {}
        return len(text) in self.ends(("ref", start), 0)

    def ends(self, e, i):
        k = e[0]
        t = self.text
        if k == "lit":
            return {i + len(e[1])} if t.startswith(e[1], i) else set()
        if k == "cls":
            if i >= len(t):
                return set()
            return {i + 1} if in_class(e, t[i]) else set()
        if k == "ref":
            key = (e[1], i)
            if key not in self.memo:
                self.memo[key] = set()  # left recursion would read this, never loop
                self.memo[key] = self.ends(self.rules[e[1]], i)
            return self.memo[key]
        if k == "seq":
            pos = {i}
            for x in e[1]:
                pos = set().union(*[self.ends(x, p) for p in pos]) if pos else set()
                if not pos:
                    break
            return pos
        if k == "alt":
            return set().union(*[self.ends(x, i) for x in e[1]])
        if k == "rep":
            sub, lo, hi = e[1], e[2], e[3]
            out = {i} if lo == 0 else set()
            frontier, seen, n = {i}, set(), 0
            while frontier and (hi is None or n < hi):
                n += 1
                frontier = set().union(*[self.ends(sub, p) for p in frontier])
                if n >= lo:
                    frontier -= seen
                    seen |= frontier
                    out |= frontier
            return out
        raise ValueError(k)

    # -- random texts of the language
    def min_lengths(self):
        ml = {r: float("inf") for r in self.rules}

        def m(e):
            k = e[0]
            if k == "lit":
                return len(e[1])
            if k == "cls":
                return 1
            if k == "ref":
                return ml[e[1]]
            if k == "seq":
                return sum(m(x) for x in e[1])
            if k == "alt":
                return min(m(x) for x in e[1])
            return e[2] * m(e[1]) if e[2] else 0

        self._m = m
        changed = True
        while changed:
            changed = False
            for r, e in self.rules.items():
                v = m(e)
                if v < ml[r]:
                    ml[r] = v
                    changed = True
        return ml

    def sample(self, rng, start="root", depth_limit=12):
        out = []

        def g(e, depth):
            k = e[0]
            if k == "lit":
                out.append(e[1])
            elif k == "cls":
                out.append(class_sample(e, rng))
            elif k == "ref":
                g(self.rules[e[1]], depth + 1)
            elif k == "seq":
                for x in e[1]:
                    g(x, depth)
            elif k == "alt":
                alts = e[1]
                if depth > depth_limit:
                    best = min(self._m(x) for x in alts)
                    alts = [x for x in alts if self._m(x) == best]
                g(rng.choice(alts), depth)
            else:
                lo, hi = e[2], e[3]
                top = lo + 3 if hi is None else min(hi, lo + 3 if rng.random() < 0.7 else hi)
                n = lo if depth > depth_limit else rng.randint(lo, max(lo, top))
                for _ in range(n):
                    g(e[1], depth + 1)

        g(("ref", start), 0)
        return "".join(out)


def in_class(e, ch):
    c = ord(ch)
    hit = any(lo <= c <= hi for lo, hi in e[2])
    return hit != e[1]


POOL = [chr(c) for c in range(0x20, 0x7F)] + list("\t\n\x01éß中😀")


def class_sample(e, rng):
    ok = [ch for ch in POOL if in_class(e, ch)]
    if not e[1] and (not ok or rng.random() < 0.5):
        lo, hi = rng.choice(e[2])
        c = rng.randint(lo, min(hi, lo + 200))
        if not (0xD800 <= c <= 0xDFFF):
            return chr(c)
    if not ok:
        raise ValueError("class %r matches nothing in the pool" % (e,))
    return rng.choice(ok)


# ---------------------------------------------------------------- schemas

class Text(str):
    """An instance given as its JSON text, used as it is."""


# (schema, valid instances, invalid instances[, narrower]): random instances are added to
# the valid ones. `narrower` are texts jsonschema accepts that the grammar refuses by
# design (docs/json-schema.md): additional properties where properties are declared,
# exponents with leading zeros, enum values with spaces, keys written with escapes.
CASES = [
    ({"type": "object", "properties": {"name": {"type": "string", "maxLength": 5},
                                       "age": {"type": "integer", "minimum": -15, "maximum": 1234},
                                       "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
      "required": ["name"]},
     [{"name": "ab"}, {"name": "", "age": -15}, {"name": "abcde", "age": 1234, "tags": ["x", "y", "z"]},
      {"name": "a\"\\", "tags": []}],
     [{}, {"name": "abcdef"}, {"name": "a", "age": 1235}, {"name": "a", "age": -16}, 
      {"name": "a", "tags": ["1", "2", "3", "4"]}, {"name": 3}],
     ['{"name":"a","x":1}', '{"age":1,"name":"a"}']),
    ({"type": "integer", "minimum": 0}, [0, 7, 10, 9999999999999999], [-1, 1.5, "1"]),
    ({"type": "integer", "exclusiveMinimum": -100, "exclusiveMaximum": -3}, [-99, -4, -50], [-100, -3, 0, 5]),
    ({"type": "integer", "maximum": 42}, [42, -7, 0, -9999999999999999], [43, 100]),
    ({"type": "integer", "minimum": 1000000, "maximum": 123456789012}, [1000000, 99999999, 123456789012],
     [999999, 123456789013, -5]),
    ({"type": "number", "minimum": 0, "maximum": 1}, [0, 1, 0.5, Text("1.000"), Text("0.0001"), Text("0")],
     [-0.5, 1.01, 2, Text("1.0001")], ["1e-3"]),
    ({"type": "number", "exclusiveMinimum": -3, "exclusiveMaximum": 12}, [-2.999, 0, 11.5, -1, Text("-0.5")],
     [-3, 12, Text("-3.0"), 12.0001, -4], ["-0.0", "-0"]),
    ({"type": "number", "exclusiveMaximum": -20}, [-21, -20.5, -123456.25], [-20, 0, 5, Text("-20.000")]),
    ({"type": "number", "minimum": 100}, [100, 100.5, 99999.25], [99.99, -100, 0]),
    ({"type": "number"}, [0, -1.5, 3e10, Text("2.25e-7"), Text("-0.5E+12"), 17], ["1", None, Text("01"), Text(".5")],
     ["2.25e-07"]),
    ({"type": ["string", "null"], "minLength": 2, "maxLength": 4}, ["ab", "abcd", None, "é中", Text('"\\u00e9\\n"'), Text('"\\u00e9\\ud83d\\ude00"')], ["a", "abcde", 1]),
    ({"enum": ["red", "green", 7, None, {"a": [1, 2]}]}, ["red", 7, None, Text('{"a":[1,2]}')], ["blue", 8, {"a": [1]}],
     ['{"a": [1, 2]}']),
    ({"const": "fixed"}, ["fixed"], ["Fixed", ""]),
    ({"type": "boolean"}, [True, False], [0, "true"]),
    ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": {"type": "boolean"},
      "maxItems": 4}, [[1, "a"], [1, "a", True], [1, "a", True, False]], [["a", 1], [1, "a", 3], [1, "a", True, True, True]]),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3}, [[1, 2], [1, 2, 3]], [[1], [1, 2, 3, 4], [1, "2"]]),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
      "additionalProperties": {"type": "number"}},
     [{}, {"a": 1}, {"b": "x", "zz": 1.5}, {"a": 1, "b": "", "c": 2, "d": 3}, {"ab": 1}, {"": 2}],
     [{"a": "x"}, {"c": "x"}], ['{"z\\u00e9":1}', '{"b":"","a":1}']),
    ({"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": True},
     [{"x": 1, "y": [1, {"z": None}]}, {"y": "s"}, {"xx": True}], [{"x": "no"}]),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
      "required": ["b"]},
     [{"b": 1}, {"a": 1, "b": 2}, {"b": 2, "c": 3}, {"a": 1, "b": 2, "c": 3}], [{"a": 1}, {}, {"a": 1, "c": 3}]),
    ({"type": "object"}, [{}, {"a": 1, "b": [True, None]}], [[], "x"]),
    ({"properties": {"名前": {"type": "string", "maxLength": 2}, "名": {"type": "integer"}}, "required": ["名前"],
      "additionalProperties": {"type": "boolean"}},
     [{"名前": "ab", "名": 3}, {"名前": "", "名前x": True}], [{"名": 1}, {"名前": "abc"}, {"名前": "a", "名": True}]),
    ({}, [1, "x", None, [1, {"a": {}}], {"k": -2.5}], []),
    ({"anyOf": [{"type": "integer", "minimum": 10}, {"type": "string", "maxLength": 1}]}, [10, 500, "a", ""], [9, "ab"]),
    ({"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind", "x"]},
                {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string"}}, "required": ["kind"]}]},
     [{"kind": "a", "x": 1}, {"kind": "b"}, {"kind": "b", "y": "q"}], [{"kind": "a"}, {"kind": "c"}]),
    ({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
     [{"a": 1, "b": "x"}], [{"a": 1}, {"b": "x"}]),
    ({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                          "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
                         "required": ["v", "next"]}},
      "$ref": "#/$defs/node"},
     [{"v": 1, "next": None}, {"v": 1, "next": {"v": 2, "next": None}}], [{"v": 1}, {"v": 1, "next": {"v": 2}}]),
    ({"definitions": {"id": {"type": "string", "format": "uuid"}}, "type": "object",
      "properties": {"id": {"$ref": "#/definitions/id"}}, "required": ["id"]},
     [{"id": "123e4567-e89b-12d3-a456-426614174000"}], [{"id": "123e4567"}]),
    ({"type": "string", "pattern": "^[A-Z][a-z]{1,3}(-\\d+)?$"}, ["Ab", "Abcd-12"], ["ab", "A", "Abcde", "Ab-"]),
    ({"type": "string", "pattern": "^(\\w+\\.)+[a-z]{2,3}$"}, ["a.bc", "x_1.y.com"], ["a.b", ".com"]),
    ({"type": "string", "pattern": "^[^\\s\"]+\\\\?$"}, ["abc", "a\\"], ["a b", "a\"", ""]),
    ({"type": "string", "pattern": "ab|^c$"}, ["xaby", "ab", "c"], ["cc", "a"]),
    ({"type": "string", "pattern": "^a.c$"}, ["abc", "a\"c", "a\\c", "a\tc"], ["a\nc", "ac"]),
    ({"type": "string", "format": "date"}, ["2024-02-29", "2000-02-29", "0001-12-31", "1999-11-30"],
     ["2024-13-01", "24-01-01", "2023-02-29", "1900-02-29", "2023-04-31", "0000-01-01"]),
    ({"type": "string", "format": "date-time"}, ["2024-02-29T12:30:00Z", "2024-02-29T23:59:59.123+05:30"],
     ["2024-02-29 12:30:00Z"]),
    ({"type": "object", "properties": {"q": {"type": "string", "enum": ["a\"b", "c\\d", "é"]},
                                       "n": {"type": ["integer", "null"], "maximum": 3}}, "required": ["q", "n"]},
     [{"q": "a\"b", "n": None}, {"q": "é", "n": -8}], [{"q": "x", "n": 1}, {"q": "é", "n": 4}]),
]


# ---------------------------------------------------------------- instances from a schema


def resolve(root, s):
    while isinstance(s, dict) and "$ref" in s:
        node = root
        for part in s["$ref"][2:].split("/"):
            node = node[part]
        s = node
    return s


def instance(root, s, rng, depth=0):
    """A random valid instance in the form the grammar writes (properties in order)."""
    s = resolve(root, s)
    if s is True or s == {}:
        return rng.choice([1, "x", None, True, [1, 2], {"k": "v"}, -0.5])
    if "const" in s:
        return s["const"]
    if "enum" in s:
        return rng.choice(s["enum"])
    if "anyOf" in s or "oneOf" in s:
        return instance(root, rng.choice(s.get("anyOf") or s["oneOf"]), rng, depth + 1)
    if "allOf" in s:
        merged = {"type": "object", "properties": {}, "required": []}
        for part in s["allOf"]:
            part = resolve(root, part)
            merged["properties"].update(part.get("properties", {}))
            merged["required"] += part.get("required", [])
        return instance(root, merged, rng, depth + 1)
    t = s.get("type")
    if isinstance(t, list):
        t = rng.choice(t)
    if t is None:
        t = "object" if "properties" in s else "string" if "pattern" in s else "object"
    if t == "null":
        return None
    if t == "boolean":
        return rng.random() < 0.5
    if t == "integer":
        lo = s.get("minimum", s.get("exclusiveMinimum", -10 ** 6 - 1) + 1)
        hi = s.get("maximum", s.get("exclusiveMaximum", 10 ** 6 + 1) - 1)
        return rng.choice([lo, hi, rng.randint(lo, hi)])
    if t == "number":
        if any(k in s for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
            lo = s.get("minimum", s.get("exclusiveMinimum", -10 ** 6))
            hi = s.get("maximum", s.get("exclusiveMaximum", 10 ** 6))
            return rng.choice([lo, hi, round(rng.uniform(lo, hi), rng.randint(0, 4)) + 0.0])  # no -0.0
        return rng.choice([0, 5, -3, 0.25, -1e-3, 12345.5, 1e21])
    if t == "string":
        if "format" in s or "pattern" in s:
            return None  # the hand-listed instances cover these
        lo, hi = s.get("minLength", 0), s.get("maxLength", 8)
        chars = "abcXYZ \"\\/\n\t\x01é中" + ("😀" if "maxLength" not in s else "")
        return "".join(rng.choice(chars) for _ in range(rng.randint(lo, hi)))
    if t == "array":
        prefix = s.get("prefixItems", [])
        lo, hi = s.get("minItems", 0), s.get("maxItems", len(prefix) + 3)
        n = rng.randint(max(lo, len(prefix)), max(hi, len(prefix)) if "items" in s or not prefix else len(prefix))
        out = [instance(root, prefix[i], rng, depth + 1) if i < len(prefix) else
               instance(root, s.get("items", True), rng, depth + 1) for i in range(n)]
        return out
    if t == "object":
        out = {}
        req = s.get("required", [])
        for k, v in s.get("properties", {}).items():
            if k in req or (depth < 4 and rng.random() < 0.5):
                out[k] = instance(root, v, rng, depth + 1)
        add = s.get("additionalProperties", "properties" not in s)
        if add is not False and rng.random() < 0.5:
            for k in ["extra", "z\u00e9", "a b"]:
                if k not in s.get("properties", {}):
                    out[k] = instance(root, add, rng, depth + 1)
        return out
    raise ValueError(t)


def has_structured_enum(s):
    return any(isinstance(x, (dict, list)) for x in s.get("enum", [])) if isinstance(s, dict) else False


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--count", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    engine = subprocess.run([args.binary, "--has-engine"], capture_output=True).returncode == 0
    failures = 0
    n_texts = 0

    def bad(msg):
        nonlocal failures
        failures += 1
        if failures <= 30:
            print("FAIL:", msg)

    for ci, case in enumerate(CASES):
        schema, valid, invalid = case[:3]
        narrower = case[3] if len(case) > 3 else []
        sj = json.dumps(schema)
        r = subprocess.run([args.binary, "--gbnf"], input=sj.encode(), capture_output=True)
        if r.returncode != 0:
            bad("case %d: no grammar: %s" % (ci, r.stderr.decode()))
            continue
        gbnf = r.stdout.decode()
        try:
            g = Grammar(gbnf)
        except ValueError as e:
            bad("case %d: grammar does not parse: %s\n%s" % (ci, e, gbnf))
            continue
        validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        texts = []  # (text, expected membership)
        # sound: the grammar's own texts
        for _ in range(args.count):
            t = g.sample(rng)
            try:
                v = json.loads(t)
            except ValueError as e:
                bad("case %d: grammar wrote invalid JSON %r: %s" % (ci, t, e))
                continue
            errs = list(validator.iter_errors(v))
            if errs:
                bad("case %d: grammar wrote %r, invalid: %s" % (ci, t, errs[0].message))
            texts.append((t, True))
        # complete: listed and random instances, compact and spaced
        vals = list(valid)
        for _ in range(args.count // 3):
            try:
                v = instance(schema, schema, rng)
            except (ValueError, KeyError):
                continue
            if v is not None or schema.get("type") in ("null", ["string", "null"]) or "enum" in schema or schema == {}:
                vals.append(v)
        for v in vals:
            if isinstance(v, Text):
                if not validator.is_valid(json.loads(v)):
                    bad("case %d: listed valid text %r is invalid for jsonschema" % (ci, v))
                texts.append((str(v), True))
                continue
            if not validator.is_valid(v):
                if v not in valid:
                    continue  # the random generator is rougher than the schema (e.g. uniqueness)
                bad("case %d: listed valid instance %r is invalid for jsonschema" % (ci, v))
                continue
            forms = [json.dumps(v, ensure_ascii=False, separators=(",", ":"))]
            if not has_structured_enum(schema):  # enum values are written compact
                forms += [json.dumps(v, ensure_ascii=False), json.dumps(v, ensure_ascii=False, indent=1)]
            texts += [(t, True) for t in forms]
        for t in narrower:
            if not validator.is_valid(json.loads(t)):
                bad("case %d: narrower text %r is invalid for jsonschema" % (ci, t))
            texts.append((t, False))
        for v in invalid:
            if isinstance(v, Text):
                texts.append((str(v), False))
                continue
            if validator.is_valid(v):
                bad("case %d: listed invalid instance %r is valid for jsonschema" % (ci, v))
                continue
            texts.append((json.dumps(v, ensure_ascii=False, separators=(",", ":")), False))
            texts.append((json.dumps(v), False))
        for t, want in texts:
            got = g.accepts(t)
            if got != want:
                bad("case %d (%s): %r %s by the grammar\n%s" % (ci, sj, t, "refused" if want else "accepted", gbnf))
        if engine:
            r = subprocess.run([args.binary, "--accepts"], input=(gbnf + "\0" + "\0".join(t for t, _ in texts)).encode(),
                               capture_output=True)
            verdicts = r.stdout.decode().split()
            if r.returncode != 0 or len(verdicts) != len(texts):
                bad("case %d: toy's engine failed: %s" % (ci, r.stderr.decode()))
            else:
                for (t, want), v in zip(texts, verdicts):
                    if (v == "1") != want:
                        bad("case %d: toy's engine %s %r" % (ci, "refused" if want else "accepted", t))
        n_texts += len(texts)
    print("json_schema_check: %d schemas, %d texts, engine %s, %d failure(s)" %
          (len(CASES), n_texts, "toy and python" if engine else "python only", failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
