"""Which reports the user named: files, folders (their reports) and globs."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from pathlib import Path

from ..common.errors import BadInputError

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


def page_beside(report: str | Path) -> Path | None:
    """The HTML page `nsyswrap run` wrote for a report, where it lies beside it:
    `report.NAME.html` (a rank of `run --ranks`), else `report.html` in a folder holding
    this one report (a plain `run`)."""
    p = Path(report)
    stem = p.name.removesuffix(".nsys-rep").removesuffix(".sqlite")
    named = p.with_name(f"report.{stem}.html")
    if named.is_file():
        return named
    alone = p.with_name("report.html")
    others = {q.name.removesuffix(".nsys-rep").removesuffix(".sqlite")
              for q in p.parent.glob("*") if q.name.endswith(REPORT_SUFFIXES)}
    return alone if alone.is_file() and others <= {stem} else None


def page_links(reports: Iterable[str | Path], page: Path | None) -> dict[str, str]:
    """Report (as named) -> the path of its own page relative to the folder of `page`
    (the one that links to them; the working folder when it goes to standard output)."""
    base = page.resolve().parent if page is not None else Path.cwd()
    out = {}
    for report in reports:
        found = page_beside(report)
        if found is not None:
            out[str(report)] = Path(os.path.relpath(found.resolve(), base)).as_posix()
    return out
