#!/usr/bin/env python3
"""Chat records from the King James text (scripts/kjv-corpus.sh's kjv-train.txt), for
teaching the bundled model to answer a turn with a few verses and end it.

Each record is one user turn and one assistant turn, drawn from a chapter (a blank line
ends a chapter in the corpus) at a seeded random verse:
- a verse, answered by the one to three verses that follow it;
- a verse's opening words, answered by the rest of that verse and up to two more;
- a question or request in a few fixed forms naming a word of the verse ("Tell me of the
  LORD", "What of Moses?", ...), answered by that verse and up to two more.

usage: kjv-chat.py KJV_TRAIN.TXT OUT.jsonl [--records N] [--seed S]
"""
import argparse
import json
import random
import re

ASKS = ["Tell me of {w}.", "What of {w}?", "Speak of {w}.", "What saith the scripture of {w}?",
        "Who was {w}?", "{w}", "Read to me of {w}.", "Say something about {w}."]


def chapters(path):
    chapter = []
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if line:
            chapter.append(line)
        elif chapter:
            yield chapter
            chapter = []
    if chapter:
        yield chapter


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("text")
    ap.add_argument("out")
    ap.add_argument("--records", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    chs = [c for c in chapters(a.text) if len(c) >= 4]
    with open(a.out, "w", encoding="utf-8") as out:
        for _ in range(a.records):
            ch = rng.choice(chs)
            i = rng.randrange(len(ch) - 1)
            kind = rng.randrange(3)
            n = rng.randint(1, 3)
            if kind == 0:
                user, reply = ch[i], ch[i + 1:i + 1 + n]
            elif kind == 1:
                words = ch[i].split()
                k = rng.randint(2, max(2, min(6, len(words) - 1)))
                user = " ".join(words[:k])
                reply = [" ".join(words[k:])] + ch[i + 1:i + n]
            else:
                names = re.findall(r"\b[A-Z][a-z]+\b|\bLORD\b|\bGod\b", ch[i])
                names = [w for w in names if w not in ("And", "The", "Then", "But", "For", "Now", "I", "O")]
                if not names:
                    continue
                user = rng.choice(ASKS).format(w=rng.choice(names))
                reply = ch[i:i + n]
            reply = " ".join(r for r in reply if r)
            if reply:
                out.write(json.dumps({"messages": [{"role": "user", "content": user},
                                                   {"role": "assistant", "content": reply}]}) + "\n")


if __name__ == "__main__":
    main()
