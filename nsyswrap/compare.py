"""`compare`: load -> analyse -> diagnose, as one call. The CLI and the Python API share it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .analysis import Analysis, analyze
from .diagnose import Finding, Thresholds, diagnose
from .loader import load
from .report import Report

SCHEMA = "nsyswrap.compare/1"


@dataclass
class Comparison:
    """Everything a renderer shows: the analyses, the findings, the thresholds used."""

    analysis: Analysis
    findings: list[Finding]
    thresholds: Thresholds = field(default_factory=Thresholds)

    @property
    def info(self):
        return self.analysis.info


def compare(report: Report | str | os.PathLike, thresholds: Thresholds | None = None,
            **load_options) -> Comparison:
    """Analyse a report (a loaded Report or a path) and diagnose what distorts its timings."""
    if not isinstance(report, Report):
        report = load(report, **load_options)
    thresholds = thresholds or Thresholds()
    analysis = analyze(report)
    return Comparison(analysis, diagnose(analysis, thresholds), thresholds)
