#!/usr/bin/env python3
"""Differential tokenizer test: toy's token ids against llama.cpp's llama-tokenize.

    python3 tests/python/tokenizer_diff.py TOY [--count N] [--seed S] [--vocab FILE]... [--show K]
                                        [--jobs J] [--dump]

Generates N strings (default 400) from seed S (default 1): Latin with accents both
precomposed and decomposed, Greek, Cyrillic, Arabic, Hebrew, Devanagari, Thai, CJK and
Hangul text, emoji sequences (ZWJ, skin tones, flags, keycaps, tags), stacked combining
marks, zero-width and bidi controls, whitespace runs (spaces, tabs, newlines, CRLF,
U+00A0, U+3000, ...), numbers, C / Python / JSON code, punctuation and contractions,
rare code points (often ones the latest Unicode versions added), bytes that are not UTF-8,
and random mixes of all of these (--dump prints them). String i depends only on (S, i),
so a larger N tests the same strings and more. Each string is tokenized by toy
(`TOY tokenize --json --no-special`) and by llama.cpp (`llama-tokenize --ids --no-bos
--no-parse-special --no-escape`), without BOS/EOS and without special-token parsing,
and the ids must be equal.

The vocabularies (unless --vocab names them): every GGUF in the fixtures' vocab/, one
model of models/ per distinct tokenizer (the models share a few), and toy's bundled
models/toy-kjv.gguf; J of them (default: the number of CPUs) are tested at once.
Printed: per vocabulary the number of strings and disagreements, and for the first K
disagreements (default 5) the string (Python escapes for non-ASCII code points;
\\udcXX stands for the invalid byte XX), toy's ids and llama.cpp's. Exit status: 0 when
all agree, 1 on any disagreement (or a tool that fails), 2 on a usage error, 77
(ctest's skip) when the fixtures or llama.cpp are not there.

Both tools load the vocabulary on each call, so the strings are sent in batches: joined
by a control token's text (BOS or EOS where they serve) and tokenized with special
tokens parsed, then cut at that token's id. llama.cpp tokenizes the text between two
special tokens on its own, exactly as if it were the whole prompt; a few strings with
leading and trailing whitespace, tokenized alone as well, check that for each
vocabulary before the batch is trusted. A string that contains the text of a control or
unknown token (which parse_special would turn into that token) is tokenized alone, and
skipped (the note says how many) if it starts with '-', which toy would read as an option.

Environment: TOY_FIXTURES (default ../shared/fixtures beside the source tree) and
TOY_LLAMA_CPP (default ../shared/llama.cpp, with bin/llama-tokenize and its libraries).

ctest runs this through tests/cli/cli_tokenizer_diff.sh with a few hundred strings per
vocabulary; for a long run from the source tree:

    python3 tests/python/tokenizer_diff.py build/toy --count 5000
    python3 tests/python/tokenizer_diff.py build/toy --count 20000 --seed 7 \\
        --vocab ../shared/fixtures/vocab/ggml-vocab-bert-bge.gguf
"""
import argparse
import concurrent.futures
import glob
import hashlib
import json
import mmap
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/python/ -> the source tree

# ---------------------------------------------------------------- GGUF metadata

