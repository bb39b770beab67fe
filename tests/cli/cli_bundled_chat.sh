#!/usr/bin/env bash
# The bundled model chats (tests/python/bundled_chat.py): of 20 varied prompts, at least 18
# replies end by themselves within 200 tokens. Needs only the repository.
. "$(dirname "$0")/../lib.sh"
python3 "$tests/python/bundled_chat.py" "$toy" "$bundled"
