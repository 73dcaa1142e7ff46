"""Harness iterations: each timed iteration's CUDA-event time next to what the GPU did.

The harness writes one NVTX range per timed iteration (same name, domain `nsyswrap`) and,
after the loop, a mark whose JSON carries the event times in iteration order. Iteration i is
the i-th of the last N such ranges the process opened before the mark.

Per iteration (all ns):
  event       the CUDA-event window the user's timer reports
  busy        union of the GPU work launched inside the range (the trusted time)
  span        first GPU start to last GPU end
  overhead    event - busy: what the events add to the kernels
  edge        event - span: window time before the first and after the last GPU op
              (launch latency, or host work before the first launch)
  host_lead   wall time from the range's start (start.record()) to the first launch call
  host        wall time to issue the iteration (the range's length) less the time the host
              spent blocked on the GPU inside it

The harness also times windows around one tiny kernel ("<name> [event floor]" ranges, their
event times in the mark): event - busy there is the events' own cost, the floor below which
no window can read (floor_ns per call).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..instrument.schema import CAPTURE_RANGE, HARNESS_DOMAIN, MARK_PART_SCHEMA, MARK_SCHEMA
from ..read.json_input import MarkParts, all_of, finite, parse, whole
from .grouped import median

ITERATION_COLUMNS = [
    "benchmark", "run", "iteration", "cache", "calls", "range_id", "pid", "start_ns",
    "end_ns", "cpu_ns", "host_ns", "gpu_first_start_ns", "gpu_last_end_ns", "event_ns",
    "gpu_busy_ns", "gpu_span_ns", "overhead_ns", "edge_ns",
    "internal_idle_ns", "gaps", "max_gap_ns", "host_lead_ns", "gpu_ops", "kernels", "streams",
    "launch_latency_ns", "syncs", "sync_ns", "copies", "copy_bytes", "copy_ns",
    "pageable_copies",
]


def benchmark_runs(marks: pd.DataFrame, notes: list[str] | None = None) -> list[dict]:
    """The harness's JSON marks, parts joined, in time order. A mark that says it is the
    harness's but whose fields cannot be used (no name, a count of calls below 1, event
    times that are not durations: written by hand, or by another tool) is left out, and
    said in `notes`: the rest of the report is analysed as ever."""
    runs, parts = [], MarkParts()
    notes = [] if notes is None else notes
    for row in marks[marks["domain"] == HARNESS_DOMAIN].itertuples():
        text = row.text
        if not text.startswith("{"):
            continue
        try:
            doc = parse(text)
        except ValueError:
            continue
        kind = doc.get("nsyswrap") if isinstance(doc, dict) else None
        if kind == MARK_SCHEMA:
            runs.append({**doc, "time_ns": int(row.time_ns), "mark_pid": int(row.pid)})
        elif kind == MARK_PART_SCHEMA and not parts.add(doc, (int(row.time_ns), int(row.pid))):
            notes.append(f"a harness mark's part at {int(row.time_ns)} ns left out: it "
                         "lacks its key, part number, part count or text")
    for joined in parts.joined():
        if not joined.complete:
            continue  # an incomplete set: the capture ended while writing
        time_ns, pid = joined.where
        if not isinstance(joined.doc, dict):
            notes.append(f"a harness mark in {joined.count} parts at {time_ns} ns left out: "
                         "its parts do not join into one JSON object")
            continue
        runs.append({**joined.doc, "time_ns": time_ns, "mark_pid": pid})
    kept = []
    for run in runs:
        problem = _mark_problem(run)
        if problem is None:
            kept.append(run)
        else:
            name = run.get("name")
            what = f"{name!r}" if isinstance(name, str) and name else "without a name"
            notes.append(f"the harness mark {what} at {run['time_ns']} ns left out: {problem}")
    return sorted(kept, key=lambda r: r["time_ns"])


def _durations(value: Any) -> bool:
    """A list of durations in ns (a timer that failed wrote null: harness._finite); a
    number past 64 bits is none (float() of it overflows)."""
    return all_of(value, lambda v: v is None or finite(v, 0))


def _mark_problem(run: dict) -> str | None:
    """What makes a harness mark unusable (benchmark_runs), None when nothing does: the
    fields the analysis reads, each of the type and range the harness writes."""
    if not (isinstance(run.get("name"), str) and run["name"]):
        return "it has no name"
    if not (isinstance(run.get("range"), str) and run["range"]):
        return "it names no range"
    if not isinstance(run.get("domain", HARNESS_DOMAIN), str):
        return "its domain is not text"
    events = run.get("event_ns")
    if not (_durations(events) and events):
        return "event_ns must be a list of durations in ns (0 or more)"
    calls = run.get("calls_per_iteration", 1)
    if not whole(calls, 1):
        return f"calls_per_iteration must be a whole number of at least 1, not {calls!r}"
    cache = run.get("cache")
    if cache is not None and not (isinstance(cache, list) and len(cache) == len(events)
                                  and all(isinstance(c, str) for c in cache)):
        return "cache must list one text per iteration"
    if run.get("floor_range") is not None and not isinstance(run["floor_range"], str):
        return "floor_range is not text"
    if not _durations(run.get("floor_event_ns") or []):
        return "floor_event_ns must be a list of durations in ns (0 or more)"
    if not _durations(run.get("clock_mhz") or []):
        return "clock_mhz must be a list of clock rates"
    if not isinstance(run.get("config", {}), dict):
        return "config is not an object"
    return None


class _Windows:
    """The harness's iteration ranges, in start order, with the rows of each (domain, name,
    pid) found once, so that each run finds its windows by a binary search: a report with
    thousands of harness runs must not filter every instance once per run, nor hold a
    frame per run (25 KB each: 550 MB at 22 k runs)."""

    def __init__(self, instances: pd.DataFrame, runs: list[dict]):
        self.groups: dict[tuple, np.ndarray] = {}
        self.starts: dict[tuple, np.ndarray] = {}
        mask = pairs_in(instances, harness_range_names(runs))
        if not mask.any():  # taking no rows of ten million instances cost 0.3-0.4 s
            return
        self.frame = instances[mask].sort_values("start_ns", kind="stable")
        self.groups = self.frame.groupby(["domain", "name", "pid"], sort=False,
                                         observed=True).indices
        starts = self.frame["start_ns"].to_numpy()
        self.starts = {key: starts[rows] for key, rows in self.groups.items()}

    def rows(self, run: dict, range_name: str, n: int) -> np.ndarray | None:
        """The positions in `frame` of the last `n` instances of `range_name` that the
        run's process opened before its mark; None when fewer are in the report (a capture
        range cut them off: cannot pair safely)."""
        key = (run.get("domain", HARNESS_DOMAIN), range_name, run["mark_pid"])
        rows = self.groups.get(key)
        if rows is None:
            return None
        end = int(np.searchsorted(self.starts[key], run["time_ns"], side="right"))
        return rows[end - n:end] if n and end >= n else None

    def last(self, run: dict, range_name: str, n: int) -> pd.DataFrame | None:
        """Those instances (rows) as a frame."""
        rows = self.rows(run, range_name, n)
        return None if rows is None else self.frame.iloc[rows]


def iterations(instances: pd.DataFrame, runs: list[dict]) -> pd.DataFrame:
    """One row per timed iteration of every harness run found in the report."""
    rows, names, run_ids, counts, caches, calls, events = [], [], [], [], [], [], []
    windows = _Windows(instances, runs)
    for run_index, run in enumerate(runs):
        n = len(run["event_ns"])
        mine = windows.rows(run, run["range"], n)
        if mine is None:
            continue
        rows.append(mine)
        names.append(run["name"])
        run_ids.append(run_index)
        counts.append(n)
        caches += run.get("cache") or ["unknown"] * n
        calls.append(int(run.get("calls_per_iteration", 1)))
        events += run["event_ns"]
    if not rows:
        return pd.DataFrame(columns=ITERATION_COLUMNS)
    it = windows.frame.take(np.concatenate(rows)).reset_index(drop=True)
    # The runs' own columns set once for all their rows, not per run: per run, the text
    # columns became Arrow arrays of one chunk a run, whose every later slice (a groupby
    # per run in the findings) walks all the chunks: O(runs^2), minutes at 20 k runs.
    counts = np.asarray(counts, dtype="int64")
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    it["benchmark"] = np.repeat(np.asarray(names, dtype=object), counts).tolist()
    it["run"] = np.repeat(np.asarray(run_ids, dtype="int64"), counts)
    it["iteration"] = np.arange(len(it), dtype="int64") - starts
    it["cache"] = caches
    it["calls"] = np.repeat(np.asarray(calls, dtype="int64"), counts)
    it["event_ns"] = np.asarray(events, dtype="float64")
    it["overhead_ns"] = it["event_ns"] - it["gpu_busy_ns"]
    it["edge_ns"] = it["event_ns"] - it["gpu_span_ns"]
    it["internal_idle_ns"] = it["gpu_idle_ns"]
    it["host_lead_ns"] = it["first_launch_ns"] - it["start_ns"]
    it["host_ns"] = it["cpu_ns"] - it["sync_ns"]
    return it[ITERATION_COLUMNS]


def event_floors(instances: pd.DataFrame, runs: list[dict]) -> dict[int, float]:
    """Per run (index): the events' own cost per window, the median of event - GPU busy over
    the harness's floor windows. Runs without floor windows (older harness, no CUDA trace)
    are left out."""
    out = {}
    windows = _Windows(instances, runs)
    for run_index, run in enumerate(runs):
        events = run.get("floor_event_ns") or []
        if not run.get("floor_range") or not events:
            continue
        mine = windows.last(run, run["floor_range"], len(events))
        if mine is None or mine["gpu_busy_ns"].isna().all():
            continue
        overhead = np.asarray(events, dtype="float64") - mine["gpu_busy_ns"].to_numpy("float64")
        out[run_index] = float(np.median(overhead))
    return out


BENCHMARK_COLUMNS = [
    "benchmark", "run", "iterations", "calls", "flush_l2", "backpressure", "cuda_graph",
    "warmup_iters", "event_median_ns", "event_iqr_ns", "busy_median_ns", "busy_iqr_ns",
    "span_median_ns", "overhead_median_ns", "overhead_share", "floor_ns", "host_median_ns",
    "event_flushed_ns",
    "event_hot_ns", "busy_flushed_ns", "busy_hot_ns", "first_start_ns", "last_end_ns",
]


def _iqr(x: np.ndarray) -> float:
    return float(np.quantile(x, 0.75) - np.quantile(x, 0.25)) if len(x) > 1 else 0.0


def benchmark_summary(it: pd.DataFrame, runs: list[dict],
                      floors: dict[int, float] | None = None) -> pd.DataFrame:
    """One row per harness run. Times are per call (a graph replay of N calls counts N);
    `floors` (event_floors) gives each run's event floor per window. Plain numpy per run:
    reports hold thousands of runs."""
    floors = floors or {}
    rows = []
    # As they are (no float copy of every column: 4 MB each a half million windows); each
    # run's rows are taken, then made float.
    cols = {c: it[c].to_numpy() for c in (
        "calls", "event_ns", "gpu_busy_ns", "gpu_span_ns", "overhead_ns", "host_ns",
        "gpu_first_start_ns", "gpu_last_end_ns", "start_ns", "end_ns")}
    cache = it["cache"].to_numpy()
    rows_of_run = it.groupby(["benchmark", "run"], sort=False, observed=True).indices
    for (name, run_index), idx in rows_of_run.items():
        def c(column: str, idx=idx) -> np.ndarray:  # a column of the run, as float
            return cols[column][idx].astype("float64", copy=False)

        calls = int(cols["calls"][idx[0]])
        event, busy = c("event_ns") / calls, c("gpu_busy_ns") / calls
        flushed, hot = cache[idx] == "flushed", cache[idx] == "hot"
        config = runs[run_index].get("config", {})
        event_median = median(event)
        first_start, last_end = c("gpu_first_start_ns"), c("gpu_last_end_ns")
        has_gpu = bool((~np.isnan(first_start)).any())
        overhead = median(c("overhead_ns") / calls)
        rows.append({
            "benchmark": name, "run": run_index, "iterations": len(idx), "calls": calls,
            "flush_l2": config.get("flush_l2"), "backpressure": config.get("backpressure"),
            "cuda_graph": config.get("cuda_graph"), "warmup_iters": config.get("warmup_iters"),
            "event_median_ns": event_median, "event_iqr_ns": _iqr(event[~np.isnan(event)]),
            "busy_median_ns": median(busy), "busy_iqr_ns": _iqr(busy[~np.isnan(busy)]),
            "span_median_ns": median(c("gpu_span_ns") / calls),
            "overhead_median_ns": overhead,
            "overhead_share": overhead / event_median if event_median else np.nan,
            "floor_ns": floors[run_index] / calls if run_index in floors else np.nan,
            "host_median_ns": median(c("host_ns") / calls),
            "event_flushed_ns": median(event[flushed]),
            "event_hot_ns": median(event[hot]),
            "busy_flushed_ns": median(busy[flushed]),
            "busy_hot_ns": median(busy[hot]),
            # The GPU's view of the timed part, for clock samples; the CPU's where no GPU work.
            "first_start_ns": int(np.nanmin(first_start) if has_gpu
                                  else c("start_ns").min()),
            "last_end_ns": int(np.nanmax(last_end) if has_gpu else c("end_ns").max()),
        })
    return pd.DataFrame(rows, columns=BENCHMARK_COLUMNS)


def pairs_in(frame: pd.DataFrame, pairs: set[tuple[str, str]]) -> np.ndarray:
    """Rows of `frame` whose (domain, name) is one of `pairs`: a hashed lookup in C (a
    Python loop over the instances took 0.9 s at 1 M kernels)."""
    if not pairs or frame.empty:
        return np.zeros(len(frame), dtype=bool)
    keys = pd.MultiIndex.from_arrays([frame["domain"], frame["name"]])
    return keys.isin(list(pairs))


def harness_range_names(runs: list[dict]) -> set[tuple[str, str]]:
    """(domain, name) of every range the harness opened: its iterations (warmup and timed)
    and the capture range of `nsyswrap run --harness-only`."""
    out = {(run.get("domain", HARNESS_DOMAIN), run["range"]) for run in runs}
    out |= {(run.get("domain", HARNESS_DOMAIN), run["floor_range"]) for run in runs
            if run.get("floor_range")}
    return out | {(HARNESS_DOMAIN, CAPTURE_RANGE)} if runs else out
