"""The many-report pipeline (`nsyswrap.multi`'s functions), imported on first use."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..common.errors import BadInputError
from ..common.progress import NO_PROGRESS, Progress
from ..diagnose import Thresholds
from . import DIFF_SCHEMA, RANKS_SCHEMA  # noqa: F401 (re-exported)
from .checks import diagnose_ranks
from .diff import Diff, diff
from .inputs import expand
from .parallel import ReportFailure, map_reports
from .ranks import RankAnalysis, analyze_ranks
from .samples import DiffSide, from_analysis_json
from .summary import ReportSummary, summarize, summary_of
from .thresholds import DiffThresholds, RankThresholds


def compare_ranks(reports: Sequence[str | os.PathLike], *, thresholds: Thresholds | None = None,
                  rank_thresholds: RankThresholds | None = None, jobs: int | None = None,
                  dask: str | None = None, compare_options: dict | None = None,
                  load_options: dict | None = None,
                  progress: Progress = NO_PROGRESS) -> RankAnalysis:
    """Analyse each report (in parallel) and put their ranks side by side, with findings.
    A report that cannot be read is left out, named in the notes and in `failed`; the
    others are analysed. When none can be read, the first one's error is raised."""
    paths = expand(reports)
    if not paths:
        raise BadInputError("give at least one report (files, a folder or a glob)")
    results = map_reports(summarize, paths, jobs=jobs, dask=dask, progress=progress,
                          keep_going=True, thresholds=thresholds,
                          compare_options=compare_options, load_options=load_options)
    failed = [r for r in results if isinstance(r, ReportFailure)]
    summaries = [r for r in results if not isinstance(r, ReportFailure)]
    if not summaries:
        error = failed[0].error()
        if len(failed) > 1:
            error.args = (f"{error} (and {len(failed) - 1} more report(s) that could not "
                          "be read)",)
        raise error
    analysis = ranks_of(summaries, rank_thresholds)
    analysis.failed = failed
    analysis.notes[:0] = [f"left out, not analysed: {f.describe()}" for f in failed]
    return analysis


def ranks_of(summaries: list[ReportSummary],
             thresholds: RankThresholds | None = None) -> RankAnalysis:
    a = analyze_ranks(summaries, thresholds)
    a.findings = diagnose_ranks(a)
    return a


def diff_reports(base: str | os.PathLike, new: str | os.PathLike, *,
                 thresholds: DiffThresholds | None = None, jobs: int | None = None,
                 dask: str | None = None, compare_options: dict | None = None,
                 load_options: dict | None = None, progress: Progress = NO_PROGRESS) -> Diff:
    """Diff two reports or analysis.json documents (reports analysed side by side)."""
    paths = [Path(base), Path(new)]
    for p in paths:
        if not p.exists():
            raise BadInputError(f"{p}: no such file")
    sides: list[DiffSide | None] = [from_analysis_json(p) if p.suffix == ".json" else None
                                    for p in paths]
    todo = [p for p, s in zip(paths, sides, strict=True) if s is None]
    if todo:
        done = iter(map_reports(summarize, todo, jobs=jobs, dask=dask, progress=progress,
                                samples=True, compare_options=compare_options,
                                load_options=load_options))
        sides = [s if s is not None else next(done).samples for s in sides]
    return diff(sides[0], sides[1], thresholds)


__all__ = ["DIFF_SCHEMA", "RANKS_SCHEMA", "Diff", "DiffThresholds", "RankAnalysis",
           "RankThresholds", "compare_ranks", "diff", "diff_reports", "ranks_of",
           "summarize", "summary_of"]
