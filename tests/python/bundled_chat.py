#!/usr/bin/env python3
"""The bundled model chats: of 20 varied prompts, each a new conversation through toy
serve's chat endpoint with the default sampling (seeded), at least 18 replies end by
themselves (finish_reason "stop": the model's end-of-turn token) within 200 tokens.

usage: bundled_chat.py TOY MODEL
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/, helpers.py
from helpers import Server  # noqa: E402

PROMPTS = ["Who made the heaven and the earth?", "Tell me of Moses.", "What is love?", "Hello", "Sing a psalm.",
           "And it came to pass", "Who was David?", "What of the LORD?", "Blessed are the meek", "Where is Egypt?",
           "Give me a proverb.", "In the beginning", "What shall I do?", "Speak of Jerusalem.", "Why do men die?",
           "The LORD is my shepherd", "Tell me a story.", "Who is Jesus?", "What did Noah build?", "Amen."]

srv = Server(sys.argv[1], sys.argv[2], "--parallel", "4")
ended, lengths = 0, []
try:
    for i, prompt in enumerate(PROMPTS):
        status, r = srv.post({"messages": [{"role": "user", "content": prompt}], "max_tokens": 200, "seed": i})
        if status != 200:
            raise SystemExit(f"FAIL: {prompt!r}: status {status}: {r}")
        ended += r["choices"][0]["finish_reason"] == "stop"
        lengths.append(r["usage"]["completion_tokens"])
finally:
    rc = srv.stop()
print(f"bundled_chat: {ended} of {len(PROMPTS)} replies ended by themselves within 200 tokens (lengths {lengths})")
if ended < 18 or rc != 0:
    print(f"FAIL: expected at least 18 (toy serve exit status {rc})")
    sys.exit(1)
