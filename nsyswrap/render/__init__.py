"""Renderers: each turns a Comparison into text in one format; none knows about SQL. The
formats and what the CLI needs to know of them before any renderer loads are here (no
pandas: tests/test_cli.py); each renderer class is imported when its format is asked for."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
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
    # The renderer class, "module:Class" of this folder, imported on use (`load`): the
    # table renderer pulls in rich and the HTML one its page builder, neither of which
    # `--format json` needs (start-up is most of a small report's time).
    renderer_class: str

    def load(self) -> type[Renderer]:
        module, _, name = self.renderer_class.partition(":")
        return getattr(importlib.import_module(f".{module}", __name__), name)


FORMATS = {f.name: f for f in (
    Format("table", "txt", makes_file=False, renderer_class="table:TableRenderer"),
    Format("json", "json", makes_file=False, renderer_class="json:JsonRenderer"),
    Format("csv", "csv", makes_file=False, renderer_class="csv:CsvRenderer"),
    Format("markdown", "md", makes_file=False, renderer_class="markdown:MarkdownRenderer"),
    Format("html", "html", makes_file=True, renderer_class="html:HtmlRenderer"),
    Format("trace", "json", makes_file=True, renderer_class="trace:TraceRenderer"),
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
