"""Renderers: each turns a Comparison into text in one format; none knows about SQL."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..compare import Comparison

# format -> (module, class). Imported on use: the table renderer pulls in rich and the HTML
# one its page builder, neither of which `--format json` needs (start-up is most of a
# small report's time).
RENDERERS = {
    "table": (".table", "TableRenderer"),
    "json": (".json", "JsonRenderer"),
    "csv": (".csv", "CsvRenderer"),
    "markdown": (".markdown", "MarkdownRenderer"),
    "html": (".html", "HtmlRenderer"),
    "trace": (".trace", "TraceRenderer"),
}

# The single-report document's sections (render/document.py), in order; csv writes one.
SECTIONS = ("kernels", "ranges", "benchmarks", "iterations", "instances", "processes",
            "findings", "timings", "timing_instances", "cuda_api", "cuda_api_slowest",
            "memory_ops", "os_runtime", "marks")
# Ranks side by side (render/multi/document.py): csv writes one of these.
RANKS_SECTIONS = ("ranks", "families", "collectives", "findings")


def renderer(fmt: str):
    module, name = RENDERERS[fmt]
    return getattr(import_module(module, __name__), name)


def render(c: Comparison, fmt: str = "table", **options) -> str:
    return renderer(fmt)().render(c, **options)


def render_pieces(c: Comparison, fmt: str = "table", **options) -> Iterator[str]:
    """render's text in pieces, for writing as they come: renderers with a `pieces` method
    (json, csv) stream millions of rows a chunk at a time; the others give one piece."""
    r = renderer(fmt)()
    return r.pieces(c, **options) if hasattr(r, "pieces") else iter([r.render(c, **options)])
