"""Renderers: each turns a Comparison into text in one format; none knows about SQL. The
formats and what the CLI needs to know of them before any renderer loads are here (no
pandas: tests/test_cli.py); each renderer class is imported when its format is asked for."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .base import Renderer

if TYPE_CHECKING:
    from ..comparison.result import Comparison


@dataclass(frozen=True)
class Format:
    name: str
    output_file_extension: str
    # A file to open elsewhere (a browser, Perfetto), not text to read here: the CLI asks
    # for -o on a terminal.
    makes_file: bool
    # The renderer class, imported on use: the table renderer pulls in rich and the HTML
    # one its page builder, neither of which `--format json` needs (start-up is most of a
    # small report's time).
    load: Callable[[], type[Renderer]]


def _table() -> type[Renderer]:
    from .table import TableRenderer

    return TableRenderer


def _json() -> type[Renderer]:
    from .json import JsonRenderer

    return JsonRenderer


def _csv() -> type[Renderer]:
    from .csv import CsvRenderer

    return CsvRenderer


def _markdown() -> type[Renderer]:
    from .markdown import MarkdownRenderer

    return MarkdownRenderer


def _html() -> type[Renderer]:
    from .html import HtmlRenderer

    return HtmlRenderer


def _trace() -> type[Renderer]:
    from .trace import TraceRenderer

    return TraceRenderer


FORMATS = {f.name: f for f in (
    Format("table", "txt", makes_file=False, load=_table),
    Format("json", "json", makes_file=False, load=_json),
    Format("csv", "csv", makes_file=False, load=_csv),
    Format("markdown", "md", makes_file=False, load=_markdown),
    Format("html", "html", makes_file=True, load=_html),
    Format("trace", "json", makes_file=True, load=_trace),
)}

# The single-report document's sections (document.py), in order; csv writes one.
SECTIONS = ("kernels", "ranges", "benchmarks", "iterations", "instances", "processes",
            "findings", "timings", "timing_instances", "cuda_api", "cuda_api_slowest",
            "memory_ops", "os_runtime", "marks", "lines", "line_kernels")
# Ranks side by side (render/multi/document.py): csv writes one of these.
RANKS_SECTIONS = ("ranks", "families", "collectives", "findings")


def renderer(fmt: str) -> type[Renderer]:
    return FORMATS[fmt].load()


def render(c: Comparison, fmt: str = "table", **options) -> str:
    return renderer(fmt)().render(c, **options)


def render_pieces(c: Comparison, fmt: str = "table", **options) -> Iterator[str]:
    """render's text in pieces, for writing as they come (Renderer.pieces): json and csv
    stream millions of rows a chunk at a time; the others give one piece."""
    return renderer(fmt)().pieces(c, **options)
