"""Long JSON marks written in parts: the harness's results and the runner's records alike.
nsys keeps an NVTX message whole, but long JSON is split so that no tool has to cope with
one huge string; the readers join the parts again (read/json_input.py: MarkParts).

Standard library only: the harness imports it, and the runner's hooks (event_hooks.py,
which import nothing of nsyswrap) load it by path."""

from __future__ import annotations

import json

MARK_CHUNK_CHARS = 30_000


def mark_texts(text: str, part_schema: str, key: str) -> list[str]:
    """The marks that carry `text`: itself when it is short, else its parts, each
    {"nsyswrap": part_schema, "key": key, "part": i, "parts": n, "text": its piece}; `key`
    tells this text's parts from those of any other."""
    if len(text) <= MARK_CHUNK_CHARS:
        return [text]
    chunks = [text[i: i + MARK_CHUNK_CHARS] for i in range(0, len(text), MARK_CHUNK_CHARS)]
    return [json.dumps({"nsyswrap": part_schema, "key": key, "part": i, "parts": len(chunks),
                        "text": chunk}, separators=(",", ":"))
            for i, chunk in enumerate(chunks)]
