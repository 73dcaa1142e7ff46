"""A name with a leading underscore is its module's own: no module of the package imports
one from another module of the package (promote the name, or move the caller next to it).
Read from the source's syntax: every `from ... import` statement, at module level or inside
functions."""

from __future__ import annotations

import ast
from pathlib import Path

import nsyswrap

PACKAGE = Path(nsyswrap.__file__).parent


def _private(name: str) -> bool:
    """A single-underscore name; dunders (__version__, __all__) are public."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _imported_module(path: Path, node: ast.ImportFrom, root: Path) -> str:
    """The dotted module an ImportFrom reads from, relative levels resolved against `path`
    (a file under `root`, the folder that holds the package)."""
    if node.level == 0:
        return node.module or ""
    parts = list(path.relative_to(root).with_suffix("").parts)
    base = parts[:-node.level]  # level 1 is the module's own package
    return ".".join(base + ([node.module] if node.module else []))


def private_imports(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """`file:line: from module import name` for each underscored name that `path` imports
    from a module of the package."""
    where = path.relative_to(root)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = _imported_module(path, node, root)
        if module.split(".")[0] != "nsyswrap":  # __future__, numpy, ...
            continue
        found += [f"{where}:{node.lineno}: from {module} import {a.name}"
                  for a in node.names if _private(a.name)]
    return found


def test_no_module_imports_another_modules_private_names():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 50
    assert [line for path in files for line in private_imports(path)] == []


def test_the_check_finds_private_imports(tmp_path):
    """The check itself: relative and absolute imports, at module level and inside
    functions; dunders, __future__ and other packages' names pass."""
    source = tmp_path / "nsyswrap" / "analysis" / "mod.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "from __future__ import annotations\n"
        "from .. import __version__\n"
        "from ..intervals import _union, union_length\n"
        "from . import _helper\n"
        "def f():\n"
        "    from nsyswrap.loader import _frame\n"
        "    from numpy import _private_of_numpy\n")
    assert [line.split(": ", 1)[1] for line in private_imports(source, tmp_path)] == [
        "from nsyswrap.intervals import _union", "from nsyswrap.analysis import _helper",
        "from nsyswrap.loader import _frame"]
