"""Every check, in the order they run, and `diagnose`: an Analysis in, Findings out."""

from __future__ import annotations

from collections.abc import Iterable

from ..analysis import Analysis
from ..common.units import plural
from . import cache, clock, cold_start, fp32_gemm, host_bound, idle, sync, transfers, window
from .finding import INFO, WARNING, Finding, Thresholds
from .where import with_lines

CHECKS = (sync, transfers, idle, host_bound, cold_start, fp32_gemm, window, cache, clock)
CODES = tuple(code for c in CHECKS for code in (c.CODES if hasattr(c, "CODES") else (c.CODE,)))
_SEVERITY_ORDER = {WARNING: 0, INFO: 1}


# Codes that, found on several of the user's ranges, are one finding: nested ranges share a
# cold start (the first step is slow, so is the forward inside it).
MERGED_RANGE_CODES = frozenset({cold_start.CODE})


def diagnose(a: Analysis, thresholds: Thresholds | None = None) -> list[Finding]:
    thresholds = thresholds or Thresholds()
    # The harness's benchmarks and the program's own timing groups: a code found in several
    # reads once, naming them all.
    benchmarks: dict[str, str] = {}
    runs: dict[str, int] = {}  # label -> its runs (a harness benchmark run every step)
    for tw in a.timed_windows():
        for name in tw.benchmarks["benchmark"]:
            label = tw.label(name)
            benchmarks[label] = "benchmarks" if tw.source == "harness" else "timed places"
            runs[label] = runs.get(label, 0) + 1
    findings = with_lines(merge_alike((f for c in CHECKS for f in c.check(a, thresholds)),
                                      benchmarks, runs), a)
    return sorted(findings, key=lambda f: (_SEVERITY_ORDER.get(f.severity, 9), f.code,
                                           f.range or ""))


# "as in 3 more timed places": what merged findings count, one of each.
_ONE = {"benchmarks": "more benchmark", "timed places": "more timed place",
        "ranges": "more range"}


class _Alike:
    """The findings of one code merged so far: the first, how many, each label once in the
    order met, each label's last evidence. Not the findings themselves: a report with a
    harness run in every training step gives one or more per run (222 k at 10 M kernels),
    most of them of one benchmark."""

    def __init__(self, first: Finding):
        self.first, self.count, self.warning = first, 0, False
        self.by_range: dict[str, dict] = {}  # its keys: the labels, in the order met
        self.add(first)

    def add(self, f: Finding) -> None:
        self.count += 1
        self.warning = self.warning or f.severity == WARNING
        self.by_range[f.range] = f.evidence

    def said(self, what: str, runs: dict[str, int]) -> str:
        """'as in 3 more benchmarks', and the runs where a benchmark's several runs (one a
        training step) each gave the finding: 'in 1849 of 22188 runs', 'as in 2 more
        benchmarks; in 3697 of 44376 runs'. `runs`: each label's runs."""
        others = len(self.by_range) - 1
        of = sum(runs.get(label, 1) for label in self.by_range)
        counted = ("" if self.count <= len(self.by_range) else f"in all {of} runs"
                   if self.count == of else f"in {self.count} of {of} runs")
        if not others:
            return counted
        more = f"as in {plural(others, _ONE[what])}"
        return f"{more}; {counted}" if counted else more


def merge_alike(findings: Iterable[Finding], benchmarks: dict[str, str],
                runs: dict[str, int] | None = None) -> list[Finding]:
    """One finding per code for all the harness benchmarks it concerns (CLOCK_VARIATION in 4
    of 7 benchmarks reads once), for all the program's own timed places (`benchmarks` says
    which labels are which: label -> "benchmarks" or "timed places"), and for all the user's
    ranges with a MERGED_RANGE_CODES code. The merged finding names each once (`ranges`),
    and counts the runs where a label's several runs gave it (`runs`: each label's); the
    numbers of each stay in evidence["by_range"]. The findings are taken as they come."""
    groups: dict[tuple[str, str], _Alike] = {}
    out = []
    for f in findings:
        what = benchmarks.get(f.range or "", "ranges")
        if f.range and (what != "ranges" or f.code in MERGED_RANGE_CODES):
            alike = groups.get((f.code, what))
            if alike is None:
                groups[(f.code, what)] = _Alike(f)
            else:
                alike.add(f)
        else:
            out.append(f)
    for (code, what), alike in groups.items():
        if alike.count == 1:
            out.append(alike.first)
            continue
        first = alike.first
        detail = first.message[len(first.range) + 2:] if first.message.startswith(
            f"{first.range}: ") else first.message
        out.append(Finding(
            code=code,
            severity=WARNING if alike.warning else INFO,
            range=None,
            # The first one's numbers: the others' are in the evidence, their names in
            # `ranges` (a table names the first and counts the rest).
            message=f"{first.range}: {detail} ({alike.said(what, runs or {})})",
            evidence={"by_range": alike.by_range},
            suggestion=first.suggestion,
            ranges=list(alike.by_range),
        ))
    return out
