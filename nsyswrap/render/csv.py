"""CSV: one section as one flat table (spreadsheets, pandas.read_csv)."""

from __future__ import annotations

import csv
import io
import json

from ..compare import Comparison
from .document import section_rows


class CsvRenderer:
    def render(self, c: Comparison, *, section: str | None = None, **_) -> str:
        section = section or ("ranges" if not c.analysis.ranges.empty else "kernels")
        return write_rows(section_rows(c, section))


def write_rows(rows: list[dict]) -> str:
    """Rows of one section as CSV; lists and dicts as JSON in their cell."""
    out = io.StringIO()
    if not rows:
        return ""
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else
                         ("" if v is None else v) for k, v in row.items()})
    return out.getvalue()
