"""One report's analysis, `compare`: load -> analyse (analysis/steps.py: what the engine
needs, the engine, then the steps after it) -> diagnose, as one call, giving a
`result.Comparison`. The CLI and the Python API share it; multi/ calls it per report."""

from __future__ import annotations

import os

import pandas as pd

from ..analysis import Analysis, analyze
from ..common.progress import NO_PROGRESS, Progress
from ..common.units import fmt_ns
from ..diagnose import Finding, Thresholds, diagnose
from ..diagnose.verdict import codes_by_range, verdict
from ..read.database import OpenReport
from ..read.loader import load
from ..read.report import Report
from .result import Comparison


def compare(report: Report | OpenReport | str | os.PathLike,
            thresholds: Thresholds | None = None, *,
            by_process: bool = False, attribution: str = "process", all_domains: bool = False,
            progress: Progress = NO_PROGRESS, operations: bool = True,
            **load_options) -> Comparison:
    """Analyse a report (a loaded Report, a path, or a report database.open_report opened)
    and diagnose what distorts its timings.

    by_process: summarise NVTX ranges per process (workers, torchrun ranks).
    attribution: "process" (default: a range also owns the GPU work that other threads of
        its process launched while it was open, as PyTorch's autograd threads do for
        backward) or "thread" (nsys's rule, as nvtx_gpu_proj_sum).
    all_domains: findings also cover ranges of libraries' NVTX domains (NCCL, cuDNN, ...).
    progress: shows the long steps (nsyswrap.common.progress).
    operations: keep every GPU operation and (range, operation) pair in the analysis
        (`analysis.attribution.gpu_ops`, `op_pairs`), as the html and trace formats and
        the many-report summaries need. False streams them from the export where that
        pays (analysis.analyze_streamed): the same numbers in memory bounded by the
        report's ranges, not its operations. A report opened with open_report(...,
        stream_operations=True) is streamed where it pays, and keeps no pair; a loaded
        Report is analysed as it is.
    """
    thresholds = thresholds or Thresholds()
    if not isinstance(report, Report | OpenReport) and not operations:
        from ..read.database import open_report

        with open_report(report, progress=progress, stream_operations=True,
                         **load_options) as opened:
            return compare(opened, thresholds, by_process=by_process,
                           attribution=attribution, all_domains=all_domains,
                           progress=progress)
    options = {"by_process": by_process, "attribution": attribution,
               "all_domains": all_domains}
    done = None
    if isinstance(report, OpenReport) and report.stream_operations:
        done = _streamed(report, thresholds, progress, options)
    if done is None:
        owned = not isinstance(report, Report)  # loaded here: nobody else holds it
        keep_pairs = report.pairs_wanted if isinstance(report, OpenReport) else operations
        if owned:
            report = load(report, progress=progress, **load_options)
        with progress.step("analysing"):
            analysis = analyze(report, consume=owned, keep_pairs=keep_pairs, **options)
            findings = diagnose(analysis, thresholds)
    else:
        analysis, findings = done
    return Comparison(analysis, findings, thresholds, _with_verdicts(analysis, findings),
                      _user_verdicts(analysis, findings))


def _streamed(opened: OpenReport, thresholds: Thresholds, progress: Progress,
              options: dict) -> tuple[Analysis, list[Finding]] | None:
    """The analysis of a report opened for streaming its operations, and its findings; or
    None where the report cannot be streamed (operations.StreamFallback), with its reads
    started for loading it whole."""
    from ..analysis import analyze_streamed
    from ..common.memory import trim_heap
    from ..read.loader import read_without_operations
    from ..read.operations import OperationStream, StreamFallback

    with progress.step(f"loading {opened.db.path.name}"):
        report, rest = read_without_operations(opened)
    stream = OperationStream(opened.db, opened.queries)
    try:
        with progress.step("analysing"):
            analysis = analyze_streamed(report, stream, rest, consume=True, **options)
            # The report's ranges and tables and the stream's buffers are the analysis's
            # now, or done with: let them go before the findings.
            stream.close()
            size = stream.operations + len(analysis.instances)
            report = rest = stream = None
            trim_heap(size)
            return analysis, diagnose(analysis, thresholds)
    except StreamFallback:
        stream.close()
        report = rest = stream = None
        opened.read_whole()
        return None


def _with_verdicts(analysis: Analysis, findings: list[Finding]) -> pd.DataFrame:
    """The harness runs with the time to trust (kernel busy, per call) and a verdict."""
    b = analysis.benchmarks.copy()
    codes = codes_by_range(findings)
    mine = [codes.get(f"nsyswrap:{name}", set()) for name in b["benchmark"]]
    b["trusted_ns"] = b["busy_median_ns"]
    b["codes"] = [sorted(c) for c in mine]
    b["verdict"] = [verdict(c, e, k, s, f) for c, e, k, s, f in
                    zip(mine, b["event_median_ns"], b["busy_median_ns"], b["span_median_ns"],
                        b["floor_ns"], strict=True)]
    return b


def _user_verdicts(analysis: Analysis, findings: list[Finding]) -> pd.DataFrame:
    """The program's own timing groups with their findings' codes and a verdict in the
    harness's words (do_bench's own estimate gets none: it is not the figure it returns)."""
    u = analysis.user_timings
    g = u.groups.copy()
    if g.empty:
        return g
    codes = codes_by_range(findings)
    spans = dict(zip(u.summary["run"], u.summary["span_median_ns"], strict=True))
    g["codes"] = [sorted(codes.get(label, set())) for label in g["label"]]
    g["verdict"] = [_user_verdict(row, spans.get(row.run, float("nan")))
                    for row in g.itertuples()]
    return g


def _user_verdict(row, span_ns: float) -> str:
    """A timing group's verdict: do_bench's judged on the figure it returned (its mean by
    default, which outliers pull up) against the same statistic of the kernels."""
    if row.kind == "do_bench estimate":
        return "do_bench's own estimate of the calls to make (not its result)"
    value, kernels = row.value_median_ns, row.kernels_median_ns
    if row.kind == "do_bench" and row.tool_value_ns == row.tool_value_ns \
            and row.tool_kernels_ns == row.tool_kernels_ns:
        value, kernels = row.tool_value_ns, row.tool_kernels_ns
    timer = row.kind == "timer"
    said = verdict(set(row.codes), value, kernels, span_ns,
                   None if timer else row.floor_ns, "Timer" if timer else "events")
    # The kernels of a program's window are those on the timed stream: the missed work is
    # beside them, not in them.
    return said.replace("events miss work on other streams: trust the kernels",
                        f"events miss {fmt_ns(row.uncovered_median_ns)} of work on another "
                        "stream (not in the kernels either)")
