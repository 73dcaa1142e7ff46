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
        doc = {**document(c, every_family=instances), **(extra or {})}
        if not doc:
            yield "{}\n"
            return
        yield from _document_pieces(doc)
        if not instances:
            yield "\n}\n"
            return
        for key, section in STREAMED_SECTIONS:
            yield f',\n  "{key}": '
            yield from _json_array(*section_frame(c, section))
        yield "\n}\n"


def _document_pieces(doc: dict[str, Any]) -> Iterator[str]:
    """json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) in pieces, a section at
    a time, without the closing brace ("\\n}"), for a document of one key or more. A list
    of records (the benchmark table: a row per harness run, 222 k at 10 M kernels with a
    run in every step) is laid out a column at a time (_records_pieces), where json's
    indented encoder, in Python, took ~45 µs a row, and is never one string; the rest as
    json lays it out. A nested dump is the same text indented one level more: JSON text
    holds no raw newline."""
    opening = "{\n"
    for key, value in doc.items():
        yield f"{opening}  {_dumps(key)}: "
        opening = ",\n"
        if isinstance(value, list) and _records(value):
            yield from _records_pieces(value)
        else:
            yield _dumps(value).replace("\n", "\n  ")


def _dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)


# Rows of a list of records laid out at once: their texts, column by column, are ~3x the
# text's own size, so the rows go a part at a time.
RECORD_ROWS = 4096


def _records(rows: list[Any]) -> bool:
    """Whether `rows` are dicts of the same text keys (the records _records_pieces lays
    out), at least one."""
    if not rows or not all(type(r) is dict for r in rows):
        return False
    fields = list(rows[0])
    return bool(fields) and all(type(f) is str for f in fields) and all(
        list(r) == fields for r in rows)


def _records_pieces(rows: list[dict[str, Any]]) -> Iterator[str]:
    """json.dumps(rows, indent=2, ...) one level deep: each column's values made JSON text
    at once (_cell_texts), then each row from a template, RECORD_ROWS rows at a time."""
    fields = list(rows[0])
    row = _row_template(fields)
    opening = "[\n"
    for at in range(0, len(rows), RECORD_ROWS):
        part = rows[at:at + RECORD_ROWS]
        texts = [_cell_texts([r[f] for r in part]) for f in fields]
        yield opening + ",\n".join(row % values for values in zip(*texts, strict=True))
        opening = ",\n"
    yield "\n  ]"


def _row_template(fields: list[str]) -> str:
    """A record one level deep as json.dumps(indent=2) lays it out, a %s for each field's
    value (the field names' own % doubled)."""
    keys = [_text(f).replace("%", "%%") for f in fields]
    return "    {\n" + ",\n".join(f"      {k}: %s" for k in keys) + "\n    }"


def _cell_texts(values: list[Any]) -> list[str]:
    """Each value as json.dumps lays it out as a field of a record one level deep: text,
    numbers and null as json writes them (float and int by their own __repr__, as json
    does), a list of texts item by item, anything else by json.dumps, indented."""
    out = []
    for v in values:
        kind = type(v)
        if kind is str:
            out.append(_text(v))
        elif v is None:
            out.append("null")
        elif kind is bool:
            out.append("true" if v else "false")
        elif kind is int:
            out.append(int.__repr__(v))
        elif kind is float and math.isfinite(v):
            out.append(float.__repr__(v))
        elif kind is list and all(type(x) is str for x in v):
            out.append("[\n" + ",\n".join("        " + _text(x) for x in v) + "\n      ]"
                       if v else "[]")
        else:  # NaN (refused, as json refuses it), a subclass, an object: json's own
            out.append(_dumps(v).replace("\n", "\n      "))
    return out


def _json_array(frame, fields: list[str]) -> Iterator[str]:
    """Rows of `frame` as json.dumps(indent=2) lays out a list of records one level deep:
    each column's values made JSON text at once, then each row from a template."""
    row = _row_template(fields)
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
