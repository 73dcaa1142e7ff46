"""`Comparison`: what one report's analysis hands the renderers (render/ imports it; it
imports nothing of render/). Its outputs for the Python API, `to_json`, `save_html` and the
notebook display, call the renderers: notebook.py attaches them from above."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

import pandas as pd

from ..analysis import Analysis
from ..common.units import fmt_ns
from ..diagnose import Finding, Thresholds

SCHEMA = "nsyswrap.compare/1"


# Lines of each kind a Comparison's repr lists before "and N more".
REPR_ROWS = 5


@dataclass(repr=False)
class Comparison:
    """Everything a renderer shows: the analyses, the findings, the thresholds used.

        c = nsyswrap.compare("run.sqlite")
        c                       # the verdicts in a few lines (a notebook shows the page)
        c.findings, c.benchmarks, c.user_timings, c.analysis.kernels, c.analysis.ranges
        c.to_json("analysis.json"); c.save_html("report.html")
    """

    analysis: Analysis
    findings: list[Finding]
    thresholds: Thresholds = field(default_factory=Thresholds)
    benchmarks: pd.DataFrame = field(default_factory=pd.DataFrame)  # with trusted_ns, verdict
    # The program's own timings by group (user_timings.GROUP_COLUMNS) with codes, verdict.
    user_timings: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The notebook display (notebook.py), made once: a notebook asks on every display.
    _notebook_html: str | None = field(default=None, init=False, compare=False)

    @property
    def info(self):
        return self.analysis.info

    def __repr__(self) -> str:
        a, info = self.analysis, self.info
        kernels = int(a.kernels["count"].sum()) if len(a.kernels) else 0
        user = int((~a.ranges["harness"]).sum()) if "harness" in a.ranges else len(a.ranges)
        lines = [f"<Comparison of {info.source.name}: {kernels:,} kernels, "
                 f"{len(a.instances):,} NVTX ranges"
                 + (f" ({user:,} range families of yours)" if user else "")
                 + f", {len(self.benchmarks):,} benchmarks, {len(self.user_timings):,} "
                 "timing groups"]
        codes = collections.Counter(f.code for f in self.findings)
        lines.append(f"  findings ({len(self.findings)}): " + (", ".join(
            code + (f" x{n}" if n > 1 else "") for code, n in codes.items()) or "none"))
        for kind, frame, name, trusted in (("benchmark", self.benchmarks, "benchmark",
                                            "trusted_ns"),
                                           ("timing", self.user_timings, "label",
                                            "kernels_median_ns")):
            if frame.empty:
                continue
            for row in frame.head(REPR_ROWS).itertuples(index=False):
                lines.append(f"  {kind} {getattr(row, name)}: {fmt_ns(getattr(row, trusted))}"
                             f" of kernels; {row.verdict}")
            if len(frame) > REPR_ROWS:
                lines.append(f"  ... and {len(frame) - REPR_ROWS} more {kind}s")
        return "\n".join(lines) + ">"
