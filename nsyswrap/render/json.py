"""JSON for CI: the `nsyswrap.compare/1` document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ..compare import Comparison
from .document import column_chunks, document, section_frame

# Sections streamed after the document's own (--instances): millions of rows are written a
# chunk at a time, never held as one list of dicts or one string.
STREAMED_SECTIONS = ("instances", "iterations")
# A flat record as json.dumps(indent=2) lays it out two levels deep, by the C encoder:
# the items' separator carries the newline and the indent.
_ROW = json.JSONEncoder(ensure_ascii=False, separators=(",\n      ", ": "))


class JsonRenderer:
    def render(self, c: Comparison, **options) -> str:
        return "".join(self.pieces(c, **options))

    def pieces(self, c: Comparison, *, instances: bool = False, **_) -> Iterator[str]:
        """The document's text in pieces: with `instances`, exactly what json.dumps(indent=2)
        gives for the document with its instance and iteration rows, a chunk at a time."""
        text = json.dumps(document(c), indent=2, ensure_ascii=False)
        if not instances:
            yield text + "\n"
            return
        yield text[:-len("\n}")]  # the document's closing brace comes after the rows
        for section in STREAMED_SECTIONS:
            yield f',\n  "{section}": '
            yield from _json_array(*section_frame(c, section))
        yield "\n}\n"


def _json_array(frame, fields: list[str]) -> Iterator[str]:
    """Rows of `frame` as json.dumps lays out a list of records one level deep."""
    first = True
    for columns, scalar in column_chunks(frame, fields):
        rows = (dict(zip(fields, row, strict=True))
                for row in zip(*columns.values(), strict=True))
        encode = _flat_record if scalar else _nested_record
        yield ("[\n" if first else ",\n") + ",\n".join(map(encode, rows))
        first = False
    yield "[]" if first else "\n  ]"


def _flat_record(row: dict[str, Any]) -> str:
    return "    {\n      " + _ROW.encode(row)[1:-1] + "\n    }"


def _nested_record(row: dict[str, Any]) -> str:
    return "    " + json.dumps(row, indent=2, ensure_ascii=False).replace("\n", "\n    ")
