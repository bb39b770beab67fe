#!/usr/bin/env bash
# The bundled model chats (tests/bundled_chat.py): of 20 varied prompts, at least 18
# replies end by themselves within 200 tokens. Needs only the repository.
set -u
exec python3 "$TOY_SOURCE_DIR/tests/bundled_chat.py" "$1" "$TOY_SOURCE_DIR/models/toy-kjv.gguf"
