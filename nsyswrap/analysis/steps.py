"""One report's analysis, in the order it runs (`analysis_of`): what the engine needs, the
engine, then the steps after it, each a small function that makes one part of the
`Analysis` from what the engine measured.

    families         each range's family and summary group, from its names alone
                     (the engine pools launch latencies by summary group as ranges close)
    user_windows     the program's timed windows in the runner's records
                     (user_timings.py: the engine measures them in its pass)
    lines            the runner's trace of the program's lines (code_lines.py: the engine
                     sums each line's GPU work in its pass)
    the engine       engine/analyze.measure: every per-range number, the kernel table,
                     the attribution, the work per process, the windows' numbers
    STEPS            unknown_tail, harness, summary, timings, lines, judged

`analyze` runs them over a loaded report, `analyze_streamed` over the export as it is read
(engine/sources.py); `compare` (comparison/single.py) calls one or the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..instrument.schema import USER_FLOOR_RANGE
from ..read.chunks import compact_ids
from ..read.loader import WithoutOperations
from ..read.operations import OperationStream
from ..read.report import Report
from .code_lines import (
    LineTotals,
    autograd_threads,
    backward_nodes,
    code_lines,
    line_trace,
    lines_missing,
)
from .columns import GPU_INSTANCE_COLUMNS
from .completeness import lost_tail
from .domains import library_mask, runner_ranges
from .engine.analyze import Measured, measure
from .engine.sources import ExportOperations, LoadedOperations, OperationSource
from .families import family_names, family_numbers
from .instance_table import InstanceTable
from .marks import user_marks
from .reconcile import (
    benchmark_runs,
    benchmark_summary,
    event_floors,
    harness_range_names,
    iterations,
    pairs_in,
)
from .result import Analysis
from .summary import lookup_table, range_summary, summary_groups
from .texts import text_where
from .user_events import without_runner_documents
from .user_timings import UserWindows, user_timings, user_windows


def analyze(report: Report, by_process: bool = False, attribution: str = "process",
            all_domains: bool = False, *, consume: bool = False,
            keep_pairs: bool = True) -> Analysis:
    """All analyses of one loaded report. `attribution`: "process" (a range owns the GPU
    work other threads of its process launched while it was open) or "thread" (nsys's
    rule); `all_domains`: findings also cover libraries' NVTX ranges; `by_process`: the
    range summary per process. `consume`: the caller has no further use for `report`, so
    its tables are emptied as soon as the analysis holds what it needs of them.
    `keep_pairs`: keep every (range, operation) pair (Attribution.op_pairs) for the
    formats that draw them (html, trace, the many-report summaries)."""
    source = LoadedOperations(report, keep_pairs=keep_pairs, consume=consume)
    return analysis_of(report, source, by_process=by_process, attribution=attribution,
                       all_domains=all_domains, consume=consume)


def analyze_streamed(report: Report, stream: OperationStream, rest: WithoutOperations, *,
                     by_process: bool = False, attribution: str = "process",
                     all_domains: bool = False, consume: bool = False) -> Analysis:
    """All analyses of a report read without its operations (loader.read_without_
    operations: `report` and what is `rest` to do), its operations from `stream`. The
    arguments are analyze's (`consume`: the report's ranges are let go once the instances
    hold them). Raises operations.StreamFallback where the report cannot be streamed (then
    analyse it loaded: the results are the same)."""
    return analysis_of(report, ExportOperations(stream, rest), by_process=by_process,
                       attribution=attribution, all_domains=all_domains, consume=consume)


def analysis_of(report: Report, source: OperationSource, *, by_process: bool,
                attribution: str, all_domains: bool, consume: bool) -> Analysis:
    """`report`'s Analysis, its operations from `source`: the module's route, top to
    bottom."""
    grouped = families(report, by_process)
    windows = user_windows(report)
    if consume:  # decoded (windows.events): their text, 17 MB at a million records, let go
        report.marks = without_runner_documents(report.marks)
    trace = line_trace(windows.events)
    autograd = autograd_threads(report.info.threads)
    lines = LineTotals(trace, autograd, backward_nodes(report.ranges, trace, autograd))
    measured = measure(report, source, library=grouped.library, groups=grouped.groups,
                       windows=windows, attribution=attribution, consume=consume,
                       lines=lines)
    run = Run(report, grouped, windows, measured, by_process, lines)
    analysis = engine_numbers(run, all_domains)
    for step in STEPS:
        analysis = step(analysis, run)
    return analysis


@dataclass
class Families:
    """What the families step gives the engine and the steps after it."""

    runs: list[dict]  # the harness runs the marks hold (reconcile.benchmark_runs)
    library: np.ndarray  # per range: one of a library's NVTX ranges (domains.library_mask)
    # with_families' columns (FAMILY_COLUMNS), packed as the instance table keeps them.
    columns: InstanceTable
    groups: np.ndarray  # per range: its group in the range summary (summary_groups)


@dataclass
class Run:
    """What the steps after the engine read: the report, what came before the engine, what
    it measured, and the option the summary takes."""

    report: Report
    families: Families
    windows: UserWindows
    measured: Measured
    by_process: bool
    lines: LineTotals  # the program's lines, their GPU work summed by the engine


# with_families' columns, which follow the instance columns.
FAMILY_COLUMNS = ("benchmark", "library", "family", "index", "family_id")


def families(report: Report, by_process: bool) -> Families:
    """Each range's family and summary group, from its names, domains and pids alone (with
    the harness runs the marks hold): the engine pools the summary's launch latencies by
    group as ranges close."""
    ranges = report.ranges
    library = library_mask(ranges["domain"], ranges["name"])
    frame = ranges[["range_id", "domain", "name", "pid", "start_ns"]].copy(deep=False)
    runs = with_families(frame, report.marks, library, notes=report.info.notes)
    # Held through the stream: 32-bit where it fits (40 MB fewer at 10 M ranges).
    groups = compact_ids(summary_groups(frame, by_process))
    # Packed now, as the instance table keeps them, not held as int64 through the stream
    # (~12 MB at 1.2 M ranges).
    columns = InstanceTable.of(frame[list(FAMILY_COLUMNS)])
    return Families(runs=runs, library=library, columns=columns, groups=groups)


def with_families(instances: InstanceTable | pd.DataFrame, marks: pd.DataFrame,
                  library: np.ndarray, *, notes: list[str] | None = None) -> list[dict]:
    """Give the instances (the report's ranges' own columns: these need only names,
    domains and pids) what the summary and the findings group them
    by: `benchmark` (the harness benchmark a range belongs to, "" for the user's own),
    `library`, `family`, `index` and `family_id`. Returns the harness runs the marks
    hold (reconcile.benchmark_runs; marks it cannot use are said in `notes`)."""
    runs = benchmark_runs(marks, notes)
    harness = harness_range_names(runs)
    # Which harness benchmark a range belongs to ("" for the user's own ranges).
    instances["benchmark"] = text_where(instances["name"], pairs_in(instances, harness), "")
    instances["library"] = library  # the instances keep the report's ranges' order
    instances["family"] = family_names(
        instances, (instances["benchmark"] == "").to_numpy() & ~library, library)
    family_id, index = family_numbers(instances["domain"], instances["family"])
    instances["index"] = index
    instances["family_id"] = family_id  # for families.family_positions
    return runs


def engine_numbers(run: Run, all_domains: bool) -> Analysis:
    """The Analysis of what the engine measured, the instances with their families'
    columns; the range summary, the harness's and the program's timings are the steps'."""
    report, m = run.report, run.measured
    m.instances.update(run.families.columns)  # both the ranges' rows, in order
    return Analysis(
        info=report.info,
        kernels=m.kernels,
        instances=m.instances,
        ranges=pd.DataFrame(),
        attribution=m.attribution,
        gpu_metrics=report.gpu_metrics,
        runs=run.families.runs,
        iterations=pd.DataFrame(),
        benchmarks=pd.DataFrame(),
        processes=m.processes,
        all_domains=all_domains,
        call_summaries=report.call_summaries,
        marks=user_marks(report.marks),
    )


def unknown_tail(a: Analysis, run: Run) -> Analysis:
    """The GPU columns of the ranges in a tail of the run whose GPU work the report lost
    (completeness.lost_tail): unknown, not none."""
    a.instances.set_rows(GPU_INSTANCE_COLUMNS, lost_tail(a.info, a.instances).to_numpy(),
                         np.nan)
    return a


def harness(a: Analysis, run: Run) -> Analysis:
    """The harness's timed iterations and one row per benchmark run (reconcile.py)."""
    a.iterations = iterations(a.instances, a.runs)
    a.benchmarks = benchmark_summary(a.iterations, a.runs, event_floors(a.instances, a.runs))
    return a


def summary(a: Analysis, run: Run) -> Analysis:
    """The range summary (summary.range_summary), with the launch latency the engine pooled
    per group, and which of its rows are nsyswrap's own ranges or a library's."""

    def latency(group_of_range: np.ndarray) -> pd.Series:
        # The groups the medians were pooled by are the summary's own.
        expected = lookup_table(a.instances.values("range_id"), run.families.groups)
        if not np.array_equal(group_of_range, expected):
            raise AssertionError("analysis engine: summary groups changed")
        return run.measured.launch_latency

    ranges = range_summary(a.instances, latency, by_process=run.by_process)
    # nsyswrap's own ranges: the harness's and the runner's.
    ranges["harness"] = (pairs_in(ranges, harness_range_names(a.runs))
                         | runner_ranges(ranges["domain"], ranges["name"]))
    ranges["library"] = library_mask(ranges["domain"], ranges["name"])
    a.ranges = ranges
    return a


def timings(a: Analysis, run: Run) -> Analysis:
    """The program's own timings (user_timings.py): its windows with the numbers the engine
    measured of them, the blocking calls, the host copies and the runner's event-floor
    windows."""
    floor_windows = a.instances.rows(
        np.flatnonzero((a.instances["name"] == USER_FLOOR_RANGE).to_numpy()),
        ["pid", "start_ns", "gpu_busy_ns"])
    # The windows' numbers handed over, not kept here (see user_timings).
    a.user_timings = user_timings(run.report, run.windows, _handed(run.measured, "windows"),
                                  a.attribution.blocking_calls, a.attribution.host_copies,
                                  floor_windows)
    a.info.notes.extend(a.user_timings.notes)
    return a


def _handed(holder, name: str):
    """holder.name, which the holder lets go of (None): the callee is its last owner."""
    value = getattr(holder, name)
    setattr(holder, name, None)
    return value


def lines(a: Analysis, run: Run) -> Analysis:
    """The program's lines (code_lines.py): each line's GPU work, host time, syncs and the
    GPU idle it caused; where there is no trace, why."""
    a.lines = code_lines(run.lines, a.attribution.blocking_calls, run.lines.names,
                         lines_missing(run.windows.events))
    a.info.notes.extend(a.lines.notes)
    return a


def judged(a: Analysis, run: Run) -> Analysis:
    """The note of the families the findings leave unjudged, where there are too many."""
    note = a.judged_note()
    if note:
        a.info.notes.append(note)
    return a


# After the engine, in order: each takes the Analysis so far and what the run holds, and
# returns the Analysis with its part made.
STEPS: list[Callable[[Analysis, Run], Analysis]] = [
    unknown_tail, harness, summary, timings, lines, judged]
