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
from .per_run import PerRun

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
    kept, parts, alike = [], MarkParts(), {}
    notes = [] if notes is None else notes
    # Each mark checked and cut to what is read as soon as it is parsed: the whole
    # documents of 222 k marks held at once took ~1 GB. Their problems are said after the
    # parts' notes, as when every mark was checked last.
    problems: list[str] = []

    def check(run: dict) -> None:
        problem = _mark_problem(run)
        if problem is None:
            kept.append(_read_fields(run, alike))
        else:
            name = run.get("name")
            what = f"{name!r}" if isinstance(name, str) and name else "without a name"
            problems.append(f"the harness mark {what} at {run['time_ns']} ns left out: "
                            f"{problem}")

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
            check({**doc, "time_ns": int(row.time_ns), "mark_pid": int(row.pid)})
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
        check({**joined.doc, "time_ns": time_ns, "mark_pid": pid})
    notes += problems
    return sorted(kept, key=lambda r: r["time_ns"])


# What the analysis reads of a harness mark (the rest, the host times and the warmup's
# event times, is the harness's own record): the runs are held to the end, and a report
# may hold one in every training step.
READ_FIELDS = ("name", "range", "domain", "calls_per_iteration", "event_ns", "cache",
               "floor_range", "floor_event_ns", "clock_mhz", "config", "time_ns", "mark_pid")


def _read_fields(run: dict, alike: dict) -> dict:
    """The run's READ_FIELDS, its texts and a configuration equal to an earlier run's
    shared with that one (`alike`: what was seen): 4.8 KB a run held became ~1 KB."""
    kept = {}
    for field in READ_FIELDS:
        if field in run:
            value = run[field]
            if isinstance(value, str):
                value = alike.setdefault(value, value)
            kept[field] = value
    config = kept.get("config")
    if config:
        # Alike by each value's repr: equal values of other types (True and 1) or signs
        # (0.0 and -0.0) are written apart.
        kept["config"] = alike.setdefault((tuple(config), tuple(map(repr, config.values()))),
                                          config)
    return kept


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


def benchmark_summary(it: pd.DataFrame, runs: list[dict],
                      floors: dict[int, float] | None = None) -> pd.DataFrame:
    """One row per harness run. Times are per call (a graph replay of N calls counts N);
    `floors` (event_floors) gives each run's event floor per window. Grouped passes over
    all runs at once (per_run.PerRun): a report may hold a run in every training step."""
    floors = floors or {}
    per = PerRun(it)
    if per.count == 0:
        return pd.DataFrame([], columns=BENCHMARK_COLUMNS)
    names, run_ids = per.first_of("benchmark"), per.first_of("run")
    calls = per.first_of("calls").astype("int64")
    calls_of_row = calls[np.maximum(per.code, 0)]  # rows of no run are never read

    def per_call(column: str) -> np.ndarray:  # each window's value per call, as float
        return it[column].to_numpy().astype("float64", copy=False) / calls_of_row

    event, busy = per_call("event_ns"), per_call("gpu_busy_ns")
    # Compared as the column is (a categorical's codes), not as an array of its texts.
    flushed = (it["cache"] == "flushed").to_numpy(bool)
    hot = (it["cache"] == "hot").to_numpy(bool)
    event_median = per.median(event)
    overhead = per.median(per_call("overhead_ns"))
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(event_median == 0, np.nan, overhead / event_median)
    floor = np.array([floors.get(int(r), np.nan) for r in run_ids], dtype="float64") / calls
    # The GPU's view of the timed part, for clock samples; the CPU's where no GPU work.
    first_start = it["gpu_first_start_ns"].to_numpy().astype("float64", copy=False)
    last_end = it["gpu_last_end_ns"].to_numpy().astype("float64", copy=False)
    has_gpu = per.any_count(~np.isnan(first_start)) > 0
    first_start = np.where(has_gpu, per.minimum(first_start), per.minimum(
        it["start_ns"].to_numpy().astype("float64", copy=False)))
    last_end = np.where(has_gpu, per.maximum(last_end), per.maximum(
        it["end_ns"].to_numpy().astype("float64", copy=False)))
    configs = [runs[int(r)].get("config", {}) for r in run_ids]
    # The text and configuration columns inferred as pandas infers rows of values; the
    # numbers are float64 or int64 whatever the rows.
    out = pd.DataFrame(list(zip(names.tolist(), *(
        [c.get(key) for c in configs]
        for key in ("flush_l2", "backpressure", "cuda_graph", "warmup_iters")), strict=True)),
        columns=["benchmark", "flush_l2", "backpressure", "cuda_graph", "warmup_iters"])
    numbers = {
        "run": run_ids.astype("int64"), "iterations": per.sizes.astype("int64"),
        "calls": calls,
        "event_median_ns": event_median, "event_iqr_ns": per.iqr(event),
        "busy_median_ns": per.median(busy), "busy_iqr_ns": per.iqr(busy),
        "span_median_ns": per.median(per_call("gpu_span_ns")),
        "overhead_median_ns": overhead, "overhead_share": share, "floor_ns": floor,
        "host_median_ns": per.median(per_call("host_ns")),
        "event_flushed_ns": per.median(event, where=flushed),
        "event_hot_ns": per.median(event, where=hot),
        "busy_flushed_ns": per.median(busy, where=flushed),
        "busy_hot_ns": per.median(busy, where=hot),
        "first_start_ns": first_start.astype("int64"),
        "last_end_ns": last_end.astype("int64"),
    }
    for column, values in numbers.items():
        out[column] = values
    return out[BENCHMARK_COLUMNS]


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
