"""capture -> export -> load -> analyse, for `nsyswrap run` and `nsyswrap import`.

Every step keeps what the previous one produced: a failed import keeps the .qdstrm, a failed
export keeps the .nsys-rep, a failing workload still gets its capture exported and analysed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .capture import Capture, ProfileOptions, finish, profile, profile_ranks
from .compare import Comparison, compare
from .diagnose import Thresholds
from .errors import BadInputError
from .nsys import find_nsys, nsys_version
from .render.document import document

ANALYSIS_JSON = "analysis.json"


@dataclass
class RunResult:
    capture: Capture
    comparison: Comparison | None
    analysis_json: Path | None


def run(target: Sequence[str], output_dir: Path, opts: ProfileOptions,
        thresholds: Thresholds | None = None, *, nsys: str | None = None,
        progress: Callable[[str], None] | None = None,
        stdout_to_stderr: bool = False, compare_options: dict | None = None) -> RunResult:
    """compare_options: keyword arguments of `compare` (attribution, all_domains, ...)."""
    cap = profile(target, output_dir, opts, nsys=nsys, progress=progress,
                  stdout_to_stderr=stdout_to_stderr)
    return _analyse(finish(cap, progress), thresholds, progress,
                    compare_options=compare_options)


def run_ranks(target: Sequence[str], output_dir: Path, opts: ProfileOptions, ranks: int,
              thresholds: Thresholds | None = None, *, nsys: str | None = None,
              progress: Callable[[str], None] | None = None,
              stdout_to_stderr: bool = False,
              compare_options: dict | None = None) -> list[RunResult]:
    """torchrun with `ranks` processes, one nsys report and one analysis per rank."""
    captures = profile_ranks(target, output_dir, opts, ranks, nsys=nsys, progress=progress,
                             stdout_to_stderr=stdout_to_stderr)
    return [_analyse(finish(c, progress), thresholds, progress,
                     json_name=f"analysis.{c.name}.json", compare_options=compare_options)
            for c in captures]


def import_capture(path: Path, thresholds: Thresholds | None = None, *,
                   nsys: str | None = None,
                   progress: Callable[[str], None] | None = None) -> RunResult:
    """Finish a capture by hand: a .qdstrm (import + export) or a .nsys-rep (export)."""
    if not path.exists():
        raise BadInputError(f"{path}: no such file")
    if path.suffix not in (".qdstrm", ".nsys-rep"):
        raise BadInputError(f"{path}: give a .qdstrm (raw capture) or a .nsys-rep")
    exe = find_nsys(nsys)
    cap = Capture(path.parent, path.stem, [], exe or "", nsys_version(exe) if exe else None)
    if path.suffix == ".qdstrm":
        cap.qdstrm = path
        rep = path.with_suffix(".nsys-rep")
        cap.rep = rep if rep.exists() else None
    else:
        cap.rep = path
    return _analyse(finish(cap, progress), thresholds, progress)


def _analyse(cap: Capture, thresholds: Thresholds | None,
             progress: Callable[[str], None] | None,
             json_name: str = ANALYSIS_JSON, compare_options: dict | None = None) -> RunResult:
    if cap.sqlite is None:
        return RunResult(cap, None, None)
    if progress:
        progress("analysing")
    result = compare(cap.sqlite, thresholds, **(compare_options or {}))
    result.info.notes.extend(cap.notes)
    out = cap.output_dir / json_name
    out.write_text(json.dumps(document(result), indent=2, ensure_ascii=False) + "\n")
    return RunResult(cap, result, out)
