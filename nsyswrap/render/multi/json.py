"""JSON: `nsyswrap.ranks/1` and `nsyswrap.diff/1` (docs/json.md)."""

from __future__ import annotations

import json

from ..base import Renderer
from .document import diff_document, ranks_document


class RanksJson(Renderer):
    def render(self, a, **_) -> str:
        return json.dumps(ranks_document(a), indent=2, ensure_ascii=False,
                          allow_nan=False) + "\n"


class DiffJson(Renderer):
    def render(self, d, **_) -> str:
        return json.dumps(diff_document(d), indent=2, ensure_ascii=False,
                          allow_nan=False) + "\n"
