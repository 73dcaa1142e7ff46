"""CSV: one section as one flat table (spreadsheets, pandas.read_csv).

Text from the report is made safe to open in a spreadsheet: its control characters are
shown as escapes (names.printable), and a text cell that starts with a character a
spreadsheet reads as the start of a formula gets a leading single quote, as OWASP's advice
on CSV injection has it. Numbers are written as numbers, negative ones too."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

from ..common.names import printable
from ..comparison.document import FINDING_FIELDS, column_chunks, section_chunks, section_frame
from ..comparison.result import Comparison
from .base import StreamingRenderer

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class CsvRenderer(StreamingRenderer):
    def pieces(self, c: Comparison, *, section: str | None = None, instances: bool = False,
               **_) -> Iterator[str]:
        """The section's CSV a chunk of rows at a time (millions of instances stream); its
        header alone where it has no rows. The ranges section has the heaviest
        MAX_RANGE_FAMILIES families, every one with `instances` (document.range_families;
        the CLI says how many were left out)."""
        section = section or default_section(c)
        if section == "findings":
            return csv_pieces(section_chunks(c, section), FINDING_FIELDS)
        return _frame_pieces(*section_frame(c, section, every_family=instances))


# What CSV writes without --section: the first of these with rows.
DEFAULT_SECTIONS = ("ranges", "timings", "benchmarks", "kernels")


def section_size(c: Comparison, section: str) -> int:
    """How many rows `section` has."""
    return len(c.findings) if section == "findings" else len(
        section_frame(c, section, every_family=True)[0])


def default_section(c: Comparison) -> str:
    """The user's NVTX ranges, else the program's timings, the harness's benchmarks, the
    kernels: the first with rows (kernels where none has)."""
    return next((s for s in DEFAULT_SECTIONS if section_size(c, s)), "kernels")


def write_rows(rows: list[dict]) -> str:
    """Rows of one section as CSV; lists and dicts as JSON in their cell."""
    return "".join(csv_pieces([rows]))


def csv_pieces(chunks: Iterable[list[dict]], header: list[str] | None = None
               ) -> Iterator[str]:
    """write_rows over chunks of rows, the text of each chunk as it is written: the header
    is the first row's keys (without rows: `header`, else nothing at all)."""
    fields = None
    for rows in chunks:
        if not rows:
            continue
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=fields or list(rows[0]), lineterminator="\n")
        if fields is None:
            writer.writeheader()
            fields = writer.fieldnames
        writer.writerows({k: _cell(v) for k, v in row.items()} for row in rows)
        yield out.getvalue()
    if fields is None and header:
        yield ",".join(header) + "\n"


def _frame_pieces(frame, fields: list[str]) -> Iterator[str]:
    """csv_pieces of a frame's rows, each column's cells made at once (document's plain
    values): what csv_pieces writes for the same rows."""
    header = False
    for columns, kinds in column_chunks(frame, fields):
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        if not header:
            writer.writerow(fields)
            header = True
        writer.writerows(zip(*(_text_column(columns[f]) if kinds[f] == "text"
                               else map(_cell, columns[f]) if kinds[f] == "object"
                               else columns[f] for f in fields), strict=True))
        yield out.getvalue()
    if not header:
        yield ",".join(fields) + "\n"


def safe_text(text: str) -> str:
    """A text cell as a spreadsheet may open it: controls escaped, no formula."""
    text = printable(text)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _cell(value: Any) -> Any:
    """A cell's value: lists and dicts as JSON, texts made safe (csv writes None as an
    empty cell itself)."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, allow_nan=False)
    return safe_text(value) if isinstance(value, str) else value


def _text_column(values: list[str | None]) -> list[str | None]:
    """safe_text of each text of a column, worked out once per distinct text (a million
    instances share a few names)."""
    changed = {v: safe for v in set(values) if v is not None and (safe := safe_text(v)) != v}
    return [changed.get(v, v) for v in values] if changed else values
