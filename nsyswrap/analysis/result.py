"""What one report's analysis gives, which diagnose and render read: the `Analysis` (the
engine's numbers and what the steps after it made of them: analysis/steps.py), and the
timed windows the window checks judge (`TimedWindows`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from ..read.report import CallSummaries, ReportInfo, empty
from .attribution import Attribution
from .code_lines import CodeLines, no_lines
from .families import (
    MAX_RANGE_FAMILIES,
    family_positions,
    heaviest_rows,
    user_rows,
)
from .instance_table import InstanceTable
from .marks import MARK_COLUMNS
from .timing_groups import DEFAULT_FLOOR_NS
from .user_timings import UserTimings


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
    # `benchmarks`' columns as arrays, made as _first first reads each.
    _column_arrays: dict[str, np.ndarray] = field(default_factory=dict, init=False,
                                                  repr=False, compare=False)

    def label(self, name: str) -> str:
        """How findings and tables name a run: 'nsyswrap:linear', or the call-site label."""
        return f"nsyswrap:{name}" if self.source == "harness" else name

    def config(self, run: int) -> dict:
        return self.runs[run].get("config", {}) if 0 <= run < len(self.runs) else {}

    @cached_property
    def _first_rows(self) -> dict[int, int]:
        """Each run's first row in `benchmarks`: the window checks ask per run, and a mask
        over every run for each was O(runs^2) (222 k harness runs at 10 M kernels)."""
        runs, first = np.unique(self.benchmarks["run"].to_numpy(), return_index=True)
        return dict(zip(runs.tolist(), first.tolist(), strict=True))

    def _first(self, run: int, column: str):
        """`column` at the run's first row of `benchmarks`; None where it has none."""
        row = self._first_rows.get(run)
        if row is None:
            return None
        if column not in self._column_arrays:
            self._column_arrays[column] = self.benchmarks[column].to_numpy()
        return self._column_arrays[column][row]

    def measured_by(self, run: int) -> str:
        """Whose figure it is, for messages: 'the events', 'Timer', 'do_bench'."""
        if self.source == "harness" or "measured_by" not in self.benchmarks:
            return "the events"
        by = self._first(run, "measured_by")
        return "the events" if by is None else str(by)

    def judged(self, run: int) -> bool:
        """Whether findings speak of the run: not of do_bench's own estimate of how often
        to call the function (listed, not the figure it returns)."""
        if self.source == "harness" or "kind" not in self.benchmarks:
            return True
        return self._first(run, "kind") != "do_bench estimate"

    def floor(self, run: int) -> tuple[float, str]:
        """The run's events' floor per window and where it came from ("measured",
        "estimated", "assumed"; "none" for a host timer, which has no events): never 0
        for events, which would call their own cost overhead."""
        if self.measured_by(run) == "Timer":
            return 0.0, "none"
        b = self.benchmarks
        floor = self._first(run, "floor_ns")
        if floor is not None and pd.notna(floor) and floor > 0:
            source = "measured"
            if "floor_source" in b:
                source = str(self._first(run, "floor_source"))
            return float(floor), source
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
    marks: pd.DataFrame = field(default_factory=lambda: empty(MARK_COLUMNS))
    # The program's lines: their GPU work, host time, syncs and the idle they caused.
    lines: CodeLines = field(default_factory=no_lines)

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
