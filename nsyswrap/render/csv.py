"""CSV: one section as one flat table (spreadsheets, pandas.read_csv)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator

from ..compare import Comparison
from .document import column_chunks, section_chunks, section_frame


class CsvRenderer:
    def render(self, c: Comparison, **options) -> str:
        return "".join(self.pieces(c, **options))

    def pieces(self, c: Comparison, *, section: str | None = None, **_) -> Iterator[str]:
        """The section's CSV a chunk of rows at a time (millions of instances stream)."""
        section = section or ("ranges" if not c.analysis.ranges.empty else "kernels")
        if section == "findings":
            return csv_pieces(section_chunks(c, section))
        return _frame_pieces(*section_frame(c, section))


def write_rows(rows: list[dict]) -> str:
    """Rows of one section as CSV; lists and dicts as JSON in their cell."""
    return "".join(csv_pieces([rows]))


def csv_pieces(chunks: Iterable[list[dict]]) -> Iterator[str]:
    """write_rows over chunks of rows, the text of each chunk as it is written: the header
    is the first row's keys (nothing at all without rows)."""
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
        writer.writerows(zip(*(columns[f] if kinds[f] != "object" else map(_cell, columns[f])
                               for f in fields), strict=True))
        yield out.getvalue()


def _cell(value):
    """A cell's value: lists and dicts as JSON (csv writes None as an empty cell itself)."""
    return json.dumps(value) if isinstance(value, (dict, list)) else value
