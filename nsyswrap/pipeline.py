"""capture -> export -> load -> analyse, for `nsyswrap run` and `nsyswrap import`.

Every step keeps what the previous one produced: a failed import keeps the .qdstrm, a failed
export keeps the .nsys-rep, a failing workload still gets its capture exported and analysed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .capture import Capture, ProfileOptions, finish, profile, profile_ranks
from .compare import Comparison, compare
from .diagnose import Thresholds
from .errors import BadInputError
from .files import atomic_write
from .nsys import find_nsys, nsys_version
from .progress import NO_PROGRESS, Progress
from .render.html import HtmlRenderer
from .render.json import JsonRenderer

ANALYSIS_JSON = "analysis.json"
REPORT_HTML = "report.html"


@dataclass
class RunResult:
    capture: Capture
    comparison: Comparison | None
    analysis_json: Path | None
    report_html: Path | None = None


def run(target: Sequence[str], output_dir: Path, opts: ProfileOptions,
        thresholds: Thresholds | None = None, *, nsys: str | None = None,
        progress: Callable[[str], None] | None = None,
        stdout_to_stderr: bool = False, compare_options: dict | None = None,
        steps: Progress = NO_PROGRESS) -> RunResult:
    """`progress` gets one-line messages; `steps` shows the long steps (a spinner);
    compare_options: keyword arguments of `compare` (attribution, all_domains, ...)."""
    cap = profile(target, output_dir, opts, nsys=nsys, progress=progress,
                  stdout_to_stderr=stdout_to_stderr)
    with steps.step("importing and exporting the capture"):
        cap = finish(cap, progress)
    return _analyse(cap, thresholds, progress, compare_options=compare_options, steps=steps)


def run_ranks(target: Sequence[str], output_dir: Path, opts: ProfileOptions, ranks: int,
              thresholds: Thresholds | None = None, *, nsys: str | None = None,
              progress: Callable[[str], None] | None = None,
              stdout_to_stderr: bool = False,
              compare_options: dict | None = None,
              steps: Progress = NO_PROGRESS) -> list[RunResult]:
    """torchrun with `ranks` processes, one nsys report and one analysis per rank."""
    captures = profile_ranks(target, output_dir, opts, ranks, nsys=nsys, progress=progress,
                             stdout_to_stderr=stdout_to_stderr)
    results = []
    with steps.step("analysing the ranks' reports", total=len(captures)) as advance:
        for c in captures:
            results.append(_analyse(finish(c, progress), thresholds, progress,
                                    json_name=f"analysis.{c.name}.json",
                                    html_name=f"report.{c.name}.html",
                                    compare_options=compare_options, steps=steps))
            advance()
    return results


def import_capture(path: Path, thresholds: Thresholds | None = None, *,
                   nsys: str | None = None,
                   progress: Callable[[str], None] | None = None,
                   steps: Progress = NO_PROGRESS) -> RunResult:
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
    with steps.step(f"importing and exporting {path.name}"):
        cap = finish(cap, progress)
    return _analyse(cap, thresholds, progress, steps=steps)


def _analyse(cap: Capture, thresholds: Thresholds | None,
             progress: Callable[[str], None] | None,
             json_name: str = ANALYSIS_JSON, html_name: str = REPORT_HTML,
             compare_options: dict | None = None, steps: Progress = NO_PROGRESS) -> RunResult:
    """Analyse the export; write analysis.json and the HTML report beside it."""
    if cap.sqlite is None:
        return RunResult(cap, None, None)
    if progress:
        progress("analysing")
    result = compare(cap.sqlite, thresholds, progress=steps, **(compare_options or {}))
    result.info.notes.extend(cap.notes)
    read = (cap.sqlite, cap.rep, cap.qdstrm)
    out = cap.output_dir / json_name
    atomic_write(out, JsonRenderer().pieces(result), inputs=read)
    page = cap.output_dir / html_name
    with steps.step(f"writing {html_name}"):
        atomic_write(page, HtmlRenderer().render(result), inputs=read)
    return RunResult(cap, result, out, page)
