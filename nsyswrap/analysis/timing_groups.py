"""The program's timed windows grouped as the program meant them, labelled, and summarised
as harness benchmarks are (reconcile.benchmark_summary), with the events' own cost (the
floor) per process. Input: the reconciled windows of user_timings (one row per interval,
Timer measurements beside them)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from .grouped import median
from .reconcile import ITERATION_COLUMNS, benchmark_summary
from .timing_keys import distinct_labels, identify, timer_keys
from .user_events import RunnerRecords, UserEvents

# What each window's work is, and its value where nothing was measured.
WORK_COLUMNS = {"work_ops": 0, "work_signature": 0, "main_kernel": "", "main_grid": ""}

# Where no floor was measured and none can be estimated from the report, the events' own
# cost is taken as this (the largest we measured: 4.6 µs on an H200 under nsys with CUDA
# event trace; 2.4 µs on an H100 without): never as 0, which would call it launch overhead.
DEFAULT_FLOOR_NS = 5_000.0
# A window counts as back-pressured (its start event waited for earlier work) when that
# work ran on this long after the start record was issued.
BACKPRESSURE_MIN_NS = 5_000
USER_INTERVAL_COLUMNS = [
    *ITERATION_COLUMNS, "key", "label", "kind", "scope", "thread", "tid", "start_site", "end_site",
    "stream_id",
    "start_stream_handle", "end_stream_handle", "value_ns", "predicted_ns", "residual_ns",
    "lead_idle_ns", "tail_idle_ns", "prior_busy_ns", "uncovered_busy_ns", "uncovered_ops",
    "joined_ops", "host_between_records_ns", "first_launch_ns", "work",
    "copies_before_bytes", "copies_before_gap_ns", "work_ops", "work_signature",
    "main_kernel", "main_grid",
]
GROUP_COLUMNS = [
    "key", "label", "kind", "pid", "start_site", "end_site", "scope", "instances",
    "value_median_ns", "value_iqr_ns", "kernels_median_ns", "kernels_iqr_ns", "difference_ns",
    "difference_share", "floor_ns", "floor_source", "host_median_ns", "lead_idle_median_ns",
    "tail_idle_median_ns", "prior_busy_median_ns", "uncovered_median_ns", "sync_median_ns",
    "copy_median_ns", "residual_median_ns", "first_values_ns", "tool_value_ns",
    "tool_statistic", "tool_kernels_ns", "calls", "run",
]



class SiteLabels:
    """Call sites as people read them: 'file.py:37', the function where it helps."""

    def __init__(self, events: UserEvents):
        self.sites = {p.pid: p.sites for p in events.processes}

    def site(self, pid: int, code: int) -> str:
        sites = self.sites.get(pid) or []
        if not 0 <= code < len(sites):
            return "?"
        file, line, _ = sites[code]
        return f"{os.path.basename(file)}:{line}"

    def function(self, pid: int, code: int) -> str:
        sites = self.sites.get(pid) or []
        return sites[code][2] if 0 <= code < len(sites) else ""

    def file(self, pid: int, code: int) -> str:
        sites = self.sites.get(pid) or []
        return sites[code][0] if 0 <= code < len(sites) else ""

    def pair(self, pid: int, start: int, end: int) -> str:
        a, b = self.site(pid, start), self.site(pid, end)
        fa, fb = a.rpartition(":")[0], b.rpartition(":")[0]
        text = f"{a}→{b.rpartition(':')[2]}" if fa == fb else f"{a}→{b}"
        fn = self.function(pid, start)
        return f"{text} ({fn})" if fn and fn != "<module>" else text


def scopes_of(events: UserEvents) -> dict[int, list[dict]]:
    return {p.pid: p.scopes for p in events.processes}


def grouped(frames: dict[str, pd.DataFrame], events: UserEvents,
            floor_windows: pd.DataFrame | None, labels: SiteLabels,
            ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Intervals labelled and grouped (call-site pairs within their do_bench call), Timer's
    measurements beside them, the groups, and the harness-shaped summary the checks read.
    `frames` ("rows": the event windows, "timers": the Timer measurements) is given away,
    emptied here, so that no caller holds the columns the intervals are made of."""
    rows, timers = frames.pop("rows"), frames.pop("timers")
    rows = identify(rows, events) if not rows.empty else rows
    if not timers.empty:
        timers = timers.assign(key=timer_keys(timers, events))
        rows = _concat(rows, timers) if not rows.empty else timers
    if rows.empty:
        return rows, pd.DataFrame(columns=GROUP_COLUMNS), pd.DataFrame()
    measured_at = rows["measured_at_ns"].to_numpy()
    if len(rows) > 1 and not (measured_at[1:] >= measured_at[:-1]).all():
        rows = rows.sort_values(["measured_at_ns"], kind="stable")
    rows = rows.reset_index(drop=True)
    rows["label"] = distinct_labels(rows["key"], rows["label"])
    # Each key's run: its number in order of first appearance.
    key_code = pd.factorize(rows["key"])[0]
    rows["benchmark"] = rows["label"]
    rows["run"] = key_code
    rows["iteration"] = rows.groupby("run").cumcount()
    rows["cache"] = pd.Categorical.from_codes(np.zeros(len(rows), "int8"), ["unknown"])
    rows["calls"] = rows["calls"].fillna(1).astype("int64") if "calls" in rows else 1
    rows["range_id"] = -1
    rows["start_ns"] = rows["start_time_ns"]
    rows["end_ns"] = rows["end_time_ns"]
    rows["cpu_ns"] = (rows["end_time_ns"] - rows["start_time_ns"]).astype("float64")
    rows["host_between_records_ns"] = rows["cpu_ns"]
    rows["event_ns"] = rows["value_ns"]
    for c in ("gpu_busy_ns", "gpu_span_ns", "gpu_first_start_ns", "gpu_last_end_ns",
              "internal_idle_ns", "max_gap_ns", "launch_latency_ns", "predicted_ns",
              "residual_ns", "lead_idle_ns", "tail_idle_ns", "prior_busy_ns",
              "uncovered_busy_ns", "host_lead_ns", "first_launch_ns", "copy_ns", "sync_ns"):
        if c not in rows:
            rows[c] = np.nan
    if "copies_before_gap_ns" not in rows:
        rows["copies_before_gap_ns"] = np.nan
    for c in ("gaps", "gpu_ops", "kernels", "streams", "copies", "copy_bytes",
              "pageable_copies", "syncs", "uncovered_ops", "joined_ops",
              "start_stream_handle", "end_stream_handle", "start_stream_id",
              "copies_before_bytes"):
        if c not in rows:
            rows[c] = 0
        rows[c] = rows[c].fillna(0).astype("int64")
    rows["sync_ns"] = rows["sync_ns"].fillna(0.0)
    rows["work"] = _filled(rows["work"], "") if "work" in rows else ""
    # What the window's work is (engine/windows.py): its operations, the shape of them
    # (kernel names and grids, copy sizes; 0 unknown), its longest kernel and that one's grid.
    for c, empty in WORK_COLUMNS.items():
        rows[c] = _filled(rows[c], empty) if c in rows else empty
    rows["host_ns"] = rows["cpu_ns"] - rows["sync_ns"]
    rows["overhead_ns"] = rows["event_ns"] - rows["gpu_busy_ns"]
    rows["edge_ns"] = rows["event_ns"] - rows["gpu_span_ns"]
    rows["stream_id"] = rows["start_stream_id"]
    # The recording thread: the start record's (a Timer measurement's own thread).
    for column, start in (("thread", "start_thread"), ("tid", "start_tid")):
        value = rows[start] if start in rows else pd.Series(np.nan, index=rows.index)
        if column in rows:
            value = value.fillna(rows[column])
        rows[column] = value.fillna(-1).astype("int64")
    intervals = rows[USER_INTERVAL_COLUMNS]
    del rows

    floors, sources = _floors(events, floor_windows, intervals)
    runs = [{"config": {}} for _ in range(int(key_code.max()) + 1)]
    first = np.unique(key_code, return_index=True)[1]  # each run's first row
    first_pid = intervals["pid"].to_numpy()[first]
    first_kind = intervals["kind"].take(first).to_numpy()  # not a text per window
    floor_of_run = {i: floors[int(first_pid[i])] if first_kind[i] != "timer" else 0.0
                    for i in range(len(first))}
    summary = benchmark_summary(intervals, runs, floor_of_run)
    summary["label"] = summary["benchmark"]
    summary["floor_source"] = [sources[int(first_pid[r])] for r in summary["run"]]
    summary["kind"] = [first_kind[r] for r in summary["run"]]
    summary["measured_by"] = [
        "Timer" if k == "timer" else "do_bench" if k.startswith("do_bench") else "the events"
        for k in summary["kind"]]
    groups = _group_rows(intervals, summary, floors, sources, events)
    return intervals, groups, summary


