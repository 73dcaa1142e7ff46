"""Renderers for many reports: ranks side by side (`nsyswrap.ranks/1`) and before/after
(`nsyswrap.diff/1`). Each format has one module; rows come from document.py and cells from
views.py, so every format shows the same numbers. None knows about SQL."""

from __future__ import annotations

from .csv import DiffCsv, RanksCsv
from .html import DiffHtml, RanksHtml
from .json import DiffJson, RanksJson
from .markdown import DiffMarkdown, RanksMarkdown
from .table import DiffTable, RanksTable

RANKS_RENDERERS = {"table": RanksTable, "json": RanksJson, "csv": RanksCsv,
                   "markdown": RanksMarkdown, "html": RanksHtml}
DIFF_RENDERERS = {"table": DiffTable, "json": DiffJson, "csv": DiffCsv,
                  "markdown": DiffMarkdown, "html": DiffHtml}


def render_ranks(a, fmt: str = "table", **options) -> str:
    return RANKS_RENDERERS[fmt]().render(a, **options)


def render_diff(d, fmt: str = "table", **options) -> str:
    return DIFF_RENDERERS[fmt]().render(d, **options)
