"""What both analyses of a report end with, once each NVTX range's instance columns are
made (engine/analyze.py): the families the
summary and the findings group instances by (with_families), then the range summary, the
harness's iterations and benchmarks and the program's own timings (finished), and the
`Analysis` they return, which diagnose and render read."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..instrument.schema import USER_FLOOR_RANGE
from ..read.report import CallSummaries, Report, ReportInfo
from .attribution import Attribution
from .columns import GPU_INSTANCE_COLUMNS
from .completeness import lost_tail
from .domains import library_mask, runner_ranges
from .families import (
    MAX_RANGE_FAMILIES,
    family_names,
    family_numbers,
    family_positions,
    heaviest_rows,
    user_rows,
)
from .instance_table import InstanceTable
from .marks import MARK_COLUMNS, user_marks
from .reconcile import (
    benchmark_runs,
    benchmark_summary,
    event_floors,
    harness_range_names,
    iterations,
    pairs_in,
)
from .summary import range_summary
from .texts import text_where
from .timing_groups import DEFAULT_FLOOR_NS
from .user_timings import UserTimings, UserWindows, user_timings


@dataclass
class TimedWindows:
    """CUDA-event (or timer) windows reconciled with the GPU work in them, one row per window
    (reconcile.ITERATION_COLUMNS) and one per run (reconcile.BENCHMARK_COLUMNS): the
    harness's benchmarks, or the program's own timings. The window checks read both."""

    source: str  # "harness" or "user"
    iterations: pd.DataFrame
    benchmarks: pd.DataFrame
    runs: list[dict]  # per run: the harness's mark (its config), {} for the program's own
    default_floor_ns: float | None = None  # where a run has no floor of its own

    def label(self, name: str) -> str:
        """How findings and tables name a run: 'nsyswrap:linear', or the call-site label."""
        return f"nsyswrap:{name}" if self.source == "harness" else name

    def config(self, run: int) -> dict:
        return self.runs[run].get("config", {}) if 0 <= run < len(self.runs) else {}

    def measured_by(self, run: int) -> str:
        """Whose figure it is, for messages: 'the events', 'Timer', 'do_bench'."""
        if self.source == "harness" or "measured_by" not in self.benchmarks:
            return "the events"
        by = self.benchmarks.loc[self.benchmarks["run"] == run, "measured_by"]
        return str(by.iloc[0]) if len(by) else "the events"

    def judged(self, run: int) -> bool:
        """Whether findings speak of the run: not of do_bench's own estimate of how often
        to call the function (listed, not the figure it returns)."""
        if self.source == "harness" or "kind" not in self.benchmarks:
            return True
        kind = self.benchmarks.loc[self.benchmarks["run"] == run, "kind"]
        return not (len(kind) and kind.iloc[0] == "do_bench estimate")

    def floor(self, run: int) -> tuple[float, str]:
        """The run's events' floor per window and where it came from ("measured",
        "estimated", "assumed"; "none" for a host timer, which has no events): never 0
        for events, which would call their own cost overhead."""
        if self.measured_by(run) == "Timer":
            return 0.0, "none"
        b = self.benchmarks
        floor = b.loc[b["run"] == run, "floor_ns"]
        if len(floor) and pd.notna(floor.iloc[0]) and floor.iloc[0] > 0:
            source = "measured"
            if "floor_source" in b:
                source = str(b.loc[b["run"] == run, "floor_source"].iloc[0])
            return float(floor.iloc[0]), source
        if self.default_floor_ns is not None:
            return self.default_floor_ns, "estimated"
        return DEFAULT_FLOOR_NS, "assumed"


@dataclass
class Analysis:
    info: ReportInfo
    kernels: pd.DataFrame  # kernel_summary
    instances: InstanceTable  # one row per NVTX range instance (columns.py), packed
    ranges: pd.DataFrame  # range_summary: one row per (domain, name)
    attribution: Attribution  # the pairs behind the numbers, for the checks
    gpu_metrics: pd.DataFrame  # clock samples, when captured
    runs: list[dict]  # harness runs found in the report (their JSON marks)
    iterations: pd.DataFrame  # one row per timed harness iteration (reconcile.iterations)
    benchmarks: pd.DataFrame  # one row per harness run (reconcile.benchmark_summary)
    processes: pd.DataFrame  # one row per process with GPU work or NVTX ranges

    all_domains: bool = False  # findings cover libraries' ranges (NCCL, cuDNN, ...) too
    # The program's own CUDA-event timings that `nsyswrap run` recorded, reconciled.
    user_timings: UserTimings = field(default_factory=UserTimings)
    # What the report's calls add up to: CUDA API, copies and memsets, OS runtime.
    call_summaries: CallSummaries = field(default_factory=CallSummaries)
    # The program's NVTX marks, nsyswrap's own left out (marks.MARK_COLUMNS).
    marks: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        {c: pd.Series(dtype="int64") for c in MARK_COLUMNS}))

    def timed_windows(self) -> list[TimedWindows]:
        """The harness's runs and the program's own timings, for the window checks."""
        harness = TimedWindows("harness", self.iterations, self.benchmarks, self.runs,
                               estimated_floor(self.iterations, self.runs))
        u = self.user_timings
        user_runs = [{} for _ in range(len(u.summary))]
        return [harness, TimedWindows("user", u.intervals, u.summary, user_runs)]

    def user_rows(self, by_start: bool = False) -> np.ndarray:
        """families.user_rows under this analysis's all_domains. Callers take the columns
        they need at these rows (InstanceTable.values), a family at a time where they can:
        at 10 M ranges every instance column is 76 MB."""
        return user_rows(self.instances, self.all_domains, by_start)

    def judged_rows(self, by_start: bool = False) -> np.ndarray:
        """user_rows() of the families the findings judge: all of them, or where there are
        more than MAX_RANGE_FAMILIES, the heaviest (families.heaviest_rows; `judged_note`
        says so)."""
        rows = self.user_rows(by_start)
        return rows[heaviest_rows(self.instances, rows, MAX_RANGE_FAMILIES)[0]]

    def judged_note(self) -> str | None:
        """What judged_rows left out, as a note for the report; None where nothing."""
        count = heaviest_rows(self.instances, self.user_rows(), MAX_RANGE_FAMILIES)[1]
        if count <= MAX_RANGE_FAMILIES:
            return None
        return (f"{count:,} range families of the user's: the findings judge the "
                f"{MAX_RANGE_FAMILIES:,} with the most GPU busy time (then wall time)")

    def instance_rows(self, range_ids) -> np.ndarray:
        """The instances' rows of range ids (-1 for ids not among them): for a finding that
        takes a few columns at the rows of its calls or copies."""
        return pd.Index(self.instances["range_id"]).get_indexer(range_ids)

    def user_instances(self, columns: list[str] | None = None) -> pd.DataFrame:
        """The instances at user_rows() as a frame (every column unless `columns`)."""
        return self.instances.rows(self.user_rows(), columns)

    def judged_instances(self, columns: list[str] | None = None) -> pd.DataFrame:
        """The instances at judged_rows() as a frame (every column unless `columns`)."""
        return self.instances.rows(self.judged_rows(), columns)

    def user_families(self, rows: np.ndarray, min_size: int = 1, keep: np.ndarray | None = None
                      ) -> Iterator[tuple[tuple[str, str], np.ndarray]]:
        """The families of the instances at `rows` (user_rows), each with its positions in
        `rows` (in their order): families in order of first appearance. Only positions
        where `keep` is true (one flag per row), and only families with at least
        `min_size` of them (families.family_positions)."""
        frame = pd.DataFrame({"family_id": self.instances.values("family_id", rows)},
                             index=rows, copy=False)
        return family_positions(frame, self.instances, min_size, keep)


def estimated_floor(iterations: pd.DataFrame, runs: list[dict]) -> float | None:
    """The events' own cost estimated from harness windows that were back-pressured (a
    GPU sleep before each: no launch overhead inside), for runs of older harness versions
    that measured no floor; None where the report has no such window."""
    back = [i for i, r in enumerate(runs) if r.get("config", {}).get("backpressure")]
    if iterations.empty or not back:
        return None
    g = iterations[iterations["run"].isin(back) & (iterations["syncs"] == 0)]
    excess = ((g["event_ns"] - g["gpu_busy_ns"] - g["internal_idle_ns"].fillna(0))
              / g["calls"]).dropna()
    excess = excess[excess > 0]
    return float(excess.median()) if len(excess) >= 3 else None


def with_families(instances: InstanceTable | pd.DataFrame, marks: pd.DataFrame, library: np.ndarray,
                  *, notes: list[str] | None = None) -> list[dict]:
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


def finished(report: Report, instances: InstanceTable, runs: list[dict], *,
             kernels: pd.DataFrame, attribution: Attribution, processes: pd.DataFrame,
             latency, by_process: bool, all_domains: bool,
             windows: tuple[UserWindows, pd.DataFrame | None]) -> Analysis:
    """The Analysis from its per-range instances (with_families done) and the rest.
    `latency`: the pooled launch latency per summary group (range_summary's); `windows`:
    the program's timed windows and what the engine measured of them (None: no GPU
    operations)."""
    instances.set_rows(GPU_INSTANCE_COLUMNS, lost_tail(report.info, instances).to_numpy(),
                       np.nan)
    its = iterations(instances, runs)
    ranges = range_summary(instances, latency, by_process=by_process)
    harness = harness_range_names(runs)
    # nsyswrap's own ranges: the harness's and the runner's.
    ranges["harness"] = pairs_in(ranges, harness) | runner_ranges(ranges["domain"],
                                                                   ranges["name"])
    ranges["library"] = library_mask(ranges["domain"], ranges["name"])
    floor_windows = instances.rows(
        np.flatnonzero((instances["name"] == USER_FLOOR_RANGE).to_numpy()),
        ["pid", "start_ns", "gpu_busy_ns"])
    mine = user_timings(report, *windows, attribution.blocking_calls,
                        attribution.host_copies, floor_windows)
    report.info.notes.extend(mine.notes)
    analysis = Analysis(
        info=report.info,
        kernels=kernels,
        instances=instances,
        ranges=ranges,
        attribution=attribution,
        gpu_metrics=report.gpu_metrics,
        runs=runs,
        iterations=its,
        benchmarks=benchmark_summary(its, runs, event_floors(instances, runs)),
        processes=processes,
        all_domains=all_domains,
        user_timings=mine,
        call_summaries=report.call_summaries,
        marks=user_marks(report.marks),
    )
    judged = analysis.judged_note()
    if judged:
        report.info.notes.append(judged)
    return analysis
