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
    writer = None
    for rows in chunks:
        if not rows:
            continue
        out = io.StringIO()
        if writer is None:
            writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
        else:
            writer = csv.DictWriter(out, fieldnames=writer.fieldnames, lineterminator="\n")
        writer.writerows({k: json.dumps(v) if isinstance(v, (dict, list)) else
                          ("" if v is None else v) for k, v in row.items()} for row in rows)
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
        writer.writerows(zip(*(_cells(columns[f], kinds[f]) for f in fields), strict=True))
        yield out.getvalue()


def _cells(values: list, kind: str) -> list:
    """A column's cells: csv writes None as an empty cell itself; lists and dicts as JSON."""
    if kind != "object":
        return values
    return [json.dumps(v) if isinstance(v, (dict, list)) else v for v in values]
