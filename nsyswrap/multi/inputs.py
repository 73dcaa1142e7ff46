"""Which reports the user named: files, folders (their reports) and globs."""

from __future__ import annotations

import glob
from collections.abc import Iterable
from pathlib import Path

from ..errors import BadInputError

REPORT_SUFFIXES = (".sqlite", ".nsys-rep")


def expand(items: Iterable[str | Path]) -> list[Path]:
    """Report paths in the order given; a folder gives its .sqlite exports (or its
    .nsys-rep files where it has no export), sorted by name; a glob its matches."""
    out: list[Path] = []
    for item in items:
        text = str(item)
        p = Path(text)
        if p.is_dir():
            found = sorted(p.glob("*.sqlite")) or sorted(p.glob("*.nsys-rep"))
            if not found:
                raise BadInputError(f"{p}: no .sqlite or .nsys-rep reports in this folder")
            out.extend(found)
        elif not p.exists() and glob.has_magic(text):
            found = sorted(Path(m) for m in glob.glob(text))
            if not found:
                raise BadInputError(f"{text}: matches no file")
            out.extend(found)
        else:
            out.append(p)  # load() says what is wrong with it, if anything
    seen: set[Path] = set()
    unique = []
    for p in out:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique
