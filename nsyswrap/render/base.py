"""What every renderer is (as pyinstrument's renderers/base.py): a class that turns a result
into the text of one format. Standard library only: render/__init__.py's FORMATS, which the
CLI reads at start-up, refers to it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any


class Renderer(ABC):
    """Turns a result (a Comparison; ranks side by side or a diff in render/multi/) into
    the text of one format."""

    @abstractmethod
    def render(self, result: Any, **options) -> str:
        """The whole text of the format."""

    def pieces(self, result: Any, **options) -> Iterator[str]:
        """The text in pieces, for writing as they come: here one piece, made at the call
        (the CLI shows this call as the step that writes a page)."""
        return iter([self.render(result, **options)])


class StreamingRenderer(Renderer):
    """A format whose output grows with the report's rows (json with --instances, csv):
    `pieces` gives millions of rows a chunk at a time, and `render` joins them."""

    def render(self, result: Any, **options) -> str:
        return "".join(self.pieces(result, **options))

    @abstractmethod
    def pieces(self, result: Any, **options) -> Iterator[str]:
        """The text a chunk of rows at a time."""
