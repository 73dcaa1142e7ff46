"""Checks that turn an Analysis into Findings. One module per finding family; each has a
CODE and a `check(analysis, thresholds) -> list[Finding]`."""

from __future__ import annotations

from ..analysis import Analysis
from . import cache, clock, cold_start, fp32_gemm, idle, sync, transfers, window
from .finding import INFO, WARNING, Finding, Thresholds, range_label

CHECKS = (sync, transfers, idle, cold_start, fp32_gemm, window, cache, clock)
CODES = tuple(code for c in CHECKS for code in (c.CODES if hasattr(c, "CODES") else (c.CODE,)))
_SEVERITY_ORDER = {WARNING: 0, INFO: 1}


def diagnose(a: Analysis, thresholds: Thresholds | None = None) -> list[Finding]:
    thresholds = thresholds or Thresholds()
    findings = [f for c in CHECKS for f in c.check(a, thresholds)]
    return sorted(findings, key=lambda f: (_SEVERITY_ORDER.get(f.severity, 9), f.code,
                                           f.range or ""))


__all__ = ["CHECKS", "CODES", "INFO", "WARNING", "Finding", "Thresholds", "diagnose",
           "range_label"]
