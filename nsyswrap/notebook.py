"""A Comparison in Python (a script, a notebook): its JSON document, its HTML page and its
display in Jupyter. These call the renderers, so they live above them and are attached to
`result.Comparison` here, which keeps the result type below render/ (render/ imports it).
The package's `compare` and `Comparison` are taken from this module (nsyswrap/__init__.py),
so every Comparison the public API returns has them."""

from __future__ import annotations

import os
from pathlib import Path

from .common.files import atomic_write
from .comparison.result import Comparison
from .comparison.single import compare

__all__ = ["Comparison", "compare"]


def to_json(self: Comparison, path: str | os.PathLike | None = None, *,
            instances: bool = False) -> str | Path:
    """The `nsyswrap.compare/1` document (docs/json.md), strict JSON: its text, or
    written to `path` atomically (never over the report it was read from) and the path
    returned. `instances`: with the per-instance rows (compare --instances)."""
    from .render.json import JsonRenderer

    pieces = JsonRenderer().pieces(self, instances=instances)
    if path is None:
        return "".join(pieces)
    return atomic_write(path, pieces, inputs=(self.info.path, self.info.source))


def save_html(self: Comparison, path: str | os.PathLike) -> Path:
    """The whole HTML report (what `nsyswrap compare --format html` writes), written to
    `path` atomically; returns the path."""
    from .render.html import HtmlRenderer

    return atomic_write(path, HtmlRenderer().render(self),
                        inputs=(self.info.path, self.info.source))


def _repr_html_(self: Comparison) -> str:
    """Jupyter: the HTML report's findings, tables and plots, without its timelines
    (save_html has them), made once per Comparison: a notebook asks on every display."""
    if self._notebook_html is None:
        from .render.html import notebook_html  # the render layer, only when displayed

        self._notebook_html = notebook_html(self)
    return self._notebook_html


Comparison.to_json = to_json
Comparison.save_html = save_html
Comparison._repr_html_ = _repr_html_
