"""Renderers: each turns a Comparison into text in one format; none knows about SQL."""

from __future__ import annotations

from ..compare import Comparison
from .csv import CsvRenderer
from .html import HtmlRenderer
from .json import JsonRenderer
from .markdown import MarkdownRenderer
from .table import TableRenderer
from .trace import TraceRenderer

RENDERERS = {
    "table": TableRenderer,
    "json": JsonRenderer,
    "csv": CsvRenderer,
    "markdown": MarkdownRenderer,
    "html": HtmlRenderer,
    "trace": TraceRenderer,
}


def render(c: Comparison, fmt: str = "table", **options) -> str:
    return RENDERERS[fmt]().render(c, **options)
