"""CSV: one section as one flat table (ranks: ranks|families|collectives|findings; diff:
rows|findings)."""

from __future__ import annotations

from ..base import Renderer
from ..csv import write_rows
from .document import diff_section, ranks_section


class RanksCsv(Renderer):
    def render(self, a, *, section: str | None = None, **_) -> str:
        return write_rows(ranks_section(a, section or "ranks"))


class DiffCsv(Renderer):
    def render(self, d, *, section: str | None = None, **_) -> str:
        return write_rows(diff_section(d, section or "rows"))