_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class Metadata:
    """The key/value section of a GGUF file, read through mmap (the tensors are never
    touched). get(key) decodes a value; raw[key] is the bytes it was stored as."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if self.m[:4] != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        self.pos = 8
        self.take("Q")  # tensor count
        self.spans, self.raw = {}, {}
        for _ in range(self.take("Q")):
            key = self.string().decode()
            typ = self.take("I")
            start = self.pos
            self.skip(typ)
            self.spans[key] = (typ, start)
            self.raw[key] = self.m[start:self.pos]

    def get(self, key, default=None):
        if key not in self.spans:
            return default
        typ, self.pos = self.spans[key]
        return self.value(typ)

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.m, self.pos)[0]
        self.pos += struct.calcsize("<" + fmt)
        return v

    def string(self):
        n = self.take("Q")
        s = self.m[self.pos:self.pos + n]
        self.pos += n
        return s

    def skip(self, typ):
        if typ == 8:
            self.pos += 8 + self.take("Q")
        elif typ == 9:
            sub, n = self.take("I"), self.take("Q")
            if sub in _SCALAR:
                self.pos += n * struct.calcsize("<" + _SCALAR[sub])
            elif sub == 8:
                m, pos, unpack = self.m, self.pos, struct.Struct("<Q").unpack_from
                for _ in range(n):
                    pos += 8 + unpack(m, pos)[0]
                self.pos = pos
            else:
                for _ in range(n):
                    self.skip(sub)
        else:
            self.pos += struct.calcsize("<" + _SCALAR[typ])

    def value(self, typ):
        if typ == 8:
            return self.string()
        if typ == 9:
            sub, n = self.take("I"), self.take("Q")
            if sub in _SCALAR:  # a numeric array: read it in one piece
                fmt = "<%d%s" % (n, _SCALAR[sub])
                v = list(struct.unpack_from(fmt, self.m, self.pos))
                self.pos += struct.calcsize(fmt)
                return v
            return [self.value(sub) for _ in range(n)]
        return self.take(_SCALAR[typ])


class Vocab:
    """What the comparison needs to know of a vocabulary: its control/unknown tokens'
    texts (parse_special turns them into tokens) and which of them can join a batch."""

    def __init__(self, path):
        meta = Metadata(path)
        self.path, self.name = path, os.path.basename(path)
        tokens = meta.get("tokenizer.ggml.tokens", [])
        types = meta.get("tokenizer.ggml.token_type", [1] * len(tokens))
        # types 2 (unknown) and 3 (control); llama.cpp also makes some tokens control by
        # their text (<|eot_id|>, <fim_prefix>, <EOT>, ...), so every <...> token counts too
        looks_special = re.compile(rb"<[^<>]+>").fullmatch
        texts = {i: t.decode("utf-8", "replace") for i, (t, ty) in enumerate(zip(tokens, types))
                 if t and (ty in (2, 3) or looks_special(t))}
        self.special = set(texts.values())
        self.special_re = re.compile("|".join(re.escape(t) for t in sorted(self.special, key=len, reverse=True))) \
            if self.special else None
        controls = [i for i, ty in enumerate(types) if ty == 3 and i in texts]
        first = [meta.get("tokenizer.ggml.bos_token_id"), meta.get("tokenizer.ggml.eos_token_id")]
        ordered = [i for i in first if i in controls] + [i for i in controls if i not in first]
        self.separators = [(i, texts[i]) for i in dict.fromkeys(ordered)][:4]

    def has_special(self, s):
        return bool(self.special_re and self.special_re.search(s))


def tokenizer_identity(meta):
    """A hash of every tokenizer.* value except the chat template: two models with the
    same identity tokenize alike."""
    h = hashlib.sha256()
    for k in sorted(meta.raw):
        if k.startswith("tokenizer.") and k != "tokenizer.chat_template":
            h.update(k.encode() + b"\0" + meta.raw[k])
    return h.hexdigest()


def default_vocabs(fixtures):
    paths = sorted(glob.glob(os.path.join(fixtures, "vocab", "*.gguf")))
    by_identity = {}
    for p in sorted(glob.glob(os.path.join(fixtures, "models", "*.gguf"))):
        if p.endswith(".ref.gguf"):
            continue
        ident = tokenizer_identity(Metadata(p))
        if ident not in by_identity or os.path.getsize(p) < os.path.getsize(by_identity[ident]):
            by_identity[ident] = p
    paths += sorted(by_identity.values())
    kjv = os.path.join(SRC, "models", "toy-kjv.gguf")
    if os.path.exists(kjv):
        paths.append(kjv)
    return paths

# ---------------------------------------------------------------- the strings


def cps(*ranges):
    """Code points of inclusive ranges, as a list of characters."""
    return [chr(c) for a, b in ranges for c in range(a, b + 1)]


LATIN_WORDS = [
    "café", "naïve", "résumé", "Ñandú", "Zürich", "façade", "Ærøskøbing", "Łódź", "Dvořák",
    "São Paulo", "İstanbul", "straße", "STRASSE", "crème brûlée", "Ångström", "señor", "jalapeño",
    "coöperate", "Þingvellir", "Œuvre", "ﬁnance", "ǅemal", "Ǆ", "ĳssel", "Việt Nam", "Nguyễn",
    "Ελλάδα", "Øresund", "Saint-Étienne", "piñata", "déjà vu", "über", "ÀÉÎÕÜ", "àéîõü", "ŝĝĥĵ",
    "Ṩṩ", "ḍḥṃṇṛṣṭ", "ǖǘǚǜ", "ȘȚșț", "ḁ", "ẞ", "ſ", "Ω", "K", "Å", "µ", "ŉ", "ǰ", "ΐ",
    "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Hello", "WORLD", "tokenizer",
    "internationalization", "antidisestablishmentarianism", "a", "I", "x",
]
SCRIPTS = {
    "greek": (["Καλημέρα", "κόσμε", "ΣΊΣΥΦΟΣ", "Ἀθῆναι", "ὦ", "λόγος", "ΑΒΓΔ", "ϐϑϕϰ"],
              cps((0x0386, 0x03CE), (0x1F00, 0x1F15), (0x1F70, 0x1F7D))),
    "cyrillic": (["Привет", "мир", "Ёжик", "ЎЇЄ", "съешь", "ещё", "этих", "мягких", "БУЛОК"],
                 cps((0x0400, 0x04FF))),
    "arabic": (["مرحبا", "بالعالم", "مُحَمَّد", "اللّٰه", "العربية", "كتاب", "ﷺ", "ﻻ"],
               cps((0x0620, 0x065F), (0x0671, 0x06D3))),
    "hebrew": (["שלום", "שָׁלוֹם", "עברית", "בְּרֵאשִׁית", "ﬠ"], cps((0x05D0, 0x05EA), (0x05B0, 0x05C2))),
    "devanagari": (["नमस्ते", "दुनिया", "क्षत्रिय", "हिन्दी", "संस्कृतम्", "ॐ", "क़"], cps((0x0900, 0x097F))),
    "thai": (["สวัสดีครับ", "ภาษาไทย", "กรุงเทพมหานคร", "ๆ", "ฯลฯ"], cps((0x0E01, 0x0E3A), (0x0E40, 0x0E5B))),
    "cjk": (["日本語のテキスト", "中文测试", "漢字", "東京", "ｶﾀｶﾅ", "𠀀𠮷𪚥", "㐀㐁", "々〆〇", "豈更",
             "ひらがな", "カタカナ", "、。「」"],
            cps((0x4E00, 0x9FFF), (0x3041, 0x3096), (0x30A1, 0x30FA), (0x3400, 0x4DBF), (0xF900, 0xFAFF),
                (0x20000, 0x2A6DF), (0x2B740, 0x2B81D), (0x2B820, 0x2B920), (0xFF66, 0xFF9D))),
    "hangul": (["한국어", "텍스트", "안녕하세요", "\u1112\u1161\u11ab", "ㅋㅋㅋ", "뷁"],
               cps((0xAC00, 0xD7A3), (0x1100, 0x11FF), (0x3131, 0x318E))),
}
EMOJI = cps((0x1F600, 0x1F64F), (0x1F300, 0x1F3FA), (0x1F900, 0x1F9FF), (0x2600, 0x26FF), (0x1FA70, 0x1FAFF))
EMOJI_SEQUENCES = [
    "👨\u200d👩\u200d👧\u200d👦", "🏳️\u200d🌈", "👩🏽\u200d💻", "🧑\u200d🤝\u200d🧑", "❤️\u200d🔥",
    "👁️\u200d🗨️", "🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F", "🇺🇸", "🇯🇵",
    "🇪🇺", "#️⃣", "*️⃣", "1️⃣", "🔟", "☺︎", "☺️", "👍🏻👍🏼👍🏽👍🏾👍🏿", "🤷\u200d♀️", "🦙",
]
SKIN = cps((0x1F3FB, 0x1F3FF))
REGIONAL = cps((0x1F1E6, 0x1F1FF))
MARKS = cps((0x0300, 0x036F), (0x1AB0, 0x1ABE), (0x1DC0, 0x1DFF), (0x20D0, 0x20F0), (0xFE20, 0xFE2F),
            (0x0483, 0x0489), (0x0591, 0x05AF), (0x064B, 0x065F), (0x093A, 0x094F), (0x0E31, 0x0E3A))
INVISIBLE = cps((0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x2069)) + ["\ufeff", "\u00ad",
                                                                                            "\u034f", "\u180e"]
WHITESPACE = [" ", " ", " ", "  ", "\t", "\n", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2009", "\u202f",
              "\u2002", "\u200a", "\x0b", "\x0c", "\u0085", "\u2028", "\u2029", "\u1680", "\u205f"]
PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + list("…—–«»“”‘’¿¡。、！？「」【】・·†‡§¶‰′″‹›„‚•©®™°±×÷€£¥¢")
CONTRACTIONS = ["don't", "can't", "I'M", "WE'VE", "they'll", "it's", "you're", "I'd", "O'Neil", "'s", "'t",
                "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "rock'n'roll", "''", "' '"]
DIGITS = cps((0x30, 0x39)) * 4 + cps((0x0660, 0x0669), (0x0966, 0x096F), (0xFF10, 0xFF19), (0x0E50, 0x0E59))
NUMERIC = ["½", "¼", "¾", "²", "³", "¹", "⁰", "₀", "₁", "Ⅻ", "ⅻ", "Ⅳ", "〇", "①", "⑳", "𝟘𝟙", "٫", "٬"]
IDENTS = ["x", "i", "n", "buf", "len", "count", "value", "result", "self", "data", "key", "tmp", "fooBar", "my_var",
          "MAX_LEN", "π", "naïve", "_", "__init__", "HTTPServer", "x2", "arr"]
RARE_RANGES = [(0x00A0, 0x024F), (0x0250, 0x02FF), (0x0370, 0x1FFF), (0x2000, 0x2BFF), (0x2C00, 0x2FFF),
               (0x3000, 0x4DBF), (0xA000, 0xABFF), (0xD7B0, 0xD7FF), (0xE000, 0xF8FF), (0xF900, 0xFFFD),
               (0x10000, 0x1FFFF), (0x20000, 0x3134F), (0xE0000, 0xE01EF), (0xF0000, 0x10FFFD)]


def word_latin(r):
    w = r.choice(LATIN_WORDS)
    w = {0: w, 1: w.lower(), 2: w.upper(), 3: w.title()}[r.randrange(4)]
    return unicodedata.normalize(r.choice(["NFC", "NFD", "NFC", "NFKD"]), w)


def word_script(r, name):
    words, chars = SCRIPTS[name]
    if r.random() < 0.6:
        return r.choice(words)
    return "".join(r.choice(chars) for _ in range(r.randint(1, 8)))


def gen_latin(r):
    return sep_join(r, [word_latin(r) for _ in range(r.randint(1, 8))], " ")


def gen_script(r):
    name = r.choice(list(SCRIPTS))
    return sep_join(r, [word_script(r, name) for _ in range(r.randint(1, 6))], " ")


def gen_emoji(r):
    out = []
    for _ in range(r.randint(1, 6)):
        k = r.randrange(6)
        if k == 0:
            out.append(r.choice(EMOJI_SEQUENCES))
        elif k == 1:
            out.append(r.choice(EMOJI) + r.choice(SKIN))
        elif k == 2:
            out.append(r.choice(REGIONAL) + r.choice(REGIONAL))
        elif k == 3:
            out.append(r.choice("0123456789#*") + r.choice(["\ufe0f\u20e3", "\u20e3", "\ufe0f"]))
        elif k == 4:
            out.append("\u200d".join(r.choice(EMOJI) for _ in range(r.randint(2, 4))))
        else:
            out.append(r.choice(EMOJI) + r.choice(["", "\ufe0f", "\ufe0e"]))
    return sep_join(r, out, r.choice(["", " ", ""]))


def gen_marks(r):
    out = []
    for _ in range(r.randint(1, 6)):
        base = r.choice([word_latin(r), r.choice("aeiouAEIOUnxyz0123 .-"), r.choice(EMOJI),
                         word_script(r, r.choice(list(SCRIPTS)))])
        out.append(base + "".join(r.choice(MARKS) for _ in range(r.randint(1, 4))))
    return sep_join(r, out, r.choice([" ", ""]))


def gen_invisible(r):
    words = [r.choice([word_latin(r), r.choice(IDENTS), word_script(r, r.choice(list(SCRIPTS)))])
             for _ in range(r.randint(1, 5))]
    out = []
    for w in words:
        k = r.randrange(len(w) + 1)
        out.append(w[:k] + "".join(r.choice(INVISIBLE) for _ in range(r.randint(1, 3))) + w[k:])
    return sep_join(r, out, r.choice([" ", "", r.choice(INVISIBLE)]))


def gen_whitespace(r):
    out = []
    for _ in range(r.randint(1, 6)):
        run = "".join(r.choice(WHITESPACE) for _ in range(r.randint(1, 6)))
        if r.random() < 0.2:
            run = " " * r.randint(2, 40)
        out.append(run)
        if r.random() < 0.75:
            out.append(r.choice([word_latin(r), r.choice(IDENTS), r.choice(PUNCT), gen_number(r)]))
    return "".join(out)


def gen_number(r):
    k = r.randrange(10)
    d = lambda n: "".join(r.choice("0123456789") for _ in range(n))
    if k == 0:
        return d(r.randint(1, 24))
    if k == 1:
        return d(r.randint(1, 6)) + "." + d(r.randint(1, 8))
    if k == 2:
        return ",".join([str(r.randint(1, 999))] + [d(3) for _ in range(r.randint(1, 4))]) + r.choice(["", ".00"])
    if k == 3:
        return r.choice(["-", "+", "−", ""]) + d(r.randint(1, 3)) + "." + d(2) + "e" + r.choice(["-", "+", ""]) + d(2)
    if k == 4:
        return "0x" + "".join(r.choice("0123456789abcdefABCDEF") for _ in range(r.randint(1, 16)))
    if k == 5:
        return "".join(r.choice(DIGITS) for _ in range(r.randint(1, 10)))
    if k == 6:
        return r.choice(NUMERIC) + r.choice(["", d(2), " ", "%"])
    if k == 7:
        return "%s-%s-%s %s:%s:%s" % (d(4), d(2), d(2), d(2), d(2), d(2))
    if k == 8:
        return r.choice(["v", "", "V"]) + ".".join(d(r.randint(1, 3)) for _ in range(r.randint(2, 4)))
    return r.choice(["$", "€", "£", "¥", ""]) + d(r.randint(1, 7)) + r.choice(["%", "k", "M", "th", "nd", "", " USD"])


def gen_code(r):
    i, j = r.choice(IDENTS), r.choice(IDENTS)
    n, ind = r.randint(0, 99999), r.choice(["    ", "\t", "  ", "        "])
    k = r.randrange(8)
    if k == 0:
        return "#include <stdio.h>\n\nint main(int argc, char **argv) {\n%sprintf(\"%%d\\n\", %s);\n%sreturn 0;\n}\n" % (
            ind, i, ind)
    if k == 1:
        return "for (size_t %s = 0; %s < %d; %s++) {\n%s%s[%s] += %s->%s * 0x%X;\n}" % (i, i, n, i, ind, j, i, j, i, n)
    if k == 2:
        return "def %s(%s, %s=None):\n%s\"\"\"Docstring: %s.\"\"\"\n%sreturn [%s**2 for %s in range(%d) if %s %% 2 == 0]\n" % (
            i, j, i, ind, word_latin(r), ind, i, i, n, i)
    if k == 3:
        return "class %s(object):\n%sdef __init__(self):\n%s%sself.%s = {'%s': %d, \"%s\": [1, 2.5, None]}\n" % (
            i.title(), ind, ind, ind, j, i, n, j)
    if k == 4:
        return json.dumps({i: n, j: [word_latin(r), None, True, r.random()], "nested": {"k": "v\n\t\"q\""}},
                          indent=r.choice([None, 2, 4]), ensure_ascii=r.random() < 0.5)
    if k == 5:
        return "if (%s != NULL && %s->%s >= %d) { /* %s */ %s <<= 2; } else %s ^= ~%s; // done" % (
            i, i, j, n, word_latin(r), i, j, i)
    if k == 6:
        return "$ grep -rn '%s' src/ | awk -F: '{print $1}' > /tmp/%s.txt && echo \"ok\" || exit 1" % (i, j)
    return "x = lambda a, *b, **c: a@b if a else (b, c)[%d:%d:-1]\nprint(f\"{%s!r:>10}\")" % (n % 10, n % 7, i)


def gen_punct(r):
    out = []
    for _ in range(r.randint(1, 8)):
        k = r.randrange(4)
        if k == 0:
            out.append("".join(r.choice(PUNCT) for _ in range(r.randint(1, 5))))
        elif k == 1:
            out.append(r.choice(CONTRACTIONS))
        elif k == 2:
            out.append(word_latin(r) + r.choice(PUNCT))
        else:
            out.append(r.choice(["...", "?!", "!!!", "--", "---", "((", "))", "==>", "<-", "''", "\"\"", "``"]))
    return sep_join(r, out, " ")


# characters of the latest Unicode versions (15.0, 15.1, 16.0), where two programs'
# tables differ first: Kawi, Nag Mundari, Kaktovik numerals, Cyrillic Extended-D, CJK
# Extensions H and I, Egyptian format controls; Garay, Todhri, Tulu-Tigalari, Sunuwar,
# Kirat Rai, Ol Onal, Gurung Khema, Legacy Computing Supplement
RECENT_RANGES = [(0x11F00, 0x11F59), (0x1E4D0, 0x1E4F9), (0x1D2C0, 0x1D2D3), (0x1E030, 0x1E08F), (0x31350, 0x323AF),
                 (0x2EBF0, 0x2EE5D), (0x13439, 0x1343F), (0x0CF3, 0x0CF3), (0x0ECE, 0x0ECE), (0x2FFC, 0x2FFF),
                 (0x31EF, 0x31EF), (0x10D40, 0x10D8F), (0x105C0, 0x105F3), (0x11380, 0x113E2), (0x11BC0, 0x11BF9),
                 (0x16D40, 0x16D79), (0x1E5D0, 0x1E5FF), (0x16100, 0x16139), (0x1CC00, 0x1CCF9)]


def gen_rare(r):
    out = []
    for _ in range(r.randint(1, 10)):
        a, b = r.choice(RECENT_RANGES if r.random() < 0.4 else RARE_RANGES)
        out.append(chr(r.randint(a, b)))
        if r.random() < 0.3:  # a letter or digit before or after: where \p{L} and \p{N} matter
            out[-1] = r.choice(["a", "1", " ", "x2"]) + out[-1] if r.random() < 0.5 else out[-1] + r.choice("a1 .")
    return sep_join(r, out, r.choice(["", " "]))


CHAR_POOLS = [cps((0x61, 0x7A), (0x41, 0x5A)), list("0123456789"), PUNCT, ["'", "'", "'s", "'T", "'re", "'LL"],
              WHITESPACE, cps((0xC0, 0x17F)), MARKS, INVISIBLE, DIGITS + NUMERIC, EMOJI + SKIN + REGIONAL,
              SCRIPTS["cjk"][1], SCRIPTS["hangul"][1], SCRIPTS["arabic"][1] + SCRIPTS["devanagari"][1],
              cps(*RECENT_RANGES)]


def gen_chars(r):
    """Characters of every kind in random order: what the pre-tokenizers' regexes see
    least in ordinary text (a mark after a space, digits against letters, ...)."""
    pools = r.sample(CHAR_POOLS, r.randint(2, 5))
    return "".join(r.choice(r.choice(pools)) for _ in range(r.randint(1, 30)))


GENERATORS = [gen_chars, gen_latin, gen_script, gen_emoji, gen_marks, gen_invisible, gen_whitespace, gen_number,
              gen_code, gen_punct, gen_rare]


INVALID_UTF8 = [b"\x80", b"\xbf", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xff", b"\xfe", b"\xc0\xaf",
                b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xc3\x28", b"\xe2\x28\xa1", b"\xf8\x88\x80\x80\x80"]


def gen_invalid(r):
    """Text with bytes that are not UTF-8 (each held as U+DC80..U+DCFF, Python's
    surrogateescape, and written back as the byte)."""
    s = r.choice(GENERATORS)(r)
    for _ in range(r.randint(1, 3)):
        k = r.randrange(len(s) + 1)
        s = s[:k] + r.choice(INVALID_UTF8).decode("utf-8", "surrogateescape") + s[k:]
    return s


def gen_mix(r):
    parts = [r.choice(GENERATORS)(r) for _ in range(r.randint(2, 5))]
    return sep_join(r, parts, r.choice(["", " ", "\n", r.choice(WHITESPACE), r.choice(PUNCT)]))


def sep_join(r, parts, sep):
    """parts joined by sep, now and then by another separator."""
    out = parts[0]
    for p in parts[1:]:
        out += (sep if r.random() < 0.8 else r.choice(WHITESPACE + ["", "-", "_", "/"])) + p
    return out


def generate(seed, i):
    """String i of seed: the kinds in turn, a mix of several every fourth."""
    r = random.Random("%s:%d" % (seed, i))
    kinds = GENERATORS + [gen_chars, gen_invalid, gen_mix, gen_mix, gen_mix, gen_mix]
    s = kinds[i % len(kinds)](r)
    if r.random() < 0.1:  # leading / trailing whitespace
        s = r.choice(WHITESPACE) + s
    if r.random() < 0.1:
        s += r.choice(WHITESPACE)
    s = s.replace("\0", "")  # toy takes the text as a command-line argument
    return s or "x"

# ---------------------------------------------------------------- running the tools

# toy takes the text as one argument (Linux allows 128 KiB per argument)
MAX_ARG_BYTES = 100_000
# leading/trailing whitespace next to the separator: what a batch could get wrong
CALIBRATION = ["  two leading spaces", "trailing\n", "\t tab\r\n", " ", "\n\nx y  "]


class ToolError(Exception):
    pass


class Runner:
    def __init__(self, toy, llama_tokenize, tmpdir):
        self.toy, self.llama, self.tmpdir = toy, llama_tokenize, tmpdir
        self.env = dict(os.environ)
        lib = os.path.dirname(llama_tokenize)
        self.env["LD_LIBRARY_PATH"] = lib + (":" + self.env["LD_LIBRARY_PATH"] if self.env.get("LD_LIBRARY_PATH") else "")
        self.n_calls = 0
        self.lock = threading.Lock()

    def _run(self, cmd, what):
        with self.lock:
            self.n_calls += 1
        r = subprocess.run(cmd, capture_output=True, env=self.env)
        if r.returncode != 0:
            raise ToolError("%s exited %d: %s" % (what, r.returncode, r.stderr.decode(errors="replace").strip()[-400:]))
        lines = r.stdout.decode(errors="replace").strip().splitlines()
        try:
            return json.loads(lines[-1]) if lines else []
        except ValueError:
            raise ToolError("%s printed no id list: %r" % (what, r.stdout[-200:]))

    def llama_ids(self, vocab, text, special):
        fd, path = tempfile.mkstemp(dir=self.tmpdir, suffix=".txt")
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8", "surrogateescape"))
        try:
            cmd = [self.llama, "-m", vocab, "-f", path, "--ids", "--no-bos", "--no-escape", "--log-disable"]
            return self._run(cmd + ([] if special else ["--no-parse-special"]), "llama-tokenize")
        finally:
            os.unlink(path)

    def toy_ids(self, vocab, text, special):
        if text.startswith("-") and text != "-":
            raise ToolError("toy tokenize cannot take a TEXT that starts with '-'")
        cmd = [self.toy, "tokenize", "-m", vocab, "--json", "--no-special"]
        return self._run(cmd + (["--parse-special"] if special else []) + [text], "toy tokenize")


def split_at(ids, sep_id, n):
    """ids = [sep] s1 [sep] s2 ... [sep] sn -> [s1, ..., sn], or None if not n parts."""
    if not ids or ids[0] != sep_id:
        return None
    parts = [[]]
    for t in ids[1:]:
        if t == sep_id:
            parts.append([])
        else:
            parts[-1].append(t)
    return parts if len(parts) == n else None


def batched(tool, vocab, sep, strings, max_bytes=None):
    """Each string's ids from batched calls of tool (Runner.toy_ids or llama_ids); a
    batch that does not come back in len(batch) parts is run string by string."""
    sep_id, sep_text = sep
    out, chunk, size = [], [], 0

    def flush():
        if not chunk:
            return
        try:
            parts = split_at(tool(vocab, "".join(sep_text + s for s in chunk), True), sep_id, len(chunk))
        except ToolError:
            parts = None
        out.extend(parts if parts is not None else [single(tool, vocab, s) for s in chunk])
        chunk.clear()

    for s in strings:
        n = len(sep_text.encode()) + len(s.encode("utf-8", "surrogateescape"))
        if max_bytes and size + n > max_bytes:
            flush()
            size = 0
        chunk.append(s)
        size += n
    flush()
    return out


def single(tool, vocab, s):
    try:
        return tool(vocab, s, False)
    except ToolError as e:
        return "error: %s" % e


def compare_vocab(runner, vocab, strings):
    """(number compared, [(string, toy ids, llama ids)], note)."""
    calib = [(s, single(runner.llama_ids, vocab.path, s)) for s in CALIBRATION]
    sep = None
    for cand in vocab.separators:
        got = split_at(runner.llama_ids(vocab.path, "".join(cand[1] + s for s, _ in calib), True), cand[0], len(calib))
        if got == [ids for _, ids in calib]:
            sep = cand
            break
    results = {s: (single(runner.toy_ids, vocab.path, s), ids) for s, ids in calib}
    notes = [] if sep else ["no control token separates a batch exactly: every string alone (slow)"]

    together = [s for s in strings if sep and not vocab.has_special(s)]
    if together:
        want = batched(runner.llama_ids, vocab.path, sep, together)
        got = batched(runner.toy_ids, vocab.path, sep, together, MAX_ARG_BYTES)
        results.update((s, (g, w)) for s, g, w in zip(together, got, want))
    alone = [s for s in strings if s not in results]
    # toy tokenize reads a TEXT that starts with '-' as an option: such a string can only
    # be given after a batch's separator
    skipped = [s for s in alone if s[:1] == "-" and s != "-"]
    if skipped:
        notes.append("%d strings that start with '-' skipped (they cannot join a batch)" % len(skipped))
    for s in alone:
        if s not in skipped:
            results[s] = (single(runner.toy_ids, vocab.path, s), single(runner.llama_ids, vocab.path, s))
    bad = [(s, g, w) for s, (g, w) in results.items() if g != w]
    return len(results), bad, "; ".join(notes)


def fmt_ids(ids, limit=40):
    if isinstance(ids, str):
        return ids
    return "[" + ", ".join(map(str, ids[:limit])) + (", ... (%d in all)" % len(ids) if len(ids) > limit else "") + "]"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("toy", help="the toy executable")
    ap.add_argument("--count", type=int, default=400, help="strings per vocabulary (default 400)")
    ap.add_argument("--seed", default="1", help="seed of the strings (default 1)")
    ap.add_argument("--vocab", action="append", default=[], help="a GGUF file to test (repeatable)")
    ap.add_argument("--show", type=int, default=5, help="disagreements printed per vocabulary (default 5)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="vocabularies tested at once")
    ap.add_argument("--dump", action="store_true", help="print the strings (escaped) and exit")
    a = ap.parse_args()
    if a.count < 1:
        ap.error("--count must be at least 1")

    strings = list(dict.fromkeys(generate(a.seed, i) for i in range(a.count)))
    if a.dump:
        for s in strings:
            print(ascii(s))
        return 0

    fixtures = os.environ.get("TOY_FIXTURES") or os.path.join(SRC, "..", "shared", "fixtures")
    llama_dir = os.environ.get("TOY_LLAMA_CPP") or os.path.join(SRC, "..", "shared", "llama.cpp")
    llama = os.path.join(llama_dir, "bin", "llama-tokenize")
    if not a.vocab and not os.path.isfile(os.path.join(fixtures, "README.md")):
        print("SKIP: fixtures not found at %s (set TOY_FIXTURES)" % fixtures)
        return 77
    if not os.access(llama, os.X_OK):
        print("SKIP: llama.cpp's llama-tokenize not found at %s (set TOY_LLAMA_CPP)" % llama)
        return 77
    if not os.access(a.toy, os.X_OK):
        ap.error("%s is not an executable" % a.toy)

    paths = a.vocab or default_vocabs(fixtures)
    t0 = time.time()
    failed = False
    total = total_bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(os.path.abspath(a.toy), llama, tmp)
        with concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as pool:
            futures = [pool.submit(lambda p: compare_vocab(runner, Vocab(p), strings), p) for p in paths]
            for path, f in zip(paths, futures):
                name = os.path.basename(path)
                try:
                    n, bad, note = f.result()
                except (ToolError, OSError, ValueError) as e:
                    print("%-34s error: %s" % (name, e))
                    failed = True
                    continue
                total, total_bad = total + n, total_bad + len(bad)
                print("%-34s %6d strings, %4d disagree%s" % (name, n, len(bad), "  (" + note + ")" if note else ""))
                for s, g, w in bad[:a.show]:
                    print("    %s\n      toy       %s\n      llama.cpp %s" % (ascii(s), fmt_ids(g), fmt_ids(w)))
                if len(bad) > a.show:
                    print("    ... and %d more" % (len(bad) - a.show))
                sys.stdout.flush()
    print("%d vocabularies, %d strings, %d disagreements (%d tool calls, %.1f s)" % (
        len(paths), total, total_bad, runner.n_calls, time.time() - t0))
    return 1 if failed or total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
