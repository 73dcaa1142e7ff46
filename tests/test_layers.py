"""The package's layers, read from the source's imports (module level and inside functions
alike, as ast finds them): no import circle, many reports' analysis (multi/) imports no
renderer, and the result type renderers take imports none of them."""

from __future__ import annotations

import ast
from pathlib import Path

import nsyswrap
from nsyswrap.render import FORMATS
from nsyswrap.render.base import Renderer

PACKAGE = Path(nsyswrap.__file__).parent


def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its __init__.py)."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that `name` imports anywhere in its source. `from .x import y`
    is module x.y where that is a module, else x."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for a in node.names:
                if f"{base}.{a.name}" in known:
                    out.add(f"{base}.{a.name}")
                elif base in known:
                    out.add(base)
    out.discard(name)
    return out


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_reads_imports_of_every_kind():
    """The reader itself: a relative import of a module, of a name, one inside a function,
    and one under TYPE_CHECKING each make an edge."""
    graph = import_graph()
    assert "nsyswrap.render.charts" in graph["nsyswrap.render.html"]  # from . import charts
    assert "nsyswrap.result" in graph["nsyswrap.render.html"]  # from ..result import ...
    assert "nsyswrap.render.json" in graph["nsyswrap.notebook"]  # inside to_json
    assert "nsyswrap.result" in graph["nsyswrap.render"]  # under TYPE_CHECKING
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_many_reports_analysis_imports_no_renderer():
    graph = import_graph()
    bad = {name: sorted(m for m in used if m.startswith("nsyswrap.render"))
           for name, used in graph.items() if name.startswith("nsyswrap.multi")}
    assert {name: used for name, used in bad.items() if used} == {}
    assert "nsyswrap.document" in graph["nsyswrap.multi.summary"]  # its numbers' source


def test_the_result_and_its_document_import_no_renderer():
    graph = import_graph()
    for name in ("nsyswrap.result", "nsyswrap.document"):
        assert not [m for m in graph[name] if m.startswith("nsyswrap.render")], name
        assert "nsyswrap.notebook" not in graph[name]


def test_every_format_loads_a_renderer():
    for name, f in FORMATS.items():
        cls = f.load()
        assert issubclass(cls, Renderer) and cls is not Renderer, name
