"""JSON for CI: the `nsyswrap.compare/1` document. Strict JSON: a number that is not
finite is null (document.plain), and json.dumps is told to refuse one that slips through."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from ..comparison.document import column_chunks, document, section_frame
from ..comparison.result import Comparison
from .base import StreamingRenderer

# Sections streamed after the document's own (--instances), as (key, section): millions of
# rows are written a chunk at a time, never held as one list of dicts or one string.
STREAMED_SECTIONS = (("instances", "instances"), ("iterations", "iterations"),
                     ("user_timing_instances", "timing_instances"))
# json.dumps' text for a str (ensure_ascii=False), in C.
_text = json.encoder.encode_basestring


class JsonRenderer(StreamingRenderer):
    def pieces(self, c: Comparison, *, instances: bool = False,
               extra: dict[str, Any] | None = None, **_) -> Iterator[str]:
        """The document's text in pieces: with `instances`, exactly what json.dumps(indent=2)
        gives for the document with every range family and its instance, iteration and
        timing-instance rows, a chunk at a time. `extra`: sections (plain JSON values) added
        after the document's own, as a run's analysis.json adds `samples`."""
        text = json.dumps({**document(c, every_family=instances), **(extra or {})}, indent=2,
                          ensure_ascii=False, allow_nan=False)
        if not instances:
            yield text + "\n"
            return
        yield text[:-len("\n}")]  # the document's closing brace comes after the rows
        for key, section in STREAMED_SECTIONS:
            yield f',\n  "{key}": '
            yield from _json_array(*section_frame(c, section))
        yield "\n}\n"


def _json_array(frame, fields: list[str]) -> Iterator[str]:
    """Rows of `frame` as json.dumps(indent=2) lays out a list of records one level deep:
    each column's values made JSON text at once, then each row from a template."""
    row = "    {\n" + ",\n".join(f"      {json.dumps(f)}: %s" for f in fields) + "\n    }"
    first = True
    for columns, kinds in column_chunks(frame, fields):
        texts = [_json_texts(columns[f], kinds[f]) for f in fields]
        if any(t is None for t in texts):  # lists or dicts in a cell
            rows = (_nested_record(dict(zip(fields, values, strict=True)))
                    for values in zip(*columns.values(), strict=True))
        else:
            rows = (row % values for values in zip(*texts, strict=True))
        yield ("[\n" if first else ",\n") + ",\n".join(rows)
        first = False
    yield "[]" if first else "\n  ]"


def _json_texts(values: list[Any], kind: str) -> list[str] | None:
    """json.dumps of each value (document.plain_column's, of `kind`); None when some value
    is a list or dict (laid out over several lines)."""
    if kind == "int":
        return list(map(str, values))
    if kind == "float":
        # str is float.__repr__, json's text for finite floats; plain_column made the others
        # None, and one that slipped through fails here rather than write NaN.
        return ["null" if v is None else str(v) if math.isfinite(v)
                else json.dumps(v, allow_nan=False) for v in values]
    if kind == "text":
        return ["null" if v is None else _text(v) for v in values]
    if any(isinstance(v, (dict, list)) for v in values):
        return None
    return [json.dumps(v, ensure_ascii=False, allow_nan=False) for v in values]


def _nested_record(row: dict[str, Any]) -> str:
    return "    " + json.dumps(row, indent=2, ensure_ascii=False,
                               allow_nan=False).replace("\n", "\n    ")
