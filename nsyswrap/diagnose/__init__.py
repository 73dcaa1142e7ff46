"""Checks that turn an Analysis into Findings. One module per finding family; each has a
CODE and a `check(analysis, thresholds) -> list[Finding]`; checks.py runs them all.

`diagnose`, CHECKS and CODES load on first use (the check modules import pandas): the CLI
reads Thresholds while a report's reads start, before pandas is imported."""

from __future__ import annotations

from .finding import INFO, WARNING, Finding, Thresholds, range_label

_FROM_CHECKS = frozenset({"CHECKS", "CODES", "MERGED_RANGE_CODES", "diagnose", "merge_alike"})


def __getattr__(name: str):
    if name not in _FROM_CHECKS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import checks

    value = getattr(checks, name)
    globals()[name] = value
    return value


__all__ = ["CHECKS", "CODES", "INFO", "WARNING", "Finding", "Thresholds", "diagnose",
           "range_label"]