def _concat(rows: pd.DataFrame, timers: pd.DataFrame) -> pd.DataFrame:
    """The event windows and the Timer measurements in one frame, the text columns kept
    categorical (their categories joined)."""
    timers = timers.copy(deep=False)
    for c in rows.columns.intersection(timers.columns):
        if not isinstance(rows[c].dtype, pd.CategoricalDtype):
            continue
        categories = rows[c].cat.categories.append(pd.Index(pd.unique(timers[c]))).unique()
        rows[c] = rows[c].cat.set_categories(categories)
        timers[c] = pd.Categorical(timers[c], categories=categories)
    return pd.concat([rows, timers], ignore_index=True)


def _filled(column: pd.Series, value) -> pd.Series:
    """fillna, for a categorical column too (`value` made one of its categories)."""
    if isinstance(column.dtype, pd.CategoricalDtype) and value not in column.cat.categories:
        column = column.cat.add_categories([value])
    return column.fillna(value)


def _floors(events: UserEvents, floor_windows: pd.DataFrame | None,
            intervals: pd.DataFrame) -> tuple[dict[int, float], dict[int, str]]:
    """The events' own cost per process: measured by the runner at exit (its windows around
    one tiny kernel, less that kernel), else estimated from the report's back-pressured
    intervals (their start event waited for earlier work, so they hold no launch overhead:
    events - kernels is the events' own cost), else DEFAULT_FLOOR_NS."""
    floors, sources = {}, {}
    for p in events.processes:
        measured = _measured_floor(p, floor_windows)
        if measured is not None:
            floors[p.pid], sources[p.pid] = measured, "measured"
            continue
        mine = intervals[(intervals["pid"] == p.pid)
                         & (intervals["prior_busy_ns"] >= BACKPRESSURE_MIN_NS)
                         & (intervals["internal_idle_ns"].fillna(np.inf) <= 1_000)
                         & (intervals["syncs"] == 0)]
        excess = (mine["event_ns"] - mine["gpu_busy_ns"]).dropna()
        excess = excess[excess > 0]
        if len(excess) >= 3:
            floors[p.pid], sources[p.pid] = float(excess.median()), "estimated"
        else:
            floors[p.pid], sources[p.pid] = DEFAULT_FLOOR_NS, "assumed"
    return floors, sources


