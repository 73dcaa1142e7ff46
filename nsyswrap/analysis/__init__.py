"""Analyses over a loaded Report. Each module answers one question with DataFrames;
`analyze` runs them all and returns the plain `Analysis` that diagnose and render read."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..report import Report, ReportInfo
from .kernels import kernel_summary
from .ranges import Attribution, attribute, range_instances, range_summary


@dataclass
class Analysis:
    info: ReportInfo
    kernels: pd.DataFrame  # kernel_summary
    instances: pd.DataFrame  # range_instances: one row per NVTX range instance
    ranges: pd.DataFrame  # range_summary: one row per (domain, name)
    attribution: Attribution  # the pairs behind the numbers, for the checks
    gpu_metrics: pd.DataFrame  # clock samples, when captured


def analyze(report: Report) -> Analysis:
    att = attribute(report)
    instances = range_instances(report, att)
    return Analysis(
        info=report.info,
        kernels=kernel_summary(report.kernels),
        instances=instances,
        ranges=range_summary(instances, att),
        attribution=att,
        gpu_metrics=report.gpu_metrics,
    )
