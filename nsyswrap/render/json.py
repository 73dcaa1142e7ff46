"""JSON for CI: the `nsyswrap.compare/1` document."""

from __future__ import annotations

import json

from ..compare import Comparison
from .document import document, section_rows


class JsonRenderer:
    def render(self, c: Comparison, *, instances: bool = False, **_) -> str:
        doc = document(c)
        if instances:
            doc["instances"] = section_rows(c, "instances")
            doc["iterations"] = section_rows(c, "iterations")
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