def _measured_floor(runner: RunnerRecords, floor_windows: pd.DataFrame | None,
                    ) -> float | None:
    """The runner's floor windows less the kernel each holds (as the harness's floor);
    None without them."""
    if not runner.floor_ms or floor_windows is None or floor_windows.empty:
        return None
    mine = floor_windows[floor_windows["pid"] == runner.pid].sort_values("start_ns")
    events = np.asarray(runner.floor_ms) * 1e6
    if len(mine) < len(events):
        return None
    busy = mine["gpu_busy_ns"].to_numpy("float64")[-len(events):]
    if np.isnan(busy).all():
        return None
    return median(events - busy)


def _group_rows(intervals: pd.DataFrame, summary: pd.DataFrame, floors: dict[int, float],
                sources: dict[int, str], events: UserEvents) -> pd.DataFrame:
    out = []
    scopes = scopes_of(events)
    # Each run's rows, as arrays of the columns read here (not a frame per run).
    rows_of_run = pd.Series(np.arange(len(intervals))).groupby(
        intervals["run"].to_numpy()).indices
    numbers = {c: intervals[c].to_numpy("float64") for c in (
        "event_ns", "gpu_busy_ns", "host_between_records_ns", "lead_idle_ns", "tail_idle_ns",
        "prior_busy_ns", "uncovered_busy_ns", "sync_ns", "copy_ns", "residual_ns")}
    for s in summary.itertuples():
        at = rows_of_run[s.run]
        g = {c: v[at] for c, v in numbers.items()}
        first = {c: intervals[c].iat[at[0]] for c in ("key", "kind", "pid", "scope",
                                                      "calls", "start_site", "end_site")}
        pid = int(first["pid"])
        value = g["event_ns"]
        calls = int(first["calls"])  # benchmark_summary's per-call divisor
        kernels = g["gpu_busy_ns"]
        tool_value = tool_kernels = np.nan
        statistic = ""
        if first["kind"] == "do_bench" and first["scope"] >= 0:
            sc = scopes[pid][int(first["scope"])]
            statistic, tool_value = _tool_figure(sc)
            tool_kernels = _statistic(kernels, statistic)
        out.append({
            "key": first["key"], "label": s.benchmark, "kind": first["kind"], "pid": pid,
            "start_site": int(first["start_site"]), "end_site": int(first["end_site"]),
            "scope": int(first["scope"]), "instances": len(at),
            "value_median_ns": s.event_median_ns, "value_iqr_ns": s.event_iqr_ns,
            "kernels_median_ns": s.busy_median_ns, "kernels_iqr_ns": s.busy_iqr_ns,
            "difference_ns": s.event_median_ns - s.busy_median_ns,
            "difference_share": ((s.event_median_ns - s.busy_median_ns) / s.busy_median_ns
                                 if s.busy_median_ns else np.nan),
            # A host timer (Timer) has no events, so no events' floor.
            "floor_ns": floors[pid] if first["kind"] != "timer" else np.nan,
            "floor_source": sources[pid] if first["kind"] != "timer" else "none",
            "host_median_ns": median(g["host_between_records_ns"]),
            "lead_idle_median_ns": median(g["lead_idle_ns"]),
            "tail_idle_median_ns": median(g["tail_idle_ns"]),
            "prior_busy_median_ns": median(g["prior_busy_ns"]),
            "uncovered_median_ns": median(g["uncovered_busy_ns"]),
            "sync_median_ns": median(g["sync_ns"]),
            "copy_median_ns": median(g["copy_ns"]),
            "residual_median_ns": median(g["residual_ns"]),
            # Per call, as the medians (a Timer measurement times many calls).
            "first_values_ns": [float(v) for v in (value / calls)[:3]],
            "tool_value_ns": tool_value, "tool_statistic": statistic,
            "tool_kernels_ns": tool_kernels, "calls": calls, "run": int(s.run),
        })
    return pd.DataFrame(out, columns=GROUP_COLUMNS)


def _tool_figure(scope: dict) -> tuple[str, float]:
    """What do_bench returned, in ns, and which statistic it was."""
    options = scope.get("options") or {}
    returned = scope.get("returned")
    # The runner writes option values that are not numbers as their repr ("'median'").
    mode = str(options.get("return_mode") or "mean").strip("'\"")
    quantiles = options.get("quantiles") or options.get("percentiles")
    if isinstance(returned, list):
        # quantiles=[...] returns their values in that order (return_mode="all": every
        # time, not compared): the first quantile.
        if isinstance(quantiles, list) and quantiles and returned and \
                len(returned) == len(quantiles):
            return f"q{float(quantiles[0]):g}", float(returned[0]) * 1e6
        return mode, np.nan
    if isinstance(returned, (int, float)):
        return mode, float(returned) * 1e6
    return mode, np.nan


def _statistic(values: np.ndarray, statistic: str) -> float:
    v = values[~np.isnan(values)]
    if not len(v):
        return np.nan
    if statistic.startswith("q"):
        return float(np.quantile(v, float(statistic[1:])))
    return float({"mean": np.mean, "median": np.median, "min": np.min,
                  "max": np.max}.get(statistic, np.median)(v))
