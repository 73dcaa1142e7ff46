"""The package's floors, read from the source's imports (module level and inside functions
alike, as ast finds them): each folder imports only the folders below it (docs/architecture.md
draws them), the package root holds only what users import, what runs inside the profiled
program imports nothing of nsyswrap, no import circle, the analysis engine imports nothing
of the steps after it, many reports' analysis (multi/) imports no renderer, and the result
type renderers take imports none of them."""

from __future__ import annotations

import ast
import functools
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


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Read once per worker (every module parsed: ~0.7 s); the tests only read it."""
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


# The folders from the bottom up: a module may import its own folder and any folder below.
FLOORS = ["common", "instrument", "read", "analysis", "diagnose", "comparison", "multi",
          "render", "capture"]
# The package root: the entry points and what users import (nsyswrap.compare and
# nsyswrap.Comparison come through notebook.py), above every folder.
ROOT = {"nsyswrap", "nsyswrap.__main__", "nsyswrap.cli", "nsyswrap.notebook",
        "nsyswrap._version"}
# Loaded by path into the profiled program (the runner, its hooks, the children's start-up,
# the NVTX shim and the marks' splitting the hooks load): standard library only.
IN_THE_PROGRAM = {"nsyswrap.instrument.runner", "nsyswrap.instrument.event_hooks",
                  "nsyswrap.instrument._children.sitecustomize",
                  "nsyswrap.instrument.nvtx_compat", "nsyswrap.instrument.mark_parts",
                  "nsyswrap.instrument.line_trace"}


def floor(module: str) -> int:
    """The floor of a module: its folder's place in FLOORS; the root's modules above them all,
    but _version (a string every floor may read) below them."""
    if module == "nsyswrap._version":
        return -1
    if module in ROOT:
        return len(FLOORS)
    return FLOORS.index(module.split(".")[1])


def test_every_module_lives_on_a_floor():
    assert {m for m in import_graph() if m not in ROOT
            and m.split(".")[1] not in FLOORS} == set()


def test_each_folder_imports_only_the_folders_below_it():
    upward = sorted(f"{a} -> {b}" for a, used in import_graph().items() for b in used
                    if floor(b) > floor(a))
    assert upward == []


def test_the_floor_rule_catches_an_upward_import():
    graph = {"nsyswrap.read.loader": {"nsyswrap.analysis.grouped"}}
    assert [(a, b) for a, used in graph.items() for b in used if floor(b) > floor(a)]


def test_what_runs_inside_the_program_imports_nothing_of_nsyswrap():
    graph = import_graph()
    assert {m: sorted(graph[m]) for m in IN_THE_PROGRAM if graph[m]} == {}


def test_the_graph_reads_imports_of_every_kind():
    """The reader itself: a relative import of a module, of a name, one inside a function,
    and one under TYPE_CHECKING each make an edge."""
    graph = import_graph()
    assert "nsyswrap.render.charts" in graph["nsyswrap.render.html"]  # from . import charts
    assert "nsyswrap.comparison.result" in graph["nsyswrap.render.html"]  # from ..result import ...
    assert "nsyswrap.render.json" in graph["nsyswrap.notebook"]  # inside to_json
    assert "nsyswrap.comparison.result" in graph["nsyswrap.render"]  # under TYPE_CHECKING
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_the_engine_returns_what_it_measured_and_calls_nothing_after_it():
    """analysis/engine/ imports neither the steps around it nor the Analysis they make: the
    route of one report's analysis (steps.analysis_of) calls the engine and goes on."""
    graph = import_graph()
    after = {"nsyswrap.analysis", "nsyswrap.analysis.steps", "nsyswrap.analysis.result"}
    bad = {name: sorted(used & after) for name, used in graph.items()
           if name.startswith("nsyswrap.analysis.engine")}
    assert {name: used for name, used in bad.items() if used} == {}
    assert "nsyswrap.analysis.engine.analyze" in graph["nsyswrap.analysis.steps"]


def test_many_reports_analysis_imports_no_renderer():
    graph = import_graph()
    bad = {name: sorted(m for m in used if m.startswith("nsyswrap.render"))
           for name, used in graph.items() if name.startswith("nsyswrap.multi")}
    assert {name: used for name, used in bad.items() if used} == {}
    assert "nsyswrap.comparison.document" in graph["nsyswrap.multi.summary"]  # its numbers' source


def test_the_result_and_its_document_import_no_renderer():
    graph = import_graph()
    for name in ("nsyswrap.comparison.result", "nsyswrap.comparison.document"):
        assert not [m for m in graph[name] if m.startswith("nsyswrap.render")], name
        assert "nsyswrap.notebook" not in graph[name]


def test_every_format_loads_a_renderer():
    for name, f in FORMATS.items():
        cls = f.load()
        assert issubclass(cls, Renderer) and cls is not Renderer, name
